//! The scheduler: runs cuzk's stages for proofs.
//!
//! A proof goes through synthesis (witness, then `spmv_parallel` → `a, b, c`),
//! `prep_msm` (split each query's scalars into zeros, ones and a tail), the backend's
//! partition call (H and the G1 MSMs), `b_g2_msm` on its own CPU pool (overlapping the
//! backend call), assembly, and deallocation. [`Prover`] runs one proof's stages in
//! order; the pipelined engine (many partitions of many jobs at once) builds on the
//! same stage functions.
//!
//! Architecture invariant: the scheduler does no field or group arithmetic of its
//! own and knows nothing of plugins: it calls stage crates and the traits they define
//! (`GpuBackend`, `Throttle`), and it owns every thread pool, passing each one in.

#![forbid(unsafe_code)]

mod budget;
mod engine;
mod srs;
mod stages;

pub use budget::{machine_limit, BudgetError, CriticalReserve, MemoryBudget, Permit};
pub use engine::{
    partition_bytes, partition_bytes_after_prep, partition_bytes_after_prep_of,
    partition_bytes_for, partition_bytes_of, Held, JobError, JobHandle, JobOutput, JobSpec,
    PartitionShape, PartitionSpec, PipelineConfig, PipelineEngine, PipelineError, Policies,
    Priority, ProofVerifier, SplitWitness, ThrottlePolicy, Unthrottled, WitnessSource,
};

pub use srs::{BaseStore, Bases, Srs, SrsError};
pub use stages::{
    abc_on_backend, assembly_stage, b_g2_msm, b_g2_on_backend, gpu_stage, gpu_stage_ref,
    gpu_stage_witness, prep_stage, query_bases, spmv_stage, stage_abc, stage_splits, stage_witness,
    ProveError, Proved, Prover, ProverConfig, QueryBases, Splits, StageTimes,
};
