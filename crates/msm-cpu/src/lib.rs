//! CPU multi-scalar multiplication for BLS12-381 (API contract; implementation in progress).
