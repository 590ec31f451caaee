//! The timeline read back from a hand-written run (tests/fixtures/run.jsonl: 2 jobs
//! × 2 partitions, times chosen so every figure is known), the text formats, the
//! recorder and the waterfall.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cuzk_timeline::synthetic::{synthetic_run, SyntheticConfig};
use cuzk_timeline::{
    analyse, intervals, parse_jsonl, parse_timeline_log, read_jsonl, render_html, render_svg,
    write_jsonl, Event, EventKind, IntervalKind, Recorder, Stage, TimelineError, WaitKind,
};

fn fixture() -> Vec<Event> {
    read_jsonl(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/run.jsonl"
    ))
    .unwrap()
}

/// (count, mean, p50, p95) of a stage.
fn stage(a: &cuzk_timeline::Analysis, s: Stage) -> (usize, f64, f64, f64) {
    let (_, st) = a.stages.iter().find(|(x, _)| *x == s).unwrap();
    (st.count, st.mean_ms, st.p50_ms, st.p95_ms)
}

fn wait(a: &cuzk_timeline::Analysis, w: WaitKind) -> (usize, f64, f64, f64) {
    let (_, st) = a.waits.iter().find(|(x, _)| *x == w).unwrap();
    (st.count, st.mean_ms, st.p50_ms, st.p95_ms)
}

#[test]
fn fixture_analysis_gives_the_hand_computed_figures() {
    let events = fixture();
    assert_eq!(events.len(), 67);
    let a = analyse(&events);

    assert_eq!((a.start_ms, a.end_ms, a.span_ms), (0.0, 455.0, 455.0));
    assert_eq!((a.jobs_submitted, a.jobs_done, a.partitions), (2, 2, 4));
    assert_eq!((a.jobs_failed, a.jobs_cancelled), (0, 0));
    assert_eq!((a.unfinished, a.orphan_ends), (0, 0));
    // 455 ms for 2 proofs.
    assert_eq!(a.s_per_proof, Some(0.455 / 2.0));
    // Jobs done at 245 and 455 ms: one proof every 210 ms once the stream runs.
    assert!((a.steady_s_per_proof.unwrap() - 0.210).abs() < 1e-12);
    assert!(a
        .headline()
        .contains("(steady 0.210: first job done to last)"));
    let lat = a.job_latency.as_ref().unwrap();
    assert_eq!(
        (lat.count, lat.mean_ms, lat.p50_ms, lat.p95_ms),
        (2, 345.0, 245.0, 445.0)
    );

    // Synthesis 100, 120, 140, 200; GPU 50, 60, 70, 80; b_g2 80, 80, 90, 100.
    assert_eq!(stage(&a, Stage::Synth), (4, 140.0, 120.0, 200.0));
    assert_eq!(stage(&a, Stage::Gpu), (4, 65.0, 60.0, 80.0));
    assert_eq!(stage(&a, Stage::BG2), (4, 87.5, 80.0, 100.0));
    assert_eq!(stage(&a, Stage::Assembly), (4, 5.0, 5.0, 5.0));
    assert_eq!(stage(&a, Stage::Dealloc), (4, 10.0, 10.0, 10.0));
    let present: Vec<Stage> = a.stages.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        present,
        [
            Stage::Synth,
            Stage::Gpu,
            Stage::BG2,
            Stage::Assembly,
            Stage::Dealloc
        ]
    );

    // GPU intervals [100,150] [150,210] touch and merge: 110 + 70 + 80 = 260 ms.
    assert_eq!(a.gpu_busy.len(), 1);
    assert_eq!(a.gpu_busy[0].device, Some(0));
    assert_eq!(a.gpu_busy[0].busy_ms, 260.0);
    assert!((a.gpu_busy[0].busy_pct - 100.0 * 260.0 / 455.0).abs() < 1e-12);
    // Idle with work ready: partition 2.1 queued at 330, picked up at 335, lock at
    // 340 (1.1's lock wait [120, 150] falls inside busy time): 10 ms. The rest of
    // the idle time nothing was ready: 455 - 260 - 10.
    assert_eq!(a.gpu_busy[0].idle_ready_ms, 10.0);
    assert_eq!(a.gpu_busy[0].starved_ms, 185.0);
    assert!(a
        .to_string()
        .contains("idle 2.2% with work ready, 40.7% starved"));

    // Waits per partition.
    let w: Vec<_> = a
        .partition_waits
        .iter()
        .map(|p| {
            (
                p.job,
                p.partition,
                p.synth_queue_ms,
                p.gpu_queue_ms,
                p.lock_wait_ms,
                p.budget_wait_ms,
            )
        })
        .collect();
    assert_eq!(
        w,
        [
            (1, 0, Some(0.0), Some(0.0), Some(0.0), None),
            (1, 1, Some(0.0), Some(0.0), Some(30.0), None),
            (2, 0, Some(90.0), Some(0.0), Some(0.0), None),
            (2, 1, Some(120.0), Some(5.0), Some(5.0), Some(10.0)),
        ]
    );
    assert_eq!(wait(&a, WaitKind::SynthQueue), (4, 52.5, 0.0, 120.0));
    assert_eq!(wait(&a, WaitKind::GpuQueue), (4, 1.25, 0.0, 5.0));
    assert_eq!(wait(&a, WaitKind::Lock), (4, 8.75, 0.0, 30.0));
    assert_eq!(wait(&a, WaitKind::Budget), (1, 10.0, 10.0, 10.0));

    let text = a.to_string();
    for needle in [
        "2 job(s) done",
        "0.228 s/proof",
        "gpu 0 busy 57.1%",
        "synthesis",
        "wait: gpu lock",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    println!("{text}");
}

#[test]
fn a_truncated_run_reports_unfinished_stages_and_orphan_ends() {
    let events = fixture();
    // Stop the run at 200 ms and drop the first event (job 1's submit).
    let cut: Vec<Event> = events
        .iter()
        .filter(|e| e.ms <= 200.0)
        .skip(1)
        .cloned()
        .collect();
    let a = analyse(&cut);
    // Open at 200 ms: job 2, synthesis of 2.0 and 2.1, GPU of 1.1, b_g2 of 1.1.
    assert_eq!(a.unfinished, 5);
    assert_eq!(a.orphan_ends, 0);
    assert_eq!(a.jobs_done, 0);
    assert_eq!(a.s_per_proof, None);
    assert_eq!(a.steady_s_per_proof, None);
    // The unfinished GPU stage counts as busy up to the run's last event (195 ms).
    assert_eq!(a.gpu_busy[0].busy_ms, 95.0);
    // Only complete stages enter the statistics.
    assert_eq!(stage(&a, Stage::Gpu).0, 1);

    // An end without its start is an orphan.
    let late: Vec<Event> = events.iter().filter(|e| e.ms >= 200.0).cloned().collect();
    let iv = intervals(&late);
    assert!(iv
        .orphan_ends
        .iter()
        .any(|e| e.event == EventKind::GpuEnd && e.job == 1 && e.partition == 1));
    assert!(iv
        .orphan_ends
        .iter()
        .any(|e| e.event == EventKind::JobDone && e.job == 1));
}

#[test]
fn timeline_lines_have_the_documented_format_and_parse_back() {
    let e = Event {
        ms: 1234.5,
        event: EventKind::GpuStart,
        job: 7,
        partition: 3,
        worker: Some(1),
        device: Some(0),
        bytes: Some(4096),
        detail: "after 2 tries, fast".into(),
    };
    assert_eq!(
        e.timeline_line(),
        "TIMELINE,1234.500,GPU_START,7,p=3 w=1 d=0 bytes=4096 after 2 tries, fast"
    );
    assert_eq!(
        Event::parse_timeline_line(&e.timeline_line()),
        Some(e.clone())
    );

    let bare = Event {
        worker: None,
        device: None,
        bytes: None,
        detail: String::new(),
        ..e.clone()
    };
    assert_eq!(bare.timeline_line(), "TIMELINE,1234.500,GPU_START,7,p=3");
    // Absent fields in the middle are skipped, not mistaken for others.
    let only_bytes = Event {
        worker: None,
        device: None,
        ..e.clone()
    };
    assert_eq!(
        only_bytes.timeline_line(),
        "TIMELINE,1234.500,GPU_START,7,p=3 bytes=4096 after 2 tries, fast"
    );

    // Every event of the fixture and of a synthetic run round-trips.
    let mut all = fixture();
    all.extend(synthetic_run(&SyntheticConfig::default()));
    for e in &all {
        assert_eq!(
            Event::parse_timeline_line(&e.timeline_line()).as_ref(),
            Some(e),
            "{}",
            e.timeline_line()
        );
    }

    // A log prefix is skipped; the C2 daemon's lines without p= read as partition 0.
    let p =
        Event::parse_timeline_line("2026-11-29T10:00:00Z INFO TIMELINE,5,GPU_PICKUP,9,").unwrap();
    assert_eq!(
        (p.ms, p.event, p.job, p.partition),
        (5.0, EventKind::GpuPickup, 9, 0)
    );
    // Malformed or unknown lines are not events.
    for bad in [
        "TIMELINE,abc,GPU_START,1,p=0",
        "TIMELINE,1,NOT_AN_EVENT,1,p=0",
        "TIMELINE,1,GPU_START,x,p=0",
        "TIMELINE,1,GPU_START,1,p=zero",
        "TIMELINE,NaN,GPU_START,1,p=0",
        "GPU_START,1,p=0",
        "",
    ] {
        assert_eq!(Event::parse_timeline_line(bad), None, "{bad}");
    }
    // Line breaks in the detail become spaces.
    let nl = Event {
        detail: "two\nlines".into(),
        ..bare
    };
    assert!(nl.timeline_line().ends_with("p=3 two lines"));

    let log = "noise\nTIMELINE,1.000,SYNTH_START,1,p=0 w=0\nmore noise\nTIMELINE,2.000,SYNTH_END,1,p=0 w=0\n";
    let parsed = parse_timeline_log(log);
    assert_eq!(parsed.len(), 2);
    assert_eq!(analyse(&parsed).stages[0].1.mean_ms, 1.0);
}

#[test]
fn event_names_are_the_same_in_json_and_timeline_lines() {
    for &k in EventKind::ALL {
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            format!("\"{}\"", k.name())
        );
        assert_eq!(EventKind::from_name(k.name()), Some(k));
        let n = k.name();
        assert!(
            n.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "{n}"
        );
    }
    assert_eq!(EventKind::BG2Start.name(), "B_G2_START");
    // Every stage's start and end are distinct kinds that map back to it.
    for s in Stage::ALL {
        assert_eq!(s.start().stage(), Some((s, true)));
        assert_eq!(s.end().stage(), Some((s, false)));
    }
}

#[test]
fn jsonl_round_trips_and_a_malformed_line_is_named() {
    let events = fixture();
    let mut buf = Vec::new();
    write_jsonl(&events, &mut buf).unwrap();
    assert_eq!(parse_jsonl(Cursor::new(&buf)).unwrap(), events);

    let text = "{\"ms\":0.0,\"event\":\"JOB_SUBMIT\",\"job\":1,\"partition\":0}\n\n{\"ms\":1.0,\"event\":\"NOPE\",\"job\":1,\"partition\":0}\n";
    match parse_jsonl(Cursor::new(text)) {
        Err(TimelineError::Line { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected a line error, got {other:?}"),
    }
    let truncated =
        "{\"ms\":0.0,\"event\":\"JOB_SUBMIT\",\"job\":1,\"partition\":0}\n{\"ms\":1.0,\"ev";
    let err = parse_jsonl(Cursor::new(truncated)).unwrap_err();
    assert!(
        matches!(err, TimelineError::Line { line: 2, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("line 2 of the timeline"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.jsonl");
    assert!(matches!(
        read_jsonl(&missing),
        Err(TimelineError::Read { path, .. }) if path == missing
    ));
}

/// Captures `cuzk::timeline` tracing events as field maps.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() != "cuzk::timeline" {
            return;
        }
        let mut m = BTreeMap::new();
        m.insert("level".into(), event.metadata().level().to_string());
        event.record(&mut Fields(&mut m));
        self.0.lock().unwrap().push(m);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn recorder_keeps_time_order_writes_jsonl_and_traces_each_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let capture = Capture::default();
    let rec = Arc::new(
        Recorder::new(Instant::now())
            .with_jsonl(&path)
            .unwrap()
            .with_timeline_stderr(false),
    );
    tracing::subscriber::with_default(capture.clone(), || {
        rec.record(EventKind::JobSubmit, 1, 0, None, None, None, "");
        std::thread::scope(|s| {
            for w in 0..4u32 {
                let (rec, capture) = (&rec, capture.clone());
                // The capturing subscriber is per thread.
                s.spawn(move || {
                    tracing::subscriber::with_default(capture, || {
                        for p in 0..5u32 {
                            let mut g = rec.stage(Stage::Synth, 1, w * 5 + p, Some(w), None);
                            g.set_bytes(u64::from(p) * 100);
                            if p % 2 == 0 {
                                g.end("ok");
                            } // odd partitions end when the guard drops
                        }
                    })
                });
            }
        });
        rec.record(EventKind::JobDone, 1, 0, None, None, None, "proof");
    });
    rec.flush().unwrap();

    let events = rec.events();
    assert_eq!(events.len(), 2 + 4 * 5 * 2);
    assert_eq!(rec.len(), events.len());
    assert!(events.windows(2).all(|w| w[0].ms <= w[1].ms));
    // Times are whole microseconds, so TIMELINE lines parse back exactly.
    for e in &events {
        assert_eq!(
            Event::parse_timeline_line(&e.timeline_line()).as_ref(),
            Some(e)
        );
    }
    let a = analyse(&events);
    assert_eq!(stage(&a, Stage::Synth).0, 20);
    assert_eq!((a.unfinished, a.orphan_ends, a.jobs_done), (0, 0, 1));
    let ends: Vec<&Event> = events
        .iter()
        .filter(|e| e.event == EventKind::SynthEnd)
        .collect();
    assert!(ends
        .iter()
        .all(|e| e.bytes == Some(u64::from(e.partition % 5) * 100)));
    assert_eq!(ends.iter().filter(|e| e.detail == "ok").count(), 12);

    // The file holds the same events in the same order.
    assert_eq!(read_jsonl(&path).unwrap(), events);

    // And tracing saw each one, with the event's fields.
    let traced = capture.0.lock().unwrap();
    assert_eq!(traced.len(), events.len());
    assert_eq!(traced[0]["event"], "JOB_SUBMIT");
    assert_eq!(traced[0]["level"], "INFO");
    assert!(!traced[0].contains_key("worker"));
    let synth = traced.iter().find(|m| m["event"] == "SYNTH_START").unwrap();
    assert_eq!(synth["level"], "DEBUG");
    assert!(synth.contains_key("worker") && synth.contains_key("partition"));
    assert_eq!(traced.last().unwrap()["detail"], "proof");
}

#[test]
fn recorder_reports_an_unopenable_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-dir").join("run.jsonl");
    match Recorder::new(Instant::now()).with_jsonl(&bad) {
        Err(TimelineError::Open { path, .. }) => assert_eq!(path, bad),
        other => panic!("expected an open error, got {:?}", other.map(|_| ())),
    }
}

/// Checks that every tag is closed in order (the SVG is well-formed XML, as far
/// as tags go).
fn assert_balanced(doc: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find('<') {
        let j = rest[i..].find('>').expect("unclosed tag") + i;
        let tag = &rest[i + 1..j];
        rest = &rest[j + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap());
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

/// Lane labels drawn in the SVG (right-aligned text left of the plot).
fn lane_labels(svg: &str) -> Vec<String> {
    svg.lines()
        .filter(|l| l.contains("text-anchor=\"end\" dominant-baseline=\"middle\""))
        .filter_map(|l| {
            let a = l.find("\">")? + 2;
            let b = l[a..].find("</text>")? + a;
            Some(l[a..b].to_string())
        })
        .collect()
}

#[test]
fn svg_has_a_lane_per_worker_and_a_bar_per_interval() {
    let events = fixture();
    let svg = render_svg(&events);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_balanced(&svg);

    let labels = lane_labels(&svg);
    for lane in [
        "jobs ×2",
        "synth w0",
        "synth w1",
        "gpu d0 w0",
        "gpu d0 w1",
        "b_g2 d0 w0",
        "b_g2 d0 w1",
        "assembly d0 w0",
        "assembly d0 w1",
        "dealloc",
    ] {
        assert!(
            labels.iter().any(|l| l == lane),
            "no lane {lane}: {labels:?}"
        );
    }

    // A bar per interval: 2 jobs, 4 partitions × 5 stages, the 2 non-zero lock
    // waits and the one budget wait of a worker.
    let iv = intervals(&events);
    let drawn = iv
        .intervals
        .iter()
        .filter(|i| match i.kind {
            IntervalKind::Job | IntervalKind::Stage(_) | IntervalKind::Staging => true,
            IntervalKind::Wait(WaitKind::Lock) => i.duration_ms() > 0.0,
            IntervalKind::Wait(WaitKind::Budget) => i.worker.is_some(),
            IntervalKind::Wait(_) => false,
        })
        .count();
    assert_eq!(drawn, 2 + 20 + 2 + 1);
    assert_eq!(svg.matches("<rect class=\"bar\"").count(), drawn);
    assert_eq!(svg.matches("url(#hatch-lock)\"").count(), 2 + 1); // bars + legend
                                                                  // Every stage interval has its tooltip.
    for i in iv.intervals.iter().filter(|i| i.kind != IntervalKind::Job) {
        if let IntervalKind::Stage(s) = i.kind {
            let t = format!(
                "job {} · partition {} · {} · {:.3}–{:.3} ms",
                i.job,
                i.partition,
                s.name(),
                i.start_ms,
                i.end_ms
            );
            assert!(svg.contains(&t), "no tooltip {t}");
        }
    }
    // The legend names what is drawn, and the waiting bands are there.
    for needle in [
        ">synthesis<",
        ">gpu lock wait<",
        ">budget wait<",
        ">synth queue<",
        ">budget in use<",
    ] {
        assert!(svg.contains(needle), "{needle}");
    }

    let html = render_html(&events);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(&svg));
    assert!(html.contains("<td>b_g2_msm</td><td>4</td><td>87.5</td>"));
    assert!(
        html.contains("<td>2</td><td>1</td><td>120.0</td><td>5.0</td><td>5.0</td><td>10.0</td>")
    );
}

#[test]
fn overlapping_bars_in_one_lane_get_rows_of_their_own() {
    // Two deallocations at once on a worker-less thread pool, and a third after.
    let mut events = Vec::new();
    for (ms, kind, p) in [
        (0.0, EventKind::DeallocStart, 0),
        (1.0, EventKind::DeallocStart, 1),
        (5.0, EventKind::DeallocEnd, 0),
        (6.0, EventKind::DeallocEnd, 1),
        (7.0, EventKind::DeallocStart, 2),
        (9.0, EventKind::DeallocEnd, 2),
    ] {
        events.push(Event {
            ms,
            event: kind,
            job: 1,
            partition: p,
            worker: None,
            device: None,
            bytes: None,
            detail: String::new(),
        });
    }
    let svg = render_svg(&events);
    assert_balanced(&svg);
    assert_eq!(lane_labels(&svg), ["dealloc ×2"]);
    assert_eq!(svg.matches("<rect class=\"bar\"").count(), 3);
    // Details with markup are escaped.
    events[0].detail = "<a&b>".into();
    let svg = render_svg(&events);
    assert_balanced(&svg);
    assert!(svg.contains("&lt;a&amp;b&gt;"));
}

#[test]
fn a_bigger_synthetic_run_renders_every_worker() {
    let cfg = SyntheticConfig {
        jobs: 5,
        partitions: 10,
        synth_workers: 6,
        devices: 2,
        gpu_workers_per_device: 2,
        ..SyntheticConfig::default()
    };
    let events = synthetic_run(&cfg);
    let a = analyse(&events);
    assert_eq!(
        (a.jobs_done, a.partitions, a.unfinished, a.orphan_ends),
        (5, 50, 0, 0)
    );
    assert_eq!(a.gpu_busy.len(), 2);
    assert!(a
        .gpu_busy
        .iter()
        .all(|d| d.busy_pct > 0.0 && d.busy_pct <= 100.0));
    let svg = render_svg(&events);
    assert_balanced(&svg);
    let labels = lane_labels(&svg);
    for w in 0..6 {
        assert!(labels.contains(&format!("synth w{w}")), "{labels:?}");
    }
    for d in 0..2 {
        for w in 0..2 {
            assert!(labels.contains(&format!("gpu d{d} w{w}")), "{labels:?}");
        }
    }
    // Every drawn stage has a bar: 50 partitions × 8 stages... minus verify.
    let stages = intervals(&events)
        .intervals
        .iter()
        .filter(|i| matches!(i.kind, IntervalKind::Stage(_)))
        .count();
    assert_eq!(stages, 50 * 7);
    assert!(svg.matches("<rect class=\"bar\"").count() >= stages + 5);
}

#[test]
fn staging_events_become_intervals_rows_and_bars_on_the_gpu_lane() {
    let mut events = fixture();
    let without = analyse(&events);
    assert!(without.staging.is_none());
    // Partition 1.1 staged for 12.5 ms up to its lock wait at 120 ms on worker 1;
    // partition 1.0's staging failed after 2 ms.
    let staged = |ms: f64, partition: u32, worker: u32, detail: &str| Event {
        ms,
        event: EventKind::Staged,
        job: 1,
        partition,
        worker: Some(worker),
        device: Some(0),
        bytes: None,
        detail: detail.into(),
    };
    events.push(staged(120.0, 1, 1, "ms=12.500"));
    events.push(staged(100.0, 0, 0, "ms=2.000 failed: no memory"));

    let iv = intervals(&events);
    let st: Vec<_> = iv
        .intervals
        .iter()
        .filter(|i| i.kind == IntervalKind::Staging)
        .map(|i| (i.partition, i.start_ms, i.end_ms, i.worker))
        .collect();
    assert_eq!(
        st,
        vec![(0, 98.0, 100.0, Some(0)), (1, 107.5, 120.0, Some(1))]
    );

    let a = analyse(&events);
    let s = a.staging.as_ref().expect("staging stats");
    assert_eq!((s.count, s.total_ms), (2, 14.5));
    // The stage table has the row between prep_msm and gpu; nothing else moved.
    assert_eq!(a.stages, without.stages);
    let text = a.to_string();
    let row = text
        .lines()
        .position(|l| l.starts_with("staging (a, b, c)"));
    let gpu = text.lines().position(|l| l.starts_with("gpu "));
    assert!(row.is_some() && row < gpu, "{text}");

    // Drawn on the GPU workers' lanes, with a legend entry and a tooltip.
    let svg = render_svg(&events);
    assert_balanced(&svg);
    assert!(svg.contains("staging a, b, c"));
    assert!(svg.contains("staging a, b, c (before the GPU lock)"));
    let bars = |svg: &str| svg.matches("<rect class=\"bar\"").count();
    assert_eq!(bars(&svg), bars(&render_svg(&fixture())) + 2);
    assert_eq!(lane_labels(&svg), lane_labels(&render_svg(&fixture())));
}

/// A subscriber sees every event in recorded order; without retention the
/// recorder keeps none of them in memory.
#[test]
fn subscribers_see_every_event_and_retention_can_be_off() {
    use cuzk_timeline::Subscriber;

    #[derive(Default)]
    struct Collect(Mutex<Vec<(EventKind, u64)>>);
    impl Subscriber for Collect {
        fn event(&self, e: &Event) {
            self.0.lock().unwrap().push((e.event, e.job));
        }
    }
    let seen = Arc::new(Collect::default());
    let rec = Recorder::new(Instant::now())
        .with_subscriber(seen.clone())
        .with_retention(false);
    rec.record(EventKind::JobSubmit, 7, 0, None, None, None, "");
    rec.record(EventKind::SynthStart, 7, 1, Some(0), None, None, "");
    rec.record(EventKind::JobDone, 7, 0, None, None, None, "");
    assert!(rec.is_empty());
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            (EventKind::JobSubmit, 7),
            (EventKind::SynthStart, 7),
            (EventKind::JobDone, 7)
        ]
    );
}
