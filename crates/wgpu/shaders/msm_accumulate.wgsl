// Level 0 of msm_segments: the entries are the sorted (key, base | sign << 31)
// pairs, each added to its run as an affine base (mixed addition).

@group(0) @binding(1) var<storage, read> sorted: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> bases: array<u32>;

fn load_base(value: u32) -> Affine {
    let i = (value & 0x7fffffffu) * 24u;
    var q: Affine;
    for (var k = 0u; k < 12u; k++) {
        q.x[k] = bases[i + k];
        q.y[k] = bases[i + 12u + k];
    }
    // -(0, 0) is (0, 0): infinity stays infinity.
    if (value >> 31u) == 1u {
        q.y = fp_neg(q.y);
    }
    return q;
}

fn entry_key(e: u32) -> u32 {
    return sorted[e].x;
}

fn add_entry(acc: Xyzz, e: u32) -> Xyzz {
    return xyzz_add_affine(acc, load_base(sorted[e].y));
}
