//! The MSM planner's host-side arithmetic.

use super::*;

#[test]
fn default_windows_follow_the_window_count() {
    let c = |log: u32| MsmPlan::for_size(1usize << log).c;
    // Small MSMs keep small windows; sizes between grow the window.
    assert!(c(4) <= 6, "2^4 -> c = {}", c(4));
    assert!((14..=16).contains(&c(20)), "2^20 -> c = {}", c(20));
    // Large MSMs take the one wide plan, in balanced pieces of 32.
    let big = MsmPlan::for_size(1 << 26);
    assert_eq!((big.c, big.piece, big.balanced), (WIDE_WINDOW, 32, true));
    assert_eq!(c(24), 16);
    assert_eq!(MsmPlan::for_size(1 << 24).piece, 32);
    // Never a window that buys no fewer windows than the one below it.
    for log in 1..=24 {
        let p = MsmPlan::for_size(1usize << log);
        let fewer = 256u32.div_ceil(p.c - 1);
        assert!(
            p.nwin < fewer || p.c == MIN_WINDOW,
            "2^{log}: c = {} is wasted",
            p.c
        );
        assert!(p.c * p.nwin >= 256);
    }
}

#[test]
fn shape_errors() {
    let plan = MsmPlan::for_size(100);
    assert!(check_msm_shape(100, 100, 100, None, plan).is_ok());
    assert!(check_msm_shape(0, 0, 0, None, plan).is_ok());
    // Too few scalars, too few bases without a map, too few indices.
    assert!(check_msm_shape(100, 100, 99, None, plan).is_err());
    assert!(check_msm_shape(100, 99, 100, None, plan).is_err());
    assert!(check_msm_shape(100, 5, 100, Some(99), plan).is_err());
    // With a map the bases may be fewer than the terms (indices repeat).
    assert!(check_msm_shape(100, 5, 100, Some(100), plan).is_ok());
    // n · nwin sorted entries must stay below 2^31.
    let big = MsmPlan::for_window(4);
    let n = (1usize << 31) / big.nwin as usize + 1;
    assert!(check_msm_shape(n, n, n, None, big).is_err());
}

#[test]
fn g2_scratch_is_twice_g1_in_points() {
    let plan = MsmPlan::for_size(1 << 20);
    let n = 1 << 20;
    let t = MsmTuning::DEFAULT;
    assert_eq!(
        plan.scratch_bytes(&t, n),
        plan.scratch_bytes_for(&t, n, G1::XYZZ_BYTES)
    );
    // The levels' scratch: twice the point size, less than twice the bytes.
    let g1 = plan.level_scratch_bytes(n, G1::XYZZ_BYTES);
    let g2 = plan.level_scratch_bytes(n, crate::gpu::G2::XYZZ_BYTES);
    assert!(g2 > g1 && g2 < 2 * g1);
    // Batch-affine rounds (both curves' default) add their outputs and running
    // products on top of the levels, twice as many bytes in G2.
    let (ba1, ba2) = (
        plan.scratch_bytes_for(&t, n, G1::XYZZ_BYTES) - g1,
        plan.scratch_bytes_for(&t, n, crate::gpu::G2::XYZZ_BYTES) - g2,
    );
    assert!(ba1 > 0);
    assert_eq!(ba2, 2 * ba1);
    // With XYZZ levels only (`calls`), a curve's scratch is its levels'.
    let calls = t
        .with_sum(SumVariant::CalledProducts)
        .with_sum_g2(SumVariant::CalledProducts);
    assert_eq!(plan.scratch_bytes_for(&calls, n, G1::XYZZ_BYTES), g1);
    assert_eq!(
        plan.scratch_bytes_for(&calls, n, crate::gpu::G2::XYZZ_BYTES),
        g2
    );
}
