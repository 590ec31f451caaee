// BLS12-381 G1 (y^2 = x^3 + 4 over Fq) and G2 (y^2 = x^3 + 4(1 + u) over Fq2) in XYZZ
// coordinates: x = X / ZZ, y = Y / ZZZ with ZZ^3 = ZZZ^2. The point at infinity has
// ZZ = ZZZ = 0. XYZZ mixed addition costs 10 multiplications (8 + 2 squarings) and
// needs no inversion, which is why buckets use it. The formulas below are those of
// a = 0 curves and never use b, so one template over the field serves both groups:
// AffineT<Fq> / XyzzT<Fq> for G1, AffineT<Fq2> / XyzzT<Fq2> for G2.
//
// Affine points have blstrs' layout (`blst_p1_affine`: x then y, 6 u64 limbs each,
// Montgomery form; `blst_p2_affine`: x then y, each an Fq2 c0 then c1); blst encodes
// the point at infinity as all-zero coordinates.

// Fq2 = Fq[u] / (u^2 + 1), blst's `blst_fp2` layout (c0 then c1), with Mont's
// interface so that curve code is a template over the field.
//
// Products: one real call each (mul_call / sqr_call) whose body inlines its 3
// (Karatsuba) or 2 Fq products, so the compiler schedules the products of one Fq2
// product together while every curve formula stays small. mul_inl / sqr_inl, the
// names G1's hot mixed addition uses to inline its Fq products, are the same calls
// here: inlining 33 Fq products into each G2 formula would multiply the module's
// code and its NVRTC time (see Mont::mul).
struct Fq2 {
    Fq c0, c1;

    static __device__ __forceinline__ Fq2 make(const Fq& a, const Fq& b) {
        Fq2 r;
        r.c0 = a;
        r.c1 = b;
        return r;
    }
    static __device__ __forceinline__ Fq2 zero() { return make(Fq::zero(), Fq::zero()); }
    static __device__ __forceinline__ Fq2 one() { return make(Fq::one(), Fq::zero()); }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() & c1.is_zero(); }
    __device__ __forceinline__ bool eq(const Fq2& o) const { return c0.eq(o.c0) & c1.eq(o.c1); }
    static __device__ __forceinline__ Fq2 load(const Fq2* p) { return make(Fq::load(&p->c0), Fq::load(&p->c1)); }
    __device__ __forceinline__ void store(Fq2* p) const {
        c0.store(&p->c0);
        c1.store(&p->c1);
    }

    static __device__ __forceinline__ Fq2 add(const Fq2& a, const Fq2& b) { return make(Fq::add(a.c0, b.c0), Fq::add(a.c1, b.c1)); }
    static __device__ __forceinline__ Fq2 sub(const Fq2& a, const Fq2& b) { return make(Fq::sub(a.c0, b.c0), Fq::sub(a.c1, b.c1)); }
    static __device__ __forceinline__ Fq2 neg(const Fq2& a) { return make(Fq::neg(a.c0), Fq::neg(a.c1)); }
    static __device__ __forceinline__ Fq2 dbl(const Fq2& a) { return make(Fq::dbl(a.c0), Fq::dbl(a.c1)); }

    // (a0 + a1 u)(b0 + b1 u) = (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u.
    static __device__ __forceinline__ Fq2 mul(const Fq2& a, const Fq2& b) {
        Fq t0 = Fq::mul(a.c0, b.c0);
        Fq t1 = Fq::mul(a.c1, b.c1);
        Fq t2 = Fq::mul(Fq::add(a.c0, a.c1), Fq::add(b.c0, b.c1));
        return make(Fq::sub(t0, t1), Fq::sub(Fq::sub(t2, t0), t1));
    }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u.
    static __device__ __forceinline__ Fq2 sqr(const Fq2& a) {
        Fq t = Fq::mul(a.c0, a.c1);
        return make(Fq::mul(Fq::add(a.c0, a.c1), Fq::sub(a.c0, a.c1)), Fq::dbl(t));
    }
    static __device__ __forceinline__ Fq2 mul_inl(const Fq2& a, const Fq2& b) { return mul(a, b); }
    static __device__ __forceinline__ Fq2 sqr_inl(const Fq2& a) { return sqr(a); }
};

// Whether a field's curve formulas are real calls: no for G1 (each kernel inlines
// them, its hot mixed addition with inlined Fq products), yes for G2, where one copy
// of each formula serves every kernel. G2's mixed addition, the one formula per MSM
// term, inlines its 33 Fq products into that single copy (mul_inl); the other G2
// formulas call the Fq2 product.
template <class F> struct CallFormulas { static const bool value = false; };
template <> struct CallFormulas<Fq2> { static const bool value = true; };

template <class F>
struct AffineT {
    F x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
    static __device__ __forceinline__ AffineT load(const AffineT* p) {
        AffineT r;
        r.x = F::load(&p->x);
        r.y = F::load(&p->y);
        return r;
    }
    __device__ __forceinline__ void store(AffineT* p) const {
        x.store(&p->x);
        y.store(&p->y);
    }
};

template <class F>
struct XyzzT {
    F X, Y, ZZ, ZZZ;

    static __device__ __forceinline__ XyzzT inf() {
        XyzzT r;
        r.X = F::zero(); r.Y = F::zero(); r.ZZ = F::zero(); r.ZZZ = F::zero();
        return r;
    }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }
    static __device__ __forceinline__ XyzzT from_affine(const AffineT<F>& a) {
        if (a.is_inf()) return inf();
        XyzzT r;
        r.X = a.x; r.Y = a.y; r.ZZ = F::one(); r.ZZZ = F::one();
        return r;
    }
    static __device__ __forceinline__ XyzzT load(const XyzzT* p) {
        XyzzT r;
        r.X = F::load(&p->X); r.Y = F::load(&p->Y); r.ZZ = F::load(&p->ZZ); r.ZZZ = F::load(&p->ZZZ);
        return r;
    }
    __device__ __forceinline__ void store(XyzzT* p) const {
        X.store(&p->X); Y.store(&p->Y); ZZ.store(&p->ZZ); ZZZ.store(&p->ZZZ);
    }
};

typedef AffineT<Fq> Affine;
typedef XyzzT<Fq> Xyzz;
typedef AffineT<Fq2> Affine2;
typedef XyzzT<Fq2> Xyzz2;

// 2 * (x, y) for an affine point (not infinity; neither group has a point with y = 0:
// both have odd prime order).
template <class F>
__device__ __forceinline__ XyzzT<F> dbl_affine_body(const AffineT<F>& a) {
    F U = F::dbl(a.y);
    F V = F::sqr(U);
    F W = F::mul(U, V);
    F S = F::mul(a.x, V);
    F xx = F::sqr(a.x);
    F M = F::add(F::dbl(xx), xx);
    XyzzT<F> r;
    r.X = F::sub(F::sqr(M), F::dbl(S));
    r.Y = F::sub(F::mul(M, F::sub(S, r.X)), F::mul(W, a.y));
    r.ZZ = V;
    r.ZZZ = W;
    return r;
}
template <class F>
__device__ __noinline__ XyzzT<F> dbl_affine_call(AffineT<F> a) { return dbl_affine_body(a); }
template <class F>
__device__ __forceinline__ XyzzT<F> dbl_affine(const AffineT<F>& a) {
    if constexpr (CallFormulas<F>::value) return dbl_affine_call(a);
    else return dbl_affine_body(a);
}

template <class F>
__device__ __forceinline__ XyzzT<F> dbl_body(const XyzzT<F>& p) {
    if (p.is_inf()) return p;
    F U = F::dbl(p.Y);
    F V = F::sqr(U);
    F W = F::mul(U, V);
    F S = F::mul(p.X, V);
    F xx = F::sqr(p.X);
    F M = F::add(F::dbl(xx), xx);
    XyzzT<F> r;
    r.X = F::sub(F::sqr(M), F::dbl(S));
    r.Y = F::sub(F::mul(M, F::sub(S, r.X)), F::mul(W, p.Y));
    r.ZZ = F::mul(V, p.ZZ);
    r.ZZZ = F::mul(W, p.ZZZ);
    return r;
}
template <class F>
__device__ __noinline__ XyzzT<F> dbl_call(XyzzT<F> p) { return dbl_body(p); }
template <class F>
__device__ __forceinline__ XyzzT<F> dbl(const XyzzT<F>& p) {
    if constexpr (CallFormulas<F>::value) return dbl_call(p);
    else return dbl_body(p);
}

// p + a, a affine (may be infinity). The hot formula of every MSM: its products are
// inlined (mul_inl), the rarer formulas call one shared product (for G2: into the one
// copy of the formula, see CallFormulas).
//
// M picks how its products are made: 0 inlined (the default), 1 through the shared
// product call (operands by value, in registers): G1's bucket sums, the fastest on
// the H200 (occupancy against instruction-cache reach; NOTES.md).
template <class F, int M>
__device__ __forceinline__ F fmul(const F& a, const F& b) {
    if constexpr (M == 0) return F::mul_inl(a, b);
    else return F::mul(a, b);
}
template <class F, int M>
__device__ __forceinline__ F fsqr(const F& a) {
    if constexpr (M == 0) return F::sqr_inl(a);
    else return F::sqr(a);
}
template <class F, int M = 0>
__device__ __forceinline__ XyzzT<F> add_mixed_body(const XyzzT<F>& p, const AffineT<F>& a) {
    if (a.is_inf()) return p;
    if (p.is_inf()) return XyzzT<F>::from_affine(a);
    F U2 = fmul<F, M>(a.x, p.ZZ);
    F S2 = fmul<F, M>(a.y, p.ZZZ);
    F P = F::sub(U2, p.X);
    F R = F::sub(S2, p.Y);
    if (P.is_zero()) {
        if (R.is_zero()) return dbl_affine(a);
        return XyzzT<F>::inf();
    }
    F PP = fsqr<F, M>(P);
    F PPP = fmul<F, M>(P, PP);
    F Q = fmul<F, M>(p.X, PP);
    XyzzT<F> r;
    r.X = F::sub(F::sub(fsqr<F, M>(R), PPP), F::dbl(Q));
    r.Y = F::sub(fmul<F, M>(R, F::sub(Q, r.X)), fmul<F, M>(p.Y, PPP));
    r.ZZ = fmul<F, M>(p.ZZ, PP);
    r.ZZZ = fmul<F, M>(p.ZZZ, PPP);
    return r;
}
template <class F>
__device__ __noinline__ XyzzT<F> add_mixed_call(XyzzT<F> p, AffineT<F> a) { return add_mixed_body(p, a); }
template <class F>
__device__ __forceinline__ XyzzT<F> add_mixed(const XyzzT<F>& p, const AffineT<F>& a) {
    if constexpr (CallFormulas<F>::value) return add_mixed_call(p, a);
    else return add_mixed_body(p, a);
}

template <class F>
__device__ __forceinline__ XyzzT<F> add_body(const XyzzT<F>& p, const XyzzT<F>& q) {
    if (q.is_inf()) return p;
    if (p.is_inf()) return q;
    F U1 = F::mul(p.X, q.ZZ);
    F U2 = F::mul(q.X, p.ZZ);
    F S1 = F::mul(p.Y, q.ZZZ);
    F S2 = F::mul(q.Y, p.ZZZ);
    F P = F::sub(U2, U1);
    F R = F::sub(S2, S1);
    if (P.is_zero()) {
        if (R.is_zero()) return dbl(p);
        return XyzzT<F>::inf();
    }
    F PP = F::sqr(P);
    F PPP = F::mul(P, PP);
    F Q = F::mul(U1, PP);
    XyzzT<F> r;
    r.X = F::sub(F::sub(F::sqr(R), PPP), F::dbl(Q));
    r.Y = F::sub(F::mul(R, F::sub(Q, r.X)), F::mul(S1, PPP));
    r.ZZ = F::mul(F::mul(p.ZZ, q.ZZ), PP);
    r.ZZZ = F::mul(F::mul(p.ZZZ, q.ZZZ), PPP);
    return r;
}
template <class F>
__device__ __noinline__ XyzzT<F> add_call(XyzzT<F> p, XyzzT<F> q) { return add_body(p, q); }
template <class F>
__device__ __forceinline__ XyzzT<F> add(const XyzzT<F>& p, const XyzzT<F>& q) {
    if constexpr (CallFormulas<F>::value) return add_call(p, q);
    else return add_body(p, q);
}

template <class F>
__device__ __forceinline__ AffineT<F> neg_affine(const AffineT<F>& a) {
    AffineT<F> r;
    r.x = a.x;
    r.y = F::neg(a.y);
    return r;
}

// ---- Batch-affine accumulation (msm.cu's msm_ba_round) ----
//
// An affine sum p + q costs one inversion and 3 products (2 for the doubling's
// numerator besides); Montgomery's trick shares one inversion among all the pairs a
// thread sums (3 more products each), so a pair costs ~6 products where an XYZZ mixed
// addition costs 10. A pair's kind says which of the cases it is, its denominator is
// what the shared inversion must invert (1 when none), and pair_sum finishes it with
// that denominator's inverse.
enum PairKind : u32 { PAIR_ADD = 0, PAIR_DBL = 1, PAIR_P = 2, PAIR_Q = 3, PAIR_INF = 4 };

template <class F>
__device__ __forceinline__ u32 pair_kind(const AffineT<F>& p, const AffineT<F>& q) {
    if (p.is_inf()) return PAIR_Q;
    if (q.is_inf()) return PAIR_P;
    if (!p.x.eq(q.x)) return PAIR_ADD;
    // Same x: q = p (double) or q = -p (infinity). y != 0 on both curves (odd order).
    return p.y.eq(q.y) ? PAIR_DBL : PAIR_INF;
}

// The denominator of the pair's slope: x_q - x_p for an addition, 2 y_p for a
// doubling, 1 for the cases that need no inversion. Never 0.
template <class F>
__device__ __forceinline__ F pair_den(u32 kind, const AffineT<F>& p, const AffineT<F>& q) {
    if (kind == PAIR_ADD) return F::sub(q.x, p.x);
    if (kind == PAIR_DBL) return F::dbl(p.y);
    return F::one();
}

// p + q given inv = 1 / pair_den(kind, p, q). The slope l is (y_q - y_p) / (x_q - x_p)
// or 3 x_p^2 / (2 y_p); then x = l^2 - x_p - x_q and y = l (x_p - x) - y_p serve both
// (x_q = x_p for a doubling).
template <class F>
__device__ __forceinline__ AffineT<F> pair_sum(u32 kind, const AffineT<F>& p, const AffineT<F>& q, const F& inv) {
    if (kind == PAIR_P) return p;
    if (kind == PAIR_Q) return q;
    AffineT<F> r;
    if (kind == PAIR_INF) {
        r.x = F::zero();
        r.y = F::zero();
        return r;
    }
    F num;
    if (kind == PAIR_ADD) {
        num = F::sub(q.y, p.y);
    } else {
        F xx = F::sqr(p.x);
        num = F::add(F::dbl(xx), xx);
    }
    F l = F::mul(num, inv);
    r.x = F::sub(F::sub(F::sqr(l), p.x), q.x);
    r.y = F::sub(F::mul(l, F::sub(p.x, r.x)), p.y);
    return r;
}

// 1 / a by the binary extended Euclid (Kaliski's "almost Montgomery inverse"), the
// batch-affine rounds' inversion (measured on the H200 against Fermat's a^(p - 2),
// ~486 products, since removed: G1 MSM 2^24 155.9 -> 148.2 ms, 2^26 579 -> 541 ms): at most 2 log2 p steps of shifts,
// subtractions and additions on 12 limbs, no multiplication, but data-dependent
// branches (a warp runs its lanes' longest path). When v reaches 0, p - r is
// A^-1 2^k mod p, A the element's Montgomery limbs and log2 p <= k <= 2 log2 p;
// A^-1 R^2 = a^-1 R, the Montgomery form of 1 / a, is that times 2^(768 - k), by
// modular doublings. r < 2p and s <= p throughout, so 12 limbs hold them. 0 gives
// 0.

__device__ __forceinline__ void limbs_shr1(Fq& x) {
#pragma unroll
    for (int i = 0; i < 11; i++) x.v[i] = (x.v[i] >> 1) | (x.v[i + 1] << 31);
    x.v[11] >>= 1;
}
__device__ __forceinline__ void limbs_shl1(Fq& x) {
#pragma unroll
    for (int i = 11; i > 0; i--) x.v[i] = (x.v[i] << 1) | (x.v[i - 1] >> 31);
    x.v[0] <<= 1;
}
// x -= y (no reduction; the callers know x >= y).
__device__ __forceinline__ void limbs_sub(Fq& x, const Fq& y) {
    x.v[0] = sub_cc(x.v[0], y.v[0]);
#pragma unroll
    for (int i = 1; i < 12; i++) x.v[i] = subc_cc(x.v[i], y.v[i]);
}
// x += y (no reduction; the callers know the sum fits).
__device__ __forceinline__ void limbs_add(Fq& x, const Fq& y) {
    x.v[0] = add_cc(x.v[0], y.v[0]);
#pragma unroll
    for (int i = 1; i < 12; i++) x.v[i] = addc_cc(x.v[i], y.v[i]);
}
// x < y as integers.
__device__ __forceinline__ bool limbs_lt(const Fq& x, const Fq& y) {
    u32 d = sub_cc(x.v[0], y.v[0]);
#pragma unroll
    for (int i = 1; i < 12; i++) d = subc_cc(x.v[i], y.v[i]);
    (void)d;
    return subc(0, 0) != 0;
}

__device__ __noinline__ Fq fq_inverse_gcd(Fq a) {
    if (a.is_zero()) return a;
    Fq u, v = a, r = Fq::zero(), s = Fq::zero();
#pragma unroll
    for (int i = 0; i < 12; i++) u.v[i] = FQ_MOD[i];
    s.v[0] = 1;
    u32 k = 0;
    while (!v.is_zero()) {
        if ((u.v[0] & 1) == 0) {
            limbs_shr1(u);
            limbs_shl1(s);
        } else if ((v.v[0] & 1) == 0) {
            limbs_shr1(v);
            limbs_shl1(r);
        } else if (limbs_lt(v, u)) {
            limbs_sub(u, v);
            limbs_shr1(u);
            limbs_add(r, s);
            limbs_shl1(s);
        } else {
            limbs_sub(v, u);
            limbs_shr1(v);
            limbs_add(s, r);
            limbs_shl1(r);
        }
        k++;
    }
    Fq p;
#pragma unroll
    for (int i = 0; i < 12; i++) p.v[i] = FQ_MOD[i];
    if (!limbs_lt(r, p)) limbs_sub(r, p);
    Fq x = p;
    limbs_sub(x, r);  // p - r: A^-1 2^k, in 1..p-1
    for (u32 i = k; i < 768; i++) x = Fq::dbl(x);
    return x;
}


// ---- Test kernels. fq2_ops_test: out[4i..4i+4) = a+b, a-b, a*b, a^2 (checked against
// blst's Fp2). g1_ops_test / g2_ops_test: one thread per pair, out[4i..4i+4) = a+b
// (mixed), a+a, (a+b)+b (full add), 2(a+b). ----
// The G1 tests go into the msm module, the G2 ones into msm_g2 (kernels.rs).
#ifdef CUZK_G2
extern "C" __global__ void fq2_ops_test(const Fq2* a, const Fq2* b, Fq2* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fq2 x = Fq2::load(a + i), y = Fq2::load(b + i);
    Fq2::add(x, y).store(out + 4 * i);
    Fq2::sub(x, y).store(out + 4 * i + 1);
    Fq2::mul(x, y).store(out + 4 * i + 2);
    Fq2::sqr(x).store(out + 4 * i + 3);
}
#endif

template <class F>
__device__ __forceinline__ void ops_test(const AffineT<F>* a, const AffineT<F>* b, XyzzT<F>* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    AffineT<F> p = AffineT<F>::load(a + i), q = AffineT<F>::load(b + i);
    XyzzT<F> s = add_mixed(XyzzT<F>::from_affine(p), q);
    s.store(out + 4 * i);
    add_mixed(XyzzT<F>::from_affine(p), p).store(out + 4 * i + 1);
    add(s, XyzzT<F>::from_affine(q)).store(out + 4 * i + 2);
    dbl(s).store(out + 4 * i + 3);
}

#ifdef CUZK_G2
extern "C" __global__ void g2_ops_test(const Affine2* a, const Affine2* b, Xyzz2* out, u32 n) { ops_test<Fq2>(a, b, out, n); }
#else
extern "C" __global__ void g1_ops_test(const Affine* a, const Affine* b, Xyzz* out, u32 n) { ops_test<Fq>(a, b, out, n); }
#endif
