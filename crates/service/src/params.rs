//! Parameter sets: loaded once per circuit, shared by every job of it, evicted
//! (least recently used first) when a set that is not in use pushes the resident
//! total over the budget, or when asked.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use crate::kind::{KindProver, LoadedParams};

/// One resident set, as status reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamStatus {
    pub circuit_id: String,
    pub bytes: u64,
    /// Jobs holding it now.
    pub ref_count: u32,
    /// Random points (benchmarks): its proofs are returned unverified.
    pub timing_only: bool,
}

/// A set a job holds; dropping it lets the set be evicted.
pub struct ParamHold {
    set: Arc<LoadedParams>,
}

impl ParamHold {
    pub fn params(&self) -> &LoadedParams {
        &self.set
    }
}

struct Slot {
    /// Held while loading, so a set is loaded once even when many jobs want it.
    loading: Mutex<()>,
    loaded: Mutex<Option<Arc<LoadedParams>>>,
    /// The kind that loaded it (told when the set is dropped).
    kind: Mutex<Option<Arc<dyn KindProver>>>,
    last_used: Mutex<Instant>,
}

/// The parameter cache.
pub struct ParamCache {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    budget: u64,
}

/// Evicting failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictError {
    #[error("the parameters of `{circuit_id}` are in use by {jobs} job(s); evict them when those jobs are done")]
    InUse { circuit_id: String, jobs: u32 },
}

impl ParamCache {
    /// A cache that keeps at most `budget` bytes resident when nothing uses them.
    pub fn new(budget: u64) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            budget,
        }
    }

    fn slot(&self, circuit_id: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots
            .entry(circuit_id.to_owned())
            .or_insert_with(|| {
                Arc::new(Slot {
                    loading: Mutex::new(()),
                    loaded: Mutex::new(None),
                    kind: Mutex::new(None),
                    last_used: Mutex::new(Instant::now()),
                })
            })
            .clone()
    }

    /// The set for `circuit_id`, loaded through `kind` if it is not resident;
    /// returns the hold and how long this call spent loading (zero if resident,
    /// or the time spent waiting for another caller's load).
    pub fn acquire(
        &self,
        kind: &Arc<dyn KindProver>,
        circuit_id: &str,
    ) -> Result<(ParamHold, Duration), String> {
        let slot = self.slot(circuit_id);
        let t = Instant::now();
        let set = {
            let _loading = slot.loading.lock().unwrap_or_else(PoisonError::into_inner);
            let resident = slot
                .loaded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            match resident {
                Some(set) => set,
                None => {
                    let set = Arc::new(kind.load_params(circuit_id)?);
                    if set.timing_only {
                        tracing::warn!(circuit_id, bytes = set.bytes, "TIMING-ONLY parameters made (random points): this circuit's proofs are returned unverified and do not verify");
                    } else {
                        tracing::info!(circuit_id, bytes = set.bytes, "parameters loaded");
                    }
                    *slot.loaded.lock().unwrap_or_else(PoisonError::into_inner) = Some(set.clone());
                    *slot.kind.lock().unwrap_or_else(PoisonError::into_inner) = Some(kind.clone());
                    set
                }
            }
        };
        *slot
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let took = t.elapsed();
        // What this evicts (other sets, idle) keeps its device copies until the
        // service's next trim or eviction tells the engine: a load is no time to
        // wait for a busy device.
        self.trim();
        Ok((ParamHold { set }, took))
    }

    /// Loads `circuit_id` if needed; `true` if it was already resident.
    pub fn preload(
        &self,
        kind: &Arc<dyn KindProver>,
        circuit_id: &str,
    ) -> Result<(bool, Duration), String> {
        let already = self.is_loaded(circuit_id);
        let (hold, took) = self.acquire(kind, circuit_id)?;
        drop(hold);
        Ok((already, took))
    }

    pub fn is_loaded(&self, circuit_id: &str) -> bool {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(circuit_id)
            .cloned();
        slot.is_some_and(|s| {
            s.loaded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        })
    }

    /// Drops `circuit_id`'s set if no job holds it: `Ok(Some(bytes))` freed,
    /// `Ok(None)` if it was not loaded.
    pub fn evict(&self, circuit_id: &str) -> Result<Option<u64>, EvictError> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(circuit_id)
            .cloned();
        let Some(slot) = slot else { return Ok(None) };
        let mut loaded = slot.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(set) = loaded.as_ref() else {
            return Ok(None);
        };
        let holders = Arc::strong_count(set) - 1;
        if holders > 0 {
            return Err(EvictError::InUse {
                circuit_id: circuit_id.to_owned(),
                jobs: holders as u32,
            });
        }
        let bytes = set.bytes;
        *loaded = None;
        drop(loaded);
        if let Some(kind) = slot
            .kind
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            kind.release_params(circuit_id);
        }
        tracing::info!(circuit_id, bytes, "parameters evicted");
        Ok(Some(bytes))
    }

    /// Resident sets, sorted by circuit id.
    pub fn status(&self) -> Vec<ParamStatus> {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut out: Vec<_> = slots
            .into_iter()
            .filter_map(|(circuit_id, slot)| {
                // A slot being loaded is not resident yet.
                let loaded = slot.loaded.lock().unwrap_or_else(PoisonError::into_inner);
                let set = loaded.as_ref()?;
                Some(ParamStatus {
                    circuit_id,
                    bytes: set.bytes,
                    ref_count: (Arc::strong_count(set) - 1) as u32,
                    timing_only: set.timing_only,
                })
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }

    /// Bytes resident.
    pub fn resident_bytes(&self) -> u64 {
        self.status().iter().map(|s| s.bytes).sum()
    }

    /// Evicts unused sets, least recently used first, until the resident total
    /// fits the budget (sets in use stay whatever the total). Returns the bytes
    /// evicted.
    pub fn trim(&self) -> u64 {
        let mut resident = self.status();
        let mut total: u64 = resident.iter().map(|s| s.bytes).sum();
        let mut evicted = 0;
        if total <= self.budget {
            return 0;
        }
        let last_used = |id: &str| {
            self.slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
                .map(|s| *s.last_used.lock().unwrap_or_else(PoisonError::into_inner))
        };
        resident.retain(|s| s.ref_count == 0);
        resident.sort_by_key(|s| last_used(&s.circuit_id));
        for s in resident {
            if total <= self.budget {
                break;
            }
            if let Ok(Some(freed)) = self.evict(&s.circuit_id) {
                total -= freed;
                evicted += freed;
            }
        }
        evicted
    }
}
