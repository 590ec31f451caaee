// Pippenger, step 4: each window's sum of d S_d over its buckets S_1..S_B.
//
// `bucket_reduce`: thread (w, t) takes buckets [t L, t L + L) of window w and
// computes sum_i (t L + i + 1) S_{tL+i} as the running sum sum_i (i + 1) S_{tL+i}
// (from the top bucket down: running += S; acc += running) plus (t L) times the
// chunk's total (double-and-add). `group_sum` then adds `group` consecutive
// points, pass after pass, until one point a window is left.

struct Params {
    // bucket_reduce: buckets a window, buckets a thread, threads a window,
    // threads in all. group_sum: points in, points a thread, points out, first
    // slot written.
    a: u32,
    b: u32,
    c: u32,
    d: u32,
    // Always 0: opaque_zero() (g1.wgsl).
    zero: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> pts_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> pts_out: array<u32>;

// Threads a workgroup: a pipeline constant (MsmConfig::workgroup_size).
override WG: u32 = 64u;

fn opaque_zero() -> u32 {
    return params.zero;
}

fn load_in(slot: u32) -> Xyzz {
    let i = slot * 48u;
    var p: Xyzz;
    for (var k = 0u; k < 12u; k++) {
        p.x[k] = pts_in[i + k];
        p.y[k] = pts_in[i + 12u + k];
        p.zz[k] = pts_in[i + 24u + k];
        p.zzz[k] = pts_in[i + 36u + k];
    }
    return p;
}

fn store_out(slot: u32, p: Xyzz) {
    let i = slot * 48u;
    for (var k = 0u; k < 12u; k++) {
        pts_out[i + k] = p.x[k];
        pts_out[i + 12u + k] = p.y[k];
        pts_out[i + 24u + k] = p.zz[k];
        pts_out[i + 36u + k] = p.zzz[k];
    }
}

@compute @workgroup_size(WG)
fn bucket_reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let g = (wid.y * nwg.x + wid.x) * WG + lid;
    let per_window = params.a;
    let per_thread = params.b;
    let threads = params.c;
    if g >= params.d {
        return;
    }
    let w = g / threads;
    let t = g % threads;
    let first = w * per_window + t * per_thread;
    let k = t * per_thread;
    // One xyzz_add call site (see g1.wgsl) driven by a small state machine:
    // phase 0, 2 L steps: running += S (from the top bucket down), acc += running;
    // phase 1: m = k running by double-and-add from the top bit of k;
    // phase 2: acc += m.
    var running = xyzz_infinity();
    var acc = xyzz_infinity();
    var m = xyzz_infinity();
    var phase = 0u;
    var s = 0u;
    var bit = i32(firstLeadingBit(k)) - 1;
    var adding = false;
    loop {
        var x: Xyzz;
        var y: Xyzz;
        if phase == 0u {
            if (s & 1u) == 0u {
                x = running;
                y = load_in(first + per_thread - 1u - s / 2u);
            } else {
                x = acc;
                y = running;
            }
        } else if phase == 1u {
            x = m;
            y = m;
            if adding {
                y = running;
            }
        } else {
            x = acc;
            y = m;
        }
        let r = xyzz_add(x, y);
        if phase == 0u {
            if (s & 1u) == 0u {
                running = r;
            } else {
                acc = r;
            }
            s += 1u;
            if s == 2u * per_thread {
                if k == 0u {
                    break;
                }
                m = running;
                phase = select(1u, 2u, bit < 0);
            }
        } else if phase == 1u {
            m = r;
            if !adding && ((k >> u32(bit)) & 1u) == 1u {
                adding = true;
            } else {
                adding = false;
                bit -= 1;
                if bit < 0 {
                    phase = 2u;
                }
            }
        } else {
            acc = r;
            break;
        }
    }
    store_out(g, acc);
}

@compute @workgroup_size(WG)
fn group_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let j = (wid.y * nwg.x + wid.x) * WG + lid;
    let n_in = params.a;
    let group = params.b;
    if j >= params.c {
        return;
    }
    var sum = xyzz_infinity();
    let lo = j * group;
    let hi = min(lo + group, n_in);
    for (var i = lo; i < hi; i++) {
        sum = xyzz_add(sum, load_in(i));
    }
    store_out(params.d + j, sum);
}
