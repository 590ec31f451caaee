// BLS12-381 G1 (y^2 = x^3 + 4 over Fq) in XYZZ coordinates: x = X / ZZ, y = Y / ZZZ with
// ZZ^3 = ZZZ^2. The point at infinity has ZZ = ZZZ = 0. XYZZ mixed addition costs 10
// multiplications (8 + 2 squarings) and needs no inversion, which is why buckets use it.
//
// Affine points have blstrs' layout (`blst_p1_affine`: x then y, 6 u64 limbs each,
// Montgomery form); blst encodes the point at infinity as all-zero coordinates.

struct Affine {
    Fq x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
    static __device__ __forceinline__ Affine load(const Affine* p) {
        Affine r;
        r.x = Fq::load(&p->x);
        r.y = Fq::load(&p->y);
        return r;
    }
};

struct Xyzz {
    Fq X, Y, ZZ, ZZZ;

    static __device__ __forceinline__ Xyzz inf() {
        Xyzz r;
        r.X = Fq::zero(); r.Y = Fq::zero(); r.ZZ = Fq::zero(); r.ZZZ = Fq::zero();
        return r;
    }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }
    static __device__ __forceinline__ Xyzz from_affine(const Affine& a) {
        if (a.is_inf()) return inf();
        Xyzz r;
        r.X = a.x; r.Y = a.y; r.ZZ = Fq::one(); r.ZZZ = Fq::one();
        return r;
    }
    static __device__ __forceinline__ Xyzz load(const Xyzz* p) {
        Xyzz r;
        r.X = Fq::load(&p->X); r.Y = Fq::load(&p->Y); r.ZZ = Fq::load(&p->ZZ); r.ZZZ = Fq::load(&p->ZZZ);
        return r;
    }
    __device__ __forceinline__ void store(Xyzz* p) const {
        X.store(&p->X); Y.store(&p->Y); ZZ.store(&p->ZZ); ZZZ.store(&p->ZZZ);
    }
};

// 2 * (x, y) for an affine point (not infinity; G1 has no point with y = 0).
__device__ __forceinline__ Xyzz dbl_affine(const Affine& a) {
    Fq U = Fq::dbl(a.y);
    Fq V = Fq::sqr(U);
    Fq W = Fq::mul(U, V);
    Fq S = Fq::mul(a.x, V);
    Fq xx = Fq::sqr(a.x);
    Fq M = Fq::add(Fq::dbl(xx), xx);
    Xyzz r;
    r.X = Fq::sub(Fq::sqr(M), Fq::dbl(S));
    r.Y = Fq::sub(Fq::mul(M, Fq::sub(S, r.X)), Fq::mul(W, a.y));
    r.ZZ = V;
    r.ZZZ = W;
    return r;
}

__device__ __forceinline__ Xyzz dbl(const Xyzz& p) {
    if (p.is_inf()) return p;
    Fq U = Fq::dbl(p.Y);
    Fq V = Fq::sqr(U);
    Fq W = Fq::mul(U, V);
    Fq S = Fq::mul(p.X, V);
    Fq xx = Fq::sqr(p.X);
    Fq M = Fq::add(Fq::dbl(xx), xx);
    Xyzz r;
    r.X = Fq::sub(Fq::sqr(M), Fq::dbl(S));
    r.Y = Fq::sub(Fq::mul(M, Fq::sub(S, r.X)), Fq::mul(W, p.Y));
    r.ZZ = Fq::mul(V, p.ZZ);
    r.ZZZ = Fq::mul(W, p.ZZZ);
    return r;
}

// p + a, a affine (may be infinity). The hot formula of every MSM: its products are
// inlined (mul_inl), the rarer formulas call one shared product.
__device__ __forceinline__ Xyzz add_mixed(const Xyzz& p, const Affine& a) {
    if (a.is_inf()) return p;
    if (p.is_inf()) return Xyzz::from_affine(a);
    Fq U2 = Fq::mul_inl(a.x, p.ZZ);
    Fq S2 = Fq::mul_inl(a.y, p.ZZZ);
    Fq P = Fq::sub(U2, p.X);
    Fq R = Fq::sub(S2, p.Y);
    if (P.is_zero()) {
        if (R.is_zero()) return dbl_affine(a);
        return Xyzz::inf();
    }
    Fq PP = Fq::sqr_inl(P);
    Fq PPP = Fq::mul_inl(P, PP);
    Fq Q = Fq::mul_inl(p.X, PP);
    Xyzz r;
    r.X = Fq::sub(Fq::sub(Fq::sqr_inl(R), PPP), Fq::dbl(Q));
    r.Y = Fq::sub(Fq::mul_inl(R, Fq::sub(Q, r.X)), Fq::mul_inl(p.Y, PPP));
    r.ZZ = Fq::mul_inl(p.ZZ, PP);
    r.ZZZ = Fq::mul_inl(p.ZZZ, PPP);
    return r;
}

__device__ __forceinline__ Xyzz add(const Xyzz& p, const Xyzz& q) {
    if (q.is_inf()) return p;
    if (p.is_inf()) return q;
    Fq U1 = Fq::mul(p.X, q.ZZ);
    Fq U2 = Fq::mul(q.X, p.ZZ);
    Fq S1 = Fq::mul(p.Y, q.ZZZ);
    Fq S2 = Fq::mul(q.Y, p.ZZZ);
    Fq P = Fq::sub(U2, U1);
    Fq R = Fq::sub(S2, S1);
    if (P.is_zero()) {
        if (R.is_zero()) return dbl(p);
        return Xyzz::inf();
    }
    Fq PP = Fq::sqr(P);
    Fq PPP = Fq::mul(P, PP);
    Fq Q = Fq::mul(U1, PP);
    Xyzz r;
    r.X = Fq::sub(Fq::sub(Fq::sqr(R), PPP), Fq::dbl(Q));
    r.Y = Fq::sub(Fq::mul(R, Fq::sub(Q, r.X)), Fq::mul(S1, PPP));
    r.ZZ = Fq::mul(Fq::mul(p.ZZ, q.ZZ), PP);
    r.ZZZ = Fq::mul(Fq::mul(p.ZZZ, q.ZZZ), PPP);
    return r;
}

__device__ __forceinline__ Affine neg_affine(const Affine& a) {
    Affine r;
    r.x = a.x;
    r.y = Fq::neg(a.y);
    return r;
}

// ---- Test kernel: one thread per pair, out[4i..4i+4) = a+b (mixed), a+a, (a+b)+b
// (full add), 2(a+b). ----
extern "C" __global__ void g1_ops_test(const Affine* a, const Affine* b, Xyzz* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Affine p = Affine::load(a + i), q = Affine::load(b + i);
    Xyzz s = add_mixed(Xyzz::from_affine(p), q);
    s.store(out + 4 * i);
    add_mixed(Xyzz::from_affine(p), p).store(out + 4 * i + 1);
    add(s, Xyzz::from_affine(q)).store(out + 4 * i + 2);
    dbl(s).store(out + 4 * i + 3);
}
