// BLS12-381 base field Fp on 32-bit words (with fp_wide16.wgsl or
// fp_wide64.wgsl for the word products).
//
// An element is 12 little-endian u32 limbs in Montgomery form with R = 2^384,
// the same integers as blst's six u64 limbs (limb 2k is the low half of blst's
// limb k). Every function keeps its result fully reduced (< p), which the
// no-carry Montgomery product below requires of its inputs.

alias Fp = array<u32, 12>;

// p, little-endian.
const FP_P = Fp(
    0xffffaaabu, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu,
    0xf6b0f624u, 0x6730d2a0u, 0xf38512bfu, 0x64774b84u,
    0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau);

// -p^-1 mod 2^32.
const FP_INV: u32 = 0xfffcfffdu;

// R mod p: one in Montgomery form.
const FP_ONE = Fp(
    0x0002fffdu, 0x76090000u, 0xc40c0002u, 0xebf4000bu,
    0x53c758bau, 0x5f489857u, 0x70525745u, 0x77ce5853u,
    0xa256ec6du, 0x5c071a97u, 0xfa80e493u, 0x15f65ec3u);

fn fp_zero() -> Fp {
    return Fp(0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
}

// mul_wide(a, b) (the 64-bit product as (low, high)) and mac(t, a, b, c)
// (t + a b + c, likewise) come from fp_wide16.wgsl (four 16-bit products, any
// device) or fp_wide64.wgsl (u64, where the device has SHADER_INT64: one wide
// multiply-add on GPUs that have it).

fn fp_is_zero(a: Fp) -> bool {
    var acc = 0u;
    for (var i = 0u; i < 12u; i++) {
        acc |= a[i];
    }
    return acc == 0u;
}

fn fp_eq(a: Fp, b: Fp) -> bool {
    var acc = 0u;
    for (var i = 0u; i < 12u; i++) {
        acc |= a[i] ^ b[i];
    }
    return acc == 0u;
}

// a - p if a >= p, else a (for a < 2p).
fn fp_reduce_once(a: Fp) -> Fp {
    var d: Fp;
    var borrow = 0u;
    for (var i = 0u; i < 12u; i++) {
        let x = a[i];
        let y = FP_P[i];
        let t = x - y;
        let t2 = t - borrow;
        borrow = select(0u, 1u, x < y) | select(0u, 1u, t < borrow);
        d[i] = t2;
    }
    if borrow != 0u {
        return a;
    }
    return d;
}

fn fp_add(a: Fp, b: Fp) -> Fp {
    // a + b < 2p < 2^382: no carry out of the top limb.
    var s: Fp;
    var carry = 0u;
    for (var i = 0u; i < 12u; i++) {
        let t = a[i] + b[i];
        let t2 = t + carry;
        carry = select(0u, 1u, t < a[i]) | select(0u, 1u, t2 < t);
        s[i] = t2;
    }
    return fp_reduce_once(s);
}

fn fp_sub(a: Fp, b: Fp) -> Fp {
    var d: Fp;
    var borrow = 0u;
    for (var i = 0u; i < 12u; i++) {
        let x = a[i];
        let y = b[i];
        let t = x - y;
        let t2 = t - borrow;
        borrow = select(0u, 1u, x < y) | select(0u, 1u, t < borrow);
        d[i] = t2;
    }
    if borrow == 0u {
        return d;
    }
    // Wrapped below zero: add p back (the carry out cancels the borrow).
    var carry = 0u;
    for (var i = 0u; i < 12u; i++) {
        let t = d[i] + FP_P[i];
        let t2 = t + carry;
        carry = select(0u, 1u, t < d[i]) | select(0u, 1u, t2 < t);
        d[i] = t2;
    }
    return d;
}

fn fp_double(a: Fp) -> Fp {
    return fp_add(a, a);
}

fn fp_neg(a: Fp) -> Fp {
    return fp_sub(fp_zero(), a);
}

// Montgomery product a b R^-1 mod p, CIOS without the extra carry word: p's top
// limb (0x1a0111ea) is below 2^31 - 1, so t stays below 2p throughout
// (Koc-Acar-Kaliski's CIOS with the spare-bit shortcut gnark-crypto describes).
// Written out limb by limb (every index a constant): a loop the driver does not
// unroll leaves t, a and b in per-thread scratch memory, slow on GPUs, and
// lavapipe (Mesa 22.3, LLVM 15) computed wrong sums in kernels whose threads
// diverged around such code.
fn fp_mul(a: Fp, b: Fp) -> Fp {
    var t = fp_zero();
    var r: vec2<u32>;
    var q: vec2<u32>;
    var ca: u32;
    var cc: u32;
    var m: u32;
    // b[0]
    r = mac(t[0], a[0], b[0], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[0], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[1]
    r = mac(t[0], a[0], b[1], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[1], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[2]
    r = mac(t[0], a[0], b[2], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[2], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[3]
    r = mac(t[0], a[0], b[3], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[3], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[4]
    r = mac(t[0], a[0], b[4], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[4], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[5]
    r = mac(t[0], a[0], b[5], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[5], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[6]
    r = mac(t[0], a[0], b[6], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[6], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[7]
    r = mac(t[0], a[0], b[7], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[7], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[8]
    r = mac(t[0], a[0], b[8], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[8], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[9]
    r = mac(t[0], a[0], b[9], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[9], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[10]
    r = mac(t[0], a[0], b[10], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[10], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    // b[11]
    r = mac(t[0], a[0], b[11], 0u);
    ca = r.y;
    m = r.x * FP_INV;
    cc = mac(r.x, m, FP_P[0], 0u).y;
    r = mac(t[1], a[1], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[1], cc); cc = q.y; t[0] = q.x;
    r = mac(t[2], a[2], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[2], cc); cc = q.y; t[1] = q.x;
    r = mac(t[3], a[3], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[3], cc); cc = q.y; t[2] = q.x;
    r = mac(t[4], a[4], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[4], cc); cc = q.y; t[3] = q.x;
    r = mac(t[5], a[5], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[5], cc); cc = q.y; t[4] = q.x;
    r = mac(t[6], a[6], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[6], cc); cc = q.y; t[5] = q.x;
    r = mac(t[7], a[7], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[7], cc); cc = q.y; t[6] = q.x;
    r = mac(t[8], a[8], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[8], cc); cc = q.y; t[7] = q.x;
    r = mac(t[9], a[9], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[9], cc); cc = q.y; t[8] = q.x;
    r = mac(t[10], a[10], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[10], cc); cc = q.y; t[9] = q.x;
    r = mac(t[11], a[11], b[11], ca); ca = r.y;
    q = mac(r.x, m, FP_P[11], cc); cc = q.y; t[10] = q.x;
    t[11] = cc + ca;
    return fp_reduce_once(t);
}

fn fp_sqr(a: Fp) -> Fp {
    return fp_mul(a, a);
}
