// a = A·w, b = B·w, c = C·w on the device, straight into the NTT's input buffers.
//
// One thread per row evaluates that row of A, B and C together, so a witness value
// the three share (x · (1 - x) = 0) is read once. Terms are (column, coefficient
// index) pairs of u32 in CSR order; the witness is [inputs, aux] in one buffer, so a
// column indexes it directly. Coefficient indices 0, 1, 2 (1, -1, 2) are applied
// without a multiplication, as the CPU mat-vec does (cuzk_synth::spmv); every other
// coefficient is one Montgomery product with the table entry. Rows from `rows` up to
// `domain` are written as zeros: the NTT's zero padding, done here instead of by a
// separate memset (the buffers are not poisoned first; this writes every element).
//
// The host uploads only matrices that passed R1csRef::validate (every column below
// the witness length, every coefficient index inside the table, row pointers
// monotone and within the terms) and checks every buffer length before the launch,
// so nothing here is bounds-checked again.

struct SpmvTerm {
    u32 col;
    u32 coeff;
};

__device__ __forceinline__ Fr spmv_row(const u32* __restrict__ row_ptr,
                                       const SpmvTerm* __restrict__ terms,
                                       const Fr* __restrict__ w,
                                       const Fr* __restrict__ coeffs, u32 r) {
    u32 end = row_ptr[r + 1];
    Fr acc = Fr::zero();
    for (u32 i = row_ptr[r]; i < end; i++) {
        SpmvTerm t = terms[i];
        Fr v = Fr::load(w + t.col);
        if (t.coeff == 0) {
            acc = Fr::add(acc, v);
        } else if (t.coeff == 1) {
            acc = Fr::sub(acc, v);
        } else if (t.coeff == 2) {
            acc = Fr::add(acc, Fr::dbl(v));
        } else {
            acc = Fr::add(acc, Fr::mul(v, Fr::load(coeffs + t.coeff)));
        }
    }
    return acc;
}

// Grid: `domain` threads (rows, then the zero padding), any block size.
extern "C" __global__ void spmv_abc(Fr* a, Fr* b, Fr* c, u32 rows, u32 domain,
                                    const Fr* w, const Fr* coeffs,
                                    const u32* a_ptr, const SpmvTerm* a_terms,
                                    const u32* b_ptr, const SpmvTerm* b_terms,
                                    const u32* c_ptr, const SpmvTerm* c_terms) {
    u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= domain) return;
    if (r >= rows) {
        Fr z = Fr::zero();
        z.store(a + r);
        z.store(b + r);
        z.store(c + r);
        return;
    }
    spmv_row(a_ptr, a_terms, w, coeffs, r).store(a + r);
    spmv_row(b_ptr, b_terms, w, coeffs, r).store(b + r);
    spmv_row(c_ptr, c_terms, w, coeffs, r).store(c + r);
}
