//! The waterfall: one lane per worker, time left to right.
//!
//! Layout, top to bottom: a title with the run's headline, a legend, a time axis,
//! then the lanes in pipeline order (jobs, synthesis workers, GPU workers per
//! device, `b_g2_msm`, assembly, deallocation), then step charts of how many
//! partitions were waiting (queues, lock, budget) and of the memory budget in use.
//! A lane whose bars overlap (two deallocations at once, a lane without worker
//! ids) is split into as many rows as it needs, so nothing is ever drawn on top of
//! something else. Every bar carries a `<title>` (the browser's tooltip) with job,
//! partition, stage and times, and `data-job` so the HTML page can highlight one
//! job across all lanes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::analysis::{analyse, device_name, fmt_ms, intervals, Analysis, Interval};
use crate::{Event, EventKind, IntervalKind, Stage, WaitKind};

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 30.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const ROW_H: f64 = 16.0;
const BAR_H: f64 = 12.0;
const JOB_ROW_H: f64 = 13.0;
const JOB_BAR_H: f64 = 10.0;
const LANE_PAD: f64 = 3.0;
const BAND_H: f64 = 34.0;
const BAND_GAP: f64 = 6.0;
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

/// Fill colour of a stage (Tableau 10: distinct for colour-blind readers too).
fn stage_colour(stage: Stage) -> &'static str {
    match stage {
        Stage::Synth => "#4e79a7",
        Stage::Spmv => "#76b7b2",
        Stage::Prep => "#b07aa1",
        Stage::Gpu => "#f28e2b",
        Stage::BG2 => "#59a14f",
        Stage::Assembly => "#9c755f",
        Stage::Dealloc => "#bab0ac",
        Stage::Verify => "#edc948",
    }
}

fn wait_colour(w: WaitKind) -> &'static str {
    match w {
        WaitKind::SynthQueue => "#4e79a7",
        WaitKind::GpuQueue => "#f28e2b",
        WaitKind::Lock => "#e15759",
        WaitKind::Budget => "#d37295",
    }
}

/// Staging of a, b, c before the GPU lock (drawn on the GPU worker's lane).
const STAGING_COLOUR: &str = "#ff9da7";
const JOB_COLOUR: &str = "#6b6b6b";
const JOB_FAILED_COLOUR: &str = "#e15759";

/// Which lanes a kind of interval goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Jobs,
    Synth,
    Gpu,
    BG2,
    Assembly,
    Dealloc,
}

impl Group {
    fn of(i: &Interval) -> Option<Group> {
        Some(match i.kind {
            IntervalKind::Job => Group::Jobs,
            IntervalKind::Stage(Stage::Synth | Stage::Spmv | Stage::Prep) => Group::Synth,
            IntervalKind::Stage(Stage::Gpu) => Group::Gpu,
            IntervalKind::Stage(Stage::BG2) => Group::BG2,
            IntervalKind::Stage(Stage::Assembly | Stage::Verify) => Group::Assembly,
            IntervalKind::Stage(Stage::Dealloc) => Group::Dealloc,
            IntervalKind::Wait(WaitKind::Lock) | IntervalKind::Staging => Group::Gpu,
            // A budget wait is drawn on the synthesis worker that waits; without a
            // worker it is only in the waiting chart.
            IntervalKind::Wait(WaitKind::Budget) if i.worker.is_some() => Group::Synth,
            IntervalKind::Wait(_) => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Group::Jobs => "jobs",
            Group::Synth => "synth",
            Group::Gpu => "gpu",
            Group::BG2 => "b_g2",
            Group::Assembly => "assembly",
            Group::Dealloc => "dealloc",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LaneKey {
    group: Group,
    device: Option<u32>,
    worker: Option<u32>,
}

impl LaneKey {
    fn label(&self) -> String {
        let mut s = self.group.name().to_string();
        if let Some(d) = self.device {
            let _ = write!(s, " d{d}");
        }
        if let Some(w) = self.worker {
            let _ = write!(s, " w{w}");
        }
        s
    }
}

struct Lane<'a> {
    key: LaneKey,
    /// (row, interval)
    bars: Vec<(usize, &'a Interval)>,
    rows: usize,
}

/// Packs a lane's intervals into the fewest rows without overlap (first fit in
/// order of start, which is optimal for intervals).
fn pack<'a>(key: LaneKey, mut items: Vec<&'a Interval>) -> Lane<'a> {
    items.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    let mut row_ends: Vec<f64> = Vec::new();
    let mut bars = Vec::with_capacity(items.len());
    for i in items {
        let row = match row_ends.iter().position(|&end| end <= i.start_ms) {
            Some(r) => r,
            None => {
                row_ends.push(f64::NEG_INFINITY);
                row_ends.len() - 1
            }
        };
        row_ends[row] = i.end_ms;
        bars.push((row, i));
    }
    Lane {
        key,
        bars,
        rows: row_ends.len().max(1),
    }
}

/// XML text escaping.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Light or dark text for a fill, by its luminance.
fn text_colour(fill: &str) -> &'static str {
    let hex = fill.trim_start_matches('#');
    let ch = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .map_or(0.0, f64::from)
    };
    let lum = 0.299 * ch(0) + 0.587 * ch(2) + 0.114 * ch(4);
    if lum > 150.0 {
        "#222"
    } else {
        "#fff"
    }
}

fn bytes_text(b: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    let f = b as f64;
    if f >= GIB {
        format!("{:.2} GiB", f / GIB)
    } else if f >= MIB {
        format!("{:.1} MiB", f / MIB)
    } else {
        format!("{b} B")
    }
}

fn interval_name(i: &Interval) -> String {
    match i.kind {
        IntervalKind::Job => match i.outcome {
            Some(EventKind::JobFailed) => "job (failed)".into(),
            Some(EventKind::JobCancelled) => "job (cancelled)".into(),
            _ => "job".into(),
        },
        IntervalKind::Stage(s) => s.name().into(),
        IntervalKind::Wait(w) => format!("wait: {}", w.name()),
        IntervalKind::Staging => "staging a, b, c (before the GPU lock)".into(),
    }
}

fn tooltip(i: &Interval) -> String {
    let mut t = if i.kind == IntervalKind::Job {
        format!("job {} · {}", i.job, interval_name(i))
    } else {
        format!(
            "job {} · partition {} · {}",
            i.job,
            i.partition,
            interval_name(i)
        )
    };
    let _ = write!(
        t,
        " · {:.3}–{:.3} ms ({})",
        i.start_ms,
        i.end_ms,
        fmt_ms(i.duration_ms())
    );
    if !i.complete {
        t.push_str(" · never ended");
    }
    if let Some(d) = i.device {
        let _ = write!(t, " · device {d}");
    }
    if let Some(w) = i.worker {
        let _ = write!(t, " · worker {w}");
    }
    if let Some(b) = i.bytes {
        let _ = write!(t, " · {}", bytes_text(b));
    }
    if !i.detail.is_empty() {
        let _ = write!(t, " · {}", i.detail);
    }
    t
}

/// Tick step (1, 2 or 5 × 10^k) giving about `target` ticks over `span`.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = (span / target).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn tick_label(ms: f64, in_seconds: bool, step: f64) -> String {
    if in_seconds {
        let decimals = if step >= 1000.0 {
            0
        } else if step >= 100.0 {
            1
        } else {
            2
        };
        format!("{:.*} s", decimals, ms / 1000.0)
    } else {
        let decimals = if step >= 1.0 { 0 } else { 2 };
        format!("{:.*} ms", decimals, ms)
    }
}

struct Frame {
    t0: f64,
    span: f64,
}

impl Frame {
    fn x(&self, ms: f64) -> f64 {
        LEFT + (ms - self.t0) / self.span * PLOT_W
    }
}

/// A step series: (time, value) changes.
struct Series {
    name: String,
    colour: &'static str,
    points: Vec<(f64, f64)>,
    max: f64,
}

/// How many intervals of `kind` are open over time.
fn depth_series(iv: &[Interval], kind: IntervalKind, name: &str, colour: &'static str) -> Series {
    let mut deltas: Vec<(f64, f64)> = Vec::new();
    for i in iv.iter().filter(|i| i.kind == kind) {
        deltas.push((i.start_ms, 1.0));
        deltas.push((i.end_ms, -1.0));
    }
    step_series(deltas, name, colour)
}

fn step_series(mut deltas: Vec<(f64, f64)>, name: &str, colour: &'static str) -> Series {
    // At equal times apply decreases first, so back-to-back waits do not show a
    // spurious peak.
    deltas.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut points = Vec::with_capacity(deltas.len());
    let mut v = 0.0;
    let mut max: f64 = 0.0;
    for (t, d) in deltas {
        v += d;
        max = max.max(v);
        match points.last_mut() {
            Some((lt, lv)) if *lt == t => *lv = v,
            _ => points.push((t, v)),
        }
    }
    Series {
        name: name.to_string(),
        colour,
        points,
        max,
    }
}

/// Renders the waterfall of `events` as a standalone SVG document.
pub fn render_svg(events: &[Event]) -> String {
    let analysis = analyse(events);
    render_svg_inner(events, &analysis)
}

fn render_svg_inner(events: &[Event], analysis: &Analysis) -> String {
    let iv = intervals(events);
    // Times count from the run's start: if the first event is close to it, the
    // axis starts at 0 so its ticks read as round numbers.
    let t0 = if iv.start_ms >= 0.0 && iv.start_ms < 0.05 * (iv.end_ms - iv.start_ms) {
        0.0
    } else {
        iv.start_ms
    };
    let span = (iv.end_ms - t0).max(1e-3);
    let frame = Frame { t0, span };

    // Lanes.
    let mut by_lane: BTreeMap<LaneKey, Vec<&Interval>> = BTreeMap::new();
    for i in &iv.intervals {
        if let Some(group) = Group::of(i) {
            // Zero-length waits say "no wait"; they would only add slivers.
            if matches!(i.kind, IntervalKind::Wait(_)) && i.duration_ms() <= 0.0 {
                continue;
            }
            // One lane for all jobs; otherwise one per (kind, device, worker).
            let key = match group {
                Group::Jobs => LaneKey {
                    group,
                    device: None,
                    worker: None,
                },
                _ => LaneKey {
                    group,
                    device: i.device,
                    worker: i.worker,
                },
            };
            by_lane.entry(key).or_default().push(i);
        }
    }
    let lanes: Vec<Lane> = by_lane.into_iter().map(|(k, v)| pack(k, v)).collect();

    // How many partitions wait, per kind of wait, in pipeline order; and the
    // memory budget in use.
    let waiting: Vec<Series> = [
        WaitKind::SynthQueue,
        WaitKind::Budget,
        WaitKind::GpuQueue,
        WaitKind::Lock,
    ]
    .into_iter()
    .map(|w| {
        let name = match w {
            WaitKind::SynthQueue => "synth queue",
            WaitKind::Budget => "budget wait",
            WaitKind::GpuQueue => "gpu queue",
            WaitKind::Lock => "gpu lock wait",
        };
        depth_series(&iv.intervals, IntervalKind::Wait(w), name, wait_colour(w))
    })
    .filter(|s| s.max > 0.0)
    .collect();
    let budget_deltas: Vec<(f64, f64)> = events
        .iter()
        .filter_map(|e| match (e.event, e.bytes) {
            (EventKind::BudgetAcquired, Some(b)) => Some((e.ms, b as f64)),
            (EventKind::BudgetReleased, Some(b)) => Some((e.ms, -(b as f64))),
            _ => None,
        })
        .collect();
    let budget =
        (!budget_deltas.is_empty()).then(|| step_series(budget_deltas, "budget in use", "#d37295"));

    // Vertical layout.
    let title_y = 22.0;
    let legend_y = 48.0;
    let legend = legend_items(&iv.intervals);
    let legend_rows = legend.len().div_ceil(8).max(1);
    let axis_y = legend_y + legend_rows as f64 * 18.0 + 22.0;
    let lanes_top = axis_y + 6.0;
    let mut y = lanes_top;
    let mut lane_tops = Vec::with_capacity(lanes.len());
    for lane in &lanes {
        lane_tops.push(y);
        let row_h = if lane.key.group == Group::Jobs {
            JOB_ROW_H
        } else {
            ROW_H
        };
        y += lane.rows as f64 * row_h + 2.0 * LANE_PAD;
    }
    let lanes_bottom = y;
    // One band per series, each on its own scale: a synthesis queue of 20 would
    // otherwise flatten a GPU queue of 1 or 2, which is the one that matters.
    let mut bands: Vec<(f64, &Series, bool)> = Vec::new();
    let mut band_y = lanes_bottom + 10.0;
    for ser in &waiting {
        bands.push((band_y, ser, false));
        band_y += BAND_H + BAND_GAP;
    }
    if let Some(b) = &budget {
        bands.push((band_y, b, true));
        band_y += BAND_H + BAND_GAP;
    }
    let plot_bottom = if bands.is_empty() {
        lanes_bottom
    } else {
        band_y - BAND_GAP
    };
    let height = plot_bottom + 34.0;

    let mut s = String::with_capacity(64 * iv.intervals.len() + 4096);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" {FONT} font-size="11">"#
    );
    s.push_str(
        r##"<defs>
<pattern id="hatch-lock" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fbe3e3"/><rect width="3" height="6" fill="#e15759"/></pattern>
<pattern id="hatch-budget" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#fbe6ef"/><rect width="3" height="6" fill="#d37295"/></pattern>
</defs>
<style>.bar:hover{stroke:#000;stroke-width:1.5}</style>
<rect width="100%" height="100%" fill="#fff"/>
"##,
    );

    // Title and legend.
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="{title_y}" font-size="15" font-weight="bold">cuzk timeline</text><text x="{:.0}" y="{title_y}" font-size="12" fill="#444">{}</text>"##,
        LEFT + 120.0,
        esc(&analysis.headline())
    );
    for (n, (label, fill, dashed)) in legend.iter().enumerate() {
        let lx = LEFT + (n % 8) as f64 * 150.0;
        let ly = legend_y + (n / 8) as f64 * 18.0;
        let stroke = if *dashed {
            r##" stroke="#000" stroke-dasharray="3,2""##
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{:.1}" width="22" height="11" fill="{fill}"{stroke}/><text x="{:.0}" y="{:.1}">{}</text>"#,
            ly - 9.0,
            lx + 27.0,
            ly,
            esc(label)
        );
    }

    // Lane backgrounds and labels.
    let mut prev_group = None;
    for (n, lane) in lanes.iter().enumerate() {
        let top = lane_tops[n];
        let bottom = lane_tops.get(n + 1).copied().unwrap_or(lanes_bottom);
        let fill = if n % 2 == 0 { "#f6f6f6" } else { "#ffffff" };
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{top:.1}" width="{PLOT_W}" height="{:.1}" fill="{fill}"/>"#,
            bottom - top
        );
        if prev_group.is_some() && prev_group != Some(lane.key.group) {
            let _ = writeln!(
                s,
                r##"<line x1="8" x2="{:.0}" y1="{top:.1}" y2="{top:.1}" stroke="#999" stroke-width="1"/>"##,
                LEFT + PLOT_W
            );
        }
        prev_group = Some(lane.key.group);
        let mut label = lane.key.label();
        // The assembly lane also carries verification; say so when it does.
        if lane.key.group == Group::Assembly {
            let has = |st| {
                lane.bars
                    .iter()
                    .any(|(_, i)| i.kind == IntervalKind::Stage(st))
            };
            match (has(Stage::Assembly), has(Stage::Verify)) {
                (true, true) => label = label.replacen("assembly", "assembly/verify", 1),
                (false, true) => label = label.replacen("assembly", "verify", 1),
                _ => {}
            }
        }
        if lane.rows > 1 {
            let _ = write!(label, " ×{}", lane.rows);
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.0}" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            LEFT - 8.0,
            (top + bottom) / 2.0,
            esc(&label)
        );
    }

    // Grid and axes.
    let in_seconds = span >= 10_000.0;
    let step = nice_step(span, 12.0);
    let first_tick = (t0 / step).ceil() * step;
    let mut t = first_tick;
    while t <= iv.end_ms + step * 1e-9 {
        let x = frame.x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{plot_bottom:.1}" stroke="#d0d0d0" stroke-width="0.6"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            axis_y,
            axis_y - 4.0,
            tick_label(t, in_seconds, step),
            plot_bottom + 14.0,
            tick_label(t, in_seconds, step)
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" x2="{:.0}" y1="{axis_y:.1}" y2="{axis_y:.1}" stroke="#666"/><line x1="{LEFT}" x2="{:.0}" y1="{plot_bottom:.1}" y2="{plot_bottom:.1}" stroke="#666"/>"##,
        LEFT + PLOT_W,
        LEFT + PLOT_W
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.0}" y="{:.1}" text-anchor="end" fill="#444">time since start</text>"##,
        LEFT + PLOT_W,
        plot_bottom + 28.0
    );

    // Bars.
    for (n, lane) in lanes.iter().enumerate() {
        let (row_h, bar_h) = if lane.key.group == Group::Jobs {
            (JOB_ROW_H, JOB_BAR_H)
        } else {
            (ROW_H, BAR_H)
        };
        for (row, i) in &lane.bars {
            let by = lane_tops[n] + LANE_PAD + *row as f64 * row_h + (row_h - bar_h) / 2.0;
            draw_bar(&mut s, &frame, i, by, bar_h);
        }
    }

    // Waiting and budget bands.
    for (top, ser, is_bytes) in bands {
        let max = ser.max.max(1.0);
        let value = |v: f64| {
            if is_bytes {
                bytes_text(v as u64)
            } else {
                format!("{v:.0}")
            }
        };
        let label = &ser.name;
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{top:.1}" width="{PLOT_W}" height="{BAND_H}" fill="#fafafa" stroke="#ddd"/><text x="{:.0}" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text><text x="{:.0}" y="{:.1}" text-anchor="end" font-size="9" fill="#666">max {}</text>"##,
            LEFT - 8.0,
            top + BAND_H / 2.0 - 5.0,
            esc(label),
            LEFT - 8.0,
            top + BAND_H / 2.0 + 8.0,
            esc(&value(ser.max))
        );
        let yv = |v: f64| top + BAND_H - v / max * (BAND_H - 3.0);
        let mut pts = String::new();
        let mut prev = 0.0;
        let _ = write!(pts, "{:.1},{:.1}", frame.x(t0), yv(0.0));
        for &(t, v) in &ser.points {
            let x = frame.x(t);
            let _ = write!(pts, " {x:.1},{:.1} {x:.1},{:.1}", yv(prev), yv(v));
            prev = v;
        }
        let _ = write!(
            pts,
            " {:.1},{:.1} {:.1},{:.1}",
            frame.x(iv.end_ms),
            yv(prev),
            frame.x(iv.end_ms),
            yv(0.0)
        );
        let _ = writeln!(
            s,
            r#"<polygon points="{pts}" fill="{c}" fill-opacity="0.3" stroke="{c}" stroke-width="1.2" stroke-linejoin="round"/>"#,
            c = ser.colour
        );
    }

    s.push_str("</svg>\n");
    s
}

fn draw_bar(s: &mut String, frame: &Frame, i: &Interval, y: f64, h: f64) {
    let x0 = frame.x(i.start_ms);
    // A bar is at least one pixel wide so short stages stay visible.
    let w = (frame.x(i.end_ms) - x0).max(1.0);
    let (fill, label) = match i.kind {
        IntervalKind::Job => {
            let fill = match i.outcome {
                Some(EventKind::JobFailed) => JOB_FAILED_COLOUR,
                Some(EventKind::JobCancelled) => "#bbbbbb",
                _ => JOB_COLOUR,
            };
            (
                fill.to_string(),
                format!("job {} · {}", i.job, fmt_ms(i.duration_ms())),
            )
        }
        IntervalKind::Stage(st) => (
            stage_colour(st).to_string(),
            format!("{}.{}", i.job, i.partition),
        ),
        IntervalKind::Staging => (STAGING_COLOUR.to_string(), String::new()),
        IntervalKind::Wait(WaitKind::Lock) => ("url(#hatch-lock)".into(), String::new()),
        IntervalKind::Wait(WaitKind::Budget) => ("url(#hatch-budget)".into(), String::new()),
        IntervalKind::Wait(w) => (wait_colour(w).to_string(), String::new()),
    };
    let outline = if i.complete {
        r##" stroke="#fff" stroke-width="0.6""##
    } else {
        r##" stroke="#000" stroke-width="1" stroke-dasharray="3,2""##
    };
    let _ = writeln!(
        s,
        r#"<rect class="bar" data-job="{}" x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}"{outline}><title>{}</title></rect>"#,
        i.job,
        esc(&tooltip(i))
    );
    // The job.partition label, where it fits (≈6 px per character at 9 px).
    let font = if i.kind == IntervalKind::Job {
        8.0
    } else {
        9.0
    };
    if !label.is_empty() && w >= label.len() as f64 * font * 0.62 + 4.0 {
        let colour = if fill.starts_with('#') {
            text_colour(&fill)
        } else {
            "#222"
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="{font}" fill="{colour}" pointer-events="none">{}</text>"#,
            x0 + 2.0,
            y + h / 2.0 + font * 0.36,
            esc(&label)
        );
    }
}

/// Legend entries for what the run contains: (label, fill, dashed outline).
fn legend_items(iv: &[Interval]) -> Vec<(String, String, bool)> {
    let has = |k: IntervalKind| iv.iter().any(|i| i.kind == k);
    let mut items = Vec::new();
    if has(IntervalKind::Job) {
        items.push(("job".to_string(), JOB_COLOUR.to_string(), false));
        if iv.iter().any(|i| i.outcome == Some(EventKind::JobFailed)) {
            items.push((
                "job failed".to_string(),
                JOB_FAILED_COLOUR.to_string(),
                false,
            ));
        }
    }
    for st in Stage::ALL {
        if has(IntervalKind::Stage(st)) {
            items.push((st.name().to_string(), stage_colour(st).to_string(), false));
        }
    }
    if has(IntervalKind::Staging) {
        items.push((
            "staging a, b, c".to_string(),
            STAGING_COLOUR.to_string(),
            false,
        ));
    }
    if iv
        .iter()
        .any(|i| i.kind == IntervalKind::Wait(WaitKind::Lock) && i.duration_ms() > 0.0)
    {
        items.push((
            "gpu lock wait".to_string(),
            "url(#hatch-lock)".to_string(),
            false,
        ));
    }
    if iv.iter().any(|i| {
        i.kind == IntervalKind::Wait(WaitKind::Budget)
            && i.worker.is_some()
            && i.duration_ms() > 0.0
    }) {
        items.push((
            "budget wait".to_string(),
            "url(#hatch-budget)".to_string(),
            false,
        ));
    }
    if iv.iter().any(|i| !i.complete) {
        items.push(("never ended".to_string(), "#ffffff".to_string(), true));
    }
    items
}

/// The waterfall and the analysis in one self-contained HTML page (no external
/// resources). Hovering a bar highlights its job in every lane.
pub fn render_html(events: &[Event]) -> String {
    let a = analyse(events);
    let svg = render_svg_inner(events, &a);
    let mut h = String::with_capacity(svg.len() + 8192);
    h.push_str(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cuzk timeline</title>
<style>
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;font-size:13px;margin:16px;color:#222}
h1{font-size:18px}h2{font-size:15px;margin-top:24px}
table{border-collapse:collapse;margin:6px 0}
th,td{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f0f0f0}
.svg{overflow-x:auto}
svg .dim{opacity:0.25}
</style></head><body>
"#,
    );
    let _ = writeln!(h, "<h1>cuzk timeline</h1><p>{}</p>", esc(&a.headline()));
    if a.unfinished > 0 || a.orphan_ends > 0 {
        let _ = writeln!(
            h,
            "<p><b>Incomplete timeline:</b> {} interval(s) never ended, {} end(s) without a start.</p>",
            a.unfinished, a.orphan_ends
        );
    }
    let _ = writeln!(h, "<div class=\"svg\">{svg}</div>");

    let rows = a.stat_rows();
    if !rows.is_empty() {
        h.push_str("<h2>Stages and waits (ms)</h2>\n<table><tr><th>stage</th><th>count</th><th>mean</th><th>p50</th><th>p95</th><th>min</th><th>max</th><th>total</th></tr>\n");
        for (name, st) in rows {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>",
                esc(&name),
                st.count,
                st.mean_ms,
                st.p50_ms,
                st.p95_ms,
                st.min_ms,
                st.max_ms,
                st.total_ms
            );
        }
        h.push_str("</table>\n");
    }
    if !a.gpu_busy.is_empty() {
        h.push_str(
            "<h2>GPU busy</h2>\n<table><tr><th>device</th><th>busy</th><th>of span</th></tr>\n",
        );
        for d in &a.gpu_busy {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
                esc(&device_name(d.device)),
                esc(&fmt_ms(d.busy_ms)),
                d.busy_pct
            );
        }
        h.push_str("</table>\n");
    }
    if !a.partition_waits.is_empty() {
        h.push_str("<h2>Waits per partition (ms)</h2>\n<table><tr><th>job</th><th>partition</th><th>synth queue</th><th>gpu queue</th><th>gpu lock</th><th>memory budget</th></tr>\n");
        let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
        for p in &a.partition_waits {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                p.job,
                p.partition,
                cell(p.synth_queue_ms),
                cell(p.gpu_queue_ms),
                cell(p.lock_wait_ms),
                cell(p.budget_wait_ms)
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str(
        r#"<script>
document.querySelectorAll('svg .bar').forEach(function(b){
  b.addEventListener('mouseenter',function(){var j=b.getAttribute('data-job');
    document.querySelectorAll('svg .bar').forEach(function(o){if(o.getAttribute('data-job')!==j)o.classList.add('dim');});});
  b.addEventListener('mouseleave',function(){document.querySelectorAll('svg .dim').forEach(function(o){o.classList.remove('dim');});});
});
</script>
</body></html>
"#,
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(455.0, 12.0), 50.0);
        assert_eq!(nice_step(100_000.0, 12.0), 10_000.0);
        assert_eq!(nice_step(12.0, 12.0), 1.0);
    }

    #[test]
    fn packing_uses_the_fewest_rows_without_overlap() {
        // Deterministic pseudo-random intervals; the fewest rows possible is the
        // largest number of intervals open at one time.
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1000) as f64
        };
        for n in [1usize, 2, 3, 7, 33, 200] {
            let items: Vec<Interval> = (0..n)
                .map(|k| {
                    let s = next();
                    Interval {
                        kind: IntervalKind::Stage(Stage::Dealloc),
                        job: 1,
                        partition: k as u32,
                        worker: None,
                        device: None,
                        bytes: None,
                        start_ms: s,
                        end_ms: s + 1.0 + next() / 10.0,
                        complete: true,
                        outcome: None,
                        detail: String::new(),
                    }
                })
                .collect();
            let key = LaneKey {
                group: Group::Dealloc,
                device: None,
                worker: None,
            };
            let lane = pack(key, items.iter().collect());
            assert_eq!(lane.bars.len(), n);
            for (i, (ra, a)) in lane.bars.iter().enumerate() {
                for (rb, b) in &lane.bars[i + 1..] {
                    if ra == rb {
                        assert!(a.end_ms <= b.start_ms || b.end_ms <= a.start_ms);
                    }
                }
            }
            let depth = items
                .iter()
                .map(|a| {
                    items
                        .iter()
                        .filter(|b| b.start_ms <= a.start_ms && a.start_ms < b.end_ms)
                        .count()
                })
                .max()
                .unwrap();
            assert_eq!(lane.rows, depth, "n = {n}");
        }
    }

    #[test]
    fn escaping() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
