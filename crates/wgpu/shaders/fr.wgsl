// Fr, the scalar field of BLS12-381, on 32-bit words.
//
// An element is eight little-endian u32 limbs in Montgomery form with R = 2^256,
// fully reduced (< q): the same bytes as blstrs' `Scalar` (blst's four u64 limbs),
// so vectors cross between host and device without conversion.
//
// A 32x32-bit product is a u64 product where the device has 64-bit integers
// (Vulkan's shaderInt64: NVIDIA, AMD, lavapipe), else four 16x16-bit products (core
// WGSL has no u64 and no mul-hi); every carry is an explicit comparison. The product is
// CIOS Montgomery multiplication (one reduction step per limb of `b`, written out; see
// fr_mul), whose result is below 2q: one conditional subtraction reduces it.

struct Fr {
    l: array<u32, 8>,
}

// q = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
const FR_Q = array<u32, 8>(
    0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
    0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u,
);
// -q^-1 mod 2^32: q = 1 mod 2^32, so its inverse is 1.
const FR_INV: u32 = 0xffffffffu;

// The word products, mul_wide(a, b) and mac(t, a, b, c) = t + a*b + c as (low,
// high), come from fp_wide64.wgsl (a u64 product, on devices with SHADER_INT64)
// or fp_wide16.wgsl (four 16x16-bit products), prepended by the kernels' source.

// a + b + carry (carry 0 or 1) as (sum, carry out).
fn adc(a: u32, b: u32, carry: u32) -> vec2<u32> {
    let s1 = a + b;
    let c1 = select(0u, 1u, s1 < a);
    let s2 = s1 + carry;
    let c2 = select(0u, 1u, s2 < s1);
    return vec2<u32>(s2, c1 + c2);
}

// a - b - borrow (borrow 0 or 1) as (difference, borrow out).
fn sbb(a: u32, b: u32, borrow: u32) -> vec2<u32> {
    let d1 = a - b;
    let b1 = select(0u, 1u, a < b);
    let d2 = d1 - borrow;
    let b2 = select(0u, 1u, d1 < borrow);
    return vec2<u32>(d2, b1 | b2);
}

// x - q where x >= q, else x (x < 2q).
fn fr_reduce(x: array<u32, 8>) -> Fr {
    var q = FR_Q;
    var v = x;
    var d: array<u32, 8>;
    var borrow = 0u;
    for (var j = 0u; j < 8u; j++) {
        let r = sbb(v[j], q[j], borrow);
        d[j] = r.x;
        borrow = r.y;
    }
    var out: Fr;
    if (borrow == 0u) {
        out.l = d;
    } else {
        out.l = v;
    }
    return out;
}

fn fr_add(a: Fr, b: Fr) -> Fr {
    var x = a.l;
    var y = b.l;
    var s: array<u32, 8>;
    var carry = 0u;
    for (var j = 0u; j < 8u; j++) {
        let r = adc(x[j], y[j], carry);
        s[j] = r.x;
        carry = r.y;
    }
    // a + b < 2q < 2^256: no carry out.
    return fr_reduce(s);
}

fn fr_sub(a: Fr, b: Fr) -> Fr {
    var x = a.l;
    var y = b.l;
    var q = FR_Q;
    var d: array<u32, 8>;
    var borrow = 0u;
    for (var j = 0u; j < 8u; j++) {
        let r = sbb(x[j], y[j], borrow);
        d[j] = r.x;
        borrow = r.y;
    }
    // On underflow add q back (the sum wraps to the right value mod 2^256).
    let mask = 0u - borrow;
    var out: Fr;
    var carry = 0u;
    for (var j = 0u; j < 8u; j++) {
        let r = adc(d[j], q[j] & mask, carry);
        out.l[j] = r.x;
        carry = r.y;
    }
    return out;
}

// a * b * 2^-256 mod q (Montgomery product): CIOS without the extra carry word, as
// fp_mul in fp.wgsl: q's top limb (0x73eda753) is below 2^31 - 1, so t stays below
// 2q throughout. Written out limb by limb (every index a constant), as fp_mul is, so
// that no driver leaves t, a or b in per-thread scratch memory.
fn fr_mul(x: Fr, y: Fr) -> Fr {
    let a = x.l;
    let b = y.l;
    var t: array<u32, 8>;
    var r: vec2<u32>;
    var q: vec2<u32>;
    var ca: u32;
    var cc: u32;
    var m: u32;
    // b[0]
    r = mac(t[0], a[0], b[0], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[0], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[1]
    r = mac(t[0], a[0], b[1], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[1], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[2]
    r = mac(t[0], a[0], b[2], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[2], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[3]
    r = mac(t[0], a[0], b[3], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[3], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[4]
    r = mac(t[0], a[0], b[4], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[4], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[5]
    r = mac(t[0], a[0], b[5], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[5], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[6]
    r = mac(t[0], a[0], b[6], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[6], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    // b[7]
    r = mac(t[0], a[0], b[7], 0u);
    ca = r.y;
    m = r.x * FR_INV;
    cc = mac(r.x, m, FR_Q[0], 0u).y;
    r = mac(t[1], a[1], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[7], ca); ca = r.y;
    q = mac(r.x, m, FR_Q[7], cc); cc = q.y; t[6] = q.x;
    t[7] = cc + ca;
    return fr_reduce(t);
}
