// G1 and G2 multi-scalar multiplication: Pippenger with signed c-bit digits.
//
// Per MSM: msm_histogram counts, per window, how many scalars fall into each bucket;
// an exclusive scan over all buckets of all windows (scan_* below) turns the counts
// into offsets; msm_scatter recomputes the digits and writes
// (point index | sign << 31) into its bucket's segment, so the (bucket, point) pairs
// end up grouped by bucket (a counting sort, order inside a bucket is irrelevant);
// msm_sum_points / msm_sum_xyzz sum each bucket's points in XYZZ, load-balanced; then
// msm_bucket_segments and xyzz_reduce reduce the buckets of each window to
// sum_b b * B_b. The window sums are combined on the host (c doublings each).
//
// The kernels that touch points are templates over the field (Fq: G1, Fq2: G2),
// instantiated as extern "C" kernels with a _g1 / _g2 suffix at the end of this file;
// the digit kernels (histogram, scans, scatter) are the same for both curves.
//
// Digits: window w covers bits [w c, w c + c) plus the carry from below; a value above
// 2^(c-1) becomes value - 2^c with a carry into the next window, so buckets hold
// |digit| in 1..=2^(c-1) and a negative digit adds the negated point. With W windows,
// W c >= 256 > 255 + 1 bits, the top window never carries out.

// Scalar formats: 0 = Fr in Montgomery form (blstrs Scalar, e.g. h on the device),
// 1 = canonical little-endian limbs (prep_msm's tail scalars).
__device__ __forceinline__ Fr load_scalar(const Fr* s, u32 i, u32 fmt) {
    Fr x = Fr::load(s + i);
    return fmt == 0 ? Fr::from_mont(x) : x;
}

__device__ __forceinline__ u32 window_bits(const Fr& s, u32 off, u32 c) {
    const u32 word = off >> 5, sh = off & 31;
    // Select the two limbs with compile-time indices: a run-time index into s.v
    // would move the scalar to local memory.
    u32 lo = 0, hi = 0;
#pragma unroll
    for (u32 i = 0; i < 8; i++) {
        if (i == word) lo = s.v[i];
        if (i == word + 1) hi = s.v[i];
    }
    u64 both = (u64)lo | ((u64)hi << 32);
    return (u32)(both >> sh) & ((1u << c) - 1);
}

extern "C" __global__ void msm_histogram(const Fr* scalars, u32 n, u32 fmt, u32 c, u32 nwin, u32* counts) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr s = load_scalar(scalars, i, fmt);
    const u32 nb = 1u << (c - 1);
    u32 carry = 0;
    for (u32 w = 0; w < nwin; w++) {
        u32 d = window_bits(s, w * c, c) + carry;
        carry = d > nb;
        u32 mag = carry ? (1u << c) - d : d;
        if (mag != 0) atomicAdd(&counts[w * nb + mag - 1], 1u);
    }
}

// only_w < nwin: the entries of that window alone (the host then launches once per
// window, so the cursors in use, 2 MB of a window at c = 20 instead of 27 MB of all
// 13, stay in L2 while the entries are written); otherwise every window.
extern "C" __global__ void msm_scatter(const Fr* scalars, const u32* index_map, u32 n, u32 fmt, u32 c, u32 nwin,
                                       u32 only_w, u32* cursors, u32* sorted) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr s = load_scalar(scalars, i, fmt);
    const u32 point = index_map ? index_map[i] : i;
    const u32 nb = 1u << (c - 1);
    u32 carry = 0;
    for (u32 w = 0; w < nwin; w++) {
        u32 d = window_bits(s, w * c, c) + carry;
        carry = d > nb;
        u32 mag = carry ? (1u << c) - d : d;
        if (mag != 0 && (only_w >= nwin || w == only_w)) {
            u32 pos = atomicAdd(&cursors[w * nb + mag - 1], 1u);
            sorted[pos] = point | (carry << 31);
        }
        if (w == only_w) break;
    }
}

// Bucket sums, load-balanced: a bucket may hold any number of points (all of them,
// for equal scalars; half of them in the carry window of some window sizes), so no
// thread sums a whole bucket. Level 1 cuts every bucket into pieces of at most K
// points, one thread per piece; each further level cuts the previous level's pieces
// of a bucket into groups of at most K, until every bucket has one sum. A level's
// per-bucket counts and starts come from a scan (mode 1); a thread finds its bucket by
// binary search over the starts.

// Last slot x with start[x] <= o (empty slots repeat their successor's start, so the
// last one is the non-empty slot that holds o).
__device__ __forceinline__ u32 find_slot(const u32* start, u32 slots, u32 o) {
    u32 lo = 0, hi = slots - 1;
    while (lo < hi) {
        u32 mid = (lo + hi + 1) >> 1;
        if (start[mid] <= o) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// Piece p of a bucket of cnt entries: [first + p len, min(first + (p + 1) len, first + cnt))
// with len = K, or with balanced != 0 the equal length ceil(cnt / ceil(cnt / K)) <= K,
// so neighbouring threads (a warp) get pieces of one length where buckets hold a few
// pieces each. Both cover the bucket exactly with ceil(cnt / K) pieces, the number the
// level scan counted; a balanced piece past the end is empty (clamped) and sums to
// infinity.
__device__ __forceinline__ void piece_bounds(u32 first, u32 cnt, u32 p, u32 K, u32 balanced, u32* begin, u32* end) {
    u32 len = K;
    if (balanced && cnt > 0) {
        const u32 np = (cnt + K - 1) / K;
        len = (cnt + np - 1) / np;
    }
    const u32 stop = first + cnt;
    *begin = min(first + p * len, stop);
    *end = min(*begin + len, stop);
}

// Level 1: out[o] = sum of the points of piece o (at most K of one bucket's sorted
// entries, negated where the sign bit is set; with sorted null, of the points
// bases[k] themselves).
// V: 0 = add_mixed as the curve's default (G2: the formula one shared call), 1 = the
// formula inlined with its products called (operands by value; G1).
template <class F, int V = 0>
__device__ __forceinline__ void sum_points(const AffineT<F>* bases, const u32* sorted, const u32* offsets, const u32* cnt0,
                                           const u32* start1, const u32* total1, u32 slots, u32 K, u32 balanced,
                                           XyzzT<F>* out) {
    u32 o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= *total1) return;
    u32 x = find_slot(start1, slots, o);
    u32 begin, end;
    piece_bounds(offsets[x], cnt0[x], o - start1[x], K, balanced, &begin, &end);
    XyzzT<F> acc = XyzzT<F>::inf();
    for (u32 k = begin; k < end; k++) {
        // No sorted entries: the points themselves, in bucket order (what is left
        // after batch-affine rounds).
        u32 v = sorted ? sorted[k] : k;
        AffineT<F> a = AffineT<F>::load(bases + (v & 0x7fffffffu));
        if (v >> 31) a = neg_affine(a);
        if constexpr (V == 1) acc = add_mixed_body<F, 1>(acc, a);
        else acc = add_mixed(acc, a);
    }
    acc.store(out + o);
}

// Level L >= 2: out[o] = sum of at most K consecutive level L-1 sums of one bucket.
template <class F>
__device__ __forceinline__ void sum_xyzz(const XyzzT<F>* in, const u32* start_in, const u32* cnt_in, const u32* start_out,
                                         const u32* total_out, u32 slots, u32 K, u32 balanced, XyzzT<F>* out) {
    u32 o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= *total_out) return;
    u32 x = find_slot(start_out, slots, o);
    u32 begin, end;
    piece_bounds(start_in[x], cnt_in[x], o - start_out[x], K, balanced, &begin, &end);
    XyzzT<F> acc = XyzzT<F>::inf();
    for (u32 k = begin; k < end; k++) acc = add(acc, XyzzT<F>::load(in + k));
    acc.store(out + o);
}

// After the last level every slot has at most one sum.
template <class F>
__device__ __forceinline__ void gather_buckets(const XyzzT<F>* in, const u32* start, const u32* cnt, u32 slots, XyzzT<F>* buckets) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= slots) return;
    XyzzT<F> b = cnt[x] ? XyzzT<F>::load(in + start[x]) : XyzzT<F>::inf();
    b.store(buckets + x);
}

// Thread (w, t) reduces buckets [t L + 1, (t + 1) L] of window w (L = nb / segs) to
// sum_b b * B_b: a running sum from the top gives sum (b - t L) B_b, and the segment's
// plain sum times t L (double-and-add) supplies the rest.
template <class F>
__device__ __forceinline__ void bucket_segments(const XyzzT<F>* buckets, u32 nb, u32 segs, u32 nwin, XyzzT<F>* partials) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= nwin * segs) return;
    const u32 w = x / segs, t = x % segs;
    const u32 len = nb / segs;
    const XyzzT<F>* seg = buckets + w * nb + t * len;
    XyzzT<F> run = XyzzT<F>::inf(), acc = XyzzT<F>::inf();
    for (int i = (int)len - 1; i >= 0; i--) {
        run = add(run, XyzzT<F>::load(seg + i));
        acc = add(acc, run);
    }
    u32 m = t * len;
    if (m != 0 && !run.is_inf()) {
        XyzzT<F> prod = XyzzT<F>::inf();
        for (int bit = 31 - __clz(m); bit >= 0; bit--) {
            prod = dbl(prod);
            if ((m >> bit) & 1) prod = add(prod, run);
        }
        acc = add(acc, prod);
    }
    acc.store(partials + x);
}

// out[i] = sum of in[i * fan .. min(i * fan + fan, count_in)).
template <class F>
__device__ __forceinline__ void reduce(const XyzzT<F>* in, XyzzT<F>* out, u32 count_in, u32 fan) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    u32 first = i * fan;
    if (first >= count_in) return;
    XyzzT<F> acc = XyzzT<F>::inf();
    for (u32 j = 0; j < fan && first + j < count_in; j++) acc = add(acc, XyzzT<F>::load(in + first + j));
    acc.store(out + i);
}

// The "ones" of prep_msm's split: the plain sum of the bases whose bit is set in the
// density bitmap. Thread t sums the bases of words [t wpt, (t + 1) wpt).
template <class F>
__device__ __forceinline__ void ones(const AffineT<F>* bases, const u64* words, u32 n_words, u32 n_bases, u32 wpt,
                                     XyzzT<F>* partials, u32 n_partials) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_partials) return;
    XyzzT<F> acc = XyzzT<F>::inf();
    for (u32 k = 0; k < wpt; k++) {
        u32 wi = t * wpt + k;
        if (wi >= n_words) break;
        u64 bits = words[wi];
        while (bits) {
            u32 b = __ffsll((long long)bits) - 1;
            bits &= bits - 1;
            u32 i = wi * 64 + b;
            if (i < n_bases) {
                // G1: the formula inlined with its products called, as the bucket
                // sums' default (CalledProducts) — 189 against 241 ms at 2^24 for
                // the all-inlined formula, whose 155 registers halve occupancy.
                if constexpr (CallFormulas<F>::value) acc = add_mixed(acc, AffineT<F>::load(bases + i));
                else acc = add_mixed_body<F, 1>(acc, AffineT<F>::load(bases + i));
            }
        }
    }
    acc.store(partials + t);
}

// Benchmark bases: out[i] = src[i % m]. Timing needs many points, not independent
// ones; correctness checks use distinct random points from the host.
template <class F>
__device__ __forceinline__ void replicate(const AffineT<F>* src, u32 m, AffineT<F>* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    AffineT<F> a = AffineT<F>::load(src + (i % m));
    a.x.store(&out[i].x);
    a.y.store(&out[i].y);
}

// ---- Exclusive prefix sums over bucket slots ----
//
// The slot count is nwin * 2^(c-1): 2^19 at c = 16, 2^23 and more for the wide windows
// of large MSMs, too many for one block. Three launches: scan_tiles sums each tile of
// SCAN_TILE slots, scan_tile_sums (one block) turns the tile sums into tile offsets,
// scan_apply scans inside each tile and writes the results. The scanned value of slot
// x is f(x) = ceil(cnt[x] / K) (K = 1: the count itself).

#define SCAN_THREADS 1024
#define SCAN_PER 4
#define SCAN_TILE (SCAN_THREADS * SCAN_PER)

__device__ __forceinline__ u32 scan_value(const u32* cnt, u32 x, u32 slots, u32 K) {
    if (x >= slots) return 0;
    const u32 v = cnt[x];
    return K == 1 ? v : (v + K - 1) / K;
}

// Exclusive scan of one value per thread over a block of SCAN_THREADS threads; *total
// gets the block's sum. ws: 33 words of shared memory.
__device__ __forceinline__ u32 block_exclusive_scan(u32 v, u32* ws, u32* total) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 x = v;
#pragma unroll
    for (u32 d = 1; d < 32; d <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    if (lane == 31) ws[warp] = x;
    __syncthreads();
    if (warp == 0) {
        const u32 s = ws[lane];
        u32 t = s;
#pragma unroll
        for (u32 d = 1; d < 32; d <<= 1) {
            u32 y = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += y;
        }
        ws[lane] = t - s;
        if (lane == 31) ws[32] = t;
    }
    __syncthreads();
    const u32 r = ws[warp] + x - v;
    *total = ws[32];
    __syncthreads();
    return r;
}

// tile_sums[b] = sum of f over tile b (coalesced: thread t reads t, t + 1024, ...).
extern "C" __global__ void scan_tiles(const u32* cnt, u32 slots, u32 K, u32* tile_sums) {
    __shared__ u32 ws[33];
    const u32 base = blockIdx.x * SCAN_TILE;
    u32 s = 0;
#pragma unroll
    for (u32 i = 0; i < SCAN_PER; i++) s += scan_value(cnt, base + i * SCAN_THREADS + threadIdx.x, slots, K);
    u32 total;
    block_exclusive_scan(s, ws, &total);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// One block: tile_sums becomes its own exclusive scan; *total = the sum of all.
extern "C" __global__ void scan_tile_sums(u32* tile_sums, u32 tiles, u32* total) {
    __shared__ u32 ws[33];
    const u32 per = (tiles + SCAN_THREADS - 1) / SCAN_THREADS;
    const u32 first = threadIdx.x * per;
    u32 local = 0;
    for (u32 i = 0; i < per; i++)
        if (first + i < tiles) local += tile_sums[first + i];
    u32 all;
    u32 run = block_exclusive_scan(local, ws, &all);
    for (u32 i = 0; i < per; i++) {
        if (first + i < tiles) {
            const u32 v = tile_sums[first + i];
            tile_sums[first + i] = run;
            run += v;
        }
    }
    if (threadIdx.x == 0) *total = all;
}

// start[x] = exclusive prefix of f at x; other[x] = start[x] (mode 0: cursors for
// msm_scatter) or f(x) (mode 1: the next level's per-slot counts).
extern "C" __global__ void scan_apply(const u32* cnt, u32 slots, u32 K, const u32* tile_offsets, u32 mode,
                                      u32* start, u32* other) {
    __shared__ u32 ws[33];
    const u32 base = blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_PER;
    u32 v[SCAN_PER];
    u32 s = 0;
#pragma unroll
    for (u32 i = 0; i < SCAN_PER; i++) {
        v[i] = scan_value(cnt, base + i, slots, K);
        s += v[i];
    }
    u32 total;
    u32 run = tile_offsets[blockIdx.x] + block_exclusive_scan(s, ws, &total);
#pragma unroll
    for (u32 i = 0; i < SCAN_PER; i++) {
        const u32 x = base + i;
        if (x < slots) {
            start[x] = run;
            other[x] = mode == 0 ? run : v[i];
        }
        run += v[i];
    }
}

// ---- The point kernels of each curve: msm_sum_points_g1 (over Fq) and
// msm_sum_points_g2 (over Fq2), and so on; the host picks the suffix from its curve
// type (msm.rs, DeviceCurve). ----
#define MSM_CURVE_KERNELS(S, F, V)                                                                                   \
    extern "C" __global__ void msm_sum_points_##S(const AffineT<F>* bases, const u32* sorted, const u32* offsets,     \
                                                  const u32* cnt0, const u32* start1, const u32* total1, u32 slots,   \
                                                  u32 K, u32 balanced, XyzzT<F>* out) {                               \
        sum_points<F, V>(bases, sorted, offsets, cnt0, start1, total1, slots, K, balanced, out);                     \
    }                                                                                                                \
    extern "C" __global__ void msm_sum_xyzz_##S(const XyzzT<F>* in, const u32* start_in, const u32* cnt_in,           \
                                                const u32* start_out, const u32* total_out, u32 slots, u32 K,         \
                                                u32 balanced, XyzzT<F>* out) {                                        \
        sum_xyzz<F>(in, start_in, cnt_in, start_out, total_out, slots, K, balanced, out);                            \
    }                                                                                                                \
    extern "C" __global__ void msm_gather_buckets_##S(const XyzzT<F>* in, const u32* start, const u32* cnt, u32 slots, \
                                                      XyzzT<F>* buckets) {                                            \
        gather_buckets<F>(in, start, cnt, slots, buckets);                                                           \
    }                                                                                                                \
    extern "C" __global__ void msm_bucket_segments_##S(const XyzzT<F>* buckets, u32 nb, u32 segs, u32 nwin,           \
                                                       XyzzT<F>* partials) {                                          \
        bucket_segments<F>(buckets, nb, segs, nwin, partials);                                                       \
    }                                                                                                                \
    extern "C" __global__ void xyzz_reduce_##S(const XyzzT<F>* in, XyzzT<F>* out, u32 count_in, u32 fan) {            \
        reduce<F>(in, out, count_in, fan);                                                                           \
    }                                                                                                                \
    extern "C" __global__ void ones_sum_##S(const AffineT<F>* bases, const u64* words, u32 n_words, u32 n_bases,      \
                                            u32 wpt, XyzzT<F>* partials, u32 n_partials) {                            \
        ones<F>(bases, words, n_words, n_bases, wpt, partials, n_partials);                                          \
    }                                                                                                                \
    extern "C" __global__ void replicate_affine_##S(const AffineT<F>* src, u32 m, AffineT<F>* out, u32 n) {           \
        replicate<F>(src, m, out, n);                                                                                \
    }

// ---- Batch-affine bucket sums (SumVariant::BatchAffine in msm.rs; G1 and G2) ----
//
// Rounds over the sorted entries: each round sums the entries of every bucket in
// pairs (2j, 2j + 1) in affine coordinates, an odd last entry passing through, so a
// bucket of m entries has ceil(m / 2) after the round and one after ceil(log2 m)
// rounds. All pairs of a round are independent: thread t takes `per` consecutive
// outputs, multiplies their denominators into a running product (kept in scratch,
// one column per thread so that a warp's stores coalesce), inverts the product once
// (field_inverse) and walks back, peeling each pair's inverse off it (Montgomery's
// trick): ~6 products per pair (Fq, or Fq2 for G2) and the inversion shared by up
// to `per` pairs.
//
// Round 1 reads the bases through the sorted entries (sign bit: the negated point);
// later rounds the previous round's output. Output slot o belongs to the bucket x
// with out_start[x] <= o < out_start[x] + ceil(in_cnt[x] / 2) (the scan of the
// level code with K = 2); its input entries start at in_start[x] + 2 (o - out_start[x]).
template <class F>
__device__ __forceinline__ AffineT<F> ba_entry(const AffineT<F>* bases, const u32* sorted, const AffineT<F>* in, u32 i) {
    if (sorted) {
        const u32 v = sorted[i];
        AffineT<F> a = AffineT<F>::load(bases + (v & 0x7fffffffu));
        return (v >> 31) ? neg_affine(a) : a;
    }
    return AffineT<F>::load(in + i);
}

// The x coordinate of entry i (negation leaves it as it is).
template <class F>
__device__ __forceinline__ F ba_x(const AffineT<F>* bases, const u32* sorted, const AffineT<F>* in, u32 i) {
    return F::load(sorted ? &bases[sorted[i] & 0x7fffffffu].x : &in[i].x);
}

// 1 / a: Fq's binary-GCD inverse; in Fq2 = Fq[u] / (u^2 + 1), 1 / (c0 + c1 u) =
// (c0 - c1 u) / (c0^2 + c1^2), one Fq inversion and four products. 0 gives 0.
__device__ __forceinline__ Fq field_inverse(const Fq& a) { return fq_inverse_gcd(a); }
__device__ __forceinline__ Fq2 field_inverse(const Fq2& a) {
    const Fq t = fq_inverse_gcd(Fq::add(Fq::sqr(a.c0), Fq::sqr(a.c1)));
    return Fq2::make(Fq::mul(a.c0, t), Fq::neg(Fq::mul(a.c1, t)));
}

// Slots a batch-affine thread steps over before it searches (see ba_round).
#define BA_WALK 8u

template <class F>
__device__ __forceinline__ void ba_round(const AffineT<F>* bases, const u32* sorted, const AffineT<F>* in,
                                         const u32* in_start, const u32* in_cnt, const u32* out_start,
                                         const u32* out_total, u32 slots, u32 per, F* scratch, AffineT<F>* out) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 nthreads = gridDim.x * blockDim.x;
    const u32 total = *out_total;
    const u64 first = (u64)t * per;
    if (first >= total) return;
    const u32 o0 = (u32)first;
    const u32 o1 = (u32)min((u64)total, first + per);
    u32 x = find_slot(out_start, slots, o0);
    // Forward: the running product of the denominators, stored after each output.
    F acc = F::one();
    bool any = false;
    for (u32 o = o0; o < o1; o++) {
        // The next bucket: the neighbour, or a few slots on; past BA_WALK empty
        // slots a binary search (2^21 a window at c = 22: walking them all made
        // skewed digits take seconds, and searching at every bucket made the
        // random-digit MSM 5-10% slower).
        for (u32 k = 0; x + 1 < slots && out_start[x + 1] <= o; k++) {
            if (k == BA_WALK) {
                x = find_slot(out_start, slots, o);
                break;
            }
            x++;
        }
        const u32 j = o - out_start[x];
        if (2 * j + 1 < in_cnt[x]) {
            const u32 i = in_start[x] + 2 * j;
            // Only the x coordinates, unless they leave the kind open (equal, or
            // zero as the identity's are).
            const F xp = ba_x(bases, sorted, in, i), xq = ba_x(bases, sorted, in, i + 1);
            if (!xp.eq(xq) && !xp.is_zero() && !xq.is_zero()) {
                acc = F::mul(acc, F::sub(xq, xp));
                any = true;
            } else {
                const AffineT<F> p = ba_entry(bases, sorted, in, i), q = ba_entry(bases, sorted, in, i + 1);
                const u32 kind = pair_kind(p, q);
                if (kind <= PAIR_DBL) {
                    acc = F::mul(acc, pair_den(kind, p, q));
                    any = true;
                }
            }
        }
        acc.store(scratch + (size_t)(o - o0) * nthreads + t);
    }
    F inv = any ? field_inverse(acc) : acc;
    // Backward: inv is 1 / (product of the denominators up to o); the pair's own
    // inverse is inv times the product before it.
    for (u32 o = o1; o-- > o0;) {
        for (u32 k = 0; out_start[x] > o; k++) {
            if (k == BA_WALK) {
                x = find_slot(out_start, slots, o);
                break;
            }
            x--;
        }
        const u32 j = o - out_start[x];
        const u32 i = in_start[x] + 2 * j;
        AffineT<F> r;
        if (2 * j + 1 < in_cnt[x]) {
            const AffineT<F> p = ba_entry(bases, sorted, in, i), q = ba_entry(bases, sorted, in, i + 1);
            const u32 kind = pair_kind(p, q);
            F own = inv;
            if (kind <= PAIR_DBL) {
                if (o > o0) own = F::mul(inv, F::load(scratch + (size_t)(o - 1 - o0) * nthreads + t));
                inv = F::mul(inv, pair_den(kind, p, q));
            }
            r = pair_sum(kind, p, q, own);
        } else {
            r = ba_entry(bases, sorted, in, i);
        }
        r.store(out + o);
    }
}

// After the last round every bucket has at most one entry: bucket x in XYZZ.
template <class F>
__device__ __forceinline__ void ba_buckets(const AffineT<F>* in, const u32* start, const u32* cnt, u32 slots,
                                           XyzzT<F>* buckets) {
    const u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= slots) return;
    const XyzzT<F> b = cnt[x] ? XyzzT<F>::from_affine(AffineT<F>::load(in + start[x])) : XyzzT<F>::inf();
    b.store(buckets + x);
}

// The rounds' kernels of each curve: msm_ba_round (G1, as before G2 had them) and
// msm_ba_round_g2, and likewise msm_ba_buckets (DeviceCurve's KERNELS names them).
#define BA_KERNELS(NAME_ROUND, NAME_BUCKETS, F)                                                                      \
    extern "C" __global__ void NAME_ROUND(const AffineT<F>* bases, const u32* sorted, const AffineT<F>* in,          \
                                          const u32* in_start, const u32* in_cnt, const u32* out_start,              \
                                          const u32* out_total, u32 slots, u32 per, F* scratch, AffineT<F>* out) {   \
        ba_round<F>(bases, sorted, in, in_start, in_cnt, out_start, out_total, slots, per, scratch, out);            \
    }                                                                                                                \
    extern "C" __global__ void NAME_BUCKETS(const AffineT<F>* in, const u32* start, const u32* cnt, u32 slots,       \
                                            XyzzT<F>* buckets) {                                                     \
        ba_buckets<F>(in, start, cnt, slots, buckets);                                                               \
    }

// One curve per module: G2's kernels are a module of their own (msm_g2, compiled with
// CUZK_G2 defined, in parallel with msm), so G1's module and its compile time stay
// as they were.
#ifdef CUZK_G2
MSM_CURVE_KERNELS(g2, Fq2, 0)
BA_KERNELS(msm_ba_round_g2, msm_ba_buckets_g2, Fq2)
#else
// G1's bucket sums inline the mixed addition with its products called (V = 1): the
// fastest XYZZ kernel on the H200 (the inlined products, the called formula and the
// products by reference were removed; NOTES.md).
MSM_CURVE_KERNELS(g1, Fq, 1)
BA_KERNELS(msm_ba_round, msm_ba_buckets, Fq)

// The ones as one bucket for the batch-affine rounds (ones_sum_affine in msm.rs):
// word w's set bits among the first n_bases bases, counted, then written out in
// order (the bucket's sorted entries: plain indices, no sign bit) from start[w], the
// exclusive scan of the counts.
__device__ __forceinline__ u64 ones_word(const u64* words, u32 w, u32 n_bases) {
    const u64 bits = words[w];
    const u32 lo = w * 64;
    if (lo + 64 <= n_bases) return bits;
    return lo >= n_bases ? 0 : bits & ((1ull << (n_bases - lo)) - 1);
}
extern "C" __global__ void ones_count(const u64* words, u32 n_words, u32 n_bases, u32* counts) {
    const u32 w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n_words) return;
    counts[w] = __popcll(ones_word(words, w, n_bases));
}
extern "C" __global__ void ones_entries(const u64* words, u32 n_words, u32 n_bases, const u32* start, u32* out) {
    const u32 w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n_words) return;
    u64 bits = ones_word(words, w, n_bases);
    u32 o = start[w];
    while (bits) {
        out[o++] = w * 64 + (__ffsll((long long)bits) - 1);
        bits &= bits - 1;
    }
}

// *out = max(*out, max of cnt[0..slots)) (the number of rounds the buckets need).
extern "C" __global__ void max_u32(const u32* cnt, u32 slots, u32* out) {
    const u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 v = x < slots ? cnt[x] : 0;
    // Shuffles, not __reduce_max_sync: that one needs sm_80, and older cards
    // (sm_75 among them) must still compile this module.
    u32 m = v;
#pragma unroll
    for (u32 d = 16; d > 0; d >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, d));
    if ((threadIdx.x & 31) == 0 && m) atomicMax(out, m);
}

#endif
