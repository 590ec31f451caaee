//! Plain-text tables of stage times.

use std::time::Duration;

use cuzk::StageTimes;

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// One column per proof plus the mean, one row per stage, in milliseconds.
pub fn stage_table(times: &[StageTimes]) -> String {
    let mut out = String::new();
    let mut header = format!("{:<20}", "stage (ms)");
    for i in 0..times.len() {
        header += &format!("{:>10}", format!("proof {}", i + 1));
    }
    header += &format!("{:>10}", "mean");
    out += &header;
    out.push('\n');
    out += &"-".repeat(header.len());
    out.push('\n');
    let mut sum = StageTimes::default();
    for t in times {
        sum.accumulate(t);
    }
    let n = times.len().max(1) as u32;
    for (row, (name, total)) in sum.rows().iter().enumerate() {
        let mut line = format!("{name:<20}");
        for t in times {
            line += &format!("{:>10}", ms(t.rows()[row].1));
        }
        line += &format!("{:>10}", ms(*total / n));
        out += &line;
        out.push('\n');
    }
    out
}

/// A service job's times (`cuzk_service::Timings`), one row each, in
/// milliseconds: where a proof proved through the service spent its time.
pub fn timings_table(t: &cuzk_service::Timings) -> String {
    let rows = [
        ("queue_wait", t.queue_wait),
        ("srs_load", t.srs_load),
        ("synthesis", t.synthesis),
        ("gpu_compute", t.gpu_compute),
        ("total", t.total),
    ];
    let header = format!("{:<20}{:>10}", "stage (ms)", "proof");
    let mut out = format!("{header}\n{}\n", "-".repeat(header.len()));
    for (name, d) in rows {
        out += &format!("{name:<20}{:>10}\n", ms(d));
    }
    out
}
