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
    extern __shared__ u32 smem[];
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

// out[bitrev(p)] = in[p] * P(bitrev(p)): leaves the bit-reversed output of a DIF
// inverse transform in natural order with the coset and 1/N factors applied.
extern "C" __global__ void bitrev_scale_copy(const Fr* in, Fr* out, u32 log_n, const Fr* P0, const Fr* P1) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (1u << log_n)) return;
    u32 q = bitrev(p, log_n);
    Fr f = Fr::mul(Fr::load(P0 + (q & 0xffff)), Fr::load(P1 + (q >> 16)));
    Fr::mul(Fr::load(in + p), f).store(out + q);
}

// a = (a * b - c) * zinv on the coset: the quotient by Z = g^N - 1.
extern "C" __global__ void abc_combine(Fr* a, const Fr* b, const Fr* c, u32 n, Fr zinv) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr x = Fr::mul(Fr::load(a + i), Fr::load(b + i));
    x = Fr::sub(x, Fr::load(c + i));
    Fr::mul(x, zinv).store(a + i);
}
