// Pippenger, step 3 (shared by msm_accumulate and msm_combine, which define
// bindings 1 and 2, entry_key and add_entry): bucket sums from the sorted
// entries, balanced whatever the digits: thread t adds up the `seg` entries [t seg, t seg + seg) run by run (a run
// is a stretch of one key). A run that neither starts nor ends the segment is a
// whole bucket: it is added into that bucket, which no other thread touches in
// this pass. The first and the last run may go on in the neighbouring segments:
// they are written out as two (key, partial sum) entries, 2t and 2t + 1 (the
// second at infinity when the segment is one run), a list sorted by key again,
// which msm_combine reduces the same way until one segment is left. Only the
// last level (one segment) adds its boundary runs into the buckets too.
//
// level_counts[level] is the number of entries in; thread 0 writes
// level_counts[level + 1], the entries out (0 after the last level).

struct Params {
    level: u32,
    seg: u32,
    // Always 0: opaque_zero() (g1.wgsl).
    zero: u32,
    // 0 for the first chunk of bases of a window group: a bucket is written,
    // not added to (it is at infinity, and this pass writes it once), so the
    // threads of a warp that finish a bucket do not hold the others up for a
    // full addition. 1 for later chunks.
    accumulate: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read_write> level_counts: array<u32>;
@group(0) @binding(4) var<storage, read_write> buckets: array<u32>;
@group(0) @binding(5) var<storage, read_write> out_keys: array<u32>;
@group(0) @binding(6) var<storage, read_write> out_points: array<u32>;

// Threads a workgroup: a pipeline constant (MsmConfig::workgroup_size).
override WG: u32 = 64u;

fn opaque_zero() -> u32 {
    return params.zero;
}

fn load_bucket(key: u32) -> Xyzz {
    let i = key * 48u;
    var p: Xyzz;
    for (var k = 0u; k < 12u; k++) {
        p.x[k] = buckets[i + k];
        p.y[k] = buckets[i + 12u + k];
        p.zz[k] = buckets[i + 24u + k];
        p.zzz[k] = buckets[i + 36u + k];
    }
    return p;
}

fn add_to_bucket(key: u32, s: Xyzz) {
    if xyzz_is_infinity(s) {
        return;
    }
    var p = s;
    if params.accumulate != 0u {
        p = xyzz_add(load_bucket(key), s);
    }
    let i = key * 48u;
    for (var k = 0u; k < 12u; k++) {
        buckets[i + k] = p.x[k];
        buckets[i + 12u + k] = p.y[k];
        buckets[i + 24u + k] = p.zz[k];
        buckets[i + 36u + k] = p.zzz[k];
    }
}

fn write_out(slot: u32, key: u32, s: Xyzz) {
    out_keys[slot] = key;
    let i = slot * 48u;
    for (var k = 0u; k < 12u; k++) {
        out_points[i + k] = s.x[k];
        out_points[i + 12u + k] = s.y[k];
        out_points[i + 24u + k] = s.zz[k];
        out_points[i + 36u + k] = s.zzz[k];
    }
}

@compute @workgroup_size(WG)
fn reduce_segments(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let t = (wid.y * nwg.x + wid.x) * WG + lid;
    let total = level_counts[params.level];
    let segs = (total + params.seg - 1u) / params.seg;
    let last = segs <= 1u;
    if t == 0u {
        level_counts[params.level + 1u] = select(2u * segs, 0u, last);
    }
    if t >= segs {
        return;
    }
    let start = t * params.seg;
    let end = min(start + params.seg, total);
    var key = entry_key(start);
    var acc = xyzz_infinity();
    var first = true;
    // One pass past the end flushes the last run; each kind of flush has one
    // call site, so the additions are inlined once (see g1.wgsl).
    for (var e = start; e <= end; e++) {
        let at_end = e == end;
        var k = key;
        if !at_end {
            k = entry_key(e);
        }
        if at_end || k != key {
            if last || (!first && !at_end) {
                add_to_bucket(key, acc);
            } else {
                if first {
                    write_out(2u * t, key, acc);
                }
                if at_end {
                    var tail = acc;
                    if first {
                        tail = xyzz_infinity();
                    }
                    write_out(2u * t + 1u, key, tail);
                }
            }
            first = false;
            key = k;
            acc = xyzz_infinity();
        }
        if !at_end {
            acc = add_entry(acc, e);
        }
    }
}
