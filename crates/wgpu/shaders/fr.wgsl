// Fr, the scalar field of BLS12-381, on 32-bit words.
//
// An element is eight little-endian u32 limbs in Montgomery form with R = 2^256,
// fully reduced (< q): the same bytes as blstrs' `Scalar` (blst's four u64 limbs),
// so vectors cross between host and device without conversion.
//
// A 32x32-bit product is a u64 product where the device has 64-bit integers
// (Vulkan's shaderInt64: NVIDIA, AMD, lavapipe), else four 16x16-bit products (core
// WGSL has no u64 and no mul-hi); every carry is an explicit comparison. The product is
// CIOS Montgomery multiplication (one reduction step per limb of `b`): with q < 2^255
// the running sum stays below 2q < 2^256, so one conditional subtraction at the end
// gives the reduced result.

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

// a * b * 2^-256 mod q (Montgomery product), CIOS.
fn fr_mul(a: Fr, b: Fr) -> Fr {
    var x = a.l;
    var y = b.l;
    var q = FR_Q;
    var t: array<u32, 10>;
    for (var i = 0u; i < 8u; i++) {
        var carry = 0u;
        for (var j = 0u; j < 8u; j++) {
            let r = mac(t[j], x[j], y[i], carry);
            t[j] = r.x;
            carry = r.y;
        }
        let s = adc(t[8], carry, 0u);
        t[8] = s.x;
        t[9] = s.y;
        let m = t[0] * FR_INV;
        var r = mac(t[0], m, q[0], 0u);
        carry = r.y;
        for (var j = 1u; j < 8u; j++) {
            r = mac(t[j], m, q[j], carry);
            t[j - 1u] = r.x;
            carry = r.y;
        }
        let s2 = adc(t[8], carry, 0u);
        t[7] = s2.x;
        t[8] = t[9] + s2.y;
    }
    var out: array<u32, 8>;
    for (var j = 0u; j < 8u; j++) {
        out[j] = t[j];
    }
    return fr_reduce(out);
}
