// Pippenger, step 1: every (scalar, window) pair with a non-zero signed digit
// becomes an entry (bucket key, base index | sign << 31). `count` histograms the
// keys; after the scan turned counts into offsets, `scatter` writes every entry
// to its key's range, so the entries come out grouped by key (a counting sort;
// order within a key does not matter).
//
// Signed digits: window w holds digit d in [-2^(c-1), 2^(c-1)], taken from bits
// [w c, w c + c) plus the carry from the window below; a digit above 2^(c-1)
// becomes d - 2^c and carries one up. Bucket key (w - w_lo) 2^(c-1) + |d| - 1.
// With W c >= 256 the top window never carries out (scalars are below r < 2^255).

struct Params {
    // Items this dispatch visits: scalars (modes 0, 1) or bases (mode 2).
    n: u32,
    // 0: scalar i belongs to base i. 1: scalar i belongs to base indices[i] -
    // index_offset. 2: base i is a one (a bit in `ones`), no scalar.
    mode: u32,
    index_offset: u32,
    c: u32,
    // Windows emitted: [w_lo, w_hi).
    w_lo: u32,
    w_hi: u32,
    // 1: the scalars are blst's Montgomery form (a R mod r), converted here.
    montgomery: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> scalars: array<u32>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read> ones: array<u32>;
@group(0) @binding(4) var<storage, read_write> cursor: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> sorted: array<vec2<u32>>;

// Threads a workgroup: a pipeline constant (MsmConfig::workgroup_size).
override WG: u32 = 64u;

// The scalar field's modulus r, little-endian, and -r^-1 mod 2^32 (r = 1 mod 2^32).
const FR_R = array<u32, 8>(
    0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
    0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u);
const FR_INV: u32 = 0xffffffffu;

// a R^-1 mod r for a < r: Montgomery reduction, one 32-bit word a step,
// written out (constant indices only, as fp_mul in fp.wgsl).
fn fr_from_montgomery(a: array<u32, 8>) -> array<u32, 8> {
    var t = a;
    var q: vec2<u32>;
    var c: u32;
    var m: u32;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    m = t[0] * FR_INV;
    c = mac(t[0], m, FR_R[0], 0u).y;
    q = mac(t[1], m, FR_R[1], c); t[0] = q.x; c = q.y;
    q = mac(t[2], m, FR_R[2], c); t[1] = q.x; c = q.y;
    q = mac(t[3], m, FR_R[3], c); t[2] = q.x; c = q.y;
    q = mac(t[4], m, FR_R[4], c); t[3] = q.x; c = q.y;
    q = mac(t[5], m, FR_R[5], c); t[4] = q.x; c = q.y;
    q = mac(t[6], m, FR_R[6], c); t[5] = q.x; c = q.y;
    q = mac(t[7], m, FR_R[7], c); t[6] = q.x; c = q.y;
    t[7] = c;
    // t <= r: subtract r once if t >= r.
    var d: array<u32, 8>;
    var borrow = 0u;
    q.x = t[0] - FR_R[0]; d[0] = q.x - borrow; borrow = select(0u, 1u, t[0] < FR_R[0]) | select(0u, 1u, q.x < borrow);
    q.x = t[1] - FR_R[1]; d[1] = q.x - borrow; borrow = select(0u, 1u, t[1] < FR_R[1]) | select(0u, 1u, q.x < borrow);
    q.x = t[2] - FR_R[2]; d[2] = q.x - borrow; borrow = select(0u, 1u, t[2] < FR_R[2]) | select(0u, 1u, q.x < borrow);
    q.x = t[3] - FR_R[3]; d[3] = q.x - borrow; borrow = select(0u, 1u, t[3] < FR_R[3]) | select(0u, 1u, q.x < borrow);
    q.x = t[4] - FR_R[4]; d[4] = q.x - borrow; borrow = select(0u, 1u, t[4] < FR_R[4]) | select(0u, 1u, q.x < borrow);
    q.x = t[5] - FR_R[5]; d[5] = q.x - borrow; borrow = select(0u, 1u, t[5] < FR_R[5]) | select(0u, 1u, q.x < borrow);
    q.x = t[6] - FR_R[6]; d[6] = q.x - borrow; borrow = select(0u, 1u, t[6] < FR_R[6]) | select(0u, 1u, q.x < borrow);
    q.x = t[7] - FR_R[7]; d[7] = q.x - borrow; borrow = select(0u, 1u, t[7] < FR_R[7]) | select(0u, 1u, q.x < borrow);
    if borrow != 0u {
        return t;
    }
    return d;
}


fn emit(key: u32, value: u32, scatter: bool) {
    if scatter {
        let pos = atomicAdd(&cursor[key], 1u);
        sorted[pos] = vec2<u32>(key, value);
    } else {
        atomicAdd(&cursor[key], 1u);
    }
}

fn visit(i: u32, scatter: bool) {
    if params.mode == 2u {
        if params.w_lo == 0u && ((ones[i >> 5u] >> (i & 31u)) & 1u) == 1u {
            emit(0u, i, scatter);
        }
        return;
    }
    var s: array<u32, 8>;
    for (var k = 0u; k < 8u; k++) {
        s[k] = scalars[i * 8u + k];
    }
    if params.montgomery != 0u {
        s = fr_from_montgomery(s);
    }
    var point = i;
    if params.mode == 1u {
        point = indices[i] - params.index_offset;
    }
    let c = params.c;
    let mask = (1u << c) - 1u;
    let half = 1u << (c - 1u);
    var carry = 0u;
    for (var w = 0u; w < params.w_hi; w++) {
        let bit = w * c;
        let word = bit >> 5u;
        let sh = bit & 31u;
        var raw = 0u;
        if word < 8u {
            raw = s[word] >> sh;
            if sh + c > 32u && word + 1u < 8u {
                raw |= s[word + 1u] << (32u - sh);
            }
            raw &= mask;
        }
        let d = raw + carry;
        var mag = d;
        var neg = 0u;
        carry = 0u;
        if d > half {
            mag = (1u << c) - d;
            neg = 1u;
            carry = 1u;
        }
        if w >= params.w_lo && mag != 0u {
            emit((w - params.w_lo) * half + mag - 1u, point | (neg << 31u), scatter);
        }
    }
}

@compute @workgroup_size(WG)
fn count(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if i < params.n {
        visit(i, false);
    }
}

@compute @workgroup_size(WG)
fn scatter(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if i < params.n {
        visit(i, true);
    }
}
