// Montgomery arithmetic over 32-bit limbs for the BLS12-381 scalar field Fr (8 limbs,
// R = 2^256) and base field Fq (12 limbs, R = 2^384). The limb order and the
// Montgomery radix match blstrs (`blst_fr` / `blst_fp` as little-endian u64 limbs), so
// host buffers are copied to the device byte for byte.
//
// Carry chains are written one PTX instruction per `asm volatile`: volatile asm
// statements keep their order, and nothing between them touches the carry flag.
// Outside a device compilation (no __CUDA_ARCH__) the same functions emulate the
// instructions on the host, so the arithmetic can be tested against blstrs in CI.

typedef unsigned int u32;
typedef unsigned long long u64;

#ifdef __CUDA_ARCH__
__device__ __forceinline__ u32 add_cc(u32 a, u32 b) { u32 r; asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 addc_cc(u32 a, u32 b) { u32 r; asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 addc(u32 a, u32 b) { u32 r; asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 sub_cc(u32 a, u32 b) { u32 r; asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 subc_cc(u32 a, u32 b) { u32 r; asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 subc(u32 a, u32 b) { u32 r; asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 mad_lo_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 madc_lo_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 mad_hi_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("mad.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 madc_hi_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 madc_hi(u32 a, u32 b, u32 c) { u32 r; asm volatile("madc.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
#else
// Host build (tests/host_arith.rs compiles these sources with the system C++
// compiler to check the arithmetic against blstrs without a GPU): the same
// instructions with the carry flag in a variable, one per thread (tests/ntt_host.rs
// runs a block's threads as host threads).
static thread_local u32 cuzk_cf;  // carry (add) or borrow (sub) flag, 0 or 1
static inline u32 cuzk_set(u64 wide) { cuzk_cf = (u32)(wide >> 32) & 1; return (u32)wide; }
static inline u32 add_cc(u32 a, u32 b) { return cuzk_set((u64)a + b); }
static inline u32 addc_cc(u32 a, u32 b) { return cuzk_set((u64)a + b + cuzk_cf); }
static inline u32 addc(u32 a, u32 b) { return a + b + cuzk_cf; }
static inline u32 sub_cc(u32 a, u32 b) { u32 r = a - b; cuzk_cf = a < b; return r; }
static inline u32 subc_cc(u32 a, u32 b) { u64 t = (u64)b + cuzk_cf; u32 r = (u32)((u64)a - t); cuzk_cf = (u64)a < t; return r; }
static inline u32 subc(u32 a, u32 b) { return a - b - cuzk_cf; }
static inline u32 mad_lo_cc(u32 a, u32 b, u32 c) { return cuzk_set((u64)(u32)((u64)a * b) + c); }
static inline u32 madc_lo_cc(u32 a, u32 b, u32 c) { return cuzk_set((u64)(u32)((u64)a * b) + c + cuzk_cf); }
static inline u32 mad_hi_cc(u32 a, u32 b, u32 c) { return cuzk_set((((u64)a * b) >> 32) + c); }
static inline u32 madc_hi_cc(u32 a, u32 b, u32 c) { return cuzk_set((((u64)a * b) >> 32) + c + cuzk_cf); }
static inline u32 madc_hi(u32 a, u32 b, u32 c) { return (u32)(((u64)a * b) >> 32) + c + cuzk_cf; }
#endif

__constant__ u32 FR_MOD[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, 0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
__constant__ u32 FR_ONE[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa, 0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
__constant__ u32 FQ_MOD[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
__constant__ u32 FQ_ONE[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857, 0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};

// Fr's INV (-1) as a value ptxas cannot see: Mont::mul_ab multiplies by it. With m
// computed as -t[0] (what t[0] * 0xffffffff folds to) ptxas (sm_90) split half of
// Fr's m * p products into an IMAD.X and a half-rate IMAD.HI.U32.X instead of one
// IMAD.WIDE.U32.X (49 of 113 wide); with m from an IMAD, as Fq's, all 113 are wide.
__constant__ u32 FR_INV_OPAQUE[1] = {0xffffffffu};

struct FrParams {
    static const int N = 8;
    static const u32 INV = 0xffffffffu;  // -r^-1 mod 2^32
    static __device__ __forceinline__ u32 m(int i) { return FR_MOD[i]; }
    static __device__ __forceinline__ u32 one(int i) { return FR_ONE[i]; }
    static __device__ __forceinline__ u32 inv_opaque() {
#ifdef __CUDA_ARCH__
        u32 r;
        asm("ld.const.u32 %0, [FR_INV_OPAQUE];" : "=r"(r));
        return r;
#else
        return INV;
#endif
    }
};

struct FqParams {
    static const int N = 12;
    static const u32 INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    static __device__ __forceinline__ u32 m(int i) { return FQ_MOD[i]; }
    static __device__ __forceinline__ u32 one(int i) { return FQ_ONE[i]; }
    static __device__ __forceinline__ u32 inv_opaque() { return INV; }
};

// An element in Montgomery form, fully reduced (< modulus) between operations. Both
// moduli leave the top bit of the top limb clear, which the add/sub/mul below rely on:
// a + b < 2^(32N) and the Montgomery accumulator fits in N + 1 limbs.
template <class P>
struct Mont {
    static const int N = P::N;
    u32 v[N];

    static __device__ __forceinline__ Mont zero() {
        Mont r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    static __device__ __forceinline__ Mont one() {
        Mont r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool eq(const Mont& o) const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }

    // 16-byte loads and stores: both element sizes (32 and 48 bytes) are multiples of 16
    // and every array of them starts 16-byte aligned.
    static __device__ __forceinline__ Mont load(const Mont* p) {
        Mont r;
        const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
        for (int i = 0; i < N / 4; i++) {
            uint4 t = q[i];
            r.v[4 * i] = t.x; r.v[4 * i + 1] = t.y; r.v[4 * i + 2] = t.z; r.v[4 * i + 3] = t.w;
        }
        return r;
    }
    __device__ __forceinline__ void store(Mont* p) const {
        uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
        for (int i = 0; i < N / 4; i++) q[i] = make_uint4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }

    // r = a - p if that does not borrow, else a.
    static __device__ __forceinline__ Mont reduce_once(const Mont& a) {
        Mont r;
        r.v[0] = sub_cc(a.v[0], P::m(0));
#pragma unroll
        for (int i = 1; i < N; i++) r.v[i] = subc_cc(a.v[i], P::m(i));
        u32 borrow = subc(0, 0);  // 0xffffffff on borrow
        if (borrow) return a;
        return r;
    }

    static __device__ __forceinline__ Mont add(const Mont& a, const Mont& b) {
        Mont s;
        s.v[0] = add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) s.v[i] = addc_cc(a.v[i], b.v[i]);
        return reduce_once(s);
    }

    static __device__ __forceinline__ Mont sub(const Mont& a, const Mont& b) {
        Mont d;
        d.v[0] = sub_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = subc_cc(a.v[i], b.v[i]);
        u32 borrow = subc(0, 0);
        if (borrow) {
            d.v[0] = add_cc(d.v[0], P::m(0));
#pragma unroll
            for (int i = 1; i < N; i++) d.v[i] = addc_cc(d.v[i], P::m(i));
        }
        return d;
    }

    static __device__ __forceinline__ Mont neg(const Mont& a) {
        if (a.is_zero()) return a;
        Mont d;
        d.v[0] = sub_cc(P::m(0), a.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = subc_cc(P::m(i), a.v[i]);
        return d;
    }

    static __device__ __forceinline__ Mont dbl(const Mont& a) { return add(a, a); }

    // Montgomery product a * b / R (CIOS, one word of b per round). The accumulator t
    // stays below 2p * 2^32 < 2^(32(N+1)), so N + 1 words hold it without overflow.
    // Fq products are real calls: inlining the 12-limb product into every curve
    // formula made the MSM module 4.5 MB of code and took NVRTC minutes to compile.
    static __device__ __forceinline__ Mont mul(const Mont& a, const Mont& b) {
        if constexpr (N > 8) return mul_call(a, b);
        else return mul_body(a, b);
    }
    // The call takes its operands by value: a reference parameter of a real call
    // makes the caller put the operand in local memory, and every product then costs
    // 24 words of stores and loads besides its arithmetic.
    static __device__ __noinline__ Mont mul_call(Mont a, Mont b) { return mul_body(a, b); }
    // Always inlined, for the few hot formulas that run once per MSM term (the mixed
    // addition of bucket sums): no call, and the compiler schedules across products.
    static __device__ __forceinline__ Mont mul_inl(const Mont& a, const Mont& b) { return mul_body(a, b); }
    static __device__ __forceinline__ Mont sqr_inl(const Mont& a) { return mul_body(a, a); }

    // Montgomery product a * b / R, fully reduced: CIOS (one word of b per round, then
    // m * p with m making the low word 0, then a shift by one word), each round's
    // products in carry chains in which every product's low and high halves are
    // neighbours, (w, w + 1) with w even in their accumulator: ptxas makes each such
    // pair one IMAD.WIDE.U32(.X), a wide multiply-add with carry in and out. (The
    // first version ran one chain of low halves and one of high halves: an IMAD, an
    // IMAD.HI at half rate and two IADD3.X per product; removed, see NOTES.md.)
    //
    // The running sum is T = A + B * 2^32: A has words of weight 0..N, B of weight
    // 1..N. Products a_j * b_i with j even go into A (words j, j + 1), odd j into B
    // (its words j - 1, j), and the same for m * p_j; the low word of T is A[0], so m
    // needs A only. After a round A[0] = 0, and T / 2^32 is again such a pair without
    // moving a word: the next A is B with A[1] added to its low word, and the next B
    // is A from word 2 up, the carry of that one addition entering the next B's chain
    // at its low word (weight 1). NT: Fr's p[0] = 1 and p[1] = 2^32 - 1, so m = -A[0]
    // and m * p[0], m * p[1] are additions (see fr_mul_nt).
    // Bounds: T < 2p * 2^32 < 2^(32(N+1)) after every round (both moduli leave the
    // top bit clear), so A (<= T) fits N + 1 words and B (B * 2^32 <= T) N words, and
    // no chain carries out of its top word.
    template <bool NT>
    static __device__ __forceinline__ Mont mul_ab(const Mont& a, const Mont& b) {
        u32 A[N + 1], B[N];
#pragma unroll
        for (int i = 0; i < N; i++) {
            const u32 bi = b.v[i];
            if (i == 0) {
#pragma unroll
                for (int j = 0; j < N; j += 2) {
                    const u64 w = (u64)a.v[j] * bi, x = (u64)a.v[j + 1] * bi;
                    A[j] = (u32)w;
                    A[j + 1] = (u32)(w >> 32);
                    B[j] = (u32)x;
                    B[j + 1] = (u32)(x >> 32);
                }
                A[N] = 0;
            } else {
                u32 nA[N + 1], nB[N];
                nA[0] = add_cc(B[0], A[1]);
#pragma unroll
                for (int j = 1; j < N - 1; j += 2) {
                    nB[j - 1] = madc_lo_cc(a.v[j], bi, A[j + 1]);
                    nB[j] = madc_hi_cc(a.v[j], bi, A[j + 2]);
                }
                nB[N - 2] = madc_lo_cc(a.v[N - 1], bi, A[N]);
                nB[N - 1] = madc_hi(a.v[N - 1], bi, 0);
                nA[0] = mad_lo_cc(a.v[0], bi, nA[0]);
                nA[1] = madc_hi_cc(a.v[0], bi, B[1]);
#pragma unroll
                for (int j = 2; j < N - 2; j += 2) {
                    nA[j] = madc_lo_cc(a.v[j], bi, B[j]);
                    nA[j + 1] = madc_hi_cc(a.v[j], bi, B[j + 1]);
                }
                nA[N - 2] = madc_lo_cc(a.v[N - 2], bi, B[N - 2]);
                nA[N - 1] = madc_hi_cc(a.v[N - 2], bi, B[N - 1]);
                nA[N] = addc(0, 0);
#pragma unroll
                for (int j = 0; j < N; j++) {
                    A[j] = nA[j];
                    B[j] = nB[j];
                }
                A[N] = nA[N];
            }
            // T += m * p, leaving A[0] = 0.
            const u32 t0 = A[0];
            const u32 mq = t0 * P::inv_opaque();  // NT: -t0
            if (NT) {
                (void)add_cc(t0, mq);  // 0, carry iff t0 != 0
                A[1] = addc_cc(A[1], 0);
            } else {
                (void)mad_lo_cc(mq, P::m(0), t0);
                A[1] = madc_hi_cc(mq, P::m(0), A[1]);
            }
#pragma unroll
            for (int j = 2; j < N; j += 2) {
                A[j] = madc_lo_cc(mq, P::m(j), A[j]);
                A[j + 1] = madc_hi_cc(mq, P::m(j), A[j + 1]);
            }
            A[N] = addc(A[N], 0);
            if (NT) {
                // m * (2^32 - 1) = (m - 1) * 2^32 + (2^32 - m): low word t0, high
                // word ~t0 (both 0 when m = 0).
                B[0] = add_cc(B[0], t0);
                B[1] = addc_cc(B[1], t0 != 0 ? ~t0 : 0u);
            } else {
                B[0] = mad_lo_cc(mq, P::m(1), B[0]);
                B[1] = madc_hi_cc(mq, P::m(1), B[1]);
            }
#pragma unroll
            for (int j = 3; j < N - 1; j += 2) {
                B[j - 1] = madc_lo_cc(mq, P::m(j), B[j - 1]);
                B[j] = madc_hi_cc(mq, P::m(j), B[j]);
            }
            B[N - 2] = madc_lo_cc(mq, P::m(N - 1), B[N - 2]);
            B[N - 1] = madc_hi(mq, P::m(N - 1), B[N - 1]);
        }
        // T / 2^32 = A[1..N] + B, below 2p < 2^(32N).
        Mont r;
        r.v[0] = add_cc(A[1], B[0]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) r.v[k] = addc_cc(A[k + 1], B[k]);
        r.v[N - 1] = addc(A[N], B[N - 1]);
        return reduce_once(r);
    }

    static __device__ __forceinline__ Mont mul_body(const Mont& a, const Mont& b) { return mul_ab<false>(a, b); }

    // a^2 as the product a * a. A dedicated squaring (cross products once, doubled:
    // 444 instead of 576 multiply instructions for Fq) measured slower on the H200:
    // 173.7 against 161.9 ms for a 2^24 MSM, 631 against 584 at 2^26 (NOTES.md).
    static __device__ __forceinline__ Mont sqr(const Mont& a) { return mul(a, a); }

    // Leaves Montgomery form: a / R, the canonical integer's limbs.
    static __device__ __forceinline__ Mont from_mont(const Mont& a) {
        Mont one_int = zero();
        one_int.v[0] = 1;
        return mul(a, one_int);
    }
};

typedef Mont<FrParams> Fr;
typedef Mont<FqParams> Fq;

// The Fr product specialised to the modulus's two low limbs, for the NTT (the r2wf
// kernels): p[0] = 1 and p[1] = 2^32 - 1, so -p^-1 = -1 mod 2^32 and in each CIOS
// round m = -t[0], m * p[0] = m, lo(m * p[1]) = t[0] and hi(m * p[1]) = m - 1 = ~t[0]
// (0 when m = 0): 14 products per round instead of 16 (Mont::mul_ab with NT, where m
// is still made by a multiply: see FR_INV_OPAQUE). Same result as
// Fr::mul, fully reduced; checked against blstrs by tests/host_arith.rs.
__device__ __forceinline__ Fr fr_mul_nt(const Fr& a, const Fr& b) { return Fr::mul_ab<true>(a, b); }

// Reverses the low `bits` bits of x.
__device__ __forceinline__ u32 bitrev(u32 x, u32 bits) {
    return bits == 0 ? 0 : (__brev(x) >> (32 - bits));
}

// ---- Test kernels: element-wise field operations checked against blstrs. ----

extern "C" __global__ void fr_ops_test(const Fr* a, const Fr* b, Fr* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr x = Fr::load(a + i), y = Fr::load(b + i);
    Fr::add(x, y).store(out + 4 * i);
    Fr::sub(x, y).store(out + 4 * i + 1);
    Fr::mul(x, y).store(out + 4 * i + 2);
    Fr::from_mont(x).store(out + 4 * i + 3);
}

extern "C" __global__ void fq_ops_test(const Fq* a, const Fq* b, Fq* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fq x = Fq::load(a + i), y = Fq::load(b + i);
    Fq::add(x, y).store(out + 4 * i);
    Fq::sub(x, y).store(out + 4 * i + 1);
    Fq::mul(x, y).store(out + 4 * i + 2);
    Fq::neg(x).store(out + 4 * i + 3);
}

// ---- Product throughput (cuzk-gpu-check's field bench). ----
// Each thread runs two independent chains of `iters` products x = x * y (so that one
// product's latency overlaps the other's) and stores both: which = 0 Fr::mul, 1
// fr_mul_nt; for Fq, 0 the called product (Fq::mul, as the MSM uses it), 1 inlined.
extern "C" __global__ void fr_mul_bench(Fr* d, u32 iters, u32 which) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    Fr x = Fr::load(d + 3 * i), y = Fr::load(d + 3 * i + 1), z = Fr::load(d + 3 * i + 2);
    if (which == 0) {
        for (u32 k = 0; k < iters; k++) { x = Fr::mul(x, y); z = Fr::mul(z, y); }
    } else {
        for (u32 k = 0; k < iters; k++) { x = fr_mul_nt(x, y); z = fr_mul_nt(z, y); }
    }
    x.store(d + 3 * i);
    z.store(d + 3 * i + 2);
}

extern "C" __global__ void fq_mul_bench(Fq* d, u32 iters, u32 which) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    Fq x = Fq::load(d + 3 * i), y = Fq::load(d + 3 * i + 1), z = Fq::load(d + 3 * i + 2);
    if (which == 0) {
        for (u32 k = 0; k < iters; k++) { x = Fq::mul(x, y); z = Fq::mul(z, y); }
    } else {
        for (u32 k = 0; k < iters; k++) { x = Fq::mul_inl(x, y); z = Fq::mul_inl(z, y); }
    }
    x.store(d + 3 * i);
    z.store(d + 3 * i + 2);
}
