//! Bases out of bellperson's `SourceBuilder`s without copying.

use std::sync::Arc;

use cuzk_scheduler::Bases;
use ec_gpu_gen::multiexp_cpu::SourceBuilder;
use group::prime::PrimeCurveAffine;

pub(crate) trait SourceExt<G> {
    /// All bases from the builder's offset on.
    fn bases(self) -> Bases<G>;
}

impl<G: PrimeCurveAffine, S: SourceBuilder<G>> SourceExt<G> for S {
    fn bases(self) -> Bases<G> {
        let (vec, offset) = self.get();
        let offset = offset.min(vec.len());
        Bases::from_offset(vec, offset).expect("offset clamped to the length")
    }
}

/// A query split by bellperson into an inputs source and an aux source, as one
/// range of bases (dense inputs, then dense aux). When both come from one vector
/// with the aux right after the `num_inputs` inputs (as in `Parameters` and
/// `MappedParameters`), this is a view; otherwise the two parts are copied into one.
pub(crate) fn join<G, S>(inputs: S, aux: S, num_inputs: usize) -> Bases<G>
where
    G: PrimeCurveAffine,
    S: SourceBuilder<G>,
{
    let (iv, io) = inputs.get();
    let (av, ao) = aux.get();
    if Arc::ptr_eq(&iv, &av) && io + num_inputs == ao {
        return Bases::from_offset(iv, io.min(av.len())).expect("offset clamped to the length");
    }
    let mut joined = Vec::with_capacity(num_inputs + av.len().saturating_sub(ao));
    joined.extend(iv.iter().skip(io).take(num_inputs).copied());
    joined.extend(av.iter().skip(ao).copied());
    Bases::new(Arc::new(joined))
}
