// BLS12-381 G1 (y^2 = x^3 + 4) in XYZZ coordinates: (X, Y, ZZ, ZZZ) stands for
// the affine point (X/ZZ, Y/ZZZ) with ZZ^3 = ZZZ^2; ZZ = 0 is the point at
// infinity. Formulas: Bernstein-Lange's Explicit-Formulas Database,
// "madd-2008-s", "add-2008-s" and "dbl-2008-s-1" for XYZZ (a = 0). Each addition
// checks its own special cases: infinity on either side, P + P (a doubling) and
// P + (-P) (infinity).
//
// An affine base is (x, y); blst writes the point at infinity as (0, 0), which is
// not on the curve, so no separate flag is needed.
//
// Code size: each formula runs its multiplications as the steps of one loop
// around a single fp_mul, operands and results picked by the step. Drivers
// inline every call and unroll fp_mul's 12 x 12 limb loops, so a formula
// written out would be ten copies of fp_mul: lavapipe took ~7 minutes to compile
// a kernel of a few dozen of them, and a GPU's instruction cache holds fewer.
// The step loops start at `opaque_zero()`, which every module including this
// file defines from a value the compiler cannot see (a uniform that is 0), so
// they are not unrolled back into copies.

struct Affine {
    x: Fp,
    y: Fp,
}

struct Xyzz {
    x: Fp,
    y: Fp,
    zz: Fp,
    zzz: Fp,
}

fn xyzz_infinity() -> Xyzz {
    return Xyzz(fp_zero(), fp_zero(), fp_zero(), fp_zero());
}

fn xyzz_is_infinity(p: Xyzz) -> bool {
    return fp_is_zero(p.zz);
}

fn affine_is_infinity(q: Affine) -> bool {
    return fp_is_zero(q.x) && fp_is_zero(q.y);
}

fn xyzz_from_affine(q: Affine) -> Xyzz {
    if affine_is_infinity(q) {
        return xyzz_infinity();
    }
    return Xyzz(q.x, q.y, FP_ONE, FP_ONE);
}

// 2p (dbl-2008-s-1): U = 2Y, V = U^2, W = U V, S = X V, M = 3 X^2,
// X3 = M^2 - 2S, Y3 = M (S - X3) - W Y, ZZ3 = V ZZ, ZZZ3 = W ZZZ.
fn xyzz_double(p: Xyzz) -> Xyzz {
    if xyzz_is_infinity(p) {
        return p;
    }
    let u = fp_double(p.y);
    var v: Fp;
    var w: Fp;
    var s: Fp;
    var m: Fp;
    var out: Xyzz;
    for (var step = opaque_zero(); step < 9u; step++) {
        var a: Fp;
        var b: Fp;
        switch step {
            case 0u: { a = u; b = u; }
            case 1u: { a = u; b = v; }
            case 2u: { a = p.x; b = v; }
            case 3u: { a = p.x; b = p.x; }
            case 4u: { a = m; b = m; }
            case 5u: { a = m; b = fp_sub(s, out.x); }
            case 6u: { a = w; b = p.y; }
            case 7u: { a = v; b = p.zz; }
            default: { a = w; b = p.zzz; }
        }
        let r = fp_mul(a, b);
        switch step {
            case 0u: { v = r; }
            case 1u: { w = r; }
            case 2u: { s = r; }
            case 3u: { m = fp_add(fp_double(r), r); }
            case 4u: { out.x = fp_sub(r, fp_double(s)); }
            case 5u: { out.y = r; }
            case 6u: { out.y = fp_sub(out.y, r); }
            case 7u: { out.zz = r; }
            default: { out.zzz = r; }
        }
    }
    return out;
}

// p + q for an affine q (madd-2008-s): P = x ZZ - X, R = y ZZZ - Y, PP = P^2,
// PPP = P PP, Q = X PP, X3 = R^2 - PPP - 2Q, Y3 = R (Q - X3) - Y PPP,
// ZZ3 = ZZ PP, ZZZ3 = ZZZ PPP.
fn xyzz_add_affine(p: Xyzz, q: Affine) -> Xyzz {
    if affine_is_infinity(q) {
        return p;
    }
    if xyzz_is_infinity(p) {
        return Xyzz(q.x, q.y, FP_ONE, FP_ONE);
    }
    var h: Fp;
    var r: Fp;
    var hh: Fp;
    var hhh: Fp;
    var q2: Fp;
    var out: Xyzz;
    var same_x = false;
    for (var step = opaque_zero(); step < 10u; step++) {
        var a: Fp;
        var b: Fp;
        switch step {
            case 0u: { a = q.x; b = p.zz; }
            case 1u: { a = q.y; b = p.zzz; }
            case 2u: { a = h; b = h; }
            case 3u: { a = h; b = hh; }
            case 4u: { a = p.x; b = hh; }
            case 5u: { a = r; b = r; }
            case 6u: { a = r; b = fp_sub(q2, out.x); }
            case 7u: { a = p.y; b = hhh; }
            case 8u: { a = p.zz; b = hh; }
            default: { a = p.zzz; b = hhh; }
        }
        let m = fp_mul(a, b);
        switch step {
            case 0u: { h = fp_sub(m, p.x); }
            case 1u: { r = fp_sub(m, p.y); }
            case 2u: { hh = m; }
            case 3u: { hhh = m; }
            case 4u: { q2 = m; }
            case 5u: { out.x = fp_sub(fp_sub(m, hhh), fp_double(q2)); }
            case 6u: { out.y = m; }
            case 7u: { out.y = fp_sub(out.y, m); }
            case 8u: { out.zz = m; }
            default: { out.zzz = m; }
        }
        if step == 1u && fp_is_zero(h) {
            same_x = true;
            break;
        }
    }
    if same_x {
        if fp_is_zero(r) {
            return xyzz_double(Xyzz(q.x, q.y, FP_ONE, FP_ONE));
        }
        return xyzz_infinity();
    }
    return out;
}

// p + q (add-2008-s): U1 = X1 ZZ2, U2 = X2 ZZ1, S1 = Y1 ZZZ2, S2 = Y2 ZZZ1,
// P = U2 - U1, R = S2 - S1, PP = P^2, PPP = P PP, Q = U1 PP,
// X3 = R^2 - PPP - 2Q, Y3 = R (Q - X3) - S1 PPP, ZZ3 = ZZ1 ZZ2 PP,
// ZZZ3 = ZZZ1 ZZZ2 PPP.
fn xyzz_add(p: Xyzz, q: Xyzz) -> Xyzz {
    if xyzz_is_infinity(q) {
        return p;
    }
    if xyzz_is_infinity(p) {
        return q;
    }
    var u1: Fp;
    var u2: Fp;
    var s1: Fp;
    var h: Fp;
    var r: Fp;
    var hh: Fp;
    var hhh: Fp;
    var q2: Fp;
    var out: Xyzz;
    var same_x = false;
    for (var step = opaque_zero(); step < 14u; step++) {
        var a: Fp;
        var b: Fp;
        switch step {
            case 0u: { a = p.x; b = q.zz; }
            case 1u: { a = q.x; b = p.zz; }
            case 2u: { a = p.y; b = q.zzz; }
            case 3u: { a = q.y; b = p.zzz; }
            case 4u: { a = h; b = h; }
            case 5u: { a = h; b = hh; }
            case 6u: { a = u1; b = hh; }
            case 7u: { a = r; b = r; }
            case 8u: { a = r; b = fp_sub(q2, out.x); }
            case 9u: { a = s1; b = hhh; }
            case 10u: { a = p.zz; b = q.zz; }
            case 11u: { a = out.zz; b = hh; }
            case 12u: { a = p.zzz; b = q.zzz; }
            default: { a = out.zzz; b = hhh; }
        }
        let m = fp_mul(a, b);
        switch step {
            case 0u: { u1 = m; }
            case 1u: { h = fp_sub(m, u1); }
            case 2u: { s1 = m; }
            case 3u: { r = fp_sub(m, s1); }
            case 4u: { hh = m; }
            case 5u: { hhh = m; }
            case 6u: { q2 = m; }
            case 7u: { out.x = fp_sub(fp_sub(m, hhh), fp_double(q2)); }
            case 8u: { out.y = m; }
            case 9u: { out.y = fp_sub(out.y, m); }
            case 10u, 11u: { out.zz = m; }
            default: { out.zzz = m; }
        }
        if step == 3u && fp_is_zero(h) {
            same_x = true;
            break;
        }
    }
    if same_x {
        if fp_is_zero(r) {
            return xyzz_double(p);
        }
        return xyzz_infinity();
    }
    return out;
}
