//! The compiled shapes kept on the device for `prove_partition_witness`.

use cuzk_gpu_backend::{BackendError, R1csRef};

use super::{dev, Inner};
use crate::error::CudaError;
use crate::spmv::{DeviceR1cs, R1csKey, ValidR1cs};

impl Inner {
    /// Makes `view`'s matrices resident (validated and uploaded the first time the
    /// shape is seen) next to `working` bytes of the partition, and returns its key.
    ///
    /// A copy of the same host matrices with another shape (an R1CS freed and
    /// another compiled at its address) is dropped. When the new shape does not fit
    /// next to what is resident, the other shapes' copies go first, then the bases
    /// (the partition streams those that do not fit back: the matrices cannot be
    /// streamed). A shape that does not fit even alone with the partition's working
    /// memory is a [`BackendError::Device`]; a malformed one is
    /// [`BackendError::Rejected`], before anything is uploaded.
    pub(super) fn prepare_r1cs(
        &mut self,
        view: R1csRef<'_>,
        working: u64,
    ) -> Result<R1csKey, BackendError> {
        let key = R1csKey::of(&view);
        self.r1cs.retain(|k, _| !k.same_place(&key) || *k == key);
        if self.r1cs.contains_key(&key) {
            return Ok(key);
        }
        // Once per shape, on a pool of its own (a 32 GiB PoRep shape has ~670
        // million terms to check): the backend owns no CPU pool, and rayon's global
        // one would stay alive for nothing afterwards.
        let valid = validate(view)?;
        let need = key.device_bytes();
        let shapes: u64 = self.r1cs.values().map(DeviceR1cs::device_bytes).sum();
        match room(shapes, self.base_bytes(), need, working, self.budget) {
            None => {
                return Err(dev(CudaError::OutOfMemory {
                    what: "compiled R1CS (CSR matrices and coefficients) with the partition's working memory",
                    need: need.saturating_add(working),
                    available: self.budget,
                }))
            }
            Some(Room::Fits) => {}
            Some(Room::DropShapes) => self.r1cs.clear(),
            Some(Room::DropShapesAndBases) => {
                self.r1cs.clear();
                self.bases.clear();
                self.bases_g2.clear();
            }
        }
        let copy = DeviceR1cs::upload(&self.gpu, valid).map_err(dev)?;
        self.r1cs.insert(key, copy);
        Ok(key)
    }
}

/// [`ValidR1cs::new`] on a pool of the machine's width, made for this one check.
fn validate(view: R1csRef<'_>) -> Result<ValidR1cs<'_>, BackendError> {
    let rejected = |e: cuzk_synth::SynthError| BackendError::Rejected(e.to_string());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| ValidR1cs::new(view)).map_err(rejected),
        // No threads to be had: the check on rayon's global pool, as good.
        Err(_) => ValidR1cs::new(view).map_err(rejected),
    }
}

/// What has to go for a new shape of `need` device bytes to be uploaded next to a
/// partition's `working` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Room {
    Fits,
    /// The other shapes' copies (`shapes` bytes).
    DropShapes,
    /// Those and every resident base set (`bases` bytes); the partition streams
    /// the sets that then do not fit back.
    DropShapesAndBases,
}

/// [`Room`] for a new shape, or `None` when it does not fit even alone with the
/// partition's working memory.
pub(super) fn room(shapes: u64, bases: u64, need: u64, working: u64, budget: u64) -> Option<Room> {
    let own = need.saturating_add(working);
    if own > budget {
        None
    } else if own.saturating_add(shapes).saturating_add(bases) <= budget {
        Some(Room::Fits)
    } else if own.saturating_add(bases) <= budget {
        Some(Room::DropShapes)
    } else {
        Some(Room::DropShapesAndBases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_shape_evicts_other_shapes_before_bases_and_fails_only_alone() {
        // budget 100: a shape of 30 with 20 working bytes.
        assert_eq!(room(0, 0, 30, 20, 100), Some(Room::Fits));
        assert_eq!(room(25, 25, 30, 20, 100), Some(Room::Fits));
        assert_eq!(room(26, 25, 30, 20, 100), Some(Room::DropShapes));
        assert_eq!(room(40, 50, 30, 20, 100), Some(Room::DropShapes));
        assert_eq!(room(40, 51, 30, 20, 100), Some(Room::DropShapesAndBases));
        assert_eq!(room(0, 0, 80, 20, 100), Some(Room::Fits));
        assert_eq!(room(0, 1, 80, 20, 100), Some(Room::DropShapesAndBases));
        assert_eq!(room(0, 0, 81, 20, 100), None);
        assert_eq!(room(0, 0, u64::MAX - 1, 2, u64::MAX - 1), None);
    }
}
