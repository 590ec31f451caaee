//! The CPU backend's fixed-base tables (`cuzk_msm_cpu::Table`), kept per base vector.
//!
//! A base vector (a parameter set's query) gets a table the first time a partition uses
//! it, if the tables made so far leave room for it in the budget. The table is made on
//! threads of its own (as many as the backend pool's) from a copy of the bases (the parameter set may be freed while it
//! runs), and only while this backend proves nothing: it yields before each chunk of
//! 256 bases while a partition is being proven, so a first proof is never slowed by the
//! table it starts. Partitions use plain Pippenger until their table is ready.
//! `forget_bases` drops the tables of freed parameter sets (and abandons their builds).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G2Affine};
use cuzk_msm_cpu::{G1Table, G2Table};

/// A base vector: its address and length (and curve, so a G1 and a G2 vector that
/// start at the same address never collide).
type Key = (usize, usize, bool);

fn key<T>(bases: &[T], g2: bool) -> Key {
    (bases.as_ptr() as usize, bases.len(), g2)
}

enum Slot {
    /// Being made; the flag abandons it.
    Building(Arc<std::sync::atomic::AtomicBool>),
    G1(Arc<G1Table>),
    G2(Arc<G2Table>),
}

enum Bases {
    G1(Vec<G1Affine>),
    G2(Vec<G2Affine>),
}

struct Build {
    key: Key,
    bases: Bases,
    abandon: Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Default)]
struct State {
    /// Bytes of the tables made or being made.
    used: usize,
    slots: HashMap<Key, (Slot, usize)>,
    builder: Option<Sender<Build>>,
}

/// The tables of one CPU backend (shared by its clones).
pub(crate) struct Tables {
    budget: usize,
    /// The backend pool's threads: tables are shaped for MSMs on that many.
    threads: usize,
    /// Partitions being proven on this backend now: builds wait while any are.
    busy: AtomicUsize,
    state: Mutex<State>,
    settled: Condvar,
}

/// Counts a partition as being proven while held.
pub(crate) struct Busy<'a>(&'a Tables);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Tables {
    pub(crate) fn new(budget: usize, threads: usize) -> Arc<Self> {
        Arc::new(Self {
            budget,
            threads: threads.max(1),
            busy: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
            settled: Condvar::new(),
        })
    }

    pub(crate) fn busy(&self) -> Busy<'_> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while the lock was held leaves counts that are still consistent
        // (every update is one statement), so a poisoned lock is used as it is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table of G1 `bases`, if made; starts making it if it is new, fits, and would
    /// speed up MSMs over `m` of them (a PoRep split's short tail would not).
    pub(crate) fn g1(self: &Arc<Self>, bases: &[G1Affine], m: usize) -> Option<Arc<G1Table>> {
        let bytes = cuzk_msm_cpu::table_bytes_g1(bases.len(), self.threads);
        match self.lookup(key(bases, false), m, bytes, || Bases::G1(bases.to_vec()))? {
            Slot::G1(t) => Some(t),
            _ => None,
        }
    }

    /// The table of G2 `bases`, if made; see [`Tables::g1`].
    pub(crate) fn g2(self: &Arc<Self>, bases: &[G2Affine], m: usize) -> Option<Arc<G2Table>> {
        let bytes = cuzk_msm_cpu::table_bytes_g2(bases.len(), self.threads);
        match self.lookup(key(bases, true), m, bytes, || Bases::G2(bases.to_vec()))? {
            Slot::G2(t) => Some(t),
            _ => None,
        }
    }

    /// The slot of base vector `k` (`k.1` bases) for an MSM over `m` of them; a new
    /// vector whose table pays for such MSMs and fits the budget starts building.
    fn lookup(
        self: &Arc<Self>,
        k: Key,
        m: usize,
        bytes: usize,
        copy: impl FnOnce() -> Bases,
    ) -> Option<Slot> {
        // Tiny vectors gain nothing worth a thread's time.
        if k.1 < 1024 || !cuzk_msm_cpu::table_pays(k.1, m, self.threads) {
            return None;
        }
        let mut st = self.state();
        if let Some((slot, _)) = st.slots.get(&k) {
            return match slot {
                Slot::Building(_) => None,
                Slot::G1(t) => Some(Slot::G1(t.clone())),
                Slot::G2(t) => Some(Slot::G2(t.clone())),
            };
        }
        if st.used + bytes > self.budget {
            return None;
        }
        let abandon = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let build = Build {
            key: k,
            bases: copy(),
            abandon: abandon.clone(),
        };
        let sender = match &st.builder {
            Some(s) => s.clone(),
            None => match self.spawn_builder() {
                Ok(s) => {
                    st.builder = Some(s.clone());
                    s
                }
                Err(e) => {
                    tracing::warn!("no fixed-base tables: their thread did not start: {e}");
                    return None;
                }
            },
        };
        if sender.send(build).is_err() {
            return None;
        }
        st.used += bytes;
        st.slots.insert(k, (Slot::Building(abandon), bytes));
        None
    }

    fn spawn_builder(self: &Arc<Self>) -> std::io::Result<Sender<Build>> {
        let (tx, rx) = channel::<Build>();
        let me: Weak<Self> = Arc::downgrade(self);
        let threads = self.threads;
        std::thread::Builder::new()
            .name("cuzk-tables".into())
            .spawn(move || {
                // As many threads as the backend's: they only run while it is idle.
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|_| "cuzk-tables-pool".into())
                    .build()
                    .map_err(|e| tracing::warn!("no fixed-base tables: their pool: {e}"))
                    .ok();
                // Without a pool every build is given up, so no slot stays building
                // (settle would wait on it for ever).
                while let Ok(b) = rx.recv() {
                    let Some(tables) = me.upgrade() else { return };
                    tables.build(b, threads, pool.as_ref());
                }
            })?;
        Ok(tx)
    }

    fn build(&self, b: Build, threads: usize, pool: Option<&rayon::ThreadPool>) {
        let start = Instant::now();
        let proceed = || {
            while self.busy.load(Ordering::SeqCst) > 0 && !b.abandon.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            !b.abandon.load(Ordering::SeqCst)
        };
        // A panic in the arithmetic is a bug; it must not leave the slot building for
        // ever (settle would wait on it).
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let pool = pool?;
            match &b.bases {
                Bases::G1(v) => cuzk_msm_cpu::precompute_g1(v, threads, pool, &proceed)
                    .map(|t| Slot::G1(Arc::new(t))),
                Bases::G2(v) => cuzk_msm_cpu::precompute_g2(v, threads, pool, &proceed)
                    .map(|t| Slot::G2(Arc::new(t))),
            }
        }))
        .unwrap_or_else(|_| {
            tracing::error!(
                bases = b.key.1,
                "making a fixed-base table panicked; plain MSMs go on"
            );
            None
        });
        let mut st = self.state();
        let current = matches!(st.slots.get(&b.key), Some((Slot::Building(f), _)) if Arc::ptr_eq(f, &b.abandon));
        if current {
            match made {
                Some(slot) => {
                    let n = b.key.1;
                    tracing::info!(
                        bases = n,
                        g2 = b.key.2,
                        seconds = start.elapsed().as_secs_f64(),
                        "fixed-base table ready"
                    );
                    if let Some(entry) = st.slots.get_mut(&b.key) {
                        entry.0 = slot;
                    }
                }
                None => {
                    if let Some((_, bytes)) = st.slots.remove(&b.key) {
                        st.used -= bytes;
                    }
                }
            }
        }
        drop(st);
        self.settled.notify_all();
    }

    /// Waits until no table is being made.
    pub(crate) fn settle(&self) {
        let mut st = self.state();
        while st
            .slots
            .values()
            .any(|(s, _)| matches!(s, Slot::Building(_)))
        {
            st = self.settled.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Drops the tables of base vectors inside `host` and abandons their builds;
    /// returns the bytes freed.
    pub(crate) fn forget(&self, host: &[Range<usize>]) -> u64 {
        let mut st = self.state();
        let gone: Vec<Key> = st
            .slots
            .keys()
            .filter(|k| host.iter().any(|r| r.start <= k.0 && k.0 < r.end))
            .copied()
            .collect();
        let mut freed = 0u64;
        for k in gone {
            if let Some((slot, bytes)) = st.slots.remove(&k) {
                if let Slot::Building(f) = slot {
                    f.store(true, Ordering::SeqCst);
                }
                st.used -= bytes;
                freed += bytes as u64;
            }
        }
        drop(st);
        self.settled.notify_all();
        freed
    }

    /// Bytes of tables made or being made.
    pub(crate) fn bytes(&self) -> usize {
        self.state().used
    }
}
