// Levels 1 and up of msm_segments: the entries are the (key, partial sum) pairs
// the level below wrote, sorted by key.

@group(0) @binding(1) var<storage, read> in_keys: array<u32>;
@group(0) @binding(2) var<storage, read> in_points: array<u32>;

fn entry_key(e: u32) -> u32 {
    return in_keys[e];
}

fn add_entry(acc: Xyzz, e: u32) -> Xyzz {
    let i = e * 48u;
    var p: Xyzz;
    for (var k = 0u; k < 12u; k++) {
        p.x[k] = in_points[i + k];
        p.y[k] = in_points[i + 12u + k];
        p.zz[k] = in_points[i + 24u + k];
        p.zzz[k] = in_points[i + 36u + k];
    }
    return xyzz_add(acc, p);
}
