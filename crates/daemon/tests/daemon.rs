//! The daemon over the wire (loopback TCP and a Unix socket): proofs through
//! `Prove` and `SubmitProof` + `AwaitProof`, checked with bellperson's verifier;
//! load from four clients; cancellation; priority; malformed input; a client that
//! goes away; await timeouts; parameters; metrics; graceful shutdown.
//!
//! The proofs are of the SYNTHETIC kind (cuzk's built-in multiplication chain, on
//! the CPU backend): they stand in for the Filecoin kinds wherever a test is about
//! the daemon rather than about Filecoin.

mod common;

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{check_synthetic_proof, start, synthetic, Opts};
use cuzk_daemon::wire as pb;
use tonic::Code;

fn completed(r: &pb::AwaitProofResponse) -> bool {
    r.status == pb::await_proof_response::Status::Completed as i32
}

fn status_of(r: &pb::AwaitProofResponse) -> pb::await_proof_response::Status {
    pb::await_proof_response::Status::try_from(r.status).unwrap()
}

#[test]
fn proofs_through_prove_and_submit_await_on_unix_and_tcp() {
    for unix in [true, false] {
        let d = start(Opts {
            unix,
            ..Opts::default()
        });
        assert_eq!(d.addr.starts_with("unix://"), unix, "{}", d.addr);
        let mut c = d.client();
        let r =
            d.rt.block_on(c.prove(pb::ProveRequest {
                submit: Some(synthetic(10, 2, 11)),
            }))
            .unwrap()
            .into_inner()
            .result
            .unwrap();
        assert!(completed(&r), "{r:?}");
        check_synthetic_proof(10, 2, 11, &r.proof);
        assert!(r.total_ms >= r.gpu_compute_ms.min(r.total_ms));

        let mut req = synthetic(10, 1, 21);
        req.request_id = "my-job".into();
        let s = d.rt.block_on(c.submit_proof(req)).unwrap().into_inner();
        assert_eq!(s.job_id, "my-job");
        let r =
            d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
                job_id: "my-job".into(),
                timeout_ms: 0,
            }))
            .unwrap()
            .into_inner();
        assert!(completed(&r), "{r:?}");
        assert_eq!(r.job_id, "my-job");
        check_synthetic_proof(10, 1, 21, &r.proof);
        // A result is handed over once.
        let again = d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: "my-job".into(),
            timeout_ms: 0,
        }));
        assert_eq!(again.unwrap_err().code(), Code::NotFound);

        let st = d.wait_idle();
        assert_eq!(st.total_proofs_completed, 2);
        let srs = st
            .loaded_srs
            .iter()
            .find(|s| s.circuit_id == "synthetic-mul-10")
            .expect("the parameters stay loaded");
        assert!(srs.size_bytes > 0);
        assert_eq!(srs.ref_count, 0);
        assert!(st.pinned_memory_limit_bytes > 0);
        assert_eq!(d.metric("cuzk_srs_load_seconds_count"), 2.0);
    }
}

#[test]
fn four_clients_at_once_every_job_answered_exactly_once() {
    let d = start(Opts::default());
    let answers = Arc::new(Mutex::new(Vec::new()));
    let addr = d.addr.clone();
    d.rt.block_on(async {
        let mut tasks = Vec::new();
        for client in 0..4u64 {
            let addr = addr.clone();
            let answers = answers.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = cuzk_daemon::client::connect(&addr, 1 << 20).await.unwrap();
                for j in 0..3u64 {
                    let seed = 100 + client * 10 + j;
                    let mut req = synthetic(10, 1, seed);
                    req.request_id = format!("c{client}-j{j}");
                    // Half through Prove, half through SubmitProof + AwaitProof.
                    let r = if j % 2 == 0 {
                        c.prove(pb::ProveRequest { submit: Some(req) })
                            .await
                            .unwrap()
                            .into_inner()
                            .result
                            .unwrap()
                    } else {
                        let id = c.submit_proof(req).await.unwrap().into_inner().job_id;
                        c.await_proof(pb::AwaitProofRequest {
                            job_id: id,
                            timeout_ms: 0,
                        })
                        .await
                        .unwrap()
                        .into_inner()
                    };
                    answers.lock().unwrap().push((seed, r));
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), 12);
    let ids: HashSet<_> = answers.iter().map(|(_, r)| r.job_id.clone()).collect();
    assert_eq!(ids.len(), 12, "a job answered twice or lost");
    for (seed, r) in answers.iter() {
        assert!(completed(r), "{r:?}");
        check_synthetic_proof(10, 1, *seed, &r.proof);
    }
    let st = d.wait_idle();
    assert_eq!(st.total_proofs_completed, 12);
    assert_eq!(d.metric("cuzk_results_waiting"), 0.0);
}

#[test]
fn queued_and_running_jobs_can_be_cancelled_and_free_their_memory() {
    let d = start(Opts {
        daemon_toml: "max_running_jobs = 1".into(),
        ..Opts::default()
    });
    d.gate.close();
    let mut c = d.client();
    let submit = |c: &mut cuzk_daemon::client::Client, id: &str, seed| {
        let mut req = synthetic(10, 2, seed);
        req.request_id = id.into();
        d.rt.block_on(c.submit_proof(req)).unwrap().into_inner()
    };
    submit(&mut c, "running", 1);
    submit(&mut c, "queued-1", 2);
    let q = submit(&mut c, "queued-2", 3);
    assert_eq!(q.queue_position, 1);
    // The first job is on the (gated) backend, the others wait.
    d.wait_status("one job running, two queued", |s| {
        s.queues
            .iter()
            .any(|q| q.proof_kind == "SYNTHETIC" && q.in_progress == 1 && q.pending == 2)
            && s.pinned_memory_bytes > 0
    });
    while d.gate.entered() == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let cancel = |c: &mut cuzk_daemon::client::Client, id: &str| {
        d.rt.block_on(c.cancel_proof(pb::CancelProofRequest { job_id: id.into() }))
            .unwrap()
            .into_inner()
            .was_running
    };
    let wait = |c: &mut cuzk_daemon::client::Client, id: &str| {
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: id.into(),
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner()
    };
    assert!(!cancel(&mut c, "queued-1"));
    assert_eq!(
        status_of(&wait(&mut c, "queued-1")),
        pb::await_proof_response::Status::Cancelled
    );
    assert!(cancel(&mut c, "running"));
    let r = wait(&mut c, "running");
    assert_eq!(status_of(&r), pb::await_proof_response::Status::Cancelled);
    assert!(r.proof.is_empty());
    // The partition on the backend finishes and is discarded; then the next job runs.
    d.gate.open();
    let r = wait(&mut c, "queued-2");
    assert!(completed(&r), "{r:?}");
    check_synthetic_proof(10, 2, 3, &r.proof);
    let st = d.wait_idle();
    assert_eq!(st.total_proofs_completed, 1);
    assert_eq!(d.metric("cuzk_proofs_cancelled_total"), 2.0);
    let unknown = d.rt.block_on(c.cancel_proof(pb::CancelProofRequest {
        job_id: "never-submitted".into(),
    }));
    assert_eq!(unknown.unwrap_err().code(), Code::NotFound);
}

#[test]
fn a_critical_job_overtakes_queued_ones() {
    let d = start(Opts {
        daemon_toml: "max_running_jobs = 1".into(),
        ..Opts::default()
    });
    d.gate.close();
    let mut c = d.client();
    let mut ids = Vec::new();
    for j in 0..6u64 {
        let mut req = synthetic(10, 1, 300 + j);
        req.request_id = format!("normal-{j}");
        ids.push(
            d.rt.block_on(c.submit_proof(req))
                .unwrap()
                .into_inner()
                .job_id,
        );
    }
    // normal-0 is admitted; five wait. A CRITICAL job (WinningPoSt's default
    // priority) goes ahead of all five.
    d.wait_status("one admitted, five queued", |s| {
        s.queues
            .iter()
            .any(|q| q.in_progress == 1 && q.pending == 5)
    });
    let mut req = synthetic(10, 1, 399);
    req.request_id = "critical".into();
    req.priority = pb::Priority::Critical as i32;
    let s = d.rt.block_on(c.submit_proof(req)).unwrap().into_inner();
    assert_eq!(s.queue_position, 0);
    ids.push(s.job_id);
    d.gate.open();
    // One job at a time: results arrive in admission order.
    let order = Arc::new(Mutex::new(Vec::new()));
    let addr = d.addr.clone();
    d.rt.block_on(async {
        let mut tasks = Vec::new();
        for id in ids.clone() {
            let order = order.clone();
            let addr = addr.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = cuzk_daemon::client::connect(&addr, 1 << 20).await.unwrap();
                let r = c
                    .await_proof(pb::AwaitProofRequest {
                        job_id: id.clone(),
                        timeout_ms: 0,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                assert!(completed(&r), "{r:?}");
                order.lock().unwrap().push(id);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let order = order.lock().unwrap();
    assert_eq!(order[0], "normal-0");
    assert_eq!(order[1], "critical", "{order:?}");
    assert_eq!(
        &order[2..],
        ["normal-1", "normal-2", "normal-3", "normal-4", "normal-5"]
    );
}

#[test]
fn malformed_requests_get_errors_and_the_daemon_keeps_serving() {
    let d = start(Opts {
        daemon_toml: "max_message_mib = 1".into(),
        ..Opts::default()
    });
    let mut c = d.client();
    let code = |c: &mut cuzk_daemon::client::Client, req: pb::SubmitProofRequest| {
        let e = d.rt.block_on(c.submit_proof(req)).unwrap_err();
        (e.code(), e.message().to_owned())
    };
    let mut r = synthetic(10, 1, 1);
    r.proof_kind = 0;
    assert_eq!(code(&mut c, r).0, Code::InvalidArgument);
    let mut r = synthetic(10, 1, 1);
    r.proof_kind = 57;
    assert_eq!(code(&mut c, r).0, Code::InvalidArgument);
    let mut r = synthetic(10, 1, 1);
    r.priority = 9;
    assert_eq!(code(&mut c, r).0, Code::InvalidArgument);
    // A bad envelope, and a circuit far over the limit.
    let mut r = synthetic(10, 1, 1);
    r.vanilla_proof = b"{\"circuit\": \"mul\", \"lo".to_vec();
    let (k, m) = code(&mut c, r);
    assert_eq!(k, Code::InvalidArgument);
    assert!(m.contains("JSON"), "{m}");
    let (k, m) = code(&mut c, synthetic(30, 1, 1));
    assert_eq!(k, Code::InvalidArgument);
    assert!(m.contains("log 30"), "{m}");
    // Kinds this daemon was not given say so; no proof is faked.
    for kind in [
        pb::ProofKind::WinningPost,
        pb::ProofKind::WindowPostPartition,
        pb::ProofKind::SnapDealsUpdate,
    ] {
        let mut r = synthetic(10, 1, 1);
        r.proof_kind = kind as i32;
        let (k, m) = code(&mut c, r);
        assert_eq!(k, Code::Unimplemented, "{kind:?}: {m}");
        assert!(m.contains("has no") && m.contains("prover"), "{m}");
    }
    // A message over the limit.
    let mut r = synthetic(10, 1, 1);
    r.vanilla_proof = vec![b' '; 2 << 20];
    let (k, _) = code(&mut c, r);
    assert!(
        matches!(k, Code::OutOfRange | Code::ResourceExhausted),
        "{k:?}"
    );
    // Prove without a request; a duplicate id; unknown jobs.
    let e =
        d.rt.block_on(c.prove(pb::ProveRequest { submit: None }))
            .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let mut r = synthetic(10, 1, 1);
    r.request_id = "twice".into();
    d.rt.block_on(c.submit_proof(r.clone())).unwrap();
    assert_eq!(code(&mut c, r).0, Code::AlreadyExists);
    let e =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: "nope".into(),
            timeout_ms: 10,
        }))
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Bytes that are not a protobuf message at all.
    for body in [
        vec![0xffu8; 64],
        (0..200u32).map(|i| (i * 151 % 251) as u8).collect(),
    ] {
        let e =
            d.rt.block_on(raw_call(&d.addr, "SubmitProof", body))
                .unwrap_err();
        assert_ne!(e.code(), Code::Ok);
        assert_ne!(e.code(), Code::Unavailable, "{e:?}");
    }
    let e =
        d.rt.block_on(raw_call(&d.addr, "SubmitProof", vec![0xff; 64]))
            .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    // Still serving.
    let r =
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(synthetic(10, 1, 5)),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert!(completed(&r), "{r:?}");
    check_synthetic_proof(10, 1, 5, &r.proof);
}

/// A unary call with `body` as the raw message bytes.
async fn raw_call(addr: &str, rpc: &str, body: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let host = addr.to_owned();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{host}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = http_path(rpc);
    grpc.unary(tonic::Request::new(body), path, RawCodec)
        .await
        .map(|r| r.into_inner())
}

fn http_path(rpc: &str) -> tonic::codegen::http::uri::PathAndQuery {
    format!("/cuzk.v1.ProvingEngine/{rpc}").parse().unwrap()
}

/// Sends and receives messages as raw bytes.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), Self::Error> {
        use bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, Self::Error> {
        use bytes::Buf;
        let mut v = vec![0; src.remaining()];
        src.copy_to_slice(&mut v);
        Ok(Some(v))
    }
}

#[test]
fn a_prove_caller_that_goes_away_does_not_leak_its_job() {
    let d = start(Opts::default());
    d.gate.close();
    let addr = d.addr.clone();
    let call = d.rt.spawn(async move {
        let mut c = cuzk_daemon::client::connect(&addr, 1 << 20).await.unwrap();
        let mut req = synthetic(10, 2, 7);
        req.request_id = "abandoned".into();
        c.prove(pb::ProveRequest { submit: Some(req) }).await
    });
    d.wait_status("the job running and holding memory", |s| {
        s.queues.iter().any(|q| q.in_progress == 1) && s.pinned_memory_bytes > 0
    });
    // The client dies mid-call: its connection is dropped with the call.
    call.abort();
    let _ = d.rt.block_on(call);
    d.wait_status("the job cancelled", |s| {
        s.queues
            .iter()
            .all(|q| q.in_progress == 0 && q.pending == 0)
    });
    d.gate.open();
    let st = d.wait_idle();
    assert_eq!(st.pinned_memory_bytes, 0);
    assert_eq!(d.metric("cuzk_proofs_cancelled_total"), 1.0);
    // Nobody can collect it, so nothing is kept for it.
    assert_eq!(d.metric("cuzk_results_waiting"), 0.0);
    let mut c = d.client();
    let e =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: "abandoned".into(),
            timeout_ms: 10,
        }))
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[test]
fn await_timeouts_are_honoured_and_the_job_goes_on() {
    let d = start(Opts::default());
    d.gate.close();
    let mut c = d.client();
    let id =
        d.rt.block_on(c.submit_proof(synthetic(10, 1, 8)))
            .unwrap()
            .into_inner()
            .job_id;
    assert!(id.starts_with("job-"), "{id}");
    let r =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: id.clone(),
            timeout_ms: 300,
        }))
        .unwrap()
        .into_inner();
    assert_eq!(status_of(&r), pb::await_proof_response::Status::Timeout);
    d.gate.open();
    let r =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: id,
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner();
    assert!(completed(&r), "{r:?}");
    check_synthetic_proof(10, 1, 8, &r.proof);
}

#[test]
fn parameters_preload_once_and_evict_only_when_unused() {
    let d = start(Opts::default());
    let mut c = d.client();
    let preload = |c: &mut cuzk_daemon::client::Client, id: &str| {
        d.rt.block_on(c.preload_srs(pb::PreloadSrsRequest {
            circuit_id: id.into(),
        }))
    };
    let evict = |c: &mut cuzk_daemon::client::Client, id: &str| {
        d.rt.block_on(c.evict_srs(pb::EvictSrsRequest {
            circuit_id: id.into(),
        }))
    };
    assert!(
        !preload(&mut c, "synthetic-mul-11")
            .unwrap()
            .into_inner()
            .already_loaded
    );
    assert!(
        preload(&mut c, "synthetic-mul-11")
            .unwrap()
            .into_inner()
            .already_loaded
    );
    let e = preload(&mut c, "porep-99g").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // In use by a running job: not evicted.
    d.gate.close();
    let mut req = synthetic(11, 1, 9);
    req.request_id = "user".into();
    d.rt.block_on(c.submit_proof(req)).unwrap();
    d.wait_status("the set in use", |s| {
        s.loaded_srs.iter().any(|p| {
            p.circuit_id == "synthetic-mul-11"
                && p.ref_count == 1
                && p.tier == pb::srs_status::Tier::Hot as i32
        })
    });
    let e = evict(&mut c, "synthetic-mul-11").unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    d.gate.open();
    let r =
        d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
            job_id: "user".into(),
            timeout_ms: 0,
        }))
        .unwrap()
        .into_inner();
    assert!(completed(&r));
    d.wait_idle();
    let size = d
        .wait_status("the set idle", |s| {
            s.loaded_srs
                .iter()
                .any(|p| p.circuit_id == "synthetic-mul-11" && p.ref_count == 0)
        })
        .loaded_srs
        .iter()
        .find(|p| p.circuit_id == "synthetic-mul-11")
        .unwrap()
        .size_bytes;
    let e = evict(&mut c, "synthetic-mul-11").unwrap().into_inner();
    assert!(e.was_loaded);
    assert_eq!(e.freed_bytes, size);
    let e = evict(&mut c, "synthetic-mul-11").unwrap().into_inner();
    assert!(!e.was_loaded);
    assert_eq!(e.freed_bytes, 0);
    let st = d.wait_idle();
    assert!(st
        .loaded_srs
        .iter()
        .all(|p| p.circuit_id != "synthetic-mul-11"));
}

#[test]
fn metrics_come_from_the_timeline_over_grpc_and_http() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let d = start(Opts {
        daemon_toml: format!("metrics_listen = \"127.0.0.1:{port}\""),
        ..Opts::default()
    });
    let mut c = d.client();
    let r =
        d.rt.block_on(c.prove(pb::ProveRequest {
            submit: Some(synthetic(10, 3, 40)),
        }))
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert!(completed(&r));
    let grpc =
        d.rt.block_on(c.get_metrics(pb::GetMetricsRequest {}))
            .unwrap()
            .into_inner()
            .prometheus_text;
    let http = http_get(port, "/metrics");
    assert!(http.starts_with("HTTP/1.1 200"), "{http}");
    for text in [&grpc, &http] {
        assert_eq!(common::metric(text, "cuzk_proofs_completed_total"), 1.0);
        assert_eq!(common::metric(text, "cuzk_proofs_failed_total"), 0.0);
        assert_eq!(
            common::metric(
                text,
                "cuzk_proofs_completed_by_kind_total{kind=\"SYNTHETIC\"}"
            ),
            1.0
        );
        assert_eq!(common::metric(text, "cuzk_queue_depth"), 0.0);
        assert_eq!(common::metric(text, "cuzk_running_jobs"), 0.0);
        assert_eq!(common::metric(text, "cuzk_gpu_workers"), 1.0);
        common::metric(text, "cuzk_uptime_seconds");
        // One GPU stage and one synthesis per partition, from the TIMELINE.
        assert_eq!(
            common::metric(text, "cuzk_stage_seconds_count{stage=\"gpu\"}"),
            3.0
        );
        assert_eq!(
            common::metric(text, "cuzk_stage_seconds_count{stage=\"synthesis\"}"),
            3.0
        );
        assert_eq!(
            common::metric(
                text,
                "cuzk_proof_duration_seconds_count{kind=\"SYNTHETIC\"}"
            ),
            1.0
        );
    }
    // The job's GPU time is the sum of the stage histogram's GPU observations.
    let gpu_sum = common::metric(&grpc, "cuzk_stage_seconds_sum{stage=\"gpu\"}");
    assert!(
        (gpu_sum * 1e3 - r.gpu_compute_ms as f64).abs() <= 3.0,
        "{gpu_sum} s vs {} ms",
        r.gpu_compute_ms
    );
    assert!(http_get(port, "/other").starts_with("HTTP/1.1 404"));
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn shutdown_finishes_accepted_jobs_then_stops() {
    let mut d = start(Opts::default());
    d.gate.close();
    let mut c = d.client();
    let addr = d.addr.clone();
    let call = d.rt.spawn(async move {
        let mut c = cuzk_daemon::client::connect(&addr, 1 << 20).await.unwrap();
        c.prove(pb::ProveRequest {
            submit: Some(synthetic(10, 1, 50)),
        })
        .await
    });
    d.wait_status("the job running", |s| {
        s.queues.iter().any(|q| q.in_progress == 1)
    });
    d.shutdown.trigger();
    // New work is refused while the accepted job finishes.
    let refused = d.rt.block_on(c.submit_proof(synthetic(10, 1, 51)));
    assert!(refused.is_err());
    d.gate.open();
    let r =
        d.rt.block_on(call)
            .unwrap()
            .unwrap()
            .into_inner()
            .result
            .unwrap();
    assert!(completed(&r), "{r:?}");
    check_synthetic_proof(10, 1, 50, &r.proof);
    drop(c);
    let served = d.served.take().unwrap();
    d.rt.block_on(served).unwrap().unwrap();
}

/// `GetStatus` lists every device the engine drives (here two CPU "devices", as
/// `[engine] devices = [0, 1]` gives with the CPU backend: named `cpu`, no
/// device memory) and, while a job's partitions are on them, that job on each;
/// queues per kind come from the jobs the service holds.
#[test]
fn status_shows_each_engine_device_and_the_job_on_it() {
    let d = start(Opts {
        devices: 2,
        daemon_toml: "max_running_jobs = 1".into(),
        ..Opts::default()
    });
    let st = d.wait_idle();
    let devices: Vec<(u32, &str, u64, u64, &str)> = st
        .gpus
        .iter()
        .map(|g| {
            (
                g.ordinal,
                g.name.as_str(),
                g.vram_total_bytes,
                g.vram_free_bytes,
                g.current_job_id.as_str(),
            )
        })
        .collect();
    assert_eq!(devices, [(0, "cpu", 0, 0, ""), (1, "cpu", 0, 0, "")]);
    assert_eq!(d.metric("cuzk_gpu_workers"), 2.0);

    d.gate.close();
    let mut c = d.client();
    for (id, seed) in [("on-both", 5), ("waiting", 6)] {
        let mut req = synthetic(10, 2, seed);
        req.request_id = id.into();
        d.rt.block_on(c.submit_proof(req)).unwrap();
    }
    // Both partitions of the first job are held in the backend, one per device
    // (each device has one GPU worker).
    while d.gate.entered() < 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = d.wait_status("the job on both devices", |s| {
        s.gpus.len() == 2
            && s.gpus
                .iter()
                .all(|g| g.current_job_id == "on-both" && g.current_proof_kind == "SYNTHETIC")
    });
    let q = st
        .queues
        .iter()
        .find(|q| q.proof_kind == "SYNTHETIC")
        .unwrap();
    assert_eq!((q.pending, q.in_progress), (1, 1), "{st:?}");
    d.gate.open();
    for (id, seed) in [("on-both", 5), ("waiting", 6)] {
        let r =
            d.rt.block_on(c.await_proof(pb::AwaitProofRequest {
                job_id: id.into(),
                timeout_ms: 0,
            }))
            .unwrap()
            .into_inner();
        assert!(completed(&r), "{r:?}");
        check_synthetic_proof(10, 2, seed, &r.proof);
    }
    let st = d.wait_status("no job on any device", |s| {
        s.gpus.iter().all(|g| g.current_job_id.is_empty())
    });
    assert_eq!(st.gpus.len(), 2);
    assert_eq!(st.total_proofs_completed, 2);
}

/// The plan the process made at start is reported by `GetStatus` as it was handed
/// over (text and JSON), and `cuzk client status` prints it; a daemon that made
/// none reports none.
#[test]
fn status_reports_the_plan_made_at_start() {
    let plan = cuzk_daemon::config::StartupPlan {
        text: "served together by cuzk serve and cuzk worker (porep at 32 GiB)\n".into(),
        json: r#"{"applied":["gpu_workers_per_device"]}"#.into(),
    };
    let d = start(Opts {
        plan: Some(plan.clone()),
        ..Opts::default()
    });
    let st = d.wait_idle();
    assert_eq!(
        (st.plan.as_str(), st.plan_json.as_str()),
        (plan.text.as_str(), plan.json.as_str())
    );
    let shown = cuzk_daemon::client::format_status(&st);
    assert!(
        shown.contains(&format!("plan at start:\n{}", plan.text)),
        "{shown}"
    );

    let d = start(Opts::default());
    let st = d.wait_idle();
    assert!(st.plan.is_empty() && st.plan_json.is_empty());
    assert!(!cuzk_daemon::client::format_status(&st).contains("plan at start"));
}
