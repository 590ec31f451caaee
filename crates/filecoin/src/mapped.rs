//! The engine's view ([`Srs`]) of a memory-mapped points file
//! (`cuzk_params::points`): each query's bases are the map's pages, shared, never
//! copied.

use std::sync::Arc;

use cuzk_assembly::AssemblyKey;
use cuzk_params::points::{MappedParams, MappedPoint, MappedQuery};
use cuzk_scheduler::{BaseStore, Bases, Srs};

struct Query<G>(MappedQuery<G>);

impl<G: MappedPoint> BaseStore<G> for Query<G> {
    fn points(&self) -> &[G] {
        self.0.as_slice()
    }

    fn is_mapped(&self) -> bool {
        true
    }
}

fn bases<G: MappedPoint>(q: &MappedQuery<G>) -> Bases<G> {
    Bases::stored(Arc::new(Query(q.clone())))
}

/// The parameter set as the stages use it. A points file holds bellperson's
/// `Parameters` layout (each query's dense inputs, then its dense aux), so every
/// query is its whole vector, as `cuzk::srs_from_source` makes it of a decoded
/// `Parameters`.
pub(crate) fn srs(m: &MappedParams) -> Srs {
    Srs {
        key: AssemblyKey {
            alpha_g1: m.vk.alpha_g1,
            beta_g1: m.vk.beta_g1,
            beta_g2: m.vk.beta_g2,
            delta_g1: m.vk.delta_g1,
            delta_g2: m.vk.delta_g2,
        },
        ic_len: m.vk.ic.len(),
        h: bases(&m.h),
        l: bases(&m.l),
        a: bases(&m.a),
        b_g1: bases(&m.b_g1),
        b_g2: bases(&m.b_g2),
    }
}
