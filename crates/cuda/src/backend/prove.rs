//! One partition on the device (`CudaBackend::prove`): the flow both
//! `prove_partition_ref` (a, b, c uploaded) and `prove_partition_witness` (a, b, c
//! evaluated from the witness by the spmv kernel) share, and the types it runs on.

use super::*;
use crate::ntt::HBuffers;

/// H of a partition: its a, b, c on their way to the device (or its witness, for
/// the spmv kernel to evaluate them from), or its coefficients.
pub(super) enum HStage<'a> {
    Uploading(AbcUpload<'a>),
    Witness(WitnessUpload<'a>),
    Done(CudaSlice<FrRepr>),
}

/// A partition's MSM queries: what [`PartitionJobRef`] and [`WitnessJobRef`] share.
#[derive(Clone, Copy)]
pub(super) struct Queries<'a> {
    pub(super) h_bases: &'a [G1Affine],
    pub(super) l: SplitMsm<'a, G1Affine>,
    pub(super) a: SplitMsm<'a, G1Affine>,
    pub(super) b_g1: SplitMsm<'a, G1Affine>,
    pub(super) b_g2: Option<SplitMsm<'a, G2Affine>>,
}

impl<'a> Queries<'a> {
    pub(super) fn of(job: &PartitionJobRef<'a>) -> Self {
        Self {
            h_bases: job.h_bases,
            l: job.l,
            a: job.a,
            b_g1: job.b_g1,
            b_g2: job.b_g2,
        }
    }

    /// The sizes [`crate::footprint`] plans with.
    pub(super) fn counts(&self, constraints: usize) -> footprint::PartitionCounts {
        let c = |m: SplitRef<'_>| footprint::SplitCounts {
            num_bases: m.num_bases(),
            tail: m.tail_indices().len(),
            ones_words: m.ones_words().len(),
        };
        footprint::PartitionCounts {
            constraints,
            l: c(self.l.split),
            a: c(self.a.split),
            b_g1: c(self.b_g1.split),
            b_g2: self.b_g2.map(|m| c(m.split)),
        }
    }

    pub(super) fn of_witness(job: &WitnessJobRef<'a>) -> Self {
        Self {
            h_bases: job.h_bases,
            l: job.l,
            a: job.a,
            b_g1: job.b_g1,
            b_g2: job.b_g2,
        }
    }
}

/// Where a partition's `a, b, c` come from.
#[derive(Clone, Copy)]
pub(super) enum AbcSource<'a> {
    /// Evaluated on the host: uploaded (copy stream).
    Host(AbcRef<'a>),
    /// Evaluated here from the witness (`[input, aux]`, uploaded on the copy stream)
    /// by the spmv kernel over the resident copy of `r1cs`.
    Witness {
        r1cs: R1csRef<'a>,
        input: &'a [Scalar],
        aux: &'a [Scalar],
    },
}

impl AbcSource<'_> {
    /// Constraints: the length of `a, b, c`.
    fn rows(&self) -> usize {
        match self {
            AbcSource::Host(abc) => abc.len(),
            AbcSource::Witness { r1cs, .. } => r1cs.num_constraints(),
        }
    }

    /// The host vectors the device reads (page-locked for the call).
    fn host_vectors(&self) -> Vec<&[Scalar]> {
        match *self {
            AbcSource::Host(abc) => vec![abc.a, abc.b, abc.c],
            AbcSource::Witness { input, aux, .. } => vec![input, aux],
        }
    }
}

impl CudaBackend {
    /// [`footprint::place`] for a partition of `n` constraints and `job`'s
    /// queries within `budget` device bytes, less `shape_bytes` for its compiled
    /// shape.
    pub(super) fn place(
        &self,
        budget: u64,
        placement: BasePlacement,
        n: usize,
        job: &Queries<'_>,
        witness_bytes: u64,
        shape_bytes: u64,
    ) -> Result<footprint::Placement, u64> {
        let counts = job.counts(n);
        let sets = [
            job.h_bases.len() as u64 * G1::AFFINE_BYTES,
            job.l.bases.len() as u64 * G1::AFFINE_BYTES,
            job.a.bases.len() as u64 * G1::AFFINE_BYTES,
            job.b_g1.bases.len() as u64 * G1::AFFINE_BYTES,
            job.b_g2
                .as_ref()
                .map_or(0, |m| m.bases.len() as u64 * G2::AFFINE_BYTES),
        ];
        footprint::place(&footprint::PlaceInput {
            kernel: self.ntt_kernel,
            tuning: &self.tuning.msm,
            counts: &counts,
            sets,
            witness: witness_bytes,
            room: budget.saturating_sub(shape_bytes),
            forced_chunk: match placement {
                BasePlacement::Auto => None,
                BasePlacement::Streamed { chunk_bases } => Some(chunk_bases),
            },
        })
    }

    /// One partition on the device, its `a, b, c` from `src`: uploaded (host
    /// evaluations), or evaluated here from the witness by the spmv kernel. The
    /// flow of [`GpuBackend::prove_partition_ref`] and
    /// [`GpuBackend::prove_partition_witness`] alike, which have checked the job's
    /// shapes (`check_shapes`); the domain's limit, this backend's own, is checked
    /// here.
    pub(super) fn prove(
        &self,
        src: AbcSource<'_>,
        job: Queries<'_>,
    ) -> Result<PartitionResult, BackendError> {
        let n = src.rows();
        let log = crate::log_domain(n);
        if log > MAX_LOG_DOMAIN {
            return Err(BackendError::DomainTooLarge {
                log,
                max: MAX_LOG_DOMAIN,
            });
        }
        // H's coefficients, as many as the h query's bases (`check_shapes`).
        let want_h = (1usize << log) - 1;
        let _span = tracing::info_span!("prove_partition", backend = "cuda", log_n = log).entered();
        // This instance's MSM launch parameters and profiler, for every MSM below.
        let tuning = &self.tuning;
        let mut host = HostMarks::start(&tuning.profiler, || format!("host partition 2^{log}"));
        // Held until this partition's work is enqueued: other partitions' page-locking
        // waits (backend/gate.rs).
        let launch = self.gate.launch();
        // The witness buffer lives next to the H buffers while the kernel runs.
        let witness_bytes = match src {
            AbcSource::Witness { r1cs, .. } => {
                footprint::witness_bytes(r1cs.num_inputs, r1cs.num_aux)
            }
            AbcSource::Host(_) => 0,
        };
        let Queries {
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        } = job;
        // Page-lock a, b, c (or the witness) before taking the device (phase 9 of the
        // C2 history): the pinning of ~12 GiB overlaps another partition's GPU work,
        // and the upload's own registration finds the ranges registered and skips
        // it. When the caller staged them (`stage`, `stage_witness`, before its GPU
        // lock) they are registered already and this registers nothing.
        // A witness staged by copy (`witness_staging = "copy"`) is uploaded from its
        // page-locked copy, and nothing is registered.
        let copy = match src {
            AbcSource::Witness { input, aux, .. } => self.copies.find(input, aux),
            AbcSource::Host(_) => None,
        };
        let host_vectors = if copy.is_some() {
            Vec::new()
        } else {
            src.host_vectors()
        };
        // SAFETY: the borrowed vectors outlive this call, and `pinned` is dropped
        // within it (explicitly below, or on an early return).
        let pinned = unsafe { self.pin(&host_vectors) }.map_err(dev)?;
        HostMarks::mark(&mut host, "pin");
        let mut inner = self.lock();
        HostMarks::mark(&mut host, "backend lock");
        // Where the bases live and how the partition runs, as the planner predicts
        // it (`footprint::place`): every set resident where all fit beside the
        // whole-query working memory; else streamed in chunks, with the resident
        // sets and H's buffers (three or two) whose stream costs least. The compiled shape is counted first: it cannot be
        // streamed, the bases can.
        let shape_bytes = match src {
            AbcSource::Witness { r1cs, .. } => R1csKey::of(&r1cs).device_bytes(),
            AbcSource::Host(_) => 0,
        };
        let placement = self
            .place(inner.budget, inner.placement, n, &job, witness_bytes, shape_bytes)
        .map_err(|need| {
            dev(CudaError::OutOfMemory {
                what: if shape_bytes > 0 {
                    "the compiled R1CS with the partition (H buffers + MSM scratch + two chunks of streamed bases)"
                } else {
                    "partition (H buffers + MSM scratch + two chunks of streamed bases)"
                },
                need: need + shape_bytes,
                available: inner.budget,
            })
        })?;
        let shape = match src {
            AbcSource::Host(_) => None,
            AbcSource::Witness { r1cs, .. } => Some(inner.prepare_r1cs(r1cs, placement.least)?),
        };
        let g2_sets: Vec<&[G2Affine]> = b_g2.iter().map(|m| m.bases).collect();
        let chunk = inner.prepare_bases(
            &[h_bases, l.bases, a.bases, b_g1.bases],
            &g2_sets,
            &placement,
            shape.as_ref(),
        )?;
        // The split queries' chunk: at least H's (`footprint::Placement::split_chunk`).
        let split_chunk = placement.split_chunk.map_or(chunk, |s| s.max(chunk));
        let h_buffers = placement.h_buffers;
        let direct = match self.config.stream_staging {
            // SAFETY: the parameter sets outlive their registrations (the engine
            // calls `forget_bases` before freeing one).
            crate::StreamStaging::Register if placement.chunk.is_some() => unsafe {
                inner.register_streamed(
                    &[h_bases, l.bases, a.bases, b_g1.bases],
                    &g2_sets,
                    &placement,
                )
            },
            _ => Vec::new(),
        };
        tracing::debug!(
            "partition 2^{log}: resident (H, L, A, B_G1, B_G2) {:?}, chunk {:?}, H in {} buffers, {} of {} device bytes",
            placement.resident,
            placement.chunk,
            h_buffers.name(),
            placement.need,
            inner.budget
        );
        let Inner {
            gpu,
            ntt,
            bases,
            bases_g2,
            stager,
            r1cs: shapes,
            splits,
            ..
        } = &mut *inner;
        let gpu = &*gpu;
        // The source, ready to start: a, b, c as they are, or the witness with the
        // resident shape it is evaluated over.
        let source = match (src, &shape) {
            (AbcSource::Host(abc), _) => Source::Host(abc),
            (AbcSource::Witness { input, aux, .. }, Some(k)) => Source::Witness {
                r1cs: shapes.get(k).ok_or_else(|| {
                    dev(CudaError::Shape(
                        "the compiled shape was not resident after its upload".into(),
                    ))
                })?,
                input,
                aux,
                copy: copy.as_deref(),
            },
            (AbcSource::Witness { .. }, None) => {
                return Err(dev(CudaError::Shape(
                    "no compiled shape for a witness partition".into(),
                )))
            }
        };

        HostMarks::mark(&mut host, "shape and bases");
        let mut phases =
            Phases::start(&tuning.profiler, gpu, || format!("partition 2^{log}")).map_err(dev)?;
        // G1 split queries not resident stream through a pair of chunk buffers of
        // their chunk (allocated at the first streamed chunk), H's MSM through a
        // pair of its own chunk after them (the same pair where the chunks agree).
        // SAFETY: `direct` holds only ranges registered by this backend, which
        // drops them only after waiting for the copy stream.
        let mut g1_stream =
            unsafe { BaseStream::<G1>::new(gpu, stager, split_chunk).with_direct(direct.clone()) };
        // With L, A and B resident, a, b, c (12 GiB at 2^27) travel on the copy stream
        // while the compute stream does L, A and B, and the transforms follow. The
        // queries' own data goes first: behind a, b, c on the copy engine it waited
        // ~230 ms at 2^27 (H200, third session). L's bitmap goes up, L's ones start,
        // and the other bitmaps and the tail terms travel while they run. With any of
        // L, A, B streamed (their chunks upload as they go), H comes first.
        let g1_sets = [&l, &a, &b_g1];
        let resident: Vec<&CudaSlice<AffineRepr>> = g1_sets
            .iter()
            .filter_map(|m| bases.get(&key::<G1>(m.bases)))
            .collect();
        let g2_resident = b_g2
            .as_ref()
            .is_some_and(|m| bases_g2.contains_key(&key::<G2>(m.bases)));
        // `split_upload = "pinned"`: every split's data through the backend's
        // page-locked buffer (backend/split_staging.rs), L's ones enqueued once its
        // bitmap is in.
        let staged = match (&resident[..], self.config.split_upload) {
            ([rl, _, _], crate::SplitUpload::Pinned) => {
                let mut parts = vec![l.split, a.split, b_g1.split];
                if let (true, Some(m)) = (g2_resident, &b_g2) {
                    parts.push(m.split);
                }
                // Staged before the GPU lock (`stage_splits`) when the caller could.
                let ahead = self.split_copies.find(&parts);
                splits
                    .upload(gpu, &parts, ahead.as_deref(), |ones| {
                        ones_msm::<G1>(gpu, tuning, rl, ones)
                    })
                    .map_err(dev)?
            }
            _ => None,
        };
        HostMarks::mark(&mut host, "splits staged");
        let (l_ones_staged, g1_staged, g2_staged) = match staged {
            Some((l_ones, mut up)) => {
                let g2 = if up.ones.len() > g1_sets.len() {
                    up.ones.pop().zip(up.tails.pop())
                } else {
                    None
                };
                (Some(l_ones), Some(up), g2)
            }
            None => (None, None, None),
        };
        // Otherwise from the caller's memory: B_G2's bitmap and tail terms before any
        // work is queued, like L, A and B's: issued behind the H MSM, the pageable
        // tail copy (its stream waits for the compute stream) held this thread for
        // the whole partition.
        let g2_up = match (&b_g2, g2_staged) {
            (_, Some(up)) => Some(up),
            (Some(m), None) if g2_resident => Some((
                upload_ones(gpu, m.split).map_err(dev)?,
                upload_tail(gpu, m.split).map_err(dev)?,
            )),
            _ => None,
        };
        HostMarks::mark(&mut host, "B_G2 uploads");
        let (h, l_p, a_p, b_p) = if let [rl, ra, rb] = resident[..] {
            let (l_ones, ones, tails) = match (l_ones_staged, g1_staged) {
                (Some(l_ones), Some(up)) => (l_ones, up.ones, up.tails),
                _ => {
                    let ones = g1_sets
                        .iter()
                        .map(|m| upload_ones(gpu, m.split))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(dev)?;
                    HostMarks::mark(&mut host, "bitmaps up");
                    let l_ones = ones_msm::<G1>(gpu, tuning, rl, &ones[0]).map_err(dev)?;
                    let tails = g1_sets
                        .iter()
                        .map(|m| upload_tail(gpu, m.split))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(dev)?;
                    (l_ones, ones, tails)
                }
            };
            HostMarks::mark(&mut host, "tails up");
            let h = source.start(gpu, h_buffers).map_err(dev)?;
            self.fault_after_upload(gpu).map_err(dev)?;
            HostMarks::mark(&mut host, "source started");
            let l_p = vec![l_ones, tail_msm(gpu, tuning, rl, &tails[0]).map_err(dev)?];
            Phases::mark(&mut phases, gpu, "L").map_err(dev)?;
            HostMarks::mark(&mut host, "L");
            let mut both = |r: &CudaSlice<AffineRepr>, k: usize, name| {
                let p = vec![
                    ones_msm::<G1>(gpu, tuning, r, &ones[k]).map_err(dev)?,
                    tail_msm(gpu, tuning, r, &tails[k]).map_err(dev)?,
                ];
                Phases::mark(&mut phases, gpu, name).map_err(dev)?;
                HostMarks::mark(&mut host, name);
                Ok::<_, BackendError>(p)
            };
            let a_p = both(ra, 1, "A")?;
            let b_p = both(rb, 2, "B_G1")?;
            (h, l_p, a_p, b_p)
        } else {
            let started = source.start(gpu, h_buffers).map_err(dev)?;
            self.fault_after_upload(gpu).map_err(dev)?;
            let up = match started {
                HStage::Witness(w) => {
                    let up = source.eval(gpu, w).map_err(dev)?;
                    Phases::mark(&mut phases, gpu, "spmv (witness upload + a, b, c)")
                        .map_err(dev)?;
                    up
                }
                HStage::Uploading(up) => up,
                HStage::Done(_) => {
                    return Err(dev(CudaError::Shape("H was done before its NTTs".into())))
                }
            };
            let h = HStage::Done(ntt.h_from(gpu, up).map_err(dev)?);
            Phases::mark(&mut phases, gpu, "H (upload + NTTs)").map_err(dev)?;
            let mut g1 = |m: &SplitMsm<'_, G1Affine>, name| {
                let p = query::<G1>(
                    gpu,
                    tuning,
                    bases.get(&key::<G1>(m.bases)),
                    &mut g1_stream,
                    m,
                )
                .map_err(dev)?;
                Phases::mark(&mut phases, gpu, name).map_err(dev)?;
                Ok::<_, BackendError>(p)
            };
            let l_p = g1(&l, "L")?;
            let a_p = g1(&a, "A")?;
            let b_p = g1(&b_g1, "B_G1")?;
            (h, l_p, a_p, b_p)
        };
        let h_coeffs = match h {
            HStage::Done(coeffs) => coeffs,
            HStage::Witness(w) => {
                let up = source.eval(gpu, w).map_err(dev)?;
                Phases::mark(&mut phases, gpu, "spmv (witness uploaded during L, A, B)")
                    .map_err(dev)?;
                let coeffs = ntt.h_from(gpu, up).map_err(dev)?;
                Phases::mark(&mut phases, gpu, "H (NTTs)").map_err(dev)?;
                coeffs
            }
            HStage::Uploading(up) => {
                let coeffs = ntt.h_from(gpu, up).map_err(dev)?;
                Phases::mark(
                    &mut phases,
                    gpu,
                    "H (NTTs; a, b, c uploaded during L, A, B)",
                )
                .map_err(dev)?;
                coeffs
            }
        };
        HostMarks::mark(&mut host, "spmv and H");
        // Uploads are done: unpin while the device works.
        drop(pinned);
        // H's MSM streams in its own chunk (its scratch bounds it): the split
        // queries' buffers go first, in stream order, where theirs is larger.
        let mut g1_stream = if g1_stream.chunk() == chunk {
            g1_stream
        } else {
            drop(g1_stream);
            // SAFETY: as above.
            unsafe { BaseStream::<G1>::new(gpu, stager, chunk).with_direct(direct.clone()) }
        };
        let h_pending = match bases.get(&key::<G1>(h_bases)) {
            Some(resident) => vec![msm::msm(
                gpu,
                tuning,
                resident,
                &h_coeffs,
                want_h,
                ScalarFormat::Montgomery,
                None,
                MsmPlan::for_size(want_h),
            )
            .map_err(dev)?],
            None => {
                streamed_dense(tuning, &mut g1_stream, h_bases, &h_coeffs, want_h).map_err(dev)?
            }
        };
        Phases::mark(&mut phases, gpu, "H MSM").map_err(dev)?;
        HostMarks::mark(&mut host, "H MSM");
        drop(h_coeffs);
        // The G1 chunk buffers go (in stream order) before G2's are made: the budget
        // counts one curve's pair.
        drop(g1_stream);
        // The B query in G2 (when the scheduler hands it over): the same split MSM
        // over the G2 bases, enqueued behind the G1 ones.
        let b2_p = match (&b_g2, g2_up) {
            (Some(m), Some((ones, tail))) => {
                let r = bases_g2.get(&key::<G2>(m.bases)).ok_or_else(|| {
                    dev(CudaError::Shape(
                        "the B_G2 bases were not resident after their upload".into(),
                    ))
                })?;
                Some(vec![
                    ones_msm::<G2>(gpu, tuning, r, &ones).map_err(dev)?,
                    tail_msm::<G2>(gpu, tuning, r, &tail).map_err(dev)?,
                ])
            }
            (Some(m), None) => {
                // SAFETY: as G1's.
                let mut g2_stream =
                    unsafe { BaseStream::<G2>::new(gpu, stager, split_chunk).with_direct(direct) };
                Some(
                    query::<G2>(
                        gpu,
                        tuning,
                        bases_g2.get(&key::<G2>(m.bases)),
                        &mut g2_stream,
                        m,
                    )
                    .map_err(dev)?,
                )
            }
            (None, _) => None,
        };
        if b2_p.is_some() {
            Phases::mark(&mut phases, gpu, "B_G2").map_err(dev)?;
            HostMarks::mark(&mut host, "B_G2");
        }

        drop(launch);
        // What is left of the enqueue (the streamed path's queries, the gate).
        HostMarks::mark(&mut host, "enqueue");
        /// The sum of a query's pending parts (ones, tails; per chunk when streamed).
        fn total<C: DeviceCurve>(
            gpu: &Gpu,
            parts: Vec<PendingSum<C>>,
        ) -> Result<C::Projective, BackendError> {
            let mut acc = C::Projective::identity();
            for p in parts {
                acc += p.finish(gpu).map_err(dev)?;
            }
            Ok(acc)
        }
        let h = total(gpu, h_pending)?;
        HostMarks::mark(&mut host, "wait for H");
        Phases::finish(phases).map_err(dev)?;
        let result = PartitionResult {
            h,
            l: total(gpu, l_p)?,
            a: total(gpu, a_p)?,
            b_g1: total(gpu, b_p)?,
            b_g2: b2_p.map(|p| total(gpu, p)).transpose()?,
        };
        HostMarks::mark(&mut host, "the other sums");
        HostMarks::finish(host);
        // The next partition is about to be launched: host memory work waits a
        // moment for it.
        self.gate.reserve();
        Ok(result)
    }
}

/// [`AbcSource`] with the shape resolved to its resident device copy.
#[derive(Clone, Copy)]
enum Source<'a> {
    Host(AbcRef<'a>),
    Witness {
        r1cs: &'a DeviceR1cs,
        input: &'a [Scalar],
        aux: &'a [Scalar],
        /// Its staged copy, `[input, aux]` page-locked, when it was staged by copy.
        copy: Option<&'a witness_copy::WitnessCopy>,
    },
}

impl<'a> Source<'a> {
    /// Starts the copy stream's part: a, b, c, or the witness.
    fn start(&self, gpu: &Gpu, h_buffers: HBuffers) -> Result<HStage<'a>, CudaError> {
        Ok(match *self {
            Source::Host(abc) => {
                HStage::Uploading(Ntt::upload_abc(gpu, abc.a, abc.b, abc.c, h_buffers)?)
            }
            Source::Witness {
                r1cs,
                input,
                aux,
                copy,
            } => HStage::Witness(spmv::upload_witness(
                gpu,
                r1cs,
                input,
                aux,
                copy.map(witness_copy::WitnessCopy::bytes),
            )?),
        })
    }

    /// The spmv kernel over the uploaded witness (compute stream).
    fn eval(&self, gpu: &Gpu, w: WitnessUpload<'a>) -> Result<AbcUpload<'a>, CudaError> {
        match *self {
            Source::Witness { r1cs, .. } => spmv::eval_abc(gpu, r1cs, w),
            Source::Host(_) => Err(CudaError::Shape(
                "a witness upload for a partition with host a, b, c".into(),
            )),
        }
    }
}
