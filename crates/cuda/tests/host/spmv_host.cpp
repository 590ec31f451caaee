// kernels/spmv.cu compiled for the host (field.cu's carry-flag instructions
// emulated, the CUDA qualifiers defined away), driven by tests/host_spmv.rs, which
// checks the kernel's a, b, c against cuzk_synth::spmv_slices. This catches mistakes
// in the kernel's row evaluation in CI, where there is no GPU.
//
// Usage: spmv_host IN OUT. IN holds, little-endian: u32 rows, domain, vars,
// coeffs, nnz_a, nnz_b, nnz_c; the witness (vars × 32 bytes); the coefficients
// (coeffs × 32); then per matrix its row pointers ((rows + 1) × u32) and terms
// (nnz × 8 bytes). OUT receives a, b and c over the domain (3 × domain × 32 bytes).
// Every one of the `domain` threads of the launch runs, one after another.

#include <cstdint>
#include <cstdio>
#include <cstring>
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
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}

#include "field.cu"
#include "spmv.cu"

template <class T>
static bool read_into(std::FILE* f, std::vector<T>& v, size_t n) {
    v.resize(n > 0 ? n : 1);
    return n == 0 || std::fread(v.data(), sizeof(T), n, f) == n;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: spmv_host IN OUT\n");
        return 2;
    }
    std::FILE* in = std::fopen(argv[1], "rb");
    if (!in) return 2;
    u32 h[7];
    if (std::fread(h, sizeof(u32), 7, in) != 7) return 2;
    u32 rows = h[0], domain = h[1], vars = h[2], ncoeffs = h[3];
    std::vector<Fr> w, coeffs;
    std::vector<u32> ptr[3];
    std::vector<SpmvTerm> terms[3];
    bool ok = read_into(in, w, vars) && read_into(in, coeffs, ncoeffs);
    for (int m = 0; m < 3 && ok; m++) ok = read_into(in, ptr[m], rows + 1) && read_into(in, terms[m], h[4 + m]);
    std::fclose(in);
    if (!ok) {
        std::fprintf(stderr, "short input\n");
        return 2;
    }
    std::vector<Fr> out[3];
    for (int m = 0; m < 3; m++) out[m].resize(domain);
    blockDim.x = 256;
    for (u32 r = 0; r < domain; r++) {
        blockIdx.x = r / 256;
        threadIdx.x = r % 256;
        spmv_abc(out[0].data(), out[1].data(), out[2].data(), rows, domain, w.data(), coeffs.data(),
                 ptr[0].data(), terms[0].data(), ptr[1].data(), terms[1].data(), ptr[2].data(), terms[2].data());
    }
    std::FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 2;
    for (int m = 0; m < 3; m++) std::fwrite(out[m].data(), sizeof(Fr), domain, o);
    std::fclose(o);
    return 0;
}
