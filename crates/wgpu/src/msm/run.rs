//! One MSM's dispatches: buffers, bind groups, passes, readback.

use blstrs::G1Projective;
use group::Group;
use wgpu::util::DeviceExt;

use super::host::{xyzz_to_projective, XYZZ_WORDS};
use super::pipelines::{Kernels, Pipelines};
use super::plan::{Plan, GROUP, SCAN_BLOCK, SEG, SEG0};
use super::{BaseChunk, MsmError};

const XYZZ_BYTES: u64 = (XYZZ_WORDS * 4) as u64;
const LEVEL_SLOTS: u64 = 64;

/// The terms of one chunk of bases.
pub(crate) struct ChunkTerms<'a> {
    pub chunk: &'a BaseChunk,
    /// Dense: one a base of the chunk. Tail: parallel to `indices`.
    pub scalars: &'a [[u64; 4]],
    /// Absolute base indices of `scalars` (a split's tail), or `None` (dense).
    pub indices: Option<&'a [u32]>,
    /// The ones bitmap's words for this chunk (the chunk starts at a multiple of
    /// 64) and how many bits are set.
    pub ones: Option<(&'a [u64], u64)>,
    /// The scalars are blst's Montgomery limbs (converted on the device).
    pub montgomery: bool,
}

impl ChunkTerms<'_> {
    fn is_empty(&self) -> bool {
        self.scalars.is_empty() && self.ones.is_none_or(|(_, n)| n == 0)
    }
}

/// Blocks on a future that wgpu resolves from `poll` (native backends resolve
/// error scopes at once).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// Runs `body` inside out-of-memory and validation error scopes; an error
/// caught there wins over `body`'s own result.
pub(crate) fn scoped<T>(
    device: &wgpu::Device,
    body: impl FnOnce() -> Result<T, MsmError>,
) -> Result<T, MsmError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let out = body();
    let v = block_on(validation.pop());
    let o = block_on(oom.pop());
    if let Some(e) = o {
        return Err(MsmError::OutOfMemory(e.to_string()));
    }
    if let Some(e) = v {
        return Err(MsmError::Device(e.to_string()));
    }
    out
}

pub(crate) fn storage(device: &wgpu::Device, label: &str, bytes: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        // Never empty: a binding needs at least one word.
        size: bytes.max(16).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// Bytes written with `write_buffer` between submissions: wgpu stages every
/// write in host memory until the next submission, so a 1.6 GB upload would
/// otherwise be held twice.
pub(crate) const FLUSH_BYTES: usize = 256 << 20;

pub(crate) fn write_in_pieces(queue: &wgpu::Queue, buffer: &wgpu::Buffer, at: u64, bytes: &[u8]) {
    for (k, piece) in bytes.chunks(FLUSH_BYTES).enumerate() {
        queue.write_buffer(buffer, at + (k * FLUSH_BYTES) as u64, piece);
        if piece.len() == FLUSH_BYTES {
            queue.submit([]);
        }
    }
}

fn upload(device: &wgpu::Device, queue: &wgpu::Queue, label: &str, bytes: &[u8]) -> wgpu::Buffer {
    let b = storage(device, label, bytes.len() as u64);
    write_in_pieces(queue, &b, 0, bytes);
    b
}

fn params(device: &wgpu::Device, words: &[u32]) -> wgpu::Buffer {
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("msm params"),
        contents: bytemuck::cast_slice(words),
        usage: wgpu::BufferUsages::UNIFORM,
    })
}

fn bind(device: &wgpu::Device, k: &Kernels, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
    let entries: Vec<_> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &k.layout,
        entries: &entries,
    })
}

/// Where a pass's dispatches go: the grid limit and the workgroup size.
#[derive(Clone, Copy)]
pub(crate) struct Grid {
    /// Workgroups a dimension holds at most (65535 on most devices).
    pub max_dim: u32,
    pub workgroup: u32,
}

/// Dispatches `threads` threads as a 2-D grid of workgroups.
fn dispatch(
    pass: &mut wgpu::ComputePass<'_>,
    pipeline: &wgpu::ComputePipeline,
    group: &wgpu::BindGroup,
    threads: u64,
    grid: Grid,
) {
    let max_dim = grid.max_dim;
    let wgs = threads.div_ceil(u64::from(grid.workgroup));
    if wgs == 0 {
        return;
    }
    let x = wgs.min(u64::from(max_dim));
    let y = wgs.div_ceil(x);
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, group, &[]);
    pass.dispatch_workgroups(x as u32, y as u32, 1);
}

/// Buffers one MSM reuses across chunks and window groups.
struct Scratch {
    dummy: wgpu::Buffer,
    cursor: wgpu::Buffer,
    blocks: wgpu::Buffer,
    levels: wgpu::Buffer,
    sorted: wgpu::Buffer,
    /// Ping-pong lists of (key, partial sum): A holds the odd levels, B the even.
    keys: [wgpu::Buffer; 2],
    points: [wgpu::Buffer; 2],
    buckets: wgpu::Buffer,
    partials: [wgpu::Buffer; 2],
    windows: wgpu::Buffer,
    readback: wgpu::Buffer,
}

impl Scratch {
    fn new(device: &wgpu::Device, plan: &Plan) -> Self {
        let keys = plan.group_keys();
        let level = |i: usize| plan.level_max.get(i).copied().unwrap_or(0);
        let partials = u64::from(plan.group_windows) * u64::from(plan.reduce_threads);
        let window_bytes = u64::from(plan.windows) * XYZZ_BYTES;
        Self {
            dummy: storage(device, "msm dummy", 16),
            cursor: storage(device, "msm cursor", keys * 4),
            blocks: storage(
                device,
                "msm blocks",
                keys.div_ceil(u64::from(SCAN_BLOCK)) * 4,
            ),
            levels: storage(device, "msm level counts", LEVEL_SLOTS * 4),
            sorted: storage(device, "msm sorted", plan.max_entries * 8),
            keys: [
                storage(device, "msm keys A", level(1) * 4),
                storage(device, "msm keys B", level(2) * 4),
            ],
            points: [
                storage(device, "msm points A", level(1) * XYZZ_BYTES),
                storage(device, "msm points B", level(2) * XYZZ_BYTES),
            ],
            buckets: storage(device, "msm buckets", keys * XYZZ_BYTES),
            partials: [
                storage(device, "msm partials A", partials * XYZZ_BYTES),
                storage(
                    device,
                    "msm partials B",
                    partials.div_ceil(u64::from(GROUP)) * XYZZ_BYTES,
                ),
            ],
            windows: storage(device, "msm windows", window_bytes),
            readback: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("msm readback"),
                size: window_bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        }
    }
}

/// Device buffers of one chunk's terms.
struct ChunkBuffers<'a> {
    terms: &'a ChunkTerms<'a>,
    scalars: wgpu::Buffer,
    indices: Option<wgpu::Buffer>,
    ones: Option<wgpu::Buffer>,
}

/// `sum_i s_i P_i` over `chunks`, as planned.
pub(crate) fn run(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    p: &Pipelines,
    grid: Grid,
    plan: &Plan,
    chunks: &[ChunkTerms<'_>],
) -> Result<G1Projective, MsmError> {
    let chunks: Vec<&ChunkTerms<'_>> = chunks.iter().filter(|c| !c.is_empty()).collect();
    if chunks.is_empty() {
        return Ok(G1Projective::identity());
    }
    let words = scoped(device, || {
        let s = Scratch::new(device, plan);
        let bufs: Vec<ChunkBuffers<'_>> = chunks
            .iter()
            .map(|t| ChunkBuffers {
                terms: t,
                scalars: upload(
                    device,
                    queue,
                    "msm scalars",
                    bytemuck::cast_slice(t.scalars),
                ),
                indices: t
                    .indices
                    .map(|i| upload(device, queue, "msm tail indices", bytemuck::cast_slice(i))),
                ones: t
                    .ones
                    .map(|(w, _)| upload(device, queue, "msm ones", bytemuck::cast_slice(w))),
            })
            .collect();
        let groups = plan.windows.div_ceil(plan.group_windows);
        let mut last = None;
        for g in 0..groups {
            let w_lo = g * plan.group_windows;
            let w_hi = (w_lo + plan.group_windows).min(plan.windows);
            let mut enc = device.create_command_encoder(&Default::default());
            enc.clear_buffer(&s.buckets, 0, None);
            for (k, b) in bufs.iter().enumerate() {
                let accumulate = k > 0;
                encode_chunk(
                    device, &mut enc, p, plan, &s, b, w_lo, w_hi, accumulate, grid,
                );
            }
            encode_reduce(device, &mut enc, p, plan, &s, w_lo, w_hi, grid);
            if g + 1 == groups {
                enc.copy_buffer_to_buffer(&s.windows, 0, &s.readback, 0, s.readback.size());
            }
            last = Some(queue.submit([enc.finish()]));
        }
        Ok((s.readback, last))
    })?;
    let (words, last) = words;
    let (tx, rx) = std::sync::mpsc::channel();
    words.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    // Waits for this MSM's last submission, not for other work on the device;
    // the map's callback runs inside a poll, so a second, full wait is the
    // fallback, and a callback that still has not run is an error, not a hang.
    let lost = |e: &dyn std::fmt::Display| MsmError::DeviceLost(e.to_string());
    device
        .poll(wgpu::PollType::Wait {
            submission_index: last,
            timeout: None,
        })
        .map_err(|e| lost(&e))?;
    let mapped = match rx.try_recv() {
        Ok(r) => r,
        Err(_) => {
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| lost(&e))?;
            rx.try_recv()
                .map_err(|_| lost(&"the readback never completed"))?
        }
    };
    mapped.map_err(|e| lost(&e))?;
    let view = words
        .slice(..)
        .get_mapped_range()
        .map_err(|e| MsmError::DeviceLost(e.to_string()))?;
    let w: &[u32] = bytemuck::cast_slice(&view);
    // Horner from the top window: acc = acc 2^c + window_w.
    let mut acc = G1Projective::identity();
    for win in w.chunks_exact(XYZZ_WORDS).rev() {
        for _ in 0..plan.c {
            acc = acc.double();
        }
        acc += xyzz_to_projective(win)
            .ok_or_else(|| MsmError::Device("a window sum read back is not a point".into()))?;
    }
    Ok(acc)
}

#[allow(clippy::too_many_arguments)]
fn encode_chunk(
    device: &wgpu::Device,
    enc: &mut wgpu::CommandEncoder,
    p: &Pipelines,
    plan: &Plan,
    s: &Scratch,
    b: &ChunkBuffers<'_>,
    w_lo: u32,
    w_hi: u32,
    accumulate: bool,
    grid: Grid,
) {
    let t = b.terms;
    let keys = u64::from(w_hi - w_lo) * u64::from(plan.half);
    let n_blocks = keys.div_ceil(u64::from(SCAN_BLOCK));
    enc.clear_buffer(&s.cursor, 0, None);
    enc.clear_buffer(&s.levels, 0, None);
    // The digit passes: the scalars, then (first group only) the ones.
    let mut sources: Vec<(wgpu::BindGroup, u64)> = Vec::new();
    if !t.scalars.is_empty() {
        let mode = if t.indices.is_some() { 1 } else { 0 };
        let u = params(
            device,
            &[
                t.scalars.len() as u32,
                mode,
                t.chunk.first as u32,
                plan.c,
                w_lo,
                w_hi,
                u32::from(t.montgomery),
                0,
            ],
        );
        let idx = b.indices.as_ref().unwrap_or(&s.dummy);
        let g = bind(
            device,
            &p.digits,
            &[&u, &b.scalars, idx, &s.dummy, &s.cursor, &s.sorted],
        );
        sources.push((g, t.scalars.len() as u64));
    }
    if let (Some(ones), true) = (&b.ones, w_lo == 0) {
        let u = params(
            device,
            &[t.chunk.len as u32, 2, 0, plan.c, w_lo, w_hi, 0, 0],
        );
        let g = bind(
            device,
            &p.digits,
            &[&u, &s.dummy, &s.dummy, ones, &s.cursor, &s.sorted],
        );
        sources.push((g, t.chunk.len as u64));
    }
    let scan_u = params(device, &[keys as u32, SCAN_BLOCK, n_blocks as u32, 0]);
    let scan_g = bind(device, &p.scan, &[&scan_u, &s.cursor, &s.blocks, &s.levels]);

    let mut pass = enc.begin_compute_pass(&Default::default());
    for (g, n) in &sources {
        dispatch(&mut pass, &p.digits.pipelines[0], g, *n, grid);
    }
    dispatch(&mut pass, &p.scan.pipelines[0], &scan_g, n_blocks, grid);
    pass.set_pipeline(&p.scan.pipelines[1]);
    pass.set_bind_group(0, &scan_g, &[]);
    pass.dispatch_workgroups(1, 1, 1);
    dispatch(&mut pass, &p.scan.pipelines[2], &scan_g, n_blocks, grid);
    for (g, n) in &sources {
        dispatch(&mut pass, &p.digits.pipelines[1], g, *n, grid);
    }
    // Level 0 from the sorted digits, then the levels of partial sums.
    let u = params(device, &[0, SEG0 as u32, 0, u32::from(accumulate)]);
    let g = bind(
        device,
        &p.accumulate,
        &[
            &u,
            &s.sorted,
            &t.chunk.buffer,
            &s.levels,
            &s.buckets,
            &s.keys[0],
            &s.points[0],
        ],
    );
    dispatch(
        &mut pass,
        &p.accumulate.pipelines[0],
        &g,
        plan.level_max[0].div_ceil(SEG0),
        grid,
    );
    for level in 1..plan.level_max.len() {
        let (i, o) = if level % 2 == 1 { (0, 1) } else { (1, 0) };
        let u = params(
            device,
            &[level as u32, SEG as u32, 0, u32::from(accumulate)],
        );
        let g = bind(
            device,
            &p.combine,
            &[
                &u,
                &s.keys[i],
                &s.points[i],
                &s.levels,
                &s.buckets,
                &s.keys[o],
                &s.points[o],
            ],
        );
        let segs = plan.level_max[level].div_ceil(SEG);
        dispatch(&mut pass, &p.combine.pipelines[0], &g, segs, grid);
    }
}

#[allow(clippy::too_many_arguments)]
fn encode_reduce(
    device: &wgpu::Device,
    enc: &mut wgpu::CommandEncoder,
    p: &Pipelines,
    plan: &Plan,
    s: &Scratch,
    w_lo: u32,
    w_hi: u32,
    grid: Grid,
) {
    let wg = w_hi - w_lo;
    let threads = wg * plan.reduce_threads;
    let u = params(
        device,
        &[
            plan.half,
            plan.reduce_per_thread,
            plan.reduce_threads,
            threads,
            0,
            0,
            0,
            0,
        ],
    );
    let g = bind(device, &p.reduce, &[&u, &s.buckets, &s.partials[0]]);
    let mut pass = enc.begin_compute_pass(&Default::default());
    dispatch(
        &mut pass,
        &p.reduce.pipelines[0],
        &g,
        u64::from(threads),
        grid,
    );
    // Sum each window's partials, GROUP at a time, until one a window is left;
    // the last pass writes window w_lo + i to slot w_lo + i of `windows`.
    let mut per_window = plan.reduce_threads;
    let mut from = 0;
    loop {
        let group = per_window.min(GROUP);
        let next = per_window / group;
        let last = next == 1;
        let out = if last {
            &s.windows
        } else {
            &s.partials[1 - from]
        };
        let offset = if last { w_lo } else { 0 };
        let n_out = wg * next;
        let u = params(device, &[wg * per_window, group, n_out, offset, 0, 0, 0, 0]);
        let g = bind(device, &p.reduce, &[&u, &s.partials[from], out]);
        dispatch(
            &mut pass,
            &p.reduce.pipelines[1],
            &g,
            u64::from(n_out),
            grid,
        );
        if last {
            break;
        }
        per_window = next;
        from = 1 - from;
    }
}
