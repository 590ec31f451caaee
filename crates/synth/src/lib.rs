//! Synthesis: a circuit's R1CS is compiled once into CSR matrices; each proof then
//! only computes the witness and evaluates `a = A·w`, `b = B·w`, `c = C·w` with a
//! parallel sparse matrix-vector product.
//!
//! (API contract; implementation in progress.)

#![forbid(unsafe_code)]

pub use cuzk_alloc::{Abc, Density, Witness};
