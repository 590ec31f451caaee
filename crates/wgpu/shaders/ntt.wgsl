// The NTT's kernels over Fr (fr.wgsl is prepended): radix-2 butterfly stages, a
// power scaling for coset shifts and 1/n, and the pointwise step of H.
//
// A vector of the domain lives in chunks of C = 2^c elements, each its own storage
// buffer and binding (one binding may not hold 2^27 scalars: 4 GiB). A stage whose
// half-span h is below C pairs elements inside one chunk (`*_in_chunk`, one dispatch
// per chunk); a stage with h >= C pairs element o of chunk k with element o of
// chunk k + h/C (`*_cross`, one dispatch per chunk pair, two bindings).
//
// Twiddles of the stages of half-span below 2^16 come from one table of those
// roots (`small`); above, and for coset powers, from two-level tables: g^e =
// lo[e & mask] * hi[e >> lo_bits], so a 2^27 domain needs 2 x 2^14 entries, not
// 2^26.

struct Params {
    // log2 of the stage's half-span h.
    log_half: u32,
    // A pair at offset t in its 2h-block takes w^(t << tw_shift) (w the domain's root).
    tw_shift: u32,
    // Global index of element 0 of the bound (first) chunk.
    base: u32,
    // Invocations that do work.
    count: u32,
    lo_bits: u32,
    lo_mask: u32,
    // scale: 1 when positions hold bit-reversed indices (e = rev(position)).
    bitrev: u32,
    log_n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
// Twiddle or power table, low and high halves.
@group(0) @binding(1) var<storage, read> lo: array<Fr>;
@group(0) @binding(2) var<storage, read> hi: array<Fr>;
// The chunk (in-chunk stages, scale, pointwise: a), the partner chunk (cross
// stages; pointwise and difference: b), and fr_ops' output.
@group(0) @binding(3) var<storage, read_write> x: array<Fr>;
@group(0) @binding(4) var<storage, read_write> y: array<Fr>;
@group(0) @binding(5) var<storage, read_write> z: array<Fr>;
// Roots of every small stage: small[h + t] = w_2h^t for h < 2^SMALL_LOG, t < h
// (w_2h the primitive 2h-th root of unity, or its inverse): one load instead of
// the two-level table's product. The roots of unity of a size are the same for
// every domain (each w is ROOT_OF_UNITY squared down), so one table serves all.
@group(0) @binding(6) var<storage, read> small: array<Fr>;
const SMALL_LOG: u32 = 16u;

const WG: u32 = 64u;

fn invocation(wg: vec3<u32>, nwg: vec3<u32>, li: u32) -> u32 {
    return (wg.y * nwg.x + wg.x) * WG + li;
}

fn power(e: u32) -> Fr {
    return fr_mul(lo[e & p.lo_mask], hi[e >> p.lo_bits]);
}

// The twiddle of pair offset t in this dispatch's stage (half-span 2^log_half,
// p.log_half): w_2h^t = w^(t << tw_shift).
fn twiddle(log_half: u32, t: u32) -> Fr {
    if (log_half < SMALL_LOG) {
        return small[(1u << log_half) + t];
    }
    return power(t << p.tw_shift);
}

// Local index of the low element of butterfly i in a chunk.
fn low_index(i: u32) -> u32 {
    let t = i & ((1u << p.log_half) - 1u);
    return ((i >> p.log_half) << (p.log_half + 1u)) + t;
}

// (l, h) <- (l + h, (l - h) w): decimation in frequency.
@compute @workgroup_size(64)
fn dif_in_chunk(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    let l = low_index(i);
    let h = l + (1u << p.log_half);
    let t = i & ((1u << p.log_half) - 1u);
    let u = x[l];
    let v = x[h];
    x[l] = fr_add(u, v);
    x[h] = fr_mul(fr_sub(u, v), twiddle(p.log_half, t));
}

// (l, h) <- (l + h w, l - h w): decimation in time.
@compute @workgroup_size(64)
fn dit_in_chunk(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    let l = low_index(i);
    let h = l + (1u << p.log_half);
    let t = i & ((1u << p.log_half) - 1u);
    let u = x[l];
    let v = fr_mul(x[h], twiddle(p.log_half, t));
    x[l] = fr_add(u, v);
    x[h] = fr_sub(u, v);
}

@compute @workgroup_size(64)
fn dif_cross(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    let t = (p.base + i) & ((1u << p.log_half) - 1u);
    let u = x[i];
    let v = y[i];
    x[i] = fr_add(u, v);
    y[i] = fr_mul(fr_sub(u, v), twiddle(p.log_half, t));
}

@compute @workgroup_size(64)
fn dit_cross(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    let t = (p.base + i) & ((1u << p.log_half) - 1u);
    let u = x[i];
    let v = fr_mul(y[i], twiddle(p.log_half, t));
    x[i] = fr_add(u, v);
    y[i] = fr_sub(u, v);
}

// x[i] *= table power of e, e the global index or its log_n-bit reversal.
@compute @workgroup_size(64)
fn scale(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    var e = p.base + i;
    if (p.bitrev != 0u) {
        e = select(0u, reverseBits(e) >> (32u - p.log_n), p.log_n > 0u);
    }
    x[i] = fr_mul(x[i], power(e));
}

// a <- a b (H's product on the coset).
@compute @workgroup_size(64)
fn pointwise(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    x[i] = fr_mul(x[i], y[i]);
}

// a <- a - b (H: the inverse coset transform of the product less C's coefficients).
@compute @workgroup_size(64)
fn difference(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    x[i] = fr_sub(x[i], y[i]);
}

// Field checks: out = [a b, a + b, a - b] for every pair (a, b) = (x[i], y[i]).
@compute @workgroup_size(64)
fn fr_ops(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = invocation(wg, nwg, li);
    if (i >= p.count) {
        return;
    }
    let a = x[i];
    let b = y[i];
    z[3u * i] = fr_mul(a, b);
    z[3u * i + 1u] = fr_add(a, b);
    z[3u * i + 2u] = fr_sub(a, b);
}

// The bottom nine stages (half-spans 256 down to 1, or up for DIT) of a block of
// 512 scalars in workgroup memory: one read and one write of the vector instead
// of nine. 512 scalars are 16 KiB, WebGPU's minimum workgroup storage. One
// workgroup a block (p.count blocks); each of its 256 invocations runs one
// butterfly a stage.
const BLOCK: u32 = 512u;
var<workgroup> sh: array<Fr, 512>;

fn block_index(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.y * nwg.x + wg.x;
}

@compute @workgroup_size(256)
fn dif_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let blk = block_index(wg, nwg);
    if (blk >= p.count) {
        return;
    }
    let off = blk * BLOCK;
    sh[li] = x[off + li];
    sh[li + 256u] = x[off + li + 256u];
    workgroupBarrier();
    for (var s = 0u; s < 9u; s++) {
        let lh = 8u - s;
        let h = 1u << lh;
        let t = li & (h - 1u);
        let l = ((li >> lh) << (lh + 1u)) + t;
        let u = sh[l];
        let v = sh[l + h];
        sh[l] = fr_add(u, v);
        sh[l + h] = fr_mul(fr_sub(u, v), small[h + t]);
        workgroupBarrier();
    }
    x[off + li] = sh[li];
    x[off + li + 256u] = sh[li + 256u];
}

@compute @workgroup_size(256)
fn dit_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let blk = block_index(wg, nwg);
    if (blk >= p.count) {
        return;
    }
    let off = blk * BLOCK;
    sh[li] = x[off + li];
    sh[li + 256u] = x[off + li + 256u];
    workgroupBarrier();
    for (var lh = 0u; lh < 9u; lh++) {
        let h = 1u << lh;
        let t = li & (h - 1u);
        let l = ((li >> lh) << (lh + 1u)) + t;
        let u = sh[l];
        let v = fr_mul(sh[l + h], small[h + t]);
        sh[l] = fr_add(u, v);
        sh[l + h] = fr_sub(u, v);
        workgroupBarrier();
    }
    x[off + li] = sh[li];
    x[off + li + 256u] = sh[li + 256u];
}
