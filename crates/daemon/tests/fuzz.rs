//! The decode and check path under arbitrary input, as a property: bytes off the
//! wire decoded as a `SubmitProofRequest` (prost, as the server's codec does),
//! and requests of arbitrary field values, each handed to the gRPC handler of a
//! daemon serving every Filecoin kind and the synthetic one. No input may panic
//! a handler (a panic surfaces as INTERNAL), hang, or leave anything counted:
//! whatever is accepted is cancelled, and at the end the service holds no job.
//!
//! 10^5 inputs in all (`FUZZ_CASES` changes the count of each of the two
//! properties; CI runs the default).

use std::sync::{Arc, OnceLock};

use cuzk_daemon::{
    server::Api,
    wire::{self as pb, proving_engine_server::ProvingEngine},
};
use cuzk_filecoin::{service_kind::ServiceProvers, FilecoinProver, ProverConfig};
use cuzk_gpu_backend::{lock::SingleLock, CpuBackend};
use cuzk_scheduler::{PipelineConfig, Policies, Unthrottled};
use cuzk_service::{synthetic::SyntheticKind, KindProver, Service, ServiceConfig};
use proptest::prelude::*;
use prost::Message;
use tonic::{Code, Request};

struct Harness {
    api: Api,
    service: Service,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let prover = Arc::new(FilecoinProver::new(ProverConfig {
            parameter_dir: dir.path().to_path_buf(),
            verify: true,
            check_digest: false,
        }));
        let mut kinds: Vec<Arc<dyn KindProver>> = ServiceProvers::new(prover).kinds();
        // Accepted synthetic jobs are cancelled at once: none is ever proved.
        kinds.push(Arc::new(SyntheticKind::new(dir.path().to_path_buf())));
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap(),
        );
        let policies = Policies {
            backend: Arc::new(CpuBackend::new(pool)),
            dealloc: Arc::new(cuzk_alloc::InlineDealloc),
            throttle: Arc::new(Unthrottled),
            lock: Arc::new(SingleLock::new()),
        };
        let engine = PipelineConfig {
            synth_jobs: Some(1),
            synth_threads: 1,
            gpu_workers_per_device: 1,
            gpu_threads: 1,
            memory_budget: Some(1 << 30),
            ..PipelineConfig::default()
        };
        // No admission: whatever passes the checks waits in the queue until
        // it is cancelled, so the property never starts a proof.
        let cfg = ServiceConfig {
            max_running_jobs: 1,
            ..ServiceConfig::default()
        };
        let service = Service::start(cfg, engine, policies, kinds).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Harness {
            api: Api::new(service.clone()),
            service,
            rt,
            _dir: dir,
        }
    })
}

/// Submits `req` through the handler; an accepted job is cancelled. Returns the
/// code (OK as `Code::Ok`).
fn submit(req: pb::SubmitProofRequest) -> Code {
    let h = harness();
    match h.rt.block_on(h.api.submit_proof(Request::new(req))) {
        Ok(r) => {
            let id = r.into_inner().job_id;
            h.service.cancel(&id).unwrap();
            // Cancelled results wait to be awaited: take it, so nothing is held.
            h.service
                .wait_blocking(&id, Some(std::time::Duration::from_secs(60)))
                .unwrap()
                .unwrap();
            Code::Ok
        }
        Err(s) => s.code(),
    }
}

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50_000)
}

/// Byte strings that look like what a kind parses: empty, JSON-ish, a bincode
/// length prefix claiming 2^64-1 elements, or anything.
fn field_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..96),
        proptest::collection::vec(any::<u8>(), 32..=32),
        any::<Vec<u8>>().prop_map(|mut v| {
            let mut out = vec![0xff; 8];
            out.append(&mut v);
            out
        }),
        "[{}\\[\\]\":,0-9a-zA-Z_ ]{0,64}".prop_map(String::into_bytes),
        Just(br#"{"circuit":"mul","log":30,"partitions":99999,"seed":1}"#.to_vec()),
        Just(br#"{"SectorNum":1,"Phase1Out":"eyJ9","SectorSize":2048}"#.to_vec()),
        // An aggregate request (kind 1001) that parses up to its sectors.
        Just(br#"{"prover_id":"1000","aggregation":"SnarkPackV2","sectors":[{"registered_proof":"StackedDrg2KiBV1_1","sector":1,"comm_r":[0],"proof":"AAAA"}]}"#.to_vec()),
    ]
}

prop_compose! {
    fn request()(
        request_id in prop_oneof![Just(String::new()), "\\PC{0,40}", "[a-z0-9-]{1,20}"],
        proof_kind in prop_oneof![-2i32..8, 998i32..1003],
        sector_size in prop_oneof![Just(2048u64), Just(34359738368), any::<u64>()],
        registered_proof in prop_oneof![0u64..20, any::<u64>()],
        priority in -2i32..7,
        vanilla_proof in field_bytes(),
        vanilla_proofs in proptest::collection::vec(field_bytes(), 0..4),
        sector_number in any::<u64>(),
        miner_id in any::<u64>(),
        randomness in field_bytes(),
        partition_index in prop_oneof![0u32..3, any::<u32>()],
        comm_r_old in field_bytes(),
        comm_r_new in field_bytes(),
        comm_d_new in field_bytes(),
    ) -> pb::SubmitProofRequest {
        pb::SubmitProofRequest {
            request_id, proof_kind, sector_size, registered_proof, priority, vanilla_proof,
            vanilla_proofs, sector_number, miner_id, randomness, partition_index,
            comm_r_old, comm_r_new, comm_d_new,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_the_decode_and_check_path(bytes in any::<Vec<u8>>()) {
        if let Ok(req) = pb::SubmitProofRequest::decode(bytes.as_slice()) {
            let code = submit(req);
            prop_assert_ne!(code, Code::Internal);
        }
    }

    #[test]
    fn arbitrary_field_values_are_answered_never_panicked_on(req in request()) {
        let code = submit(req);
        prop_assert_ne!(code, Code::Internal);
        prop_assert_ne!(code, Code::Unknown);
    }
}

/// Runs after the properties in the same binary only by chance, so it also
/// submits a batch itself: nothing the properties accepted is left behind.
#[test]
fn nothing_is_left_counted() {
    for i in 0..50u8 {
        submit(pb::SubmitProofRequest {
            proof_kind: (i % 7) as i32 - 1,
            vanilla_proof: vec![i; i as usize],
            ..Default::default()
        });
    }
    let s = harness().service.status();
    for q in &s.queues {
        assert_eq!(q.in_progress, 0, "{s:?}");
    }
    assert_eq!(s.results_waiting, 0, "{s:?}");
}
