// The device arithmetic compiled for the host: field.cu and ec.cu as they are, with
// the CUDA qualifiers defined away and the carry-flag instructions emulated (see
// field.cu), driven by tests/host_arith.rs, which checks every result against
// blstrs. This catches arithmetic mistakes in CI, where there is no GPU.
//
// Protocol (stdin → stdout), one line per operation:
//   <op> <hex> <hex> ...   →   <hex>
// each <hex> the bytes of one operand or result in memory order (blstrs layout).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#define __device__
#define __forceinline__ inline
#define __noinline__
#define __constant__ static const
#define __global__
struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
struct Dim3 {
    unsigned x;
};
static Dim3 blockIdx{0}, blockDim{1}, threadIdx{0}, gridDim{1};
// What msm.cu uses besides: single-threaded stand-ins (the harness runs a kernel's
// threads one after another; the batch-affine kernels' threads do not interact).
#define __shared__ static
template <class T>
static inline T min(T a, T b) { return a < b ? a : b; }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
static inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; if (v > o) *p = v; return o; }
static inline unsigned __shfl_up_sync(unsigned, unsigned v, unsigned) { return v; }
static inline unsigned __shfl_xor_sync(unsigned, unsigned v, unsigned) { return v; }
template <class T>
static inline T max(T a, T b) { return a > b ? a : b; }
static inline void __syncthreads() {}
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }

#include "field.cu"
#include "ec.cu"
#include "msm.cu"

static std::vector<unsigned char> unhex(const std::string& h) {
    std::vector<unsigned char> out(h.size() / 2);
    for (size_t i = 0; i < out.size(); i++) out[i] = (unsigned char)std::stoi(h.substr(2 * i, 2), nullptr, 16);
    return out;
}

template <class T>
static T get(const std::string& h) {
    std::vector<unsigned char> b = unhex(h);
    T t;
    if (b.size() != sizeof(T)) {
        std::fprintf(stderr, "operand of %zu bytes, want %zu\n", b.size(), sizeof(T));
        std::exit(2);
    }
    std::memcpy(&t, b.data(), sizeof(T));
    return t;
}

template <class T>
static void put(const T& t) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&t);
    for (size_t i = 0; i < sizeof(T); i++) std::printf("%02x", p[i]);
    std::printf("\n");
}

template <class T>
static std::vector<T> get_vec(const std::string& h) {
    std::vector<unsigned char> b = unhex(h);
    std::vector<T> v(b.size() / sizeof(T));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
    return v;
}

template <class T>
static void put_vec(const std::vector<T>& v) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(T); i++) std::printf("%02x", p[i]);
    std::printf("\n");
}

static std::vector<u32> exclusive_scan(const std::vector<u32>& v, u32* total) {
    std::vector<u32> s(v.size());
    u32 run = 0;
    for (size_t i = 0; i < v.size(); i++) {
        s[i] = run;
        run += v[i];
    }
    *total = run;
    return s;
}

// Runs the device's batch-affine bucket sums (msm_ba_round rounds, then
// msm_ba_buckets) the way msm.rs launches them, each launch's threads in turn:
// blocks of 4 threads, one block more than the outputs need, `per` outputs a thread.
static std::vector<Xyzz> batch_affine(const std::vector<Affine>& bases, std::vector<u32> cnt,
                                      const std::vector<u32>& sorted, u32 per) {
    const u32 slots = (u32)cnt.size();
    u32 entries = 0, fullest = 2;
    std::vector<u32> start = exclusive_scan(cnt, &entries);
    for (u32 c : cnt) fullest = c > fullest ? c : fullest;
    u32 rounds = 0;
    while ((1u << rounds) < fullest) rounds++;
    std::vector<Affine> prev;
    for (u32 r = 0; r < rounds; r++) {
        std::vector<u32> ocnt(slots);
        for (u32 x = 0; x < slots; x++) ocnt[x] = (cnt[x] + 1) / 2;
        u32 total = 0;
        std::vector<u32> ostart = exclusive_scan(ocnt, &total);
        blockDim.x = 4;
        gridDim.x = (total + per - 1) / per / 4 + 2;
        const u32 threads = gridDim.x * blockDim.x;
        std::vector<Fq> scratch((size_t)per * threads);
        std::vector<Affine> out(total + 1);
        for (u32 t = 0; t < threads; t++) {
            blockIdx.x = t / 4;
            threadIdx.x = t % 4;
            msm_ba_round(bases.data(), r == 0 ? sorted.data() : nullptr, r == 0 ? nullptr : prev.data(), start.data(),
                         cnt.data(), ostart.data(), &total, slots, per, scratch.data(), out.data());
        }
        prev = out;
        cnt = ocnt;
        start = ostart;
    }
    std::vector<Xyzz> buckets(slots);
    blockDim.x = 1;
    for (u32 x = 0; x < slots; x++) {
        blockIdx.x = x;
        threadIdx.x = 0;
        msm_ba_buckets(prev.data(), start.data(), cnt.data(), slots, buckets.data());
    }
    return buckets;
}

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string op, a, b;
        in >> op >> a >> b;
        if (op == "fr_mul") put(Fr::mul(get<Fr>(a), get<Fr>(b)));
        else if (op == "fr_mul_nt") put(fr_mul_nt(get<Fr>(a), get<Fr>(b)));
        else if (op == "fr_add") put(Fr::add(get<Fr>(a), get<Fr>(b)));
        else if (op == "fr_sub") put(Fr::sub(get<Fr>(a), get<Fr>(b)));
        else if (op == "fr_from_mont") put(Fr::from_mont(get<Fr>(a)));
        else if (op == "fq_mul") put(Fq::mul(get<Fq>(a), get<Fq>(b)));
        else if (op == "fq_sqr") put(Fq::sqr(get<Fq>(a)));
        else if (op == "fr_sqr") put(Fr::sqr(get<Fr>(a)));
        else if (op == "fq_add") put(Fq::add(get<Fq>(a), get<Fq>(b)));
        else if (op == "fq_sub") put(Fq::sub(get<Fq>(a), get<Fq>(b)));
        else if (op == "fq_neg") put(Fq::neg(get<Fq>(a)));
        else if (op == "fq2_mul") put(Fq2::mul(get<Fq2>(a), get<Fq2>(b)));
        else if (op == "fq2_sqr") put(Fq2::sqr(get<Fq2>(a)));
        // Curve formulas: XYZZ results; every compilation of the mixed addition.
        else if (op == "g1_madd") put(add_mixed(get<XyzzT<Fq>>(a), get<AffineT<Fq>>(b)));
        else if (op == "g1_madd_calls") put(add_mixed_body<Fq, 1>(get<XyzzT<Fq>>(a), get<AffineT<Fq>>(b)));
        else if (op == "g1_add") put(add(get<XyzzT<Fq>>(a), get<XyzzT<Fq>>(b)));
        else if (op == "g1_dbl") put(dbl(get<XyzzT<Fq>>(a)));
        // Batch-affine pieces: the inversion, and one pair summed as msm_ba_round
        // does (kind, denominator, its inverse, the sum).
        else if (op == "fq_inv_gcd") put(fq_inverse_gcd(get<Fq>(a)));
        else if (op == "g1_pair") {
            AffineT<Fq> p = get<AffineT<Fq>>(a), q = get<AffineT<Fq>>(b);
            u32 kind = pair_kind(p, q);
            put(pair_sum(kind, p, q, fq_inverse_gcd(pair_den(kind, p, q))));
        }
        // ones_entries <n_bases> <words>: ones_count per word, the scan, ones_entries
        // per word (a thread each), as msm.rs's ones_sum_affine launches them.
        else if (op == "ones_entries") {
            std::vector<u64> words = get_vec<u64>(b);
            const u32 nw = (u32)words.size(), nb = (u32)std::stoul(a);
            std::vector<u32> counts(nw);
            blockDim.x = 1;
            for (u32 w = 0; w < nw; w++) {
                blockIdx.x = w;
                ones_count(words.data(), nw, nb, counts.data());
            }
            u32 m = 0;
            std::vector<u32> start = exclusive_scan(counts, &m);
            std::vector<u32> out(m);
            for (u32 w = 0; w < nw; w++) {
                blockIdx.x = w;
                ones_entries(words.data(), nw, nb, start.data(), out.data());
            }
            blockIdx.x = 0;
            put_vec(out);
        }
        // g1_ba <per> <bases> <per-slot counts> <sorted entries>: the buckets.
        else if (op == "g1_ba") {
            std::string counts, sorted;
            in >> counts >> sorted;
            put_vec(batch_affine(get_vec<Affine>(b), get_vec<u32>(counts), get_vec<u32>(sorted), (u32)std::stoul(a)));
        }
        else if (op == "g2_madd") put(add_mixed(get<XyzzT<Fq2>>(a), get<AffineT<Fq2>>(b)));
        else if (op == "g2_add") put(add(get<XyzzT<Fq2>>(a), get<XyzzT<Fq2>>(b)));
        else if (op == "g2_dbl") put(dbl(get<XyzzT<Fq2>>(a)));
        else {
            std::fprintf(stderr, "unknown op %s\n", op.c_str());
            return 2;
        }
    }
    return 0;
}
