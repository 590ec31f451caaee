//! The engine's threads: synthesis workers (witness, spmv, prep_msm under a budget
//! permit), GPU workers (one lane's backend, its lock, staging, a critical lane's
//! partitions), the `b_g2_msm` thread and the finisher (assembly, verification,
//! deallocation).

use super::*;

pub(super) fn synth_worker(sh: &Shared, w: u32) {
    // The queue's head together with a slot for it (see `SynthQueue`).
    while let Some(item) = sh.synth_q.pop() {
        synth_one(sh, w, item);
        sh.synth_q.release();
    }
}

fn synth_one(sh: &Shared, w: u32, item: SynthItem) {
    let SynthItem {
        job,
        partition: p,
        spec,
    } = item;
    if sh.is_over(job.id) {
        sh.partition_left(job.id, p, None);
        return;
    }
    let wk = Some(w);
    let bytes = sh.partition_charge(&job.r1cs);
    let critical = job.priority == Priority::Critical;
    if sh
        .budget
        .would_wait_for(bytes + sh.srs_extra(&job), critical)
    {
        sh.rec(Ev::BudgetWaitStart, job.id, p, wk, None, Some(bytes), "");
    }
    // The need is read again while it waits, both parts of it. The charge: a
    // partition queued before its shape's first partition measured its splits is
    // charged at worst, and must not wait for that stale charge while smaller ones
    // pass it. The parameters: partitions of a job that wait together all count
    // them until one is admitted and holds them for the job; the others must then
    // stop counting them, or they wait for the parameters twice (on the H200 five
    // partitions of a 32 GiB sector waited for ever once the witness copies'
    // pinned buffers filled the rest of the budget). `extra` is the parameters'
    // part of the need read last, which is what the permit holds.
    let extra = std::cell::Cell::new(0);
    let need = || {
        let e = sh.srs_extra(&job);
        extra.set(e);
        sh.partition_charge(&job.r1cs) + e
    };
    let permit = match sh.budget.acquire_for_with(need, critical) {
        Ok(Some(mut permit)) => {
            let extra = extra.get();
            let srs_permit = (extra > 0).then(|| permit.split_off(extra));
            sh.hold_srs(&job, srs_permit);
            permit
        }
        Ok(None) => {
            sh.fail(job.id, JobError::ShutDown);
            sh.partition_left(job.id, p, None);
            return;
        }
        Err(e) => {
            sh.fail(job.id, e.into());
            sh.partition_left(job.id, p, None);
            return;
        }
    };
    sh.rec(
        Ev::BudgetAcquired,
        job.id,
        p,
        wk,
        None,
        Some(permit.bytes()),
        "",
    );
    let started = Instant::now();
    match synth_partition(sh, &job, p, w, spec, permit, started) {
        Ok(item) => {
            sh.rec(Ev::GpuQueue, job.id, p, None, None, None, "");
            push_gpu(sh, item);
        }
        Err(e) => sh.partition_failed(job.id, p, e.to_string()),
    }
}

fn synth_partition(
    sh: &Shared,
    job: &Arc<JobShared>,
    p: u32,
    w: u32,
    spec: PartitionSpec,
    mut permit: Permit,
    started: Instant,
) -> Result<GpuItem, ProveError> {
    let wk = Some(w);
    let mut times = StageTimes::default();
    sh.rec(Ev::SynthStart, job.id, p, wk, None, None, "");
    let t = Instant::now();
    let witness = catch("synthesis", || {
        spec.circuit.synthesize(&job.r1cs, &sh.synth_pool)
    })??;
    times.synthesis = t.elapsed();
    sh.rec(Ev::SynthEnd, job.id, p, wk, None, None, "");

    let abc = match sh.held {
        Held::Abc { .. } => {
            sh.rec(Ev::SpmvStart, job.id, p, wk, None, None, "");
            let t = Instant::now();
            let abc = catch("spmv", || {
                spmv_stage(
                    &job.r1cs,
                    &witness,
                    &sh.synth_pool,
                    sh.policies.throttle.as_ref(),
                    sh.cfg.check_witness,
                )
            })??;
            times.spmv = t.elapsed();
            let bytes = cuzk_alloc::HeapSize::heap_size(&abc) as u64;
            sh.rec(Ev::SpmvEnd, job.id, p, wk, None, Some(bytes), "");
            Some(abc)
        }
        // The backend evaluates a, b, c in its GPU stage.
        Held::Witness => None,
    };

    sh.rec(Ev::PrepStart, job.id, p, wk, None, None, "");
    let t = Instant::now();
    let splits = catch("prep_msm", || {
        prep_stage(&job.r1cs, &witness, &sh.synth_pool)
    })??;
    times.prep_msm = t.elapsed();
    let split_bytes = splits.heap_size() as u64;
    sh.rec(Ev::PrepEnd, job.id, p, wk, None, Some(split_bytes), "");
    // Charged from what the shape's splits took so far: where this partition's
    // splits are larger, its permit grows to what it really holds.
    let peak = sh.splits_prepared(&job.r1cs, split_bytes);
    if peak > permit.bytes() {
        permit.grow(peak - permit.bytes());
    }
    let t = Instant::now();
    // From here on the partition holds a, b, c (or its witness, where the backend
    // evaluates them) and the splits (and H, on the host): the rest of its permit
    // goes back, with the witness where it is freed, when the dealloc policy really
    // frees it, so that the next partition starts while this one waits for and runs
    // on the GPU.
    let after = partition_bytes_after_prep(&job.r1cs, sh.held, split_bytes);
    let back = permit.split_off(permit.bytes().saturating_sub(after));
    let input = match abc {
        Some(abc) => {
            let bytes = cuzk_alloc::HeapSize::heap_size(&witness);
            sh.dealloc(job.id, p, Released::new((witness, back), bytes, "witness"));
            GpuInput::Abc(abc)
        }
        None => {
            drop(back);
            GpuInput::Witness(witness)
        }
    };
    times.dealloc += t.elapsed();

    Ok(GpuItem {
        input,
        failed_on: Vec::new(),
        b_g2: None,
        carry: Carry {
            job: job.clone(),
            partition: p,
            splits: Arc::new(splits),
            r: spec.r,
            s: spec.s,
            public_inputs: spec.public_inputs,
            permit,
            times,
            started,
        },
    })
}

/// The critical lanes for the setting `setting` (see
/// [`PipelineConfig::critical_lane`]): a second instance of each lane's backend.
pub(super) fn critical_lanes(
    setting: Option<bool>,
    backend: &dyn GpuBackend,
    lanes: &[DeviceLane],
) -> Result<Vec<DeviceLane>, PipelineError> {
    let want = match setting {
        Some(want) => want,
        None => !backend.capabilities().devices.is_empty(),
    };
    if !want {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(lanes.len());
    for l in lanes {
        let sibling = l.backend.open_sibling().map_err(|e| {
            PipelineError::Config(format!(
                "critical lane on device {}: the backend's second instance failed: {e}",
                l.ordinal
            ))
        })?;
        match sibling {
            Some(b) => out.push(DeviceLane {
                ordinal: l.ordinal,
                backend: b,
            }),
            // Unset: a backend without a second instance simply has no lane.
            None if setting.is_none() => return Ok(Vec::new()),
            None => {
                return Err(PipelineError::Config(format!(
                    "critical_lane = true, but the backend `{}` offers no second instance",
                    l.backend.capabilities().name
                )))
            }
        }
    }
    Ok(out)
}

/// Queues a partition for the GPU workers (a critical one counted in
/// `Shared::critical_gpu` until its worker holds a lock).
fn push_gpu(sh: &Shared, item: GpuItem) {
    let job = &item.carry.job;
    if job.priority == Priority::Critical {
        sh.critical_gpu.enter();
    }
    sh.gpu_q.push(key(job, item.carry.partition), item);
}

/// Runs `f`, turning a panic into [`ProveError::Panicked`] with its message.
fn catch<T>(stage: &'static str, f: impl FnOnce() -> T) -> Result<T, ProveError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| ProveError::panicked(stage, p.as_ref()))
}

/// A GPU worker of lane `lane` (one device): takes the GPU queue's first partition
/// that has not failed on this device, stages it, takes the device's lock and runs
/// the lane's backend. A device error (the device's fault, not the input's) sends
/// the partition back to the queue for another device while one is left.
pub(super) fn gpu_worker(sh: &Shared, lane: usize, w: u32, finish: &Sender<FinishItem>) {
    // Lanes past `sh.lanes` are critical lanes: critical partitions only, no lock.
    let critical_lane = lane >= sh.lanes.len();
    let this = match lane.checked_sub(sh.lanes.len()) {
        Some(i) => &sh.critical_lanes[i],
        None => &sh.lanes[lane],
    };
    let device = this.ordinal;
    let backend = this.backend.clone();
    let backend = backend.as_ref();
    let (wk, dev) = (Some(w), Some(device));
    let critical_lanes = sh.lanes.len()..sh.lanes.len() + sh.critical_lanes.len();
    // How many lanes may take a partition: critical ones also go to critical lanes.
    let eligible =
        |critical: bool| sh.lanes.len() + if critical { critical_lanes.len() } else { 0 };
    let takes = |i: &GpuItem| {
        let critical = i.carry.job.priority == Priority::Critical;
        !i.failed_on.contains(&lane)
            && if critical_lane {
                critical
            } else {
                // A critical partition is the critical lanes' until each failed it.
                !critical || critical_lanes.clone().all(|c| i.failed_on.contains(&c))
            }
    };
    // The finisher outlives the GPU workers (it is joined last), so a send fails only
    // during a panic elsewhere; the item is then dropped, freeing its buffers.
    let send = |gpu, b_g2, carry| {
        let _ = finish.send(FinishItem { gpu, b_g2, carry });
    };
    while let Some(item) = sh.gpu_q.pop_where(takes) {
        let GpuItem {
            input,
            mut carry,
            mut failed_on,
            b_g2,
        } = item;
        let (job, p) = (carry.job.clone(), carry.partition);
        let critical = job.priority == Priority::Critical;
        if sh.is_over(job.id) {
            if critical {
                sh.critical_gpu.leave();
            }
            sh.dealloc(job.id, p, input.released());
            let bytes = Some(carry.permit.bytes());
            sh.rec(Ev::BudgetReleased, job.id, p, None, None, bytes, "");
            drop(carry);
            sh.partition_left(job.id, p, None);
            continue;
        }
        sh.rec(Ev::GpuPickup, job.id, p, wk, dev, None, "");
        let g2_on_backend =
            crate::b_g2_on_backend(sh.cfg.b_g2_on_backend, &sh.policies.backend.capabilities());

        // b_g2_msm starts now on its own pool and overlaps this partition's GPU work
        // and the next one's (a retried partition keeps the one it queued first).
        let b_g2 =
            b_g2.or_else(|| (!g2_on_backend).then(|| queue_b_g2(sh, &job, p, &carry.splits)));

        // Staging (the CUDA backend pins a, b, c or the witness) runs before the lock
        // is waited for, so it overlaps another partition's GPU work instead of
        // holding the device.
        // So do the split data (the backend copies them into page-locked memory),
        // which the backend call would otherwise copy while the device waits.
        let t = Instant::now();
        let (staged, stage_result) = match &input {
            GpuInput::Abc(abc) => stage_abc(backend, abc),
            GpuInput::Witness(w) => stage_witness(backend, w),
        };
        let t_splits = Instant::now();
        let (staged_splits, splits_result) = stage_splits(backend, &carry.splits, g2_on_backend);
        let splits_ms = t_splits.elapsed().as_secs_f64() * 1e3;
        let took = t.elapsed().as_secs_f64() * 1e3;
        let splits_note = if staged_splits.is_staged() {
            format!(" splits_ms={splits_ms:.3}")
        } else {
            String::new()
        };
        match (&stage_result, &splits_result) {
            (Ok(()), Ok(())) if staged.is_staged() || staged_splits.is_staged() => {
                let detail = format!("ms={took:.3}{splits_note}");
                sh.rec(Ev::Staged, job.id, p, wk, dev, None, &detail);
            }
            (Ok(()), Ok(())) => {}
            (Err(why), _) | (Ok(()), Err(why)) => {
                let detail = format!("ms={took:.3}{splits_note} failed: {why}");
                sh.rec(Ev::Staged, job.id, p, wk, dev, None, &detail);
            }
        }
        // A staged partition lends a, b, c to the backend (`prove_partition_ref`)
        // and keeps them until the guard is gone; so does one that another device
        // may have to retry. Otherwise they are handed over. A witness is always
        // lent.
        let keep = staged.is_staged()
            || failed_on.len() + 1 < eligible(critical)
            || matches!(input, GpuInput::Witness(_));
        // The split data's staging is undone with the partition's own, after the
        // backend call (or when the partition goes back to the queue).
        let staged = staged.and(staged_splits);
        let mut input = Some(input);

        sh.rec(Ev::LockWaitStart, job.id, p, wk, dev, None, "");
        // A panicking lock policy holds nothing: the guard says it failed.
        let take_lock = || {
            catch_unwind(AssertUnwindSafe(|| {
                sh.policies.lock.partition(device as usize)
            }))
            .unwrap_or_else(|panic| {
                LockGuard::failed(
                    Duration::ZERO,
                    format!(
                        "the GPU lock policy panicked: {}",
                        panic_message(panic.as_ref())
                    ),
                )
            })
        };
        // A critical lane runs beside the device's lock holder: no lock.
        let mut guard = if critical_lane {
            LockGuard::free()
        } else {
            take_lock()
        };
        if critical {
            sh.critical_gpu.leave();
        }
        // A critical partition on its way to a GPU: a non-critical one that got
        // the device gives it up. If the critical one is the queue's head, this
        // worker puts its own partition back and takes it; else (another worker
        // holds it, waiting for a lock) this one waits until it has a lock.
        let mut gave_way = false;
        // With critical lanes, critical partitions do not need this device.
        let yields = !critical && sh.critical_lanes.is_empty();
        if yields && guard.failure().is_none() && sh.critical_gpu.any() {
            let critical_first =
                |k: &Key, i: &GpuItem| k.0 .0 == Priority::Critical && !i.failed_on.contains(&lane);
            if sh.gpu_q.head_is(critical_first) {
                // The lock was had (its wait ends here) and is given up.
                let waited = guard.waited().as_secs_f64() * 1e3;
                let detail = format!("waited_ms={waited:.3}; given up to a critical partition");
                sh.rec(Ev::LockAcquired, job.id, p, wk, dev, None, &detail);
                drop(guard);
                drop(staged);
                let detail = "gave way to a critical partition";
                sh.rec(Ev::GpuQueue, job.id, p, None, None, None, detail);
                match input {
                    Some(input) => sh.gpu_q.push(
                        key(&job, p),
                        GpuItem {
                            input,
                            carry,
                            failed_on,
                            b_g2,
                        },
                    ),
                    // Not reachable: a, b, c are taken only by the backend call.
                    None => send(
                        Err(ProveError::Backend(cuzk_gpu_backend::BackendError::Device(
                            "internal: the partition's a, b, c were already handed over".into(),
                        ))),
                        b_g2,
                        carry,
                    ),
                }
                continue;
            }
            while guard.failure().is_none() && sh.critical_gpu.any() {
                drop(guard);
                gave_way = true;
                sh.critical_gpu.wait_none(|| sh.gpu_q.is_closed());
                guard = take_lock();
            }
        }
        if let Some(why) = guard.failure() {
            let err = ProveError::Backend(cuzk_gpu_backend::BackendError::Device(format!(
                "the GPU lock failed: {why}"
            )));
            drop(guard);
            drop(staged);
            if let Some(input) = input {
                sh.dealloc(job.id, p, input.released());
            }
            send(Err(err), b_g2, carry);
            continue;
        }
        let waited = guard.waited().as_secs_f64() * 1e3;
        let detail = if gave_way {
            format!("waited_ms={waited:.3} after giving way to a critical partition")
        } else {
            format!("waited_ms={waited:.3}")
        };
        sh.rec(Ev::LockAcquired, job.id, p, wk, dev, None, &detail);
        sh.rec(Ev::GpuStart, job.id, p, wk, dev, None, "");
        let t = Instant::now();
        let gpu = {
            let compute = catch("gpu_lock", || {
                if critical_lane {
                    LockGuard::free()
                } else {
                    sh.policies.lock.region(device as usize, Region::Compute)
                }
            });
            let owned = match input.take() {
                Some(GpuInput::Abc(abc)) if !keep => Some(abc),
                other => {
                    input = other;
                    None
                }
            };
            // The compute guard lives until the backend call returns.
            compute.and_then(|_compute| {
                query_bases(&job.srs, &job.r1cs)
                    .map_err(ProveError::from)
                    .and_then(|bases| {
                        catch("gpu", || match (owned, &input) {
                            (Some(owned), _) => {
                                gpu_stage(backend, owned, &bases, &carry.splits, g2_on_backend)
                            }
                            (None, Some(GpuInput::Abc(lent))) => {
                                gpu_stage_ref(backend, lent, &bases, &carry.splits, g2_on_backend)
                            }
                            (None, Some(GpuInput::Witness(w))) => gpu_stage_witness(
                                backend,
                                &job.r1cs,
                                w,
                                &bases,
                                &carry.splits,
                                g2_on_backend,
                            ),
                            // Not reachable: `abc` is taken only when it is handed over.
                            (None, None) => Err(cuzk_gpu_backend::BackendError::Device(
                                "internal: the partition's a, b, c were already handed over".into(),
                            )),
                        })?
                        .map_err(ProveError::from)
                    })
            })
        };
        carry.times.gpu += t.elapsed();
        drop(guard);
        // After the backend call (and outside the lock): undo the staging.
        let t = Instant::now();
        let unstaged = staged.is_staged();
        drop(staged);
        let unstage = if unstaged {
            format!("unstage_ms={:.3}", t.elapsed().as_secs_f64() * 1e3)
        } else {
            String::new()
        };
        // The device's fault, with a, b, c still here and a device left that has
        // not failed this partition: another device takes it.
        let retry = match (&gpu, &input) {
            (Err(ProveError::Backend(e)), Some(_)) if e.is_device() => {
                failed_on.len() + 1 < eligible(critical)
            }
            _ => false,
        };
        if retry {
            let why = gpu
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            let detail = format!("device_error={why}; retried on another device");
            sh.rec(Ev::GpuEnd, job.id, p, wk, dev, None, &detail);
            tracing::warn!(target: "cuzk::engine", job = job.id, partition = p, device, error = %why, "device error; the partition goes to another device");
            failed_on.push(lane);
            if let Some(input) = input {
                sh.rec(Ev::GpuQueue, job.id, p, None, None, None, "retry");
                push_gpu(
                    sh,
                    GpuItem {
                        input,
                        carry,
                        failed_on,
                        b_g2,
                    },
                );
            }
            continue;
        }
        sh.rec(Ev::GpuEnd, job.id, p, wk, dev, None, &unstage);
        if let Some(input) = input {
            sh.dealloc(job.id, p, input.released());
        }
        send(gpu, b_g2, carry);
    }
}

/// Queues a partition's `b_g2_msm` for the `b_g2_msm` thread.
fn queue_b_g2(
    sh: &Shared,
    job: &Arc<JobShared>,
    p: u32,
    splits: &Arc<Splits>,
) -> Receiver<(BG2Result, Duration)> {
    let (tx, rx) = bounded(1);
    sh.b_g2_q.push(
        key(job, p),
        BG2Task {
            job: job.clone(),
            partition: p,
            splits: splits.clone(),
            done: tx,
        },
    );
    rx
}

/// Runs the queued `b_g2_msm`s one at a time, each on the whole pool.
///
/// Spawning each MSM onto the shared pool instead let rayon interleave their
/// nested parallel work: every CPU G2 MSM of a batch finished within 3 ms of the
/// others, so in a stream of jobs an earlier job waited for later ones. One at a
/// time, in queue order, the pool is as busy and each job's MSMs finish in order.
pub(super) fn b_g2_worker(sh: &Shared) {
    while let Some(task) = sh.b_g2_q.pop() {
        let BG2Task {
            job,
            partition: p,
            splits,
            done,
        } = task;
        if sh.is_over(job.id) {
            // The finisher sees the closed channel; the job is already over.
            continue;
        }
        let throttle = sh.policies.throttle.as_ref();
        let raised = catch("throttle", || throttle.raise());
        sh.rec(Ev::BG2Start, job.id, p, None, None, None, "");
        let t = Instant::now();
        let result = raised.and_then(|()| {
            catch("b_g2_msm", || -> BG2Result {
                let bases = query_bases(&job.srs, &job.r1cs)?;
                Ok(b_g2_msm(bases.b_g2, &splits.b, &sh.b_g2_pool)?)
            })
            .and_then(|r| r)
        });
        let took = t.elapsed();
        sh.rec(Ev::BG2End, job.id, p, None, None, None, "");
        let lowered = catch("throttle", || throttle.lower());
        let result = lowered.and(result);
        // The splits go back before the result, so the finisher owns them alone
        // and hands them to the deallocation policy.
        drop(splits);
        let _ = done.send((result, took));
    }
}

pub(super) fn finisher(sh: &Shared, rx: &Receiver<FinishItem>) {
    while let Ok(item) = rx.recv() {
        let FinishItem { gpu, b_g2, carry } = item;
        let Carry {
            job,
            partition: p,
            splits,
            r,
            s,
            public_inputs,
            permit,
            mut times,
            started,
        } = carry;
        let outcome = (|| -> Result<ProofPoints, ProveError> {
            let result = gpu?;
            let b_g2_sum = match (b_g2, result.b_g2) {
                (Some(rx), _) => {
                    let (sum, took) = rx.recv().map_err(|_| ProveError::Panicked {
                        stage: "b_g2_msm",
                        message: "the b_g2_msm thread dropped the task".into(),
                    })?;
                    times.b_g2_msm = took;
                    sum?
                }
                (None, Some(sum)) => sum,
                (None, None) => {
                    return Err(ProveError::Backend(
                        cuzk_gpu_backend::BackendError::Unsupported("the G2 MSM it was asked for"),
                    ))
                }
            };
            sh.rec(Ev::AssemblyStart, job.id, p, None, None, None, "");
            let t = Instant::now();
            let proof = assembly_stage(&job.srs.key, &result, b_g2_sum, r, s)?;
            times.assembly = t.elapsed();
            sh.rec(Ev::AssemblyEnd, job.id, p, None, None, None, "");
            if sh.cfg.verify {
                if let Some(v) = &job.verifier {
                    sh.rec(Ev::VerifyStart, job.id, p, None, None, None, "");
                    let ok = catch("verify", || v.verify(&proof, &public_inputs))?;
                    sh.rec(Ev::VerifyEnd, job.id, p, None, None, None, "");
                    match ok {
                        Ok(true) => {}
                        Ok(false) => return Err(ProveError::Verification(String::new())),
                        Err(e) => return Err(ProveError::Verification(format!(": {e}"))),
                    }
                }
            }
            Ok(proof)
        })();
        // The splits are shared with the b_g2 task, which is over by now.
        let t = Instant::now();
        match Arc::try_unwrap(splits) {
            Ok(splits) => {
                let bytes = splits.heap_size();
                sh.dealloc(job.id, p, Released::new(splits, bytes, "splits"));
            }
            Err(still_shared) => drop(still_shared),
        }
        times.dealloc += t.elapsed();
        // Recorded before the permit goes back, so a waiter's BUDGET_ACQUIRED never
        // precedes this release in the timeline.
        sh.rec(
            Ev::BudgetReleased,
            job.id,
            p,
            None,
            None,
            Some(permit.bytes()),
            "",
        );
        drop(permit);
        times.total = started.elapsed();
        match outcome {
            Ok(proof) => sh.partition_left(job.id, p, Some((proof, times))),
            Err(e) => sh.partition_failed(job.id, p, e.to_string()),
        }
    }
}
