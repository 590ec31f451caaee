// Word products for fp.wgsl where the device has SHADER_INT64: a u64 product,
// which a GPU with a wide multiply-add does in one instruction (the 16-bit
// halves of fp_wide16.wgsl take about sixteen).

fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let p = u64(a) * u64(b);
    return vec2<u32>(u32(p & 0xfffffffflu), u32(p >> 32u));
}

// t + a*b + c as (low word, high word); at most 2^64 - 1.
fn mac(t: u32, a: u32, b: u32, c: u32) -> vec2<u32> {
    let p = u64(a) * u64(b) + u64(t) + u64(c);
    return vec2<u32>(u32(p & 0xfffffffflu), u32(p >> 32u));
}
