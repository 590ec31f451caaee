//! The NTT kernels themselves, compiled for the host, against the CPU NTT of
//! `cuzk-gpu-backend`: `tests/host/ntt_host.cpp` includes `kernels/field.cu` and
//! `kernels/ntt.cu` as they are and runs each launch block by block, a block's threads
//! as host threads (barriers and warp shuffles included). The launches are the ones
//! [`Ntt`] makes ([`pass_launch`], [`bitrev_launch`], `h_from`'s), so the plans, the
//! launch shapes and every line of the kernels' index arithmetic are checked without
//! a GPU. Needs a C++17 compiler (`$CXX`, else `c++`): without one these tests fail.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use super::*;

fn bitrev(x: u32, bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (32 - bits)
    }
}

/// The harness binary, built once per test process.
fn harness() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            let out = std::env::temp_dir().join(format!("cuzk-ntt-host-{}", std::process::id()));
            let status = Command::new(&cxx)
                .args(["-std=c++17", "-O2", "-pthread", "-I"])
                .arg(dir.join("kernels"))
                .arg(dir.join("tests/host/ntt_host.cpp"))
                .arg("-o")
                .arg(&out)
                .status()
                .unwrap_or_else(|e| panic!("no C++17 compiler ({cxx}: {e}); set CXX"));
            assert!(
                status.success(),
                "kernels/ntt.cu does not compile for the host"
            );
            out
        })
        .clone()
}

/// An argument of a host launch.
enum Arg {
    Buf(u32),
    U(u32),
    Fr(Scalar),
}

/// One harness process: buffers by id, launches, reads.
struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// Buffer ids.
const DATA: u32 = 0;
const W: u32 = 1;
/// T0, T1, T18 of a direction: 2, 3, 4 (forward) and 5, 6, 7 (inverse).
fn table_ids(dir: Direction) -> [u32; 3] {
    match dir {
        Direction::Forward => [2, 3, 4],
        Direction::Inverse => [5, 6, 7],
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Host {
    /// A harness with both directions' root tables loaded.
    fn new() -> Self {
        let mut child = Command::new(harness())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the NTT harness");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut h = Self {
            child,
            stdin,
            stdout,
        };
        for (dir, w) in [
            (Direction::Forward, Scalar::ROOT_OF_UNITY),
            (Direction::Inverse, Scalar::ROOT_OF_UNITY_INV),
        ] {
            for (id, t) in table_ids(dir).into_iter().zip(twiddle_tables(w)) {
                h.set(id, &t);
            }
        }
        h
    }

    fn command(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("writing to the NTT harness");
        let mut out = String::new();
        self.stdout
            .read_line(&mut out)
            .expect("reading the NTT harness");
        assert!(
            !out.is_empty(),
            "the NTT harness stopped at: {}",
            &line[..line.len().min(120)]
        );
        out.trim_end().to_owned()
    }

    fn set(&mut self, id: u32, v: &[Scalar]) {
        let line = format!("buf {id} {}", hex(scalars_as_bytes(v)));
        assert_eq!(self.command(&line), "ok");
    }

    fn get(&mut self, id: u32) -> Vec<Scalar> {
        let h = self.command(&format!("get {id}"));
        (0..h.len() / 64)
            .map(|i| {
                let mut r = FrRepr::default();
                for (w, limb) in r.0.iter_mut().enumerate() {
                    let at = 64 * i + 8 * w;
                    let b: Vec<u8> = (0..4)
                        .map(|j| u8::from_str_radix(&h[at + 2 * j..at + 2 * j + 2], 16).unwrap())
                        .collect();
                    *limb = u32::from_le_bytes(b.try_into().unwrap());
                }
                crate::testing::gpu::scalar_from_repr(&r)
            })
            .collect()
    }

    fn launch(&mut self, name: &str, cfg: LaunchConfig, args: &[Arg]) {
        let mut line = format!(
            "launch {name} {} {} {}",
            cfg.grid_dim.0, cfg.block_dim.0, cfg.shared_mem_bytes
        );
        for a in args {
            line.push(' ');
            line += &match a {
                Arg::Buf(id) => format!("b{id}"),
                Arg::U(v) => format!("u{v}"),
                Arg::Fr(x) => format!("f{}", hex(scalars_as_bytes(std::slice::from_ref(x)))),
            };
        }
        assert_eq!(self.command(&line), "ok", "{name}");
    }

    /// r2wg's table W for 2^log_n, built by the kernel that builds it on the device.
    fn global_table(&mut self, log_n: u32) {
        let half = 1usize << (log_n - 1);
        self.set(W, &vec![Scalar::ZERO; half]);
        let [t0, t1, _] = table_ids(Direction::Forward);
        self.launch(
            "ntt_r2wg_table",
            grid(half, 256),
            &[Arg::Buf(W), Arg::U(log_n), Arg::Buf(t0), Arg::Buf(t1)],
        );
    }

    /// One pass as [`Ntt::pass`] launches it, on buffer `data`.
    fn pass(
        &mut self,
        data: u32,
        kernel: NttKernel,
        log_n: u32,
        p: Pass,
        dit: bool,
        dir: Direction,
    ) {
        let l = pass_launch(kernel, log_n, p, dit, dir);
        let [t0, t1, t18] = table_ids(dir).map(Arg::Buf);
        let mut args = vec![Arg::Buf(data)];
        match l.args {
            PassArgs::Global(u) => {
                args.extend(u.map(Arg::U));
                args.push(Arg::Buf(W));
            }
            PassArgs::GlobalSmall(u) => {
                args.extend(u.map(Arg::U));
                args.push(Arg::Buf(W));
            }
            PassArgs::Tables(u) => args.extend(u.map(Arg::U).into_iter().chain([t0, t1, t18])),
            PassArgs::Radix2(u) => args.extend(u.map(Arg::U).into_iter().chain([t0, t1])),
        }
        self.launch(l.name, l.cfg, &args);
    }

    fn dif(&mut self, data: u32, kernel: NttKernel, log_n: u32, plan: &[Pass], dir: Direction) {
        for &p in plan {
            self.pass(data, kernel, log_n, p, false, dir);
        }
    }

    fn dit(&mut self, data: u32, kernel: NttKernel, log_n: u32, plan: &[Pass], dir: Direction) {
        for &p in plan.iter().rev() {
            self.pass(data, kernel, log_n, p, true, dir);
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `plan` with another choice of c (the kernels take any c <= lo with k + c <= 10).
fn plan_with_c(log_n: u32, f: impl Fn(&Pass) -> u32) -> Vec<Pass> {
    plan(log_n)
        .into_iter()
        .map(|p| Pass { c: f(&p), ..p })
        .collect()
}

/// A plan like `plan`'s with a given number of passes (small transforms then have
/// middle passes, with both a twiddle in and one out, as 2^21 and up do).
fn plan_split(log_n: u32, passes: u32) -> Vec<Pass> {
    let base = log_n / passes;
    let extra = log_n % passes;
    let mut out = Vec::new();
    let (mut hi, mut prev_k) = (log_n, 0);
    for i in 0..passes {
        let k = base + u32::from(i < extra);
        let lo = hi - k;
        out.push(Pass {
            lo,
            k,
            c: lo.min(MAX_PASS_BITS - k),
            prev_k,
        });
        prev_k = k;
        hi = lo;
    }
    out
}

fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
}

/// Every kernel's DIF (natural in, bit-reversed out) and DIT (bit-reversed in,
/// natural out) transforms of 2^log_n random points, both directions, for the
/// default plan and (with `more_plans`) others, against the CPU domain's.
fn check_size(host: &mut Host, log_n: u32, kernels: &[NttKernel], more_plans: bool) {
    let n = 1usize << log_n;
    let pool = pool();
    let mut rng = ChaCha20Rng::seed_from_u64(u64::from(log_n));
    let input: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let dom = cuzk_gpu_backend::ntt::Domain::new(log_n).unwrap();
    let mut fwd = input.clone();
    dom.fft(&mut fwd, &pool).unwrap();
    let mut inv = input.clone();
    dom.ifft(&mut inv, &pool).unwrap();
    let nn = Scalar::from(n as u64);
    inv.iter_mut().for_each(|x| *x *= nn);
    let br = |v: &[Scalar]| -> Vec<Scalar> {
        (0..n)
            .map(|i| v[bitrev(i as u32, log_n) as usize])
            .collect()
    };
    let input_br = br(&input);
    let mut plans = vec![("default c", plan(log_n))];
    let zero_c =
        |v: Vec<Pass>| -> Vec<Pass> { v.into_iter().map(|p| Pass { c: 0, ..p }).collect() };
    for passes in [3u32, 4] {
        if more_plans && log_n >= 3 * passes {
            plans.push(("split", plan_split(log_n, passes)));
            plans.push(("split, c = 0", zero_c(plan_split(log_n, passes))));
        }
    }
    if more_plans && log_n > 1 {
        plans.push(("c = 0", plan_with_c(log_n, |_| 0)));
        plans.push((
            "c = min(lo, 2)",
            plan_with_c(log_n, |p| p.lo.min(2).min(MAX_PASS_BITS - p.k)),
        ));
    }
    host.global_table(log_n);
    for (pname, pl) in &plans {
        for &kernel in kernels {
            for (dir, want) in [(Direction::Forward, &fwd), (Direction::Inverse, &inv)] {
                let what = format!("2^{log_n} {pname} {kernel:?} {dir:?}");
                host.set(DATA, &input);
                host.dif(DATA, kernel, log_n, pl, dir);
                assert!(br(&host.get(DATA)) == *want, "dif {what}");
                host.set(DATA, &input_br);
                host.dit(DATA, kernel, log_n, pl, dir);
                assert!(host.get(DATA) == *want, "dit {what}");
            }
        }
    }
}

#[test]
fn every_pass_kernel_matches_the_cpu_ntt_small() {
    let mut host = Host::new();
    for log_n in 1..=11 {
        check_size(&mut host, log_n, &NttKernel::ALL, true);
    }
}

#[test]
fn every_pass_kernel_matches_the_cpu_ntt_larger() {
    let mut host = Host::new();
    // 2^13: two passes with c > 0 and a full 1024-element tile; the default kernel
    // at 2^15 (three passes of 5 bits, one of them in the middle).
    check_size(&mut host, 13, &NttKernel::ALL, false);
    check_size(&mut host, 15, &[NttKernel::DEFAULT], false);
}

/// The natural-order bit reversal (`bitrev_tiled` from 2^8, else `bitrev_permute`),
/// with and without the scale factor.
#[test]
fn the_bit_reversals_reverse_the_bits() {
    let mut host = Host::new();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    for log_n in [1u32, 5, 7, 8, 9, 12] {
        let n = 1usize << log_n;
        let input: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let s = Scalar::random(&mut rng);
        {
            for scale in [None, Some(s)] {
                let (name, cfg) = bitrev_launch(log_n);
                host.set(DATA, &input);
                let f = scale.unwrap_or(Scalar::ONE);
                host.launch(
                    name,
                    cfg,
                    &[
                        Arg::Buf(DATA),
                        Arg::U(log_n),
                        Arg::U(u32::from(scale.is_some())),
                        Arg::Fr(f),
                    ],
                );
                let d = host.get(DATA);
                let ok = (0..n).all(|i| d[bitrev(i as u32, log_n) as usize] == input[i] * f);
                assert!(ok, "{name} 2^{log_n} scale {}", scale.is_some());
            }
        }
    }
}

/// `Ntt::h_from`'s launches (the coset transforms of a and b, the DIF of c,
/// `ab_combine`, the DIF of the product and `bitrev_scale_sub_copy`) on the host
/// against the CPU H chain of `cuzk-gpu-backend`.
#[test]
fn h_from_s_launches_match_the_cpu_chain() {
    let mut host = Host::new();
    let pool = pool();
    let kernel = NttKernel::DEFAULT;
    for (log_n, len) in [(1u32, 2usize), (5, 29), (10, 1024), (12, 3001)] {
        let n = 1usize << log_n;
        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(log_n) + 100);
        let mut abc: [Vec<Scalar>; 3] =
            std::array::from_fn(|_| (0..len).map(|_| Scalar::random(&mut rng)).collect());
        let want = cuzk_gpu_backend::compute_h(
            cuzk_gpu_backend::Abc {
                a: abc[0].clone(),
                b: abc[1].clone(),
                c: abc[2].clone(),
            },
            &pool,
        )
        .unwrap();
        for v in &mut abc {
            v.resize(n, Scalar::ZERO);
        }
        host.global_table(log_n);
        let pl = plan(log_n);
        let pows = |host: &mut Host, kind: PowKind, ids: [u32; 2]| {
            let g = Scalar::MULTIPLICATIVE_GENERATOR;
            let n_inv = Scalar::from(n as u64).invert().unwrap();
            let (base, scale) = match kind {
                PowKind::Coset => (g, Scalar::ONE),
                PowKind::CosetOverN => (g, n_inv),
                PowKind::CosetInvOverN => (g.invert().unwrap(), n_inv),
            };
            host.set(ids[0], &powers_s(base, scale, TABLE));
            host.set(ids[1], &powers_s(pow2k(base, 16), Scalar::ONE, POW_HI));
        };
        let (a_id, b_id, c_id) = (10, 11, 12);
        let (p_over_n, p_inv) = ([20, 21], [22, 23]);
        pows(&mut host, PowKind::CosetOverN, p_over_n);
        pows(&mut host, PowKind::CosetInvOverN, p_inv);
        for (id, v) in [(a_id, &abc[0]), (b_id, &abc[1]), (c_id, &abc[2])] {
            host.set(id, v);
        }
        // a and b to the coset (Ntt::to_coset), c to its bit-reversed coefficients.
        for id in [a_id, b_id] {
            host.dif(id, kernel, log_n, &pl, Direction::Inverse);
            host.launch(
                "scale_by_powers",
                grid(n, 256),
                &[
                    Arg::Buf(id),
                    Arg::U(log_n),
                    Arg::U(1),
                    Arg::Buf(p_over_n[0]),
                    Arg::Buf(p_over_n[1]),
                ],
            );
            host.dit(id, kernel, log_n, &pl, Direction::Forward);
        }
        host.dif(c_id, kernel, log_n, &pl, Direction::Inverse);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let zinv = (g.pow_vartime([n as u64]) - Scalar::ONE).invert().unwrap();
        let n_inv = Scalar::from(n as u64).invert().unwrap();
        host.launch(
            "ab_combine",
            grid(n, 256),
            &[
                Arg::Buf(a_id),
                Arg::Buf(b_id),
                Arg::U(n as u32),
                Arg::Fr(zinv),
            ],
        );
        host.dif(a_id, kernel, log_n, &pl, Direction::Inverse);
        host.launch(
            "bitrev_scale_sub_copy",
            grid(n, 256),
            &[
                Arg::Buf(a_id),
                Arg::Buf(c_id),
                Arg::Buf(b_id),
                Arg::U(log_n),
                Arg::Buf(p_inv[0]),
                Arg::Buf(p_inv[1]),
                Arg::Fr(zinv * n_inv),
            ],
        );
        let out = host.get(b_id);
        assert_eq!(out[..n - 1], want[..], "2^{log_n}, {len} constraints");
        // The two-buffer H's last step (`HBuffers::Two`): the same, in place in
        // a's buffer (the copy above read a and c and wrote only b).
        host.launch(
            "bitrev_scale_sub",
            grid(n, 256),
            &[
                Arg::Buf(a_id),
                Arg::Buf(c_id),
                Arg::U(log_n),
                Arg::Buf(p_inv[0]),
                Arg::Buf(p_inv[1]),
                Arg::Fr(zinv * n_inv),
            ],
        );
        let out = host.get(a_id);
        assert_eq!(
            out[..n - 1],
            want[..],
            "in place: 2^{log_n}, {len} constraints"
        );
    }
}
