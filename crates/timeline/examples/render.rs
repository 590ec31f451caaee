//! Renders a timeline to SVG or HTML and prints its analysis.
//!
//! ```text
//! cargo run --release -p cuzk-timeline --example render -- run.jsonl out.html
//! cargo run --release -p cuzk-timeline --example render -- --synthetic out.svg
//! ```
//! The input is JSON lines (as `Recorder::with_jsonl` writes) or, if its name ends
//! in `.log` or `.txt`, a log holding TIMELINE lines. The output format follows
//! the output's extension (`.svg`, anything else is HTML).

use std::process::ExitCode;

use cuzk_timeline::synthetic::{synthetic_run, SyntheticConfig};
use cuzk_timeline::{analyse, parse_timeline_log, read_jsonl, render_html, render_svg};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: render <run.jsonl | run.log | --synthetic> <out.svg | out.html>");
        return ExitCode::FAILURE;
    };
    let events = if input == "--synthetic" {
        synthetic_run(&SyntheticConfig::default())
    } else if input.ends_with(".log") || input.ends_with(".txt") {
        match std::fs::read_to_string(input) {
            Ok(text) => parse_timeline_log(&text),
            Err(e) => {
                eprintln!("cannot read {input}: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        match read_jsonl(input) {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    };
    print!("{}", analyse(&events));
    let out = if output.ends_with(".svg") {
        render_svg(&events)
    } else {
        render_html(&events)
    };
    if let Err(e) = std::fs::write(output, out) {
        eprintln!("cannot write {output}: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
