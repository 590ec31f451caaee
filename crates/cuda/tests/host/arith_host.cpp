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
static Dim3 blockIdx{0}, blockDim{1}, threadIdx{0};
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }

#include "field.cu"
#include "ec.cu"

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
        else if (op == "fq_mul_ref") put(Fq::mul_ref(get<Fq>(a), get<Fq>(b)));
        else if (op == "fq_add") put(Fq::add(get<Fq>(a), get<Fq>(b)));
        else if (op == "fq_sub") put(Fq::sub(get<Fq>(a), get<Fq>(b)));
        else if (op == "fq_neg") put(Fq::neg(get<Fq>(a)));
        else if (op == "fq2_mul") put(Fq2::mul(get<Fq2>(a), get<Fq2>(b)));
        else if (op == "fq2_sqr") put(Fq2::sqr(get<Fq2>(a)));
        // Curve formulas: XYZZ results; every compilation of the mixed addition.
        else if (op == "g1_madd") put(add_mixed(get<XyzzT<Fq>>(a), get<AffineT<Fq>>(b)));
        else if (op == "g1_madd_calls") put(add_mixed_body<Fq, 1>(get<XyzzT<Fq>>(a), get<AffineT<Fq>>(b)));
        else if (op == "g1_madd_refs") put(add_mixed_body<Fq, 2>(get<XyzzT<Fq>>(a), get<AffineT<Fq>>(b)));
        else if (op == "g1_madd_fcall") put(add_mixed_call(get<XyzzT<Fq>>(a), get<AffineT<Fq>>(b)));
        else if (op == "g1_add") put(add(get<XyzzT<Fq>>(a), get<XyzzT<Fq>>(b)));
        else if (op == "g1_dbl") put(dbl(get<XyzzT<Fq>>(a)));
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
