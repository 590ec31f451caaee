// Pippenger, step 2: the key counts become exclusive offsets, in three passes:
// each thread sums a block of `block` counts, one workgroup scans the block sums
// and writes the total to level_counts[0], then each thread rewrites its block's
// counts as offsets.

struct Params {
    n_keys: u32,
    block: u32,
    n_blocks: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> cursor: array<u32>;
@group(0) @binding(2) var<storage, read_write> blocks: array<u32>;
@group(0) @binding(3) var<storage, read_write> level_counts: array<u32>;

// Threads a workgroup: a pipeline constant (MsmConfig::workgroup_size).
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn block_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let b = (wid.y * nwg.x + wid.x) * WG + lid;
    if b >= params.n_blocks {
        return;
    }
    let lo = b * params.block;
    let hi = min(lo + params.block, params.n_keys);
    var sum = 0u;
    for (var k = lo; k < hi; k++) {
        sum += cursor[k];
    }
    blocks[b] = sum;
}

const SCAN_THREADS: u32 = 256u;
var<workgroup> totals: array<u32, 256>;

// One workgroup: each of 256 threads scans a contiguous share of the block sums
// (at c = 20 a group of 13 windows has 26,624 blocks: ~100 a thread, where one
// thread walking them all took ~50x longer), the shares' totals are scanned in
// workgroup memory, and each thread offsets its share.
@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_index) lid: u32) {
    let share = (params.n_blocks + SCAN_THREADS - 1u) / SCAN_THREADS;
    let lo = min(lid * share, params.n_blocks);
    let hi = min(lo + share, params.n_blocks);
    var running = 0u;
    for (var b = lo; b < hi; b++) {
        let c = blocks[b];
        blocks[b] = running;
        running += c;
    }
    totals[lid] = running;
    workgroupBarrier();
    // Hillis-Steele inclusive scan of the 256 totals.
    for (var d = 1u; d < SCAN_THREADS; d <<= 1u) {
        var v = totals[lid];
        if lid >= d {
            v += totals[lid - d];
        }
        workgroupBarrier();
        totals[lid] = v;
        workgroupBarrier();
    }
    var before = 0u;
    if lid > 0u {
        before = totals[lid - 1u];
    }
    for (var b = lo; b < hi; b++) {
        blocks[b] += before;
    }
    if lid == SCAN_THREADS - 1u {
        level_counts[0] = totals[lid];
    }
}

@compute @workgroup_size(WG)
fn block_offsets(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let b = (wid.y * nwg.x + wid.x) * WG + lid;
    if b >= params.n_blocks {
        return;
    }
    let lo = b * params.block;
    let hi = min(lo + params.block, params.n_keys);
    var running = blocks[b];
    for (var k = lo; k < hi; k++) {
        let c = cursor[k];
        cursor[k] = running;
        running += c;
    }
}
