// Word products for fp.wgsl on any device: WGSL has no u64 and no mul-hi, so
// the operands are split into 16-bit halves whose products fit in 32 bits.

// The full 64-bit product a*b as (low word, high word). WGSL has no u64 and no
// mul-hi, so the operands are split into 16-bit halves whose products fit.
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // At most (2^16-1)^2 + 2 (2^16-1) < 2^32: no overflow.
    let mid = p01 + (p00 >> 16u) + (p10 & 0xffffu);
    let lo = (mid << 16u) | (p00 & 0xffffu);
    let hi = p11 + (mid >> 16u) + (p10 >> 16u);
    return vec2<u32>(lo, hi);
}

// t + a*b + c as (low word, high word); at most 2^64 - 1, so the high word
// cannot overflow.
fn mac(t: u32, a: u32, b: u32, c: u32) -> vec2<u32> {
    let p = mul_wide(a, b);
    let s = p.x + t;
    let s2 = s + c;
    let hi = p.y + select(0u, 1u, s < t) + select(0u, 1u, s2 < c);
    return vec2<u32>(s2, hi);
}

