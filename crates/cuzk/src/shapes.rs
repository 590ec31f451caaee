//! Compiled shapes, cached: a circuit's R1CS is compiled once per shape and reused
//! by every later batch of that shape.
//!
//! Compiling is the expensive half of synthesis (2.9-3.4 s for a 2^22 SHA circuit,
//! more than the GPU's work for it), and bellperson's drop-in signatures give no
//! handle to keep a shape in. The key is what fixes a Groth16 circuit's shape
//! without running it: the circuit's Rust type and the verifying key of the
//! parameters it is proved with (a proving key is generated for exactly one
//! circuit shape, and its random `delta` and `gamma` make two parameter sets
//! distinct). A cached shape is still checked against every witness (the counts of
//! inputs, aux variables and constraints, [`cuzk_synth::SynthError::ShapeMismatch`]).
//! A circuit whose wiring changes with its witness values cannot be proved with
//! Groth16 anyway; it is the one case a cache keyed this way would not notice.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
};

use bellperson::groth16::{ParameterSource, VerifyingKey};
use blstrs::Bls12;
use cuzk_synth::R1cs;
use sha2::{Digest, Sha256};

use crate::Error;

/// What identifies a compiled shape: the circuit's type and its parameters'
/// verifying key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeKey {
    circuit: &'static str,
    vk: [u8; 32],
}

impl ShapeKey {
    /// The key of circuits of type `C` proved with `params`.
    pub fn of<C, P: ParameterSource<Bls12>>(params: &P) -> Result<Self, Error> {
        let vk = params.get_vk(0).map_err(Error::ParameterSource)?;
        Ok(Self::from_vk::<C>(vk))
    }

    /// The key of circuits of type `C` whose verifying key is `vk`.
    pub fn from_vk<C>(vk: &VerifyingKey<Bls12>) -> Self {
        let mut h = Sha256::new();
        h.update(vk.alpha_g1.to_compressed());
        h.update(vk.beta_g1.to_compressed());
        h.update(vk.beta_g2.to_compressed());
        h.update(vk.gamma_g2.to_compressed());
        h.update(vk.delta_g1.to_compressed());
        h.update(vk.delta_g2.to_compressed());
        h.update((vk.ic.len() as u64).to_le_bytes());
        for p in &vk.ic {
            h.update(p.to_compressed());
        }
        Self {
            circuit: std::any::type_name::<C>(),
            vk: h.finalize().into(),
        }
    }
}

/// A bounded cache of compiled shapes, least recently used out first. A shape of
/// a 2^27-constraint circuit is gigabytes, so the bound matters.
#[derive(Debug)]
pub struct ShapeCache {
    shapes: Mutex<VecDeque<(ShapeKey, Arc<R1cs>)>>,
    capacity: usize,
    compiles: AtomicU64,
}

impl Default for ShapeCache {
    /// Four shapes: the Filecoin proof kinds a proving farm serves at once.
    fn default() -> Self {
        Self::with_capacity(4)
    }
}

impl ShapeCache {
    /// A cache of at most `capacity` shapes (0 keeps none).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            shapes: Mutex::new(VecDeque::new()),
            capacity,
            compiles: AtomicU64::new(0),
        }
    }

    /// The shape for `key`, if cached (it becomes the most recently used).
    pub fn get(&self, key: &ShapeKey) -> Option<Arc<R1cs>> {
        let mut shapes = self.shapes.lock().unwrap_or_else(PoisonError::into_inner);
        let i = shapes.iter().position(|(k, _)| k == key)?;
        let entry = shapes.remove(i)?;
        let r1cs = entry.1.clone();
        shapes.push_front(entry);
        Some(r1cs)
    }

    /// Keeps `r1cs` for `key`, evicting the least recently used beyond capacity.
    pub fn insert(&self, key: ShapeKey, r1cs: Arc<R1cs>) {
        self.compiles.fetch_add(1, Ordering::Relaxed);
        if self.capacity == 0 {
            return;
        }
        let mut shapes = self.shapes.lock().unwrap_or_else(PoisonError::into_inner);
        shapes.retain(|(k, _)| k != &key);
        shapes.push_front((key, r1cs));
        shapes.truncate(self.capacity);
    }

    /// Shapes held now.
    pub fn len(&self) -> usize {
        self.shapes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shapes compiled into this cache so far (a miss each).
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }
}
