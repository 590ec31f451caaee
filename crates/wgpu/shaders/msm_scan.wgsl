// Pippenger, step 2: the key counts become exclusive offsets, in three passes:
// each thread sums a block of `block` counts, one thread scans the block sums
// (a few thousand at most) and writes the total to level_counts[0], then each thread
// rewrites its block's counts as offsets.

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

const WG: u32 = 64u;

@compute @workgroup_size(64)
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

@compute @workgroup_size(1)
fn scan_blocks() {
    var running = 0u;
    for (var b = 0u; b < params.n_blocks; b++) {
        let c = blocks[b];
        blocks[b] = running;
        running += c;
    }
    level_counts[0] = running;
}

@compute @workgroup_size(64)
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
