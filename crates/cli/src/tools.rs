//! `cuzk timeline` and `cuzk plugins`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use cuzk_plugin_host::{PluginInfo, SearchPath};

#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// A run's `timeline.jsonl` (or a log holding `TIMELINE,...` lines).
    pub file: PathBuf,
    /// Write the waterfall as an SVG picture.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write the waterfall and the figures as an HTML page.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

pub fn timeline(args: TimelineArgs) -> Result<()> {
    let events = if args.file.extension().is_some_and(|e| e == "jsonl") {
        cuzk_timeline::read_jsonl(&args.file)?
    } else {
        let text = std::fs::read_to_string(&args.file)
            .with_context(|| format!("reading {}", args.file.display()))?;
        cuzk_timeline::parse_timeline_log(&text)
    };
    if events.is_empty() {
        anyhow::bail!("{} holds no timeline events", args.file.display());
    }
    let analysis = cuzk_timeline::analyse(&events);
    print!("{analysis}");
    if let Some(p) = &args.svg {
        std::fs::write(p, cuzk_timeline::render_svg(&events))
            .with_context(|| format!("writing {}", p.display()))?;
        println!("waterfall: {}", p.display());
    }
    if let Some(p) = &args.html {
        std::fs::write(p, cuzk_timeline::render_html(&events))
            .with_context(|| format!("writing {}", p.display()))?;
        println!("page: {}", p.display());
    }
    Ok(())
}

#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// List the plugins found in a folder (default: next to the cuzk binary).
    List {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Load one plugin file and report its kind, name, ABI version and capabilities.
    Check { path: PathBuf },
}

fn print_info(info: &PluginInfo) {
    println!(
        "{:<9} {:<10} ABI v{:<3} {}",
        info.kind.as_str(),
        info.name,
        info.abi_version,
        info.path.display()
    );
    if !info.description.is_empty() {
        println!("          {}", info.description);
    }
    for p in &info.params {
        println!("          {} = {} (default): {}", p.name, p.default, p.help);
    }
    if let Some(why) = &info.unavailable {
        println!("          cannot start here: {why}");
    }
    if let Some(c) = &info.capabilities {
        println!(
            "          capabilities: max domain 2^{}, G2 {}, {} device(s)",
            c.max_log_domain,
            if c.g2 { "yes" } else { "no" },
            c.devices.len()
        );
        for d in &c.devices {
            println!(
                "            {}: {:.1} GiB free of {:.1} GiB",
                d.name,
                d.free_memory as f64 / (1u64 << 30) as f64,
                d.total_memory as f64 / (1u64 << 30) as f64
            );
        }
    }
}

pub fn plugins(cmd: PluginsCommand) -> Result<()> {
    match cmd {
        PluginsCommand::List { dir } => {
            let dirs: Vec<PathBuf> = match dir {
                Some(d) => vec![d],
                None => SearchPath::next_to_exe().dirs().to_vec(),
            };
            let mut found = 0;
            for d in &dirs {
                for r in cuzk_plugin_host::list_plugins(d) {
                    match r {
                        Ok(info) => {
                            found += 1;
                            print_info(&info);
                        }
                        Err(e) => println!("(skipped) {e}"),
                    }
                }
            }
            if found == 0 {
                println!(
                    "no cuzk plugins in {} (build them with `cargo build --release --workspace`)",
                    dirs.iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Ok(())
        }
        PluginsCommand::Check { path } => {
            let info = cuzk_plugin_host::check_plugin(Path::new(&path))?;
            print_info(&info);
            println!("ok: a cuzk plugin built against this ABI");
            Ok(())
        }
    }
}
