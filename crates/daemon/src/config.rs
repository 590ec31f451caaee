//! The `[daemon]` table of `cuzk.toml`.
//!
//! ```toml
//! [daemon]
//! listen = "127.0.0.1:9820"          # or "unix:///run/cuzk.sock"
//! metrics_listen = "127.0.0.1:9821"  # HTTP /metrics; left out: no endpoint
//! param_cache = "/var/tmp/filecoin-proof-parameters"
//! param_memory_gib = 200             # parameter sets kept resident when idle
//! gpus = [0]
//! max_running_jobs = 2
//! result_ttl_s = 3600
//! max_message_mib = 1025             # default: the largest kind's request + 1
//! shutdown = "finish"                # or "cancel"
//! shutdown_timeout_s = 900           # after SIGTERM: the most jobs, then calls still in flight (a preload), are waited for
//! synthetic = false
//! synthetic_max_log = 18
//! synthetic_timing_only = false
//! timing_only_circuits = []          # benchmarks only, e.g. ["porep-32g"]
//! timeline = "/var/log/cuzk/timeline.jsonl"
//! ```
//!
//! Every key is optional; an unknown key is an error that names it. The engine's
//! knobs (`[engine]`, including its memory budget for partitions in flight) and
//! the plugins are the same tables as for every other command.
//!
//! The table's type, [`DaemonSection`], lives in `cuzk-config` with the rest of
//! `cuzk.toml`; this module checks its values and applies the defaults.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

pub use cuzk_config::daemon::DaemonSection;
use cuzk_config::daemon::LimitSection;
use cuzk_service::{KindLimits, ProofKind, ServiceConfig, ShutdownMode};

/// Where the daemon listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// `host:port`.
    Tcp(String),
    /// `unix:///path`.
    Unix(PathBuf),
}

impl Listen {
    /// Parses `host:port` or `unix:///path` (Curio's forms).
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        if let Some(path) = s.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(ConfigError::Invalid(format!(
                    "listen `{s}`: a Unix socket is `unix:///absolute/path`"
                )));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Listen::Tcp(s.to_owned()))
            }
            _ => Err(ConfigError::Invalid(format!(
                "listen `{s}`: expected `host:port` (such as 127.0.0.1:9820) or `unix:///path`"
            ))),
        }
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => f.write_str(a),
            Listen::Unix(p) => write!(f, "unix://{}", p.display()),
        }
    }
}

/// A bad `[daemon]` table.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] cuzk_config::ConfigError),
    #[error("{0}")]
    Invalid(String),
}

/// The daemon's resolved settings.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    pub listen: Listen,
    pub metrics_listen: Option<String>,
    pub param_cache: PathBuf,
    /// Parameters memory-mapped from points files here (`[daemon] points_dir`).
    pub points_dir: Option<PathBuf>,
    pub gpus: Option<Vec<u32>>,
    pub max_message_bytes: usize,
    pub shutdown: ShutdownMode,
    pub shutdown_timeout: Duration,
    pub synthetic: bool,
    pub synthetic_max_log: u32,
    pub synthetic_timing_only: bool,
    /// Filecoin circuit ids proved with timing-only parameters (benchmarks;
    /// proofs returned unverified). Empty by default.
    pub timing_only_circuits: Vec<String>,
    pub service: ServiceConfig,
    /// Who may call and how the transport is protected.
    pub access: Access,
    /// Concurrent calls one connection may have open.
    pub max_streams_per_connection: u32,
    /// The plan the process made at start, which `GetStatus` reports (not read
    /// from the file: the command that planned sets it).
    pub plan: Option<StartupPlan>,
}

/// A daemon's plan at start, as text and as JSON (`GetStatusResponse.plan`,
/// `plan_json`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartupPlan {
    pub text: String,
    pub json: String,
}

/// Who may call the daemon (ARCHITECTURE.md, "Threat model").
#[derive(Clone, Debug)]
pub struct Access {
    /// Where the shared token is read from at start (every call must carry
    /// `authorization: Bearer <token>`); `None`: no token asked.
    pub token_file: Option<PathBuf>,
    /// PEM certificate chain and key: gRPC over TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// A Unix socket's mode.
    pub socket_mode: u32,
    /// A Unix socket's group (name or number, resolved at bind).
    pub socket_group: Option<String>,
}

impl Default for Access {
    /// No token, no TLS, a Unix socket of mode 0660.
    fn default() -> Self {
        Self {
            token_file: None,
            tls: None,
            socket_mode: 0o660,
            socket_group: None,
        }
    }
}

/// Whether every address `host:port` names is a loopback address (an address
/// that does not resolve counts as not loopback).
pub fn is_loopback(addr: &str) -> bool {
    use std::net::ToSocketAddrs;
    match addr.to_socket_addrs() {
        Ok(mut addrs) => {
            let all: Vec<_> = addrs.by_ref().collect();
            !all.is_empty() && all.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

/// One kind's limits from its `[daemon.limits.<kind>]` table.
fn kind_limits(
    kind: ProofKind,
    table: &str,
    s: Option<&LimitSection>,
) -> Result<Option<KindLimits>, ConfigError> {
    let Some(s) = s else { return Ok(None) };
    let mut l = KindLimits::default_for(kind);
    if let Some(p) = s.max_pending {
        l.max_pending = p;
    }
    if let Some(m) = s.max_request_mib {
        if m == 0 || m > 4095 {
            return Err(ConfigError::Invalid(format!(
                "[daemon.limits.{table}] max_request_mib = {m}: give 1 to 4095"
            )));
        }
        l.max_request_bytes = m << 20;
    }
    Ok(Some(l))
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self::from_section(&DaemonSection::default()).expect("the defaults are valid")
    }
}

/// filecoin-proofs' default parameter directory.
pub const DEFAULT_PARAM_CACHE: &str = "/var/tmp/filecoin-proof-parameters";

impl DaemonConfig {
    /// The `[daemon]` table of a whole `cuzk.toml`'s text (defaults if absent).
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let c = cuzk_config::Config::from_toml(text, origin)?;
        Self::from_section(&c.daemon.unwrap_or_default())
    }

    /// Applies the defaults to `s` and checks every value.
    pub fn from_section(s: &DaemonSection) -> Result<DaemonConfig, ConfigError> {
        let listen = Listen::parse(s.listen.as_deref().unwrap_or("127.0.0.1:9820"))?;
        if let Some(m) = &s.metrics_listen {
            if !matches!(Listen::parse(m)?, Listen::Tcp(_)) {
                return Err(ConfigError::Invalid(format!(
                    "metrics_listen `{m}`: the metrics endpoint is HTTP on `host:port`"
                )));
            }
        }
        let param_cache = s.param_cache.clone().unwrap_or_else(|| {
            std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_PARAM_CACHE))
        });
        let param_budget_bytes = match s.param_memory_gib {
            None => u64::MAX,
            Some(g) if g.is_finite() && g >= 0.0 => (g * (1u64 << 30) as f64) as u64,
            Some(g) => {
                return Err(ConfigError::Invalid(format!(
                    "param_memory_gib = {g}: give a number of GiB, 0 or more"
                )))
            }
        };
        if let Some(g) = &s.gpus {
            if g.len() > 1 {
                return Err(ConfigError::Invalid(format!(
                    "gpus = {g:?}: one daemon drives one GPU for now; run one daemon per GPU"
                )));
            }
        }
        let max_running_jobs = s.max_running_jobs.unwrap_or(2);
        if max_running_jobs == 0 {
            return Err(ConfigError::Invalid(
                "max_running_jobs must be at least 1".into(),
            ));
        }
        let mut limits = BTreeMap::new();
        let ls = s.limits.clone().unwrap_or_default();
        for (kind, table, section) in [
            (ProofKind::PorepSealCommit, "porep", &ls.porep),
            (ProofKind::SnapDealsUpdate, "snap", &ls.snap),
            (ProofKind::WindowPostPartition, "window", &ls.window),
            (ProofKind::WinningPost, "winning", &ls.winning),
            (ProofKind::NiPorepSealCommit, "ni_porep", &ls.ni_porep),
            (ProofKind::SealAggregate, "aggregate", &ls.aggregate),
            (ProofKind::Synthetic, "synthetic", &ls.synthetic),
        ] {
            if let Some(l) = kind_limits(kind, table, section.as_ref())? {
                limits.insert(kind, l);
            }
        }
        // The transport's limit: the largest request any kind accepts, plus room
        // for the other fields (a request over its kind's limit is refused after
        // decoding, with the kind named).
        let largest_request = ProofKind::ALL
            .iter()
            .map(|&k| {
                limits
                    .get(&k)
                    .copied()
                    .unwrap_or_else(|| KindLimits::default_for(k))
                    .max_request_bytes
            })
            .max()
            .unwrap_or(0);
        let max_message_mib = s
            .max_message_mib
            .unwrap_or(((largest_request >> 20) + 1) as usize);
        if max_message_mib == 0 || max_message_mib > 4095 {
            return Err(ConfigError::Invalid(format!(
                "max_message_mib = {max_message_mib}: give 1 to 4095"
            )));
        }
        let shutdown = match s.shutdown.as_deref().unwrap_or("finish") {
            "finish" => ShutdownMode::Finish,
            "cancel" => ShutdownMode::Cancel,
            other => {
                return Err(ConfigError::Invalid(format!(
                    "shutdown = \"{other}\": use \"finish\" or \"cancel\""
                )))
            }
        };
        let socket_mode = match s.socket_mode.as_deref() {
            None => 0o660,
            Some(m) => {
                let mode = u32::from_str_radix(m.trim_start_matches("0o"), 8)
                    .ok()
                    .filter(|&mode| mode <= 0o777)
                    .ok_or_else(|| {
                        ConfigError::Invalid(format!(
                            "socket_mode = \"{m}\": give an octal mode such as \"0660\""
                        ))
                    })?;
                if mode & 0o007 != 0 && s.insecure != Some(true) {
                    return Err(ConfigError::Invalid(format!(
                        "socket_mode = \"{m}\": every user of the host could call the daemon; give 0660 or stricter, or write insecure = true to accept that"
                    )));
                }
                mode
            }
        };
        let tls = match (&s.tls_cert, &s.tls_key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            _ => {
                return Err(ConfigError::Invalid(
                    "tls_cert and tls_key go together: give both or neither".into(),
                ))
            }
        };
        if let Listen::Tcp(addr) = &listen {
            if s.token_file.is_none() && s.insecure != Some(true) && !is_loopback(addr) {
                return Err(ConfigError::Invalid(format!(
                    "listen `{addr}` is not a loopback address and no token_file is set: anyone who reaches it could submit, cancel and take proofs. Set token_file (and tls_cert/tls_key), or write insecure = true to accept that"
                )));
            }
        }
        let max_streams_per_connection = s.max_streams_per_connection.unwrap_or(64);
        if max_streams_per_connection == 0 {
            return Err(ConfigError::Invalid(
                "max_streams_per_connection must be at least 1".into(),
            ));
        }
        let timing_only_circuits = s.timing_only_circuits.clone().unwrap_or_default();
        for (i, id) in timing_only_circuits.iter().enumerate() {
            if id.trim().is_empty() || id.trim() != id {
                return Err(ConfigError::Invalid(format!(
                    "timing_only_circuits: `{id}` is not a circuit id (such as \"porep-32g\")"
                )));
            }
            if timing_only_circuits[..i].contains(id) {
                return Err(ConfigError::Invalid(format!(
                    "timing_only_circuits lists `{id}` twice"
                )));
            }
        }
        Ok(DaemonConfig {
            plan: None,
            timing_only_circuits,
            listen,
            metrics_listen: s.metrics_listen.clone(),
            param_cache,
            points_dir: s.points_dir.clone(),
            gpus: s.gpus.clone(),
            max_message_bytes: max_message_mib << 20,
            shutdown,
            shutdown_timeout: Duration::from_secs(s.shutdown_timeout_s.unwrap_or(900)),
            synthetic: s.synthetic.unwrap_or(false),
            synthetic_max_log: s
                .synthetic_max_log
                .unwrap_or(cuzk_service::synthetic::MAX_LOG),
            synthetic_timing_only: s.synthetic_timing_only.unwrap_or(false),
            service: ServiceConfig {
                max_running_jobs,
                param_budget_bytes,
                result_ttl: Duration::from_secs(s.result_ttl_s.unwrap_or(3600)),
                timeline_jsonl: s.timeline.clone(),
                limits,
            },
            access: Access {
                token_file: s.token_file.clone(),
                tls,
                socket_mode,
                socket_group: s.socket_group.clone(),
            },
            max_streams_per_connection,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_parses_and_unknown_keys_are_errors() {
        let c = DaemonConfig::from_toml(
            r#"
            [engine]
            synth_jobs = 2
            [daemon]
            listen = "unix:///tmp/cuzk.sock"
            metrics_listen = "127.0.0.1:9821"
            param_cache = "/params"
            param_memory_gib = 1.5
            gpus = [0]
            max_running_jobs = 3
            result_ttl_s = 60
            max_message_mib = 64
            shutdown = "cancel"
            shutdown_timeout_s = 5
            synthetic = true
            synthetic_max_log = 20
            synthetic_timing_only = false
            timing_only_circuits = ["porep-2k", "winning-32g"]
            timeline = "/tmp/t.jsonl"
            "#,
            "test",
        )
        .unwrap();
        assert_eq!(c.listen, Listen::Unix("/tmp/cuzk.sock".into()));
        assert_eq!(c.max_message_bytes, 64 << 20);
        assert_eq!(c.shutdown, ShutdownMode::Cancel);
        assert_eq!(c.service.max_running_jobs, 3);
        assert_eq!(c.service.param_budget_bytes, 3 << 29);
        assert!(c.synthetic);
        assert_eq!(c.timing_only_circuits, ["porep-2k", "winning-32g"]);
        // Off unless written.
        assert!(DaemonConfig::default().timing_only_circuits.is_empty());

        let err = DaemonConfig::from_toml("[daemon]\nlisten_addr = \"x\"\n", "test").unwrap_err();
        assert!(err.to_string().contains("listen_addr"), "{err}");
    }

    #[test]
    fn cuzk_s_kinds_have_limit_tables_and_size_the_transport() {
        // The defaults: NI-PoRep's 1 GiB is the largest request, so the transport
        // takes 1 GiB + 1 MiB.
        let d = DaemonConfig::default();
        assert_eq!(d.max_message_bytes, 1025 << 20);
        let ni = d.service.limits_for(ProofKind::NiPorepSealCommit);
        let agg = d.service.limits_for(ProofKind::SealAggregate);
        assert_eq!((ni.max_pending, ni.max_request_bytes), (4, 1 << 30));
        assert_eq!((agg.max_pending, agg.max_request_bytes), (32, 8 << 20));
        let c = DaemonConfig::from_toml(
            "[daemon.limits.ni_porep]\nmax_pending = 1\nmax_request_mib = 2048\n\
             [daemon.limits.aggregate]\nmax_pending = 2\nmax_request_mib = 1\n",
            "test",
        )
        .unwrap();
        let ni = c.service.limits_for(ProofKind::NiPorepSealCommit);
        let agg = c.service.limits_for(ProofKind::SealAggregate);
        assert_eq!((ni.max_pending, ni.max_request_bytes), (1, 2048 << 20));
        assert_eq!((agg.max_pending, agg.max_request_bytes), (2, 1 << 20));
        assert_eq!(c.max_message_bytes, 2049 << 20);
        let e = DaemonConfig::from_toml("[daemon.limits.aggregate]\nmax_request_mib = 0\n", "t")
            .unwrap_err();
        assert!(e.to_string().contains("[daemon.limits.aggregate]"), "{e}");
        let e =
            DaemonConfig::from_toml("[daemon.limits.niporep]\nmax_pending = 1\n", "t").unwrap_err();
        assert!(e.to_string().contains("niporep"), "{e}");
    }

    #[test]
    fn bad_values_say_what_to_write() {
        for (toml, needle) in [
            ("listen = \"9820\"", "host:port"),
            ("listen = \"unix://rel.sock\"", "absolute"),
            ("shutdown = \"now\"", "finish"),
            ("max_running_jobs = 0", "at least 1"),
            ("gpus = [0, 1]", "one GPU"),
            ("metrics_listen = \"unix:///x\"", "HTTP"),
            (
                "timing_only_circuits = [\"porep-2k\", \"porep-2k\"]",
                "twice",
            ),
            ("timing_only_circuits = [\"\"]", "not a circuit id"),
            (
                "timing_only_circuits = \"porep-2k\"",
                "timing_only_circuits",
            ),
        ] {
            let err = DaemonConfig::from_toml(&format!("[daemon]\n{toml}\n"), "test")
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{toml}: {err}");
        }
    }
}
