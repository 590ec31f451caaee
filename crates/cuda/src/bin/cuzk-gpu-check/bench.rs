//! The benchmarks of `cuzk-gpu-check`: the table of BENCHMARKS.md and the tuning
//! sweeps.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use blstrs::{G1Affine, G2Affine, Scalar};
use cudarc::driver::CudaSlice;
use cuzk_alloc::{Abc, Density};
use cuzk_cuda::testing::gpu::{
    g2_points_as_bytes, points_as_bytes, scalar_from_repr, scalars_as_bytes, Affine2Repr,
    AffineRepr, FqRepr, FrRepr, Gpu,
};
use cuzk_cuda::testing::msm::{self, MsmPlan, MsmTuning, ScalarFormat, SumVariant};
use cuzk_cuda::testing::ntt::{Direction, HBuffers, Ntt, NttKernel};
use cuzk_cuda::{CudaBackend, CudaError, Tuning};
use cuzk_gpu_backend::{GpuBackend, SplitMsm};
use ff::Field;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::common::*;
/// Field product throughput (`field-bench`): Fr::mul, fr_mul_nt, and Fq's called and
/// inlined products, each thread two independent chains of products; the row for the
/// even/odd product rows (the only ones since the CIOS rows were removed). The chains' ends are
/// checked on the host for the first 64 threads (x * y^iters).
pub fn bench_fields(gpu: &Gpu, log: &Log) -> Result<()> {
    use blst::{blst_fp, blst_fp_mul};
    let variant = "eo";
    let mut r = rng(11);
    let threads = 132 * 8 * 256; // 8 blocks of 256 per SM of the H200
    let (block, blocks) = (256u32, (threads / 256) as u32);
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let checked = 64;
    let record = |name: &str, bad: usize, ms: f64, iters: u32| {
        log.check(
            &format!("{name} chains ({variant})"),
            bad == 0,
            &format!("{checked} threads, {bad} wrong"),
        );
        let products = 2.0 * threads as f64 * iters as f64;
        log.row(
            &format!("{name} ({variant} rows)"),
            &format!("{threads} threads"),
            ms,
            format!("{:.2}e9 products/s", products / ms / 1e6),
            "",
        );
    };
    // Fr: x, y, z per thread.
    let iters_fr = 512u32;
    let fr: Vec<Scalar> = (0..3 * threads).map(|_| Scalar::random(&mut r)).collect();
    for (which, name) in [(0u32, "Fr::mul"), (1, "fr_mul_nt")] {
        let mut d = gpu.upload::<FrRepr>(scalars_as_bytes(&fr))?;
        let ms = time5(gpu, || gpu.fr_mul_bench(cfg, &mut d, iters_fr, which))?;
        // 6 launches so far (warm-up and 5): x * y^(6 iters).
        let got = download_scalars(gpu, &d, 3 * checked)?;
        let e = [6 * iters_fr as u64];
        let bad = (0..checked)
            .filter(|&i| {
                let yp = fr[3 * i + 1].pow_vartime(e);
                got[3 * i] != fr[3 * i] * yp || got[3 * i + 2] != fr[3 * i + 2] * yp
            })
            .count();
        record(name, bad, ms, iters_fr);
    }
    // Fq: the same with blst_fp elements (random points' coordinates are in range).
    let iters_fq = 256u32;
    let pts = random_points(threads, &mut r);
    let mut fq: Vec<blst_fp> = Vec::with_capacity(3 * threads);
    for i in 0..threads {
        let raw: &blst::blst_p1_affine = pts[i].as_ref();
        let other: &blst::blst_p1_affine = pts[(i + 1) % threads].as_ref();
        fq.extend([raw.x, raw.y, other.x]);
    }
    // SAFETY: blst_fp is six u64 limbs, 48 bytes, no padding.
    let fq_bytes = unsafe {
        std::slice::from_raw_parts(fq.as_ptr().cast::<u8>(), std::mem::size_of_val(&fq[..]))
    };
    for (which, name) in [(0u32, "Fq::mul (call)"), (1, "Fq::mul_inl")] {
        let mut d = gpu.upload::<FqRepr>(fq_bytes)?;
        let ms = time5(gpu, || gpu.fq_mul_bench(cfg, &mut d, iters_fq, which))?;
        let got = gpu.download(&d, 3 * checked)?;
        let as_fp = |x: &FqRepr| {
            let mut f = blst_fp::default();
            for (j, l) in f.l.iter_mut().enumerate() {
                *l = x.0[2 * j] as u64 | (x.0[2 * j + 1] as u64) << 32;
            }
            f
        };
        let bad = (0..checked)
            .filter(|&i| {
                let (mut x, y, mut z) = (fq[3 * i], fq[3 * i + 1], fq[3 * i + 2]);
                for _ in 0..6 * iters_fq {
                    // SAFETY: valid field elements in, one written out.
                    unsafe {
                        blst_fp_mul(&mut x, &x, &y);
                        blst_fp_mul(&mut z, &z, &y);
                    }
                }
                as_fp(&got[3 * i]) != x || as_fp(&got[3 * i + 2]) != z
            })
            .count();
        record(name, bad, ms, iters_fq);
    }
    Ok(())
}

// ---------------------------------------------------------------- benchmarks

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn time5(gpu: &Gpu, mut f: impl FnMut() -> Result<(), CudaError>) -> Result<f64> {
    gpu.time_ms(&mut f)?; // warm-up
    let mut v = Vec::new();
    for _ in 0..5 {
        v.push(gpu.time_ms(&mut f)? as f64);
    }
    Ok(median(v))
}

/// The G1 MSM rows of the table and, unless `table_only`, the bucket-sum kernels,
/// the batch-affine windows, one profiled run per size and (with `sweeps`) the
/// piece and window sweeps that picked msm.rs's defaults. `tuning` is the
/// backend's: its launch parameters the defaults, its profiler the one profiled.
#[allow(clippy::too_many_arguments)]
pub fn bench_msm(
    gpu: &Gpu,
    tuning: &Tuning,
    log: &Log,
    r: &mut ChaCha20Rng,
    dsc: &CudaSlice<FrRepr>,
    max_msm: u32,
    table_only: bool,
    sweeps: bool,
) -> Result<()> {
    // MSM: 2^16 distinct points replicated on the device; random scalars.
    let distinct = random_points(1 << 16, r);
    let dsrc = gpu.upload::<AffineRepr>(points_as_bytes(&distinct))?;
    let mut bases = gpu.alloc_poisoned::<AffineRepr>(1 << max_msm)?;
    msm::replicate_bases(gpu, &dsrc, &mut bases)?;
    let peers = [(20, "21.2"), (22, "53.4"), (24, "155"), (26, "606")];
    for (lg, peer) in peers.into_iter().filter(|(l, _)| *l <= max_msm) {
        let n = 1usize << lg;
        let plan = MsmPlan::for_size(n);
        let ms = time5(gpu, || {
            let p = msm::msm(
                gpu,
                tuning,
                &bases,
                dsc,
                n,
                ScalarFormat::Montgomery,
                None,
                plan,
            )?;
            p.finish(gpu).map(|_| ())
        })?;
        log.row(
            "G1 MSM",
            &format!("2^{lg}"),
            ms,
            format!("{:.1} ns/pt, c={}", ms * 1e6 / n as f64, plan.c),
            peer,
        );
    }
    // The bucket-sum kernels (how the hot mixed addition is compiled) at the default
    // and two fixed windows, then window sweeps, then one profiled run per size: the
    // numbers that pick msm.rs's defaults.
    // Each sweep runs with a variant of the backend's launch parameters.
    let timed = |t: MsmTuning, n: usize, plan: MsmPlan| {
        let t = tuning.with_msm(t);
        time5(gpu, || {
            msm::msm(
                gpu,
                &t,
                &bases,
                dsc,
                n,
                ScalarFormat::Montgomery,
                None,
                plan,
            )?
            .finish(gpu)
            .map(|_| ())
        })
    };
    let base = tuning.msm;
    let default_variant = base.sum();
    let sizes = if table_only { vec![] } else { vec![24u32, 26] };
    for lg in sizes.into_iter().map(|l| l.min(max_msm)) {
        let n = 1usize << lg;
        for v in [SumVariant::CalledProducts, SumVariant::BatchAffine] {
            for plan in [MsmPlan::for_size(n), MsmPlan::for_window(16)] {
                let ms = timed(base.with_sum(v), n, plan)?;
                log.line(&format!(
                    "BENCH msm sum kernel {v:?} 2^{lg} c={}: {ms:.2} ms",
                    plan.c
                ));
            }
        }
        // Batch-affine rounds at other windows (their per-bucket work differs).
        let affine = base.with_sum(SumVariant::BatchAffine);
        for c in [16u32, 18, 20, 22] {
            let plan = MsmPlan::for_window(c);
            let ms = timed(affine, n, plan)?;
            log.line(&format!(
                "BENCH msm batch-affine 2^{lg} c={c} ({} windows): {ms:.2} ms",
                plan.nwin
            ));
        }
        // How many rounds stay affine before the XYZZ levels take over.
        for min_per in [16u64, 64, 128, 256] {
            let plan = MsmPlan::for_size(n);
            let ms = timed(affine.with_ba_min_per(min_per), n, plan)?;
            log.line(&format!(
                "BENCH msm batch-affine 2^{lg} c={} min {min_per} pairs/thread: {ms:.2} ms",
                plan.c
            ));
        }
        for c in [16u32, 19, 20].into_iter().filter(|_| sweeps) {
            for (piece, balanced) in [(64u32, false), (64, true), (32, true), (32, false)] {
                let plan = MsmPlan::for_window(c).with_pieces(piece, balanced);
                let ms = timed(base, n, plan)?;
                log.line(&format!(
                    "BENCH msm pieces 2^{lg} c={c} piece={piece} balanced={balanced}: {ms:.2} ms"
                ));
            }
        }
        for c in [16u32, 18, 19, 20, 21, 22].into_iter().filter(|_| sweeps) {
            let plan = MsmPlan::for_window(c);
            let ms = timed(base, n, plan)?;
            log.line(&format!(
                "BENCH msm window sweep 2^{lg} c={c} ({} windows): {ms:.2} ms",
                plan.nwin
            ));
        }
        // Profiled through the backend's profiler, switched on for these runs only.
        let was_on = tuning.profiler.enabled();
        tuning.profiler.set_enabled(true);
        for v in [default_variant, SumVariant::BatchAffine] {
            let t = tuning.with_msm(base.with_sum(v));
            for plan in [MsmPlan::for_size(n), MsmPlan::for_window(16)] {
                msm::msm(
                    gpu,
                    &t,
                    &bases,
                    dsc,
                    n,
                    ScalarFormat::Montgomery,
                    None,
                    plan,
                )?
                .finish(gpu)?;
            }
        }
        tuning.profiler.set_enabled(was_on);
        for rep in tuning.profiler.take() {
            log.line(&format!("BENCH phases {rep}"));
        }
    }
    drop(bases);
    Ok(())
}

/// G1 MSM (`msm-bench`, see bench_msm) and G2 MSM (`g2-bench`) timings.
/// `table_only`: the table's rows without the tuning sweeps (sum kernels, pieces,
/// windows, profiles, the CPU G2 context).
#[allow(clippy::too_many_arguments)]
pub fn bench(
    gpu: &Gpu,
    tuning: &Tuning,
    log: &Log,
    pool: &rayon::ThreadPool,
    quick: bool,
    table_only: bool,
    sweeps: bool,
    on: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut r = rng(6);
    let max_msm = if quick { 22 } else { 26 };
    let all_scalars = fast_scalars(1 << max_msm, r.next_u64());
    let dsc = gpu.upload::<FrRepr>(scalars_as_bytes(&all_scalars))?;
    drop(all_scalars);
    if on("msm-bench") {
        bench_msm(gpu, tuning, log, &mut r, &dsc, max_msm, table_only, sweeps)?;
    }

    // G2 MSM: 2^14 distinct random points replicated on the device, the same random
    // scalars; then cuzk-msm-cpu's msm_g2 at the same sizes on this host's threads
    // (once each, bases replicated the same way) for context.
    let distinct2 = random_points_g2(1 << 14, &mut r);
    let dsrc2 = gpu.upload::<Affine2Repr>(g2_points_as_bytes(&distinct2))?;
    let max_g2 = 22usize;
    let mut bases2 = gpu.alloc_poisoned::<Affine2Repr>(1 << max_g2)?;
    msm::replicate_bases(gpu, &dsrc2, &mut bases2)?;
    // Both G2 bucket sums (`msm_sum_g2`), the default's row first, in turn.
    let default_g2 = tuning.msm.sum_g2();
    let other_g2 = match default_g2 {
        SumVariant::BatchAffine => SumVariant::CalledProducts,
        SumVariant::CalledProducts => SumVariant::BatchAffine,
    };
    for lg in [20usize, 22].into_iter().filter(|_| on("g2-bench")) {
        let n = 1usize << lg;
        let plan = MsmPlan::for_size(n);
        for v in [default_g2, other_g2] {
            let t = tuning.with_msm(tuning.msm.with_sum_g2(v));
            let ms = time5(gpu, || {
                let p = msm::msm(
                    gpu,
                    &t,
                    &bases2,
                    &dsc,
                    n,
                    ScalarFormat::Montgomery,
                    None,
                    plan,
                )?;
                p.finish(gpu).map(|_| ())
            })?;
            let name = match v {
                SumVariant::BatchAffine => "G2 MSM (affine)",
                SumVariant::CalledProducts => "G2 MSM (calls)",
            };
            log.row(
                name,
                &format!("2^{lg}"),
                ms,
                format!("{:.1} ns/pt, c={}", ms * 1e6 / n as f64, plan.c),
                "-",
            );
        }
    }
    drop(bases2);
    let host_scalars = fast_scalars(1 << max_g2, r.next_u64());
    let host_bases: Vec<G2Affine> = (0..1usize << max_g2)
        .into_par_iter()
        .map(|i| distinct2[i % distinct2.len()])
        .collect();
    let context = if table_only || !on("g2-bench") {
        vec![]
    } else {
        vec![20usize, 22]
    };
    for lg in context {
        let n = 1usize << lg;
        let t = Instant::now();
        cuzk_msm_cpu::msm_g2(&host_bases[..n], &host_scalars[..n], pool)?;
        log.line(&format!(
            "BENCH cpu msm_g2 2^{lg}: {:.1} ms ({} threads, once)",
            t.elapsed().as_secs_f64() * 1e3,
            pool.current_num_threads()
        ));
    }
    drop(host_bases);
    drop(dsc);
    Ok(())
}

/// NTT (every kernel, per pass at 2^24 and 2^27) and H timings: its own section
/// (`--skip msm-bench` leaves the MSM timings out of an NTT visit). `table_only`:
/// the default kernel's rows only.
pub fn bench_ntt(
    gpu: &Gpu,
    ntt: &Ntt,
    log: &Log,
    quick: bool,
    table_only: bool,
    on: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut r = rng(7);
    // NTT: forward, natural order in and out, data already on the device.
    let max_ntt = if quick { 24 } else { 27 };
    let data = fast_scalars(1 << max_ntt, r.next_u64());
    let mut d = gpu.upload::<FrRepr>(scalars_as_bytes(&data))?;
    drop(data);
    for (lg, peer) in [(20, "0.28"), (24, "4.75"), (26, "23.8"), (27, "44.4")]
        .into_iter()
        .filter(|(l, _)| *l <= max_ntt && on("ntt-bench"))
    {
        // The table rows are the default kernel; BENCH lines compare all of them.
        for kernel in KERNELS {
            if table_only && kernel != NttKernel::DEFAULT {
                continue;
            }
            ntt.set_kernel(kernel);
            let r = (|| -> Result<(f64, f64, f64, Vec<String>)> {
                let full = time5(gpu, || ntt.ntt(gpu, &mut d, lg, Direction::Forward, false))?;
                let dif = time5(gpu, || ntt.dif(gpu, &mut d, lg, Direction::Forward))?;
                let dit = time5(gpu, || ntt.dit(gpu, &mut d, lg, Direction::Inverse))?;
                // Each pass of the kernel alone (where the time goes).
                let mut per_pass = Vec::new();
                if !table_only && (lg == 24 || lg == 27) {
                    for (i, (lo, k, c, _)) in Ntt::passes(lg).into_iter().enumerate() {
                        let dif = time5(gpu, || {
                            ntt.run_pass(gpu, &mut d, lg, i, false, Direction::Forward)
                        })?;
                        let dit = time5(gpu, || {
                            ntt.run_pass(gpu, &mut d, lg, i, true, Direction::Forward)
                        })?;
                        per_pass.push(format!(
                            "BENCH ntt {} 2^{lg} pass {i} (lo {lo}, k {k}, c {c}): dif {dif:.3} ms, dit {dit:.3} ms",
                            kernel_name(kernel)
                        ));
                    }
                }
                Ok((full, dif, dit, per_pass))
            })();
            ntt.set_kernel(NttKernel::DEFAULT);
            let (ms, dif, dit, per_pass) = r?;
            let kn = kernel_name(kernel);
            log.line(&format!(
                "BENCH ntt {kn} 2^{lg}: fwd {ms:.3} ms, dif-only {dif:.3} ms, dit-only {dit:.3} ms"
            ));
            if kernel == NttKernel::DEFAULT {
                log.row(
                    &format!("NTT fwd ({kn} kernel)"),
                    &format!("2^{lg}"),
                    ms,
                    format!("{:.2} ns/elem", ms * 1e6 / (1u64 << lg) as f64),
                    peer,
                );
            }
            for l in per_pass {
                log.line(&l);
            }
        }
    }
    drop(d);

    // H: the whole chain from host a, b, c (upload, 6 transforms, combine) to h on
    // the device, wall clock with the stream synchronised: with a, b, c page-locked
    // by the call (12 GiB at 2^27: the registration is most of it), then registered
    // beforehand, as the engine stages them before its GPU lock.
    for lg in [24u32, 27]
        .into_iter()
        .filter(|&l| l <= max_ntt && on("h-bench"))
    {
        let n = 1usize << lg;
        let a = fast_scalars(n, r.next_u64());
        let b = fast_scalars(n, r.next_u64());
        let c = fast_scalars(n, r.next_u64());
        let timed_h = |buffers: HBuffers| -> Result<f64> {
            let mut v = Vec::new();
            for i in 0..6 {
                let t = Instant::now();
                let h = ntt.compute_h(gpu, &a, &b, &c, buffers)?;
                gpu.sync()?;
                drop(h);
                if i > 0 {
                    v.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            Ok(median(v))
        };
        let per = |ms: f64| format!("{:.2} ns/elem", ms * 1e6 / n as f64);
        let ms = timed_h(HBuffers::Three)?;
        log.row(
            "H (pinned by the call + upload + NTTs)",
            &format!("2^{lg}"),
            ms,
            per(ms),
            "-",
        );
        let mut regs = Vec::new();
        for v in [&a, &b, &c] {
            // SAFETY: a, b, c outlive `regs`, dropped right after the timing.
            regs.push(unsafe {
                cuzk_cuda::testing::raw::HostRegistration::new(gpu.context(), scalars_as_bytes(v))
            }?);
        }
        let ms = timed_h(HBuffers::Three)?;
        // In two buffers (a 16 GB card's H): c's upload after the combine.
        let two = timed_h(HBuffers::Two)?;
        drop(regs);
        log.row(
            "H (pre-staged: upload + NTTs)",
            &format!("2^{lg}"),
            ms,
            per(ms),
            "-",
        );
        log.row(
            "H (pre-staged, two buffers: c uploaded after the combine)",
            &format!("2^{lg}"),
            two,
            format!("{} ({:.2}x three)", per(two), two / ms),
            "-",
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- partition bench

/// A PoRep-shaped aux vector: 95.7% of the values 0 or 1 (the share of the real
/// partition's SHA-256/Poseidon bit gadgets that `PorepLike` reproduces), the rest
/// uniform.
pub fn porep_aux(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(ci, ch)| {
        let mut r = ChaCha20Rng::seed_from_u64(seed ^ (ci as u64) << 20);
        for s in ch {
            match r.gen_range(0..1000u32) {
                0..=479 => {}
                480..=956 => *s = Scalar::ONE,
                _ => {
                    let mut l = [0u32; 8];
                    for x in &mut l {
                        *x = r.next_u32();
                    }
                    l[7] &= 0x0fff_ffff;
                    *s = scalar_from_repr(&FrRepr(l));
                }
            }
        }
    });
    v
}

/// `len` bases cycling through `distinct` (timing needs the memory and the sizes,
/// not independent points).
pub fn cycle_bases(distinct: &[G1Affine], len: usize) -> Vec<G1Affine> {
    (0..len)
        .into_par_iter()
        .map(|i| distinct[i % distinct.len()])
        .collect()
}

/// The GPU region of one PoRep-shaped partition of 2^lg constraints through
/// `CudaBackend::prove_partition_ref` — H (upload a, b, c and the NTT chain), the H
/// MSM, and ones + tails for L, A and B_G1 — with every base vector already resident
/// (the first call uploads them and is not timed). The real partition's shape:
/// 328 public inputs, aux ≈ 99.9% of the domain, A holding 99.7% of the aux, B 25.4%
/// and only ONE among the inputs. Timed twice: with a, b, c page-locked by the call
/// itself, and with them registered beforehand (the engine's pre-staging).
/// One partition call with `backend`'s own profiler on, its reports logged after
/// `label` (another backend's profiler stays as it is).
fn profiled_call(
    backend: &CudaBackend,
    job: cuzk_gpu_backend::PartitionJobRef<'_>,
    log: &Log,
    label: &str,
) -> Result<()> {
    let profiler = &backend.tuning().profiler;
    let was_on = profiler.enabled();
    profiler.set_enabled(true);
    let done = backend.prove_partition_ref(job).map_err(|e| anyhow!("{e}"));
    profiler.set_enabled(was_on);
    done?;
    for rep in profiler.take() {
        log.line(&format!("{label} {rep}"));
    }
    Ok(())
}

/// Tells backends to forget host ranges when dropped.
struct Forget<'a>(Vec<&'a CudaBackend>, Vec<std::ops::Range<usize>>);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        for b in &self.0 {
            b.forget_bases(&self.1);
        }
    }
}

pub fn bench_partition(
    backend: &CudaBackend,
    streamed: Vec<(&str, &CudaBackend)>,
    log: &Log,
    pool: &Arc<rayon::ThreadPool>,
    lg: u32,
) -> Result<()> {
    let t = Instant::now();
    let mut r = rng(7 + lg as u64);
    let n = 1usize << lg;
    let inputs = 328usize;
    let aux_n = n - n / 1000 - inputs;
    let abc = Abc {
        a: fast_scalars(n, r.next_u64()),
        b: fast_scalars(n, r.next_u64()),
        c: fast_scalars(n, r.next_u64()),
    };
    let mut inp = fast_scalars(inputs, r.next_u64());
    inp[0] = Scalar::ONE;
    let aux = porep_aux(aux_n, r.next_u64());
    let mut a_aux = Density::new(aux_n);
    let mut b_aux = Density::new(aux_n);
    let mut b_in = Density::new(inputs);
    b_in.set(0);
    for i in 0..aux_n {
        let x = r.next_u32() % 1000;
        if x < 997 {
            a_aux.set(i);
        }
        if x < 254 {
            b_aux.set(i);
        }
    }
    let l_split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, pool)?;
    let a_split = cuzk_msm_cpu::prep_msm(&inp, None, &aux, Some(&a_aux), pool)?;
    let b_split = cuzk_msm_cpu::prep_msm(&inp, Some(&b_in), &aux, Some(&b_aux), pool)?;
    drop(aux);
    let distinct = random_points(1 << 16, &mut r);
    let h_bases = cycle_bases(&distinct, n - 1);
    let l_bases = cycle_bases(&distinct, l_split.num_bases());
    let a_bases = cycle_bases(&distinct, a_split.num_bases());
    let b_bases = cycle_bases(&distinct, b_split.num_bases());
    // The streamed backends forget the bases before they are freed, however this
    // ends: they keep them page-locked where they lie until then.
    let _forget = Forget(
        streamed.iter().map(|(_, b)| *b).collect(),
        [&h_bases, &l_bases, &a_bases, &b_bases]
            .map(|v| v.as_ptr() as usize..v.as_ptr() as usize + std::mem::size_of_val(&v[..]))
            .to_vec(),
    );
    let tails = [&l_split, &a_split, &b_split].map(|s| s.tail_indices().len());
    log.line(&format!(
        "  partition 2^{lg}: inputs made in {:.1?}; tails L/A/B = {:?}, bases {:.1} GiB",
        t.elapsed(),
        tails,
        (h_bases.len() + l_bases.len() + a_bases.len() + b_bases.len()) as f64 * 96.0
            / (1u64 << 30) as f64
    ));
    let job = || cuzk_gpu_backend::PartitionJobRef {
        abc: cuzk_gpu_backend::AbcRef {
            a: &abc.a,
            b: &abc.b,
            c: &abc.c,
        },
        h_bases: &h_bases,
        l: SplitMsm {
            bases: &l_bases,
            split: l_split.as_ref(),
        },
        a: SplitMsm {
            bases: &a_bases,
            split: a_split.as_ref(),
        },
        b_g1: SplitMsm {
            bases: &b_bases,
            split: b_split.as_ref(),
        },
        b_g2: None,
    };
    let t = Instant::now();
    // The resident result, which every streamed variant below must equal.
    let want = backend
        .prove_partition_ref(job())
        .map_err(|e| anyhow!("{e}"))?;
    log.line(&format!(
        "  partition 2^{lg}: first call (uploads the bases) {:.1?}",
        t.elapsed()
    ));
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        backend
            .prove_partition_ref(job())
            .map_err(|e| anyhow!("{e}"))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let ms = median(times);
    log.row(
        "PoRep-shaped partition, GPU region (a, b, c pinned by the call)",
        &format!("2^{lg}"),
        ms,
        format!("{:.2} ns/constraint", ms * 1e6 / n as f64),
        "-",
    );
    // Pre-staged: a, b, c registered before the call (the backend finds them so).
    let ctx = backend.with_gpu(|gpu, _| gpu.context().clone());
    let mut regs = Vec::new();
    let t = Instant::now();
    for v in [&abc.a, &abc.b, &abc.c] {
        // SAFETY: `abc` outlives `regs`, dropped at the end of this function.
        regs.push(unsafe {
            cuzk_cuda::testing::raw::HostRegistration::new(&ctx, scalars_as_bytes(v))
        }?);
    }
    let pin_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        backend
            .prove_partition_ref(job())
            .map_err(|e| anyhow!("{e}"))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // Profiled by this backend's own profiler (another backend's stays as it is).
    profiled_call(backend, job(), log, "BENCH phases")?;
    // The same partition with its bases streamed from host memory (the path of GPUs
    // smaller than the parameters), a, b, c still pre-staged. The untimed first call
    // also allocates the backend's pinned staging buffers (kept across partitions).
    for &(how, sb) in &streamed {
        let t = Instant::now();
        let got = sb.prove_partition_ref(job()).map_err(|e| anyhow!("{e}"))?;
        let same = got == want;
        log.check(
            &format!("partition 2^{lg} streamed ({how}) equals resident"),
            same,
            if same { "" } else { "the sums differ" },
        );
        let warm = sb.take_stream_stats();
        log.line(&format!(
            "  partition 2^{lg} streamed ({how}): first call (pins {:.2} GiB of staging buffers{}) {:.1?}",
            warm.pinned_bytes as f64 / (1u64 << 30) as f64,
            if warm.direct_bytes > 0 { " and registers the bases" } else { "" },
            t.elapsed()
        ));
        let mut st = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            sb.prove_partition_ref(job()).map_err(|e| anyhow!("{e}"))?;
            st.push(t.elapsed().as_secs_f64() * 1e3);
        }
        // Host side of the timed calls: the copies into the staging buffers and the
        // waits for a buffer's previous DMA (per call, averaged).
        let s = sb.take_stream_stats();
        let calls = st.len() as f64;
        let copy_ms = s.host_copy.as_secs_f64() * 1e3 / calls;
        log.line(&format!(
            "BENCH streamed 2^{lg} ({how}): per call {} chunks, {:.2} GiB ({:.2} GiB DMA'd in place), host copy {copy_ms:.1} ms \
             ({:.1} GB/s), host waits for DMA {:.1} ms; {:.2} GiB pinned",
            s.chunks as f64 / calls,
            s.bytes as f64 / calls / (1u64 << 30) as f64,
            s.direct_bytes as f64 / calls / (1u64 << 30) as f64,
            (s.bytes - s.direct_bytes) as f64 / calls / 1e6 / copy_ms.max(1e-9),
            s.host_wait.as_secs_f64() * 1e3 / calls,
            s.pinned_bytes as f64 / (1u64 << 30) as f64,
        ));
        // One profiled call: where the streamed path's device time goes (H MSM,
        // L, A, B against the resident phases above).
        profiled_call(sb, job(), log, &format!("BENCH phases streamed ({how})"))?;
        let _ = sb.take_stream_stats();
        let ms = median(st);
        log.row(
            &format!(
                "PoRep-shaped partition, GPU region (pre-staged, bases streamed, {how}, warmed up)"
            ),
            &format!("2^{lg}"),
            ms,
            format!("{:.2} ns/constraint", ms * 1e6 / n as f64),
            "-",
        );
    }
    drop(regs);
    let ms = median(times);
    log.row(
        "PoRep-shaped partition, GPU region (a, b, c pre-staged)",
        &format!("2^{lg}"),
        ms,
        format!(
            "{:.2} ns/constraint; pinning took {pin_ms:.0} ms",
            ms * 1e6 / n as f64
        ),
        "-",
    );
    backend.evict_bases();
    Ok(())
}
