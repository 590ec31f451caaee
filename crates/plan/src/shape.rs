//! The shapes the planner serves: a partition's sizes and what was measured of it.

use cuzk_cuda::footprint::{PartitionCounts, SplitCounts, G1_AFFINE_BYTES, G2_AFFINE_BYTES};
use cuzk_scheduler::PartitionShape;
use serde::Serialize;

/// A proof kind of Filecoin's, at the 32 GiB sector size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Porep,
    Snap,
    Window,
    Winning,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Porep, Kind::Snap, Kind::Window, Kind::Winning];

    /// The name `cuzk plan --kind` takes.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Porep => "porep",
            Kind::Snap => "snap",
            Kind::Window => "window",
            Kind::Winning => "winning",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// One query's bases and the terms of a partition's split that are neither 0 nor
/// 1 (its tail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Query {
    pub bases: usize,
    pub tail: usize,
}

impl Query {
    fn counts(self) -> SplitCounts {
        SplitCounts {
            num_bases: self.bases,
            tail: self.tail,
            ones_words: self.bases.div_ceil(64),
        }
    }

    /// Host bytes of its split: the ones bitmap and the tail terms (a `u32` index
    /// and canonical limbs each), as `SplitScalars::heap_size` counts them.
    fn split_bytes(self) -> u64 {
        self.bases.div_ceil(64) as u64 * 8 + self.tail as u64 * 36
    }
}

/// What was measured of a kind, to calibrate the speed model (each figure with
/// where it comes from, in [`Shape::basis`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// Device seconds a partition with every base set resident and `a, b, c`
    /// evaluated on the device, on the H200 (transfers the measurement included
    /// subtracted at [`crate::PCIE_BYTES_PER_S`]).
    pub device_s_h200: f64,
    /// Host core-seconds a partition takes (synthesis, prep_msm, staging) with
    /// `a, b, c` evaluated on the device.
    pub host_core_s: f64,
    /// The same with `a, b, c` from the CPU spmv.
    pub host_core_s_cpu_spmv: f64,
}

/// A partition's shape: its R1CS, its queries, how many make a proof, and what
/// was measured of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shape {
    pub kind: Kind,
    /// filecoin-proofs' circuit name.
    pub circuit: &'static str,
    pub partitions: u32,
    pub constraints: usize,
    pub inputs: usize,
    pub aux: usize,
    /// Bases of the H query: the domain less one.
    pub h: usize,
    pub l: Query,
    pub a: Query,
    pub b_g1: Query,
    pub b_g2: Query,
    /// Terms of the compiled A, B and C matrices.
    pub nnz: [usize; 3],
    pub coeffs: usize,
    pub measured: Measured,
    /// Where the figures come from, and which are estimates.
    pub basis: &'static str,
}

/// Terms per row of a 32 GiB PoRep partition's A, B and C (REFERENCE.md: ≈ 2.4,
/// 1.0, 2.2), which with its row pointers make the 6.87 GiB BENCHMARKS.md reports
/// for the compiled R1CS.
const POREP_NNZ_PER_ROW: [f64; 3] = [2.4, 1.0, 2.2];

fn nnz(rows: usize) -> [usize; 3] {
    POREP_NNZ_PER_ROW.map(|r| (rows as f64 * r) as usize)
}

impl Shape {
    /// The 32 GiB shape of `kind`.
    pub fn filecoin_32gib(kind: Kind) -> Shape {
        match kind {
            Kind::Porep => {
                let (constraints, inputs, aux) = (130_278_869, 328, 130_169_893);
                Shape {
                    kind,
                    circuit: "StackedDrg32GiBV1_1",
                    partitions: 10,
                    constraints,
                    inputs,
                    aux,
                    h: (1 << 27) - 1,
                    // Densities (REFERENCE.md): A 99.7% of aux plus the inputs, B
                    // 25.4% of aux and 1 input; tails 1.2-1.7 M terms a query
                    // (BENCHMARKS.md, issue 14).
                    l: Query {
                        bases: aux,
                        tail: 1_700_000,
                    },
                    a: Query {
                        bases: inputs + aux * 997 / 1000,
                        tail: 1_700_000,
                    },
                    b_g1: Query {
                        bases: 1 + aux * 254 / 1000,
                        tail: 1_200_000,
                    },
                    b_g2: Query {
                        bases: 1 + aux * 254 / 1000,
                        tail: 1_200_000,
                    },
                    nnz: nnz(constraints),
                    coeffs: 1 << 10,
                    measured: Measured {
                        // The 10-sector stream, GPU stage p50, H200 (BENCHMARKS.md,
                        // 2026-12-03 14:10): everything resident, device spmv.
                        device_s_h200: 1.424,
                        // The same stream rerun at 20:18: 456% CPU at a 1.424 s
                        // period.
                        host_core_s: 6.5,
                        // Issue 33, H100 16 cores, abc_on_backend = false: 43.1
                        // (80 GB) and 40.5 (~32 GB) s/proof, host-bound: ~4.2 s a
                        // partition on 16 cores.
                        host_core_s_cpu_spmv: 67.0,
                    },
                    basis: "measured: constraints, inputs, aux, densities, R1CS 6.87 GiB, \
                            parameters 44.1 GiB, device and host times (BENCHMARKS.md, \
                            REFERENCE.md, issue 33)",
                }
            }
            Kind::Snap => {
                let (constraints, inputs, aux) = (81_049_504, 16, 81_049_504);
                Shape {
                    kind,
                    circuit: "EmptySectorUpdate32GiB",
                    partitions: 16,
                    constraints,
                    inputs,
                    aux,
                    h: (1 << 27) - 1,
                    l: Query {
                        bases: aux,
                        tail: 2_000_000,
                    },
                    a: Query {
                        bases: aux * 99 / 100,
                        tail: 1_000_000,
                    },
                    b_g1: Query {
                        bases: aux * 40 / 100,
                        tail: 500_000,
                    },
                    b_g2: Query {
                        bases: aux * 40 / 100,
                        tail: 500_000,
                    },
                    nnz: nnz(constraints),
                    coeffs: 1 << 10,
                    measured: Measured {
                        // H200 2026-12-02 (BENCHMARKS.md, SnapDeals device phases):
                        // 1346 ms device work, GPU stage p50 1.53 s.
                        device_s_h200: 1.53,
                        // 16 partitions in 124 s of synthesis on 16 cores (gadget
                        // synthesis, 2026-12-02).
                        host_core_s: 124.0,
                        host_core_s_cpu_spmv: 124.0 + 60.5 * 81.0 / 130.3,
                    },
                    basis: "measured: constraints, partitions, device and host times \
                            (BENCHMARKS.md 2026-12-02); estimated: aux = constraints, \
                            densities, tails, R1CS terms at PoRep's per row",
                }
            }
            Kind::Window => {
                let (constraints, inputs, aux) = (125_305_057, 4_700, 127_600_000);
                Shape {
                    kind,
                    circuit: "StackedDrgWindow32GiBV1_2",
                    partitions: 1,
                    constraints,
                    inputs,
                    aux,
                    h: (1 << 27) - 1,
                    // Tails measured (BENCHMARKS.md: 127.5, 98.1, 89.4, 90.8 M);
                    // bases chosen to cover them and make the 56.6 GiB of
                    // parameters reported.
                    l: Query {
                        bases: aux,
                        tail: 127_500_000,
                    },
                    a: Query {
                        bases: 98_400_000,
                        tail: 98_100_000,
                    },
                    b_g1: Query {
                        bases: 91_000_000,
                        tail: 89_400_000,
                    },
                    b_g2: Query {
                        bases: 91_000_000,
                        tail: 90_800_000,
                    },
                    nnz: nnz(constraints),
                    coeffs: 1 << 12,
                    measured: Measured {
                        // H200 2026-12-03 20:17: GPU stage 5.8 s with every set
                        // streamed (60.7 GB at 50 GB/s: 1.2 s of it).
                        device_s_h200: 4.6,
                        // Synthesis 1.45 s + prep_msm 2.43 s on 16 cores.
                        host_core_s: 62.0,
                        host_core_s_cpu_spmv: 62.0 + 60.5 * 125.3 / 130.3,
                    },
                    basis: "measured: constraints, tails, parameters 56.6 GiB, device and \
                            host times (BENCHMARKS.md 2026-12-03); estimated: inputs, \
                            bases per query, R1CS terms at PoRep's per row",
                }
            }
            Kind::Winning => {
                let (constraints, inputs, aux) = (370_723, 23, 370_000);
                Shape {
                    kind,
                    circuit: "StackedDrgWinning32GiBV1",
                    partitions: 1,
                    constraints,
                    inputs,
                    aux,
                    h: (1 << 19) - 1,
                    l: Query {
                        bases: aux,
                        tail: 300_000,
                    },
                    a: Query {
                        bases: aux,
                        tail: 250_000,
                    },
                    b_g1: Query {
                        bases: 250_000,
                        tail: 200_000,
                    },
                    b_g2: Query {
                        bases: 250_000,
                        tail: 200_000,
                    },
                    nnz: nnz(constraints),
                    coeffs: 1 << 12,
                    measured: Measured {
                        // H200 2026-12-02: GPU 140 ms; synthesis 150 + prep 55 ms.
                        device_s_h200: 0.14,
                        host_core_s: 3.3,
                        host_core_s_cpu_spmv: 3.5,
                    },
                    basis: "measured: constraints, parameters 0.18 GiB, device and host \
                            times (BENCHMARKS.md 2026-12-02); estimated: aux, bases, tails",
                }
            }
        }
    }

    /// What the CUDA backend's memory arithmetic reads of a partition (B_G2 on the
    /// backend, as the engine hands it to a backend that drives a device).
    pub fn counts(&self) -> PartitionCounts {
        PartitionCounts {
            constraints: self.constraints,
            l: self.l.counts(),
            a: self.a.counts(),
            b_g1: self.b_g1.counts(),
            b_g2: Some(self.b_g2.counts()),
        }
    }

    /// What the scheduler's partition arithmetic reads.
    pub fn partition_shape(&self) -> PartitionShape {
        PartitionShape {
            num_inputs: self.inputs,
            num_aux: self.aux,
            num_constraints: self.constraints,
        }
    }

    /// Base bytes of each set, in the order H, L, A, B_G1, B_G2.
    pub fn base_bytes(&self) -> [u64; 5] {
        [
            self.h as u64 * G1_AFFINE_BYTES,
            self.l.bases as u64 * G1_AFFINE_BYTES,
            self.a.bases as u64 * G1_AFFINE_BYTES,
            self.b_g1.bases as u64 * G1_AFFINE_BYTES,
            self.b_g2.bases as u64 * G2_AFFINE_BYTES,
        ]
    }

    /// The parameter set's points in host memory (what the budget counts per
    /// parameter set in use).
    pub fn params_bytes(&self) -> u64 {
        self.base_bytes().iter().sum()
    }

    /// The three splits' host bytes.
    pub fn split_bytes(&self) -> u64 {
        [self.l, self.a, self.b_g1]
            .iter()
            .map(|q| q.split_bytes())
            .sum()
    }

    /// Device bytes of the compiled R1CS's copy (the backend's arithmetic).
    pub fn r1cs_device_bytes(&self) -> u64 {
        cuzk_cuda::footprint::r1cs_device_bytes(self.constraints, self.nnz, self.coeffs)
    }

    /// Bytes of `a, b, c` (uploaded per partition when the CPU evaluates them).
    pub fn abc_bytes(&self) -> u64 {
        3 * self.constraints as u64 * 32
    }

    /// Bytes of the witness (`[input, aux]`).
    pub fn witness_bytes(&self) -> u64 {
        cuzk_cuda::footprint::witness_bytes(self.inputs, self.aux)
    }
}

/// A compiled shape's counts and its parameters' query lengths, as a run has them
/// (`cuzk bench` records the plan for its own workload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub partitions: u32,
    pub constraints: usize,
    pub inputs: usize,
    pub aux: usize,
    /// H, L, A, B_G1, B_G2 bases.
    pub bases: [usize; 5],
    pub nnz: [usize; 3],
    pub coeffs: usize,
    /// Whether the run's parameters are memory-mapped from points files
    /// (`Srs::mapped_bytes`): not the shape's, the host's ([`crate::Hardware::mapped`]),
    /// carried here because the loaded set is what knows it.
    pub mapped: bool,
}

impl Shape {
    /// A run's own shape: its counts, with the tails (as shares of each query) and
    /// the measured times (scaled by constraints) of the 32 GiB kind whose
    /// constraint count is nearest: an estimate, which its basis says.
    pub fn from_counts(c: &Counts) -> Shape {
        let like = Kind::ALL
            .into_iter()
            .map(Shape::filecoin_32gib)
            .min_by(|x, y| {
                let d = |s: &Shape| {
                    ((s.constraints as f64).ln() - (c.constraints.max(1) as f64).ln()).abs()
                };
                d(x).total_cmp(&d(y))
            })
            .expect("four kinds");
        let q = |of: Query, bases: usize| Query {
            bases,
            tail: ((bases as f64) * of.tail as f64 / of.bases.max(1) as f64) as usize,
        };
        let scale = c.constraints as f64 / like.constraints as f64;
        let m = like.measured;
        Shape {
            kind: like.kind,
            circuit: "this run's circuit",
            partitions: c.partitions,
            constraints: c.constraints,
            inputs: c.inputs,
            aux: c.aux,
            h: c.bases[0],
            l: q(like.l, c.bases[1]),
            a: q(like.a, c.bases[2]),
            b_g1: q(like.b_g1, c.bases[3]),
            b_g2: q(like.b_g2, c.bases[4]),
            nnz: c.nnz,
            coeffs: c.coeffs,
            measured: Measured {
                device_s_h200: m.device_s_h200 * scale,
                host_core_s: m.host_core_s * scale,
                host_core_s_cpu_spmv: m.host_core_s_cpu_spmv * scale,
            },
            basis: "counted: this run's R1CS and parameters; estimated: tails and times \
                    from the 32 GiB kind of the nearest size, scaled by constraints",
        }
    }
}
