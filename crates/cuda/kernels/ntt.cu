// Number-theoretic transforms over Fr, in place, for domains up to 2^28.
//
// A transform of 2^L points runs as a few passes, each doing k <= 10 radix-2 stages of
// one chunk of index bits inside shared memory. The passes follow the Cooley-Tukey
// split N = N1 * N2 applied recursively: a pass transforms its chunk of bits as an
// independent 2^k-point NTT, and between passes every element is multiplied by a
// twiddle omega_{N'}^(i_rest * k_prev), where k_prev is the (bit-reversed) output index
// of the previous, higher chunk and i_rest the position's bits below that chunk.
//
// ntt_pass with dit = 0 is decimation in frequency: natural-order input, bit-reversed
// output, passes from the high bits down, the inter-pass twiddle applied on load.
// dit = 1 is the transpose: bit-reversed input, natural-order output, passes from the
// low bits up, the same twiddle applied on store. Powers of the 2^32-th root of unity
// come from two tables of 2^16 entries each (T0[i] = w^i, T1[i] = w^(i * 2^16) with
// w the primitive 2^32-th root, or its inverse), so every root of every domain size is
// T0[x & 0xffff] * T1[x >> 16] and the local stages' roots are single T1 entries.
//
// ntt_pass is the first version (one stage per barrier), kept as r2wf's kernel for
// tiles under a warp; ntt_r2wf_* below give bit-identical results with fewer barriers.
// ntt_r2wg_* (with ntt_pass_g for small tiles, the default) is the one exception to the
// split above: the same passes with the plain radix-2 transform's global twiddles and
// no inter-pass twiddle (see R2wg). Kernels that never won (r8, radix2 alone, r2w,
// r2wf3) were removed; crates/cuda/NOTES.md keeps their numbers and last commit.
// tests/ntt_host.rs compiles this file for the host (tests/host/ntt_host.cpp runs a
// block's threads as host threads) and checks every pass kernel against the CPU NTT.

// A kernel's dynamic shared memory (the launch's shared_mem_bytes); the host harness
// defines it as its own block-wide buffer.
#ifndef CUZK_DYNAMIC_SMEM
#define CUZK_DYNAMIC_SMEM(name) extern __shared__ u32 name[]
#endif

__device__ __forceinline__ Fr root_pow(const Fr* T0, const Fr* T1, u32 x) {
    u32 lo = x & 0xffff, hi = x >> 16;
    if (lo == 0) return Fr::load(T1 + hi);
    if (hi == 0) return Fr::load(T0 + lo);
    return Fr::mul(Fr::load(T0 + lo), Fr::load(T1 + hi));
}

// Twiddle between passes for position p: chunk [lo, lo + k) is this pass's, the
// previous chunk is the prev_k bits above it.
__device__ __forceinline__ Fr pass_twiddle(const Fr* T0, const Fr* T1, u32 p, u32 lo, u32 k, u32 prev_k) {
    u32 below = lo + k;
    u32 kp = bitrev((p >> below) & ((1u << prev_k) - 1), prev_k);
    u32 irest = p & ((1u << below) - 1);
    u32 order = below + prev_k;
    return root_pow(T0, T1, (kp * irest) << (32 - order));
}

__device__ __forceinline__ void smem_store(u32* s, u32 tile, u32 e, const Fr& x) {
#pragma unroll
    for (int w = 0; w < 8; w++) s[w * tile + e] = x.v[w];
}
__device__ __forceinline__ Fr smem_load(const u32* s, u32 tile, u32 e) {
    Fr x;
#pragma unroll
    for (int w = 0; w < 8; w++) x.v[w] = s[w * tile + e];
    return x;
}

// One pass: k stages over bits [lo, lo + k) for 2^c neighbouring sub-transforms per
// block (c <= lo) so that global accesses come in runs of 2^c consecutive elements.
// Block: 2^(k + c - 1) threads, 32 * 2^(k + c) bytes of dynamic shared memory.
extern "C" __global__ void ntt_pass(Fr* data, u32 lo, u32 k, u32 c, u32 prev_k, u32 dit,
                                    const Fr* T0, const Fr* T1) {
    CUZK_DYNAMIC_SMEM(smem);
    const u32 tile = 1u << (k + c);
    const u32 half = tile >> 1;
    const u32 t = threadIdx.x;
    const u32 smask = (1u << c) - 1;
    const u32 b = blockIdx.x;
    const u32 sub_base = (b & ((1u << (lo - c)) - 1)) << c;
    const u32 high = b >> (lo - c);
    const u32 base = (high << (lo + k)) | sub_base;

#pragma unroll
    for (int r = 0; r < 2; r++) {
        u32 e = t + r * half;
        u32 p = base | ((e >> c) << lo) | (e & smask);
        Fr x = Fr::load(data + p);
        if (!dit && prev_k) x = Fr::mul(x, pass_twiddle(T0, T1, p, lo, k, prev_k));
        smem_store(smem, tile, e, x);
    }
    __syncthreads();

    const u32 s = t & smask;
    const u32 q = t >> c;
    for (u32 st = 0; st < k; st++) {
        u32 lh = dit ? st : (k - 1 - st);  // log2 of the span
        u32 h = 1u << lh;
        u32 j = q & (h - 1);
        u32 l1 = ((q >> lh) << (lh + 1)) | j;
        u32 e1 = (l1 << c) | s, e2 = ((l1 + h) << c) | s;
        Fr x = smem_load(smem, tile, e1), y = smem_load(smem, tile, e2);
        if (dit) {
            if (j != 0) y = Fr::mul(y, Fr::load(T1 + (j << (15 - lh))));
            smem_store(smem, tile, e1, Fr::add(x, y));
            smem_store(smem, tile, e2, Fr::sub(x, y));
        } else {
            Fr d = Fr::sub(x, y);
            if (j != 0) d = Fr::mul(d, Fr::load(T1 + (j << (15 - lh))));
            smem_store(smem, tile, e1, Fr::add(x, y));
            smem_store(smem, tile, e2, d);
        }
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        u32 e = t + r * half;
        u32 p = base | ((e >> c) << lo) | (e & smask);
        Fr x = smem_load(smem, tile, e);
        if (dit && prev_k) x = Fr::mul(x, pass_twiddle(T0, T1, p, lo, k, prev_k));
        x.store(data + p);
    }
}

// Global position of tile element e in the block whose first position is `base`.
__device__ __forceinline__ u32 tile_pos(u32 base, u32 lo, u32 c, u32 e) {
    return base | ((e >> c) << lo) | (e & ((1u << c) - 1));
}

// pass_twiddle with one load up to order 18.
__device__ __forceinline__ Fr pass_twiddle18(const Fr* T0, const Fr* T1, const Fr* T18, u32 p, u32 lo, u32 k,
                                             u32 prev_k) {
    u32 below = lo + k;
    u32 kp = bitrev((p >> below) & ((1u << prev_k) - 1), prev_k);
    u32 irest = p & ((1u << below) - 1);
    u32 order = below + prev_k;
    u32 e = kp * irest;  // < 2^order
    if (order <= 16) return Fr::load(T1 + (e << (16 - order)));
    if (order <= 18) return Fr::load(T18 + (e << (18 - order)));
    return root_pow(T0, T1, e << (32 - order));
}

// ---- Radix-2 with warp shuffles: ntt_r2wf_dif / ntt_r2wf_dit (ntt_kernel = "r2wf"). ----
//
// ntt_pass's butterflies and thread count (2 elements per thread, 2^(k + c - 1)
// threads), with fewer shared-memory exchanges and barriers:
// - A stage whose pair is (e, e + 2^P) in tile index e ("stage at tile bit P",
//   P = c + lh) is done by thread T on e1 = ins1(T, P) (a zero bit inserted at P) and
//   e1 + 2^P: that is ntt_pass's pairing, written once for all phases.
// - The top stage (P = k + c - 1) pairs (t, t + half): DIF does it straight after the
//   global load, DIT straight before the global store, without shared memory.
// - Stages at P >= 6 cross warps: one shared-memory exchange and barrier each
//   (tile bits below c are not stages: the 2^c sub-transforms side by side).
// - Stages at P <= 5 stay inside a warp, which holds the 64 tile elements with the
//   same bits >= 6 (lane = 5 bits, register = 1 bit). Before the stage at P the
//   register holds tile bit P and the lanes hold the other bits in order
//   (e1 = ins1(lane, P) | warp << 6); going to the next stage swaps the register bit
//   with one lane bit through __shfl_xor_sync (r2w_swap): 8 shuffles per thread, no
//   barrier. The DIF store and the DIT load use the warp arrangement of the last
//   (first) stage at P = min(c, 5) directly: runs of 2^c elements as in ntt_pass.
// - The inter-pass twiddle is one table load up to order 18 (pass_twiddle18).
// A 9-bit pass with c <= 1 (2^27) has 4 barriers instead of 10 and 4 shared-memory
// round trips per element instead of 10. Needs k + c >= 6 (a full warp; the host
// uses ntt_pass for smaller tiles). Block: 2^(k + c - 1) threads, 32 * 2^(k + c)
// bytes of dynamic shared memory (used only when k + c > 6).

__device__ __forceinline__ u32 r2w_ins1(u32 t, u32 pos) {
    return ((t >> pos) << (pos + 1)) | (t & ((1u << pos) - 1));
}

// The butterfly of ntt_pass on (x, y) = elements (e1, e1 + 2^P), twiddle index j of
// span 2^lh (lh = P - c).
template <bool DIT>
__device__ __forceinline__ void r2w_bfly(Fr& x, Fr& y, u32 j, u32 lh, const Fr* T1) {
    if (DIT) {
        if (j != 0) y = fr_mul_nt(y, Fr::load(T1 + (j << (15 - lh))));
        Fr s = Fr::add(x, y);
        y = Fr::sub(x, y);
        x = s;
    } else {
        Fr d = Fr::sub(x, y);
        x = Fr::add(x, y);
        if (j != 0) d = fr_mul_nt(d, Fr::load(T1 + (j << (15 - lh))));
        y = d;
    }
}

// ---- Global twiddles: the r2wg flavour of r2w_pass (ntt_kernel = "r2wg"). ----
//
// Every butterfly is the plain radix-2 transform's on the whole array of N = 2^log_n:
// stage b (span 2^b; in a pass, chunk bit lh = b - lo) pairs positions (i, i + 2^b),
// bit b of i clear, with the twiddle w_{2^(b+1)}^(i mod 2^b) = w_N^((i mod 2^b) <<
// (log_n - 1 - b)), one load from W[j] = w_N^j (j < N/2, w_N the forward root; built
// by ntt_r2wg_table). DIF (stages from the top bit down): x' = x + y, y' = (x - y) w;
// DIT (from b = 0 up): x' = x + y w, y' = x - y w. The passes then compose with no
// inter-pass twiddle at all (prev_k is ignored). i mod 2^b is the lower element's
// position below bit b: its chunk bits below lh (shifted to lo) and its bits below lo
// (the block's sub-transform bits and the element's bits below c). What the four-step
// split hoists into the inter-pass twiddle is here part of the load index.
// The inverse reads the same table: w_N^-t = -W[N/2 - t] for 0 < t < N/2, the sign
// folded into the butterfly (DIF: y' = (y - x) W[N/2 - t]; DIT: x' = x - y W[N/2 - t],
// y' = x + y W[N/2 - t]). Index 0 (twiddle 1) skips the load and the product, per
// thread: a warp saves the product only where all its lanes have index 0 (the span-1
// stage of the lo = 0 pass).
struct R2wg {
    const Fr* W;
    u32 log_n;
    u32 inv;
};

// W index of the butterfly whose lower element is tile element e1, chunk bit lh.
__device__ __forceinline__ u32 r2wg_index(u32 base, u32 lo, u32 c, u32 e1, u32 lh, u32 log_n) {
    const u32 b = lo + lh;
    return (tile_pos(base, lo, c, e1) & ((1u << b) - 1)) << (log_n - 1 - b);
}

template <bool DIT>
__device__ __forceinline__ void r2wg_bfly(Fr& x, Fr& y, u32 wi, const R2wg& g) {
    if (wi == 0) {
        Fr s = Fr::add(x, y);
        y = Fr::sub(x, y);
        x = s;
        return;
    }
    const Fr w = Fr::load(g.W + (g.inv ? (1u << (g.log_n - 1)) - wi : wi));
    if (DIT) {
        y = fr_mul_nt(y, w);  // the inverse's product is -y w
        Fr a = Fr::add(x, y), s = Fr::sub(x, y);
        x = g.inv ? s : a;
        y = g.inv ? a : s;
    } else {
        Fr d = g.inv ? Fr::sub(y, x) : Fr::sub(x, y);
        x = Fr::add(x, y);
        y = fr_mul_nt(d, w);
    }
}

// The butterfly of stage lh on tile elements (e1, e1 + 2^(c + lh)) in r2w_pass: with
// the pass's own twiddle index j (the four-step flavours) or the global one (r2wg).
template <bool DIT, bool GLOBAL>
__device__ __forceinline__ void r2w_bfly_e(Fr& x, Fr& y, u32 e1, u32 j, u32 lh, const Fr* T1, u32 base, u32 lo,
                                           u32 c, const R2wg& g) {
    if (GLOBAL) r2wg_bfly<DIT>(x, y, r2wg_index(base, lo, c, e1, lh, g.log_n), g);
    else r2w_bfly<DIT>(x, y, j, lh, T1);
}

// Swaps the register bit with lane bit lb: a lane with lane bit v keeps x[v] and
// receives its partner's x[v] (the partner sends the element it gives up) as x[1 - v].
__device__ __forceinline__ void r2w_swap(Fr& x0, Fr& x1, u32 lane, u32 lb) {
    const bool v = (lane >> lb) & 1;
#pragma unroll
    for (int w = 0; w < 8; w++) {
        u32 send = v ? x0.v[w] : x1.v[w];
        u32 recv = __shfl_xor_sync(0xffffffffu, send, 1u << lb);
        if (v) x0.v[w] = recv;
        else x1.v[w] = recv;
    }
}

// A stage at tile bit P >= 6 through shared memory (then a barrier).
template <bool DIT, bool GLOBAL>
__device__ __forceinline__ void r2w_smem_stage(u32* smem, u32 tile, u32 t, u32 c, u32 P, const Fr* T1, u32 base,
                                               u32 lo, const R2wg& g) {
    const u32 e1 = r2w_ins1(t, P), e2 = e1 | (1u << P);
    const u32 lh = P - c;
    Fr x = smem_load(smem, tile, e1), y = smem_load(smem, tile, e2);
    r2w_bfly_e<DIT, GLOBAL>(x, y, e1, (e1 >> c) & ((1u << lh) - 1), lh, T1, base, lo, c, g);
    smem_store(smem, tile, e1, x);
    smem_store(smem, tile, e2, y);
    __syncthreads();
}

template <bool DIT, bool GLOBAL>
__device__ __forceinline__ void r2w_pass(Fr* data, u32 lo, u32 k, u32 c, u32 prev_k, const Fr* T0, const Fr* T1,
                                         const Fr* T18, const R2wg g) {
    CUZK_DYNAMIC_SMEM(smem);
    const u32 tb = k + c;
    const u32 tile = 1u << tb;
    const u32 half = tile >> 1;
    const u32 t = threadIdx.x;
    const u32 lane = t & 31, wbase = (t >> 5) << 6;
    const u32 blk = blockIdx.x;
    const u32 base = ((blk >> (lo - c)) << (lo + k)) | ((blk & ((1u << (lo - c)) - 1)) << c);
    const u32 top = tb - 1;            // the top stage's tile bit
    const u32 cc = c < 5 ? c : 5;      // the warp arrangement at the DIF end / DIT start
    const u32 jtop = (t >> c) & ((1u << (k - 1)) - 1);
    Fr x0, x1;

    if (!DIT) {
        {
            const u32 p0 = tile_pos(base, lo, c, t), p1 = tile_pos(base, lo, c, t + half);
            x0 = Fr::load(data + p0);
            x1 = Fr::load(data + p1);
            if (!GLOBAL && prev_k) {
                x0 = fr_mul_nt(x0, pass_twiddle18(T0, T1, T18, p0, lo, k, prev_k));
                x1 = fr_mul_nt(x1, pass_twiddle18(T0, T1, T18, p1, lo, k, prev_k));
            }
        }
        r2w_bfly_e<false, GLOBAL>(x0, x1, t, jtop, k - 1, T1, base, lo, c, g);
        if (top > 5) {
            smem_store(smem, tile, t, x0);
            smem_store(smem, tile, t + half, x1);
            __syncthreads();
            for (u32 P = top - 1; P >= 6 && P >= c; P--)
                r2w_smem_stage<false, GLOBAL>(smem, tile, t, c, P, T1, base, lo, g);
            x0 = smem_load(smem, tile, wbase | lane);
            x1 = smem_load(smem, tile, wbase | lane | 32);
        }
        // Warp stages P = 5 .. c (P = 5 already done when it is the top stage).
        for (int P = 5; P >= (int)c; P--) {
            if (P < 5) r2w_swap(x0, x1, lane, P);
            if (P < (int)top) {
                const u32 lh = P - c;
                r2w_bfly_e<false, GLOBAL>(x0, x1, wbase | r2w_ins1(lane, P), (lane >> c) & ((1u << lh) - 1),
                                                lh, T1, base, lo, c, g);
            }
        }
        const u32 e0 = wbase | r2w_ins1(lane, cc);
        x0.store(data + tile_pos(base, lo, c, e0));
        x1.store(data + tile_pos(base, lo, c, e0 | (1u << cc)));
    } else {
        {
            const u32 e0 = wbase | r2w_ins1(lane, cc);
            x0 = Fr::load(data + tile_pos(base, lo, c, e0));
            x1 = Fr::load(data + tile_pos(base, lo, c, e0 | (1u << cc)));
        }
        // Warp stages P = c .. 5 (P = 5 is the top stage when the tile is one warp).
        for (u32 P = cc; P <= 5; P++) {
            if (P > cc) r2w_swap(x0, x1, lane, P - 1);
            if (P >= c) {
                const u32 lh = P - c;
                r2w_bfly_e<true, GLOBAL>(x0, x1, wbase | r2w_ins1(lane, P), (lane >> c) & ((1u << lh) - 1),
                                               lh, T1, base, lo, c, g);
            }
        }
        if (top > 5) {
            smem_store(smem, tile, wbase | lane, x0);
            smem_store(smem, tile, wbase | lane | 32, x1);
            __syncthreads();
            for (u32 P = c > 6 ? c : 6; P < top; P++)
                r2w_smem_stage<true, GLOBAL>(smem, tile, t, c, P, T1, base, lo, g);
            x0 = smem_load(smem, tile, t);
            x1 = smem_load(smem, tile, t + half);
            r2w_bfly_e<true, GLOBAL>(x0, x1, t, jtop, k - 1, T1, base, lo, c, g);
        }
        const u32 p0 = tile_pos(base, lo, c, t), p1 = tile_pos(base, lo, c, t + half);
        if (!GLOBAL && prev_k) {
            x0 = fr_mul_nt(x0, pass_twiddle18(T0, T1, T18, p0, lo, k, prev_k));
            x1 = fr_mul_nt(x1, pass_twiddle18(T0, T1, T18, p1, lo, k, prev_k));
        }
        x0.store(data + p0);
        x1.store(data + p1);
    }
}

// The butterflies and the twiddle applications use fr_mul_nt (ntt_kernel = "r2wf";
// the product inside an order > 18 twiddle stays Fr::mul).
extern "C" __global__ void __launch_bounds__(512) ntt_r2wf_dif(Fr* data, u32 lo, u32 k, u32 c, u32 prev_k,
                                                              const Fr* T0, const Fr* T1, const Fr* T18) {
    r2w_pass<false, false>(data, lo, k, c, prev_k, T0, T1, T18, R2wg{});
}
extern "C" __global__ void __launch_bounds__(512) ntt_r2wf_dit(Fr* data, u32 lo, u32 k, u32 c, u32 prev_k,
                                                              const Fr* T0, const Fr* T1, const Fr* T18) {
    r2w_pass<true, false>(data, lo, k, c, prev_k, T0, T1, T18, R2wg{});
}

// r2wf's pass with global twiddles (see R2wg): no inter-pass twiddles, every pass reads
// W (ntt_kernel = "r2wg"). The same launch as r2wf. inv: the inverse transform.
// Two blocks per SM (32 warps): ptxas (sm_90) gave the DIT pass 72 registers with the
// even/odd products, one block per SM, and the DIT transform ran 25% slower than the
// DIF one (55.5 against 44.3 ms at 2^27); bounded, both fit 64 with no spills and the
// two run alike (44.3 / 44.7 ms).
// Tried (fifth session): the top chunk's pass as r2wf's (local twiddles only, 13.6
// against 16.1 ms at 2^27) with the four-step twiddle applied by the pass below: that
// twiddle, of order N, costs two products per element, and the transform went from
// 46.7 to 49.3 ms (5.20 to 5.47 at 2^24).
extern "C" __global__ void __launch_bounds__(512, 2) ntt_r2wg_dif(Fr* data, u32 lo, u32 k, u32 c, u32 log_n, u32 inv,
                                                              const Fr* W) {
    r2w_pass<false, true>(data, lo, k, c, 0, nullptr, nullptr, nullptr, R2wg{W, log_n, inv});
}
extern "C" __global__ void __launch_bounds__(512, 2) ntt_r2wg_dit(Fr* data, u32 lo, u32 k, u32 c, u32 log_n, u32 inv,
                                                              const Fr* W) {
    r2w_pass<true, true>(data, lo, k, c, 0, nullptr, nullptr, nullptr, R2wg{W, log_n, inv});
}

// ntt_pass with r2wg's global twiddles: r2wg's passes whose tile is under a warp's 64
// elements (all passes of a transform must use the same decomposition, so these
// cannot fall back to ntt_pass as r2wf's do).
extern "C" __global__ void ntt_pass_g(Fr* data, u32 lo, u32 k, u32 c, u32 dit, u32 log_n, u32 inv, const Fr* W) {
    CUZK_DYNAMIC_SMEM(smem);
    const R2wg g{W, log_n, inv};
    const u32 tile = 1u << (k + c);
    const u32 half = tile >> 1;
    const u32 t = threadIdx.x;
    const u32 smask = (1u << c) - 1;
    const u32 b = blockIdx.x;
    const u32 base = ((b >> (lo - c)) << (lo + k)) | ((b & ((1u << (lo - c)) - 1)) << c);

#pragma unroll
    for (int r = 0; r < 2; r++) {
        u32 e = t + r * half;
        smem_store(smem, tile, e, Fr::load(data + tile_pos(base, lo, c, e)));
    }
    __syncthreads();

    const u32 s = t & smask;
    const u32 q = t >> c;
    for (u32 st = 0; st < k; st++) {
        u32 lh = dit ? st : (k - 1 - st);  // log2 of the span within the chunk
        u32 h = 1u << lh;
        u32 l1 = ((q >> lh) << (lh + 1)) | (q & (h - 1));
        u32 e1 = (l1 << c) | s, e2 = ((l1 + h) << c) | s;
        Fr x = smem_load(smem, tile, e1), y = smem_load(smem, tile, e2);
        u32 wi = r2wg_index(base, lo, c, e1, lh, log_n);
        if (dit) r2wg_bfly<true>(x, y, wi, g);
        else r2wg_bfly<false>(x, y, wi, g);
        smem_store(smem, tile, e1, x);
        smem_store(smem, tile, e2, y);
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        u32 e = t + r * half;
        smem_load(smem, tile, e).store(data + tile_pos(base, lo, c, e));
    }
}

// W[j] = w_N^j for j < N/2 (N = 2^log_n, w_N the forward root, log_n >= 1): r2wg's
// table, built once per size (Ntt caches it).
extern "C" __global__ void ntt_r2wg_table(Fr* W, u32 log_n, const Fr* T0, const Fr* T1) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (1u << (log_n - 1))) return;
    root_pow(T0, T1, j << (32 - log_n)).store(W + j);
}

// data[p] *= P(idx) with idx = p or bitrev(p), P(i) = P0[i & 0xffff] * P1[i >> 16]
// (tables of scaled powers s * g^i built on the host).
extern "C" __global__ void scale_by_powers(Fr* data, u32 log_n, u32 bitrev_index, const Fr* P0, const Fr* P1) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (1u << log_n)) return;
    u32 idx = bitrev_index ? bitrev(p, log_n) : p;
    Fr f = Fr::mul(Fr::load(P0 + (idx & 0xffff)), Fr::load(P1 + (idx >> 16)));
    Fr::mul(Fr::load(data + p), f).store(data + p);
}

// In-place bit-reversal permutation, optionally times a constant s.
extern "C" __global__ void bitrev_permute(Fr* data, u32 log_n, u32 do_scale, Fr s) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (1u << log_n)) return;
    u32 q = bitrev(p, log_n);
    if (q < p) return;
    Fr x = Fr::load(data + p);
    Fr y = Fr::load(data + q);
    if (do_scale) {
        x = Fr::mul(x, s);
        y = Fr::mul(y, s);
    }
    y.store(data + p);
    if (q != p) x.store(data + q);
}

// In-place bit reversal by tiles, optionally times s (log_n >= 8; the r2w kernels'
// natural-order transforms). p = (a << (log_n - 4)) | (m << 4) | b with a, b of 4 bits
// has bitrev(p) = (rev4(b) << (log_n - 4)) | (rev(m) << 4) | rev4(a). Block m (those
// with rev(m) < m exit) reads the 256 elements of middle m and of middle rev(m) in
// runs of 16 (512 bytes), and writes each tile to the other's positions, again in
// runs of 16, so a block writes exactly what it read. bitrev_permute's accesses are
// single 32-byte elements scattered over the array. Block: 256 threads.
extern "C" __global__ void __launch_bounds__(256) bitrev_tiled(Fr* data, u32 log_n, u32 do_scale, Fr s) {
    __shared__ u32 tile[2][8][16 * 17];  // word-planar, rows of 16 padded to 17 words
    const u32 mb = log_n - 8;
    const u32 m = blockIdx.x, mr = bitrev(m, mb);
    if (mr < m) return;
    const u32 t = threadIdx.x, hi = t >> 4, lo = t & 15;
    const u32 sh = log_n - 4;
    const u32 ntile = mr == m ? 1 : 2;
    for (u32 i = 0; i < ntile; i++) {
        Fr x = Fr::load(data + ((hi << sh) | ((i ? mr : m) << 4) | lo));
        if (do_scale) x = Fr::mul(x, s);
#pragma unroll
        for (int w = 0; w < 8; w++) tile[i][w][hi * 17 + lo] = x.v[w];
    }
    __syncthreads();
    const u32 a = bitrev(lo, 4), b = bitrev(hi, 4);
    for (u32 i = 0; i < ntile; i++) {
        Fr x;
#pragma unroll
        for (int w = 0; w < 8; w++) x.v[w] = tile[i][w][a * 17 + b];
        x.store(data + ((hi << sh) | ((i ? m : mr) << 4) | lo));
    }
}

// out[bitrev(p)] = in[p] * P(bitrev(p)): leaves the bit-reversed output of a DIF
// inverse transform in natural order with the coset and 1/N factors applied.
// H's coefficients in natural order from X = DIF_inv(a_c b_c / Z) and Y = DIF_inv(c)
// (both bit-reversed, unscaled): out[q] = X[p] g^-q / n - Y[p] s with q = rev(p),
// s = 1 / (n Z). The coset inverse of c's coset evaluations is c's own
// coefficients (deg < n), so c needs one transform instead of three (H = coset_inv(
// a_c b_c - c_c) / Z = (coset_inv(a_c b_c) - coeffs(c)) / Z).
extern "C" __global__ void bitrev_scale_sub_copy(const Fr* in, const Fr* sub, Fr* out, u32 log_n,
                                                 const Fr* P0, const Fr* P1, Fr s) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (1u << log_n)) return;
    u32 q = bitrev(p, log_n);
    Fr f = Fr::mul(Fr::load(P0 + (q & 0xffff)), Fr::load(P1 + (q >> 16)));
    Fr::sub(Fr::mul(Fr::load(in + p), f), Fr::mul(Fr::load(sub + p), s)).store(out + q);
}

// bitrev_scale_sub_copy in place, for a device without room for a third buffer
// (H at 2^27 in two 4 GiB buffers: a 16 GB card): x[q] = x[p] P(q) - y[p] s and
// x[p] = x[q] P(p) - y[q] s for the pair {p, q = rev(p)}, each pair by the thread of
// its smaller index, which reads all four values before it writes either.
extern "C" __global__ void bitrev_scale_sub(Fr* x, const Fr* y, u32 log_n, const Fr* P0,
                                            const Fr* P1, Fr s) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (1u << log_n)) return;
    u32 q = bitrev(p, log_n);
    if (q < p) return;
    Fr fq = Fr::mul(Fr::load(P0 + (q & 0xffff)), Fr::load(P1 + (q >> 16)));
    Fr fp = Fr::mul(Fr::load(P0 + (p & 0xffff)), Fr::load(P1 + (p >> 16)));
    Fr xp = Fr::load(x + p), xq = Fr::load(x + q);
    Fr yp = Fr::load(y + p), yq = Fr::load(y + q);
    Fr::sub(Fr::mul(xp, fq), Fr::mul(yp, s)).store(x + q);
    if (q != p) Fr::sub(Fr::mul(xq, fp), Fr::mul(yq, s)).store(x + p);
}

// a = a * b * zinv on the coset: the product's share of the quotient by Z = g^N - 1
// (c's share is subtracted from the coefficients by bitrev_scale_sub_copy).
extern "C" __global__ void ab_combine(Fr* a, const Fr* b, u32 n, Fr zinv) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr x = Fr::mul(Fr::load(a + i), Fr::load(b + i));
    Fr::mul(x, zinv).store(a + i);
}
