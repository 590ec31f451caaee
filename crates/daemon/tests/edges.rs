//! The daemon's edges, tried as a hostile caller would: request ids no log or
//! thread may carry, duplicates, requests over their kind's size, more pending
//! jobs than a kind may queue, kinds whose own code panics at every step, and
//! who may call (the token, TLS, a Unix socket's mode and an existing path).
//! After each, the daemon still answers, holds nothing, proves a job and stops.

mod common;

use std::{
    os::unix::fs::PermissionsExt,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{check_synthetic_proof, start, synthetic, Daemon, Opts};
use cuzk_daemon::{client::ClientOptions, wire as pb, DaemonConfig};
use cuzk_scheduler::PipelineEngine;
use cuzk_service::{
    KindProver, LoadedParams, PreparedProof, ProofFailure, ProofKind, ProofRequest, RequestError,
    RunningProof,
};
use tonic::Code;

fn completed(r: &pb::AwaitProofResponse) -> bool {
    r.status == pb::await_proof_response::Status::Completed as i32
}

/// A synthetic job proves and verifies: the daemon is not wedged.
fn still_proves(d: &Daemon, seed: u64) {
    let mut c = d.client();
    let r =
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(synthetic(10, 1, seed)),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert!(completed(&r), "{r:?}");
    check_synthetic_proof(10, 1, seed, &r.proof);
}

/// Stops the daemon and checks it stopped within `limit`.
fn stops_within(mut d: Daemon, limit: Duration) {
    let t = Instant::now();
    d.shutdown.trigger();
    let served = d.served.take().unwrap();
    d.rt.block_on(served).unwrap().unwrap();
    assert!(t.elapsed() < limit, "shutdown took {:?}", t.elapsed());
}

fn submit_code(d: &Daemon, req: pb::SubmitProofRequest) -> Result<String, Code> {
    let mut c = d.client();
    d.rt.block_on(c.submit_proof(req))
        .map(|r| r.into_inner().job_id)
        .map_err(|s| s.code())
}

#[test]
fn hostile_request_ids_are_refused_before_anything_is_counted() {
    let d = start(Opts::default());
    let with_id = |id: &str| {
        let mut r = synthetic(10, 1, 1);
        r.request_id = id.into();
        r
    };
    // The report's wedge: two NUL ids, each once panicked a handler after the
    // job was counted as running.
    for _ in 0..2 {
        assert_eq!(submit_code(&d, with_id("a\0b")), Err(Code::InvalidArgument));
    }
    for bad in [
        "x".repeat(1 << 20),
        "x".repeat(129),
        "with space".into(),
        "new\nline".into(),
        "\u{1b}[31mred".into(),
        "caf\u{e9}".into(),
    ] {
        assert_eq!(submit_code(&d, with_id(&bad)), Err(Code::InvalidArgument));
    }
    // Printable ids of any shape Curio might send are fine, 128 bytes included.
    let long = "y".repeat(128);
    let mut c = d.client();
    for ok in [long.as_str(), "porep-f01000-42:1", "../../etc/passwd"] {
        assert_eq!(submit_code(&d, with_id(ok)), Ok(ok.to_owned()));
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: ok.into(),
            timeout_ms: 0,
        }))
        .unwrap();
    }
    let s = d.wait_idle();
    assert_eq!(s.total_proofs_failed, 0, "{s:?}");
    still_proves(&d, 2);
    stops_within(d, Duration::from_secs(30));
}

#[test]
fn a_duplicate_id_is_answered_and_never_makes_a_second_job() {
    let d = start(Opts::default());
    d.gate.close();
    let mut r = synthetic(10, 1, 3);
    r.request_id = "same".into();
    assert_eq!(submit_code(&d, r.clone()), Ok("same".into()));
    assert_eq!(submit_code(&d, r.clone()), Err(Code::AlreadyExists));
    let s = d.wait_status("one job", |s| {
        s.queues
            .iter()
            .map(|q| q.pending + q.in_progress)
            .sum::<u32>()
            == 1
    });
    assert_eq!(s.queues.iter().map(|q| q.pending).sum::<u32>(), 0);
    d.gate.open();
    let mut c = d.client();
    let res =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: "same".into(),
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner();
    assert!(completed(&res));
    check_synthetic_proof(10, 1, 3, &res.proof);
    stops_within(d, Duration::from_secs(30));
}

#[test]
fn unknown_kinds_and_priorities_and_junk_are_invalid_arguments() {
    let d = start(Opts::default());
    for bad in [
        pb::SubmitProofRequest {
            proof_kind: 77,
            ..synthetic(10, 1, 1)
        },
        pb::SubmitProofRequest {
            proof_kind: 0,
            ..synthetic(10, 1, 1)
        },
        pb::SubmitProofRequest {
            priority: -3,
            ..synthetic(10, 1, 1)
        },
        pb::SubmitProofRequest {
            vanilla_proof: b"{\"circuit\":\"../../x\",\"log\":10,\"partitions\":1,\"seed\":1}"
                .to_vec(),
            ..synthetic(10, 1, 1)
        },
    ] {
        assert_eq!(submit_code(&d, bad), Err(Code::InvalidArgument));
    }
    // A kind this daemon has no prover for.
    let porep = pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        registered_proof: 1 << 40,
        vanilla_proof: vec![0xff; 4096],
        ..Default::default()
    };
    assert_eq!(submit_code(&d, porep), Err(Code::Unimplemented));
    // Path-like circuit ids name no file.
    let mut c = d.client();
    for id in ["../../etc/passwd", "/etc/shadow", "porep-32g/../../x", ""] {
        let e =
            d.rt.block_on(c.preload_srs(pb::PreloadSrsRequest {
                circuit_id: id.into(),
            }))
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{id}: {e:?}");
        let e =
            d.rt.block_on(c.evict_srs(pb::EvictSrsRequest {
                circuit_id: id.into(),
            }))
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{id}: {e:?}");
    }
    still_proves(&d, 4);
    stops_within(d, Duration::from_secs(30));
}

#[test]
fn a_kind_queues_at_most_its_pending_cap_and_loses_nothing_accepted() {
    let d = start(Opts {
        daemon_toml: "max_running_jobs = 1\n[daemon.limits.synthetic]\nmax_pending = 3\nmax_request_mib = 1\n".into(),
        ..Opts::default()
    });
    d.gate.close();
    let mut accepted = Vec::new();
    accepted.push(submit_code(&d, synthetic(10, 1, 10)).unwrap());
    d.wait_status("the first job admitted", |s| {
        s.queues.iter().any(|q| q.in_progress == 1)
    });
    for seed in 11..14 {
        accepted.push(submit_code(&d, synthetic(10, 1, seed)).unwrap());
    }
    // Over the cap: refused, and refused again while nothing moved.
    for seed in 14..16 {
        assert_eq!(
            submit_code(&d, synthetic(10, 1, seed)),
            Err(Code::ResourceExhausted)
        );
    }
    assert_eq!(
        d.metric(r#"cuzk_proofs_refused_queue_full_total{kind="SYNTHETIC"}"#),
        2.0
    );
    // Over the kind's size: refused before it is decoded further.
    let mut big = synthetic(10, 1, 20);
    big.vanilla_proofs = vec![vec![7u8; 2 << 20]];
    assert_eq!(submit_code(&d, big), Err(Code::ResourceExhausted));
    d.gate.open();
    let mut c = d.client();
    for (id, seed) in accepted.iter().zip(10..) {
        let r =
            d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
                job_id: id.clone(),
                timeout_ms: 0,
            }))
            .unwrap()
            .into_inner();
        assert!(completed(&r), "{r:?}");
        check_synthetic_proof(10, 1, seed, &r.proof);
    }
    d.wait_idle();
    stops_within(d, Duration::from_secs(30));
}

/// Where a [`Panicky`] kind panics, chosen by the request's `sector_number`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Prepare = 1,
    CircuitId = 2,
    Load = 3,
    Start = 4,
    Wait = 5,
    StartError = 6,
}

/// A kind whose own code panics (or fails) at the step the request names: the
/// service must fail that job and give every slot and count back.
struct Panicky;

struct PanickyPrepared(Step);

struct PanickyRunning;

impl RunningProof for PanickyRunning {
    fn engine_job(&self) -> Option<u64> {
        None
    }
    fn wait(self: Box<Self>) -> Result<Vec<u8>, ProofFailure> {
        panic!("injected: wait")
    }
}

impl PreparedProof for PanickyPrepared {
    fn circuit_id(&self) -> &str {
        match self.0 {
            Step::CircuitId => panic!("injected: circuit_id"),
            Step::Load => "panicky-load",
            _ => "panicky",
        }
    }
    fn start(
        self: Box<Self>,
        _engine: &PipelineEngine,
        _params: &LoadedParams,
    ) -> Result<Box<dyn RunningProof>, String> {
        match self.0 {
            Step::Start => panic!("injected: start"),
            Step::StartError => Err("injected: start error".into()),
            _ => Ok(Box::new(PanickyRunning)),
        }
    }
}

impl KindProver for Panicky {
    fn kind(&self) -> ProofKind {
        ProofKind::WinningPost
    }
    fn prepare(&self, r: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError> {
        let step = match r.sector_number {
            1 => panic!("injected: prepare"),
            2 => Step::CircuitId,
            3 => Step::Load,
            4 => Step::Start,
            5 => Step::Wait,
            _ => Step::StartError,
        };
        Ok(Box::new(PanickyPrepared(step)))
    }
    fn knows_circuit(&self, id: &str) -> bool {
        id.starts_with("panicky")
    }
    fn load_params(&self, id: &str) -> Result<LoadedParams, String> {
        if id == "panicky-load" {
            panic!("injected: load_params")
        }
        Ok(LoadedParams {
            value: Arc::new(()),
            bytes: 1,
            timing_only: false,
        })
    }
}

#[test]
fn panics_and_errors_in_a_kind_fail_its_job_and_leak_no_slot() {
    let d = start(Opts {
        daemon_toml: "max_running_jobs = 1".into(),
        kinds: vec![Arc::new(Panicky)],
        ..Opts::default()
    });
    let mut c = d.client();
    let req = |step: Step| pb::SubmitProofRequest {
        proof_kind: pb::ProofKind::WinningPost as i32,
        sector_number: step as u64,
        ..Default::default()
    };
    // A panic in the request's check is the request's fault, and nothing was counted.
    assert_eq!(
        submit_code(&d, req(Step::Prepare)),
        Err(Code::InvalidArgument)
    );
    for step in [
        Step::CircuitId,
        Step::Load,
        Step::Start,
        Step::Wait,
        Step::StartError,
    ] {
        let id = submit_code(&d, req(step)).unwrap();
        let r =
            d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
                job_id: id,
                timeout_ms: 60_000,
            }))
            .unwrap()
            .into_inner();
        assert_eq!(
            r.status,
            pb::await_proof_response::Status::Failed as i32,
            "{step:?}: {r:?}"
        );
        assert!(r.error_message.contains("injected"), "{step:?}: {r:?}");
    }
    // With one admission slot, a slot leaked by any of the five would leave
    // this job pending for ever.
    still_proves(&d, 30);
    let s = d.wait_idle();
    assert_eq!(s.total_proofs_failed, 5, "{s:?}");
    stops_within(d, Duration::from_secs(30));
}

fn token_file(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let token = "5f1e0c8a9b7d6e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d".to_owned();
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    (path, token)
}

/// Every call of a client without the token is UNAUTHENTICATED.
fn every_call_refused(d: &Daemon, opts: &ClientOptions) {
    let mut c = d.client_with(opts);
    let code = |r: Result<(), tonic::Status>| r.unwrap_err().code();
    let rt = &d.rt;
    let calls = [
        code(rt.block_on(c.submit_proof(synthetic(10, 1, 1))).map(drop)),
        code(
            rt.block_on(c.prove(pb::ProveRequest {
                submit: Some(synthetic(10, 1, 1)),
            }))
            .map(drop),
        ),
        code(
            rt.block_on(c.await_proof(pb::AwaitProofRequest {
                job_id: "x".into(),
                timeout_ms: 1,
            }))
            .map(drop),
        ),
        code(
            rt.block_on(c.cancel_proof(pb::CancelProofRequest { job_id: "x".into() }))
                .map(drop),
        ),
        code(rt.block_on(c.get_status(pb::GetStatusRequest {})).map(drop)),
        code(
            rt.block_on(c.get_metrics(pb::GetMetricsRequest {}))
                .map(drop),
        ),
        code(
            rt.block_on(c.preload_srs(pb::PreloadSrsRequest {
                circuit_id: "synthetic-mul-10".into(),
            }))
            .map(drop),
        ),
        code(
            rt.block_on(c.evict_srs(pb::EvictSrsRequest {
                circuit_id: "synthetic-mul-10".into(),
            }))
            .map(drop),
        ),
    ];
    assert!(
        calls.iter().all(|&c| c == Code::Unauthenticated),
        "{calls:?}"
    );
}

#[test]
fn with_a_token_every_call_needs_it_and_the_socket_is_0660() {
    let dir = tempfile::tempdir().unwrap();
    let (path, token) = token_file(dir.path());
    let d = start(Opts {
        unix: true,
        daemon_toml: format!("token_file = \"{}\"", path.display()),
        ..Opts::default()
    });
    let sock = d.addr.strip_prefix("unix://").unwrap();
    assert_eq!(
        std::fs::metadata(sock).unwrap().permissions().mode() & 0o777,
        0o660
    );
    every_call_refused(&d, &ClientOptions::default());
    every_call_refused(
        &d,
        &ClientOptions {
            token: Some(format!("{}0", &token[1..])),
            ..ClientOptions::default()
        },
    );
    let with = ClientOptions {
        token: Some(token),
        ..ClientOptions::default()
    };
    let mut c = d.client_with(&with);
    let r =
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(synthetic(10, 1, 40)),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert!(completed(&r));
    check_synthetic_proof(10, 1, 40, &r.proof);
    d.rt.block_on(c.get_status(pb::GetStatusRequest {}))
        .unwrap();
    stops_within(d, Duration::from_secs(30));
}

#[test]
fn tls_with_the_ca_works_and_plain_text_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    let d = start(Opts {
        daemon_toml: format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"",
            crt.display(),
            key.display()
        ),
        ..Opts::default()
    });
    let tls = ClientOptions {
        tls_ca: Some(crt.clone()),
        tls_domain: Some("localhost".into()),
        ..ClientOptions::default()
    };
    let mut c = d.client_with(&tls);
    d.rt.block_on(c.get_status(pb::GetStatusRequest {}))
        .unwrap();
    let mut plain = d.client();
    assert!(d
        .rt
        .block_on(plain.get_status(pb::GetStatusRequest {}))
        .is_err());
    // A certificate for another name is not trusted.
    let wrong = ClientOptions {
        tls_domain: Some("other.example".into()),
        ..tls
    };
    let e =
        d.rt.block_on(cuzk_daemon::client::connect_with(&d.addr, 1 << 20, &wrong))
            .err()
            .unwrap();
    assert!(format!("{e:?}").contains("NotValidForName"), "{e:?}");
    stops_within(d, Duration::from_secs(30));
}

#[test]
fn binding_replaces_only_a_stale_socket_of_its_own_kind() {
    use cuzk_daemon::{Access, Bound, Listen};
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let at = |name: &str| Listen::Unix(dir.path().join(name));
    let access = Access::default();
    // A regular file and a directory are never removed.
    std::fs::write(dir.path().join("file"), b"precious").unwrap();
    std::fs::create_dir(dir.path().join("dir")).unwrap();
    for name in ["file", "dir"] {
        let e = rt
            .block_on(Bound::bind_with(&at(name), &access))
            .err()
            .unwrap();
        assert!(e.to_string().contains("not a socket"), "{e}");
    }
    assert_eq!(std::fs::read(dir.path().join("file")).unwrap(), b"precious");
    // A live listener's socket is not taken over.
    let live = std::os::unix::net::UnixListener::bind(dir.path().join("live")).unwrap();
    let e = rt
        .block_on(Bound::bind_with(&at("live"), &access))
        .err()
        .unwrap();
    assert!(e.to_string().contains("another process"), "{e}");
    drop(live);
    // Once nobody listens it is stale, and replaced, with the configured mode.
    let strict = Access {
        socket_mode: 0o600,
        ..Access::default()
    };
    let bound = rt.block_on(Bound::bind_with(&at("live"), &strict)).unwrap();
    let mode = std::fs::metadata(dir.path().join("live"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(bound);
}

#[test]
fn a_non_loopback_listen_needs_a_token_or_insecure_in_so_many_words() {
    let e = DaemonConfig::from_toml("[daemon]\nlisten = \"0.0.0.0:9820\"\n", "t").unwrap_err();
    assert!(e.to_string().contains("not a loopback"), "{e}");
    assert!(DaemonConfig::from_toml(
        "[daemon]\nlisten = \"0.0.0.0:9820\"\ninsecure = true\n",
        "t"
    )
    .is_ok());
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = token_file(dir.path());
    assert!(DaemonConfig::from_toml(
        &format!(
            "[daemon]\nlisten = \"0.0.0.0:9820\"\ntoken_file = \"{}\"\n",
            path.display()
        ),
        "t"
    )
    .is_ok());
    for ok in ["127.0.0.1:0", "localhost:9820", "[::1]:9820"] {
        DaemonConfig::from_toml(&format!("[daemon]\nlisten = \"{ok}\"\n"), "t").unwrap();
    }
    let e = DaemonConfig::from_toml("[daemon]\nsocket_mode = \"0666\"\n", "t").unwrap_err();
    assert!(e.to_string().contains("every user"), "{e}");
    let e = DaemonConfig::from_toml("[daemon]\ntls_cert = \"/x\"\n", "t").unwrap_err();
    assert!(e.to_string().contains("together"), "{e}");
    let e = DaemonConfig::from_toml("[daemon.limits.porep]\nmax_queued = 3\n", "t").unwrap_err();
    assert!(e.to_string().contains("max_queued"), "{e}");
    let e = DaemonConfig::from_toml("[daemon.limits.porepp]\nmax_pending = 3\n", "t").unwrap_err();
    assert!(e.to_string().contains("porepp"), "{e}");
}
