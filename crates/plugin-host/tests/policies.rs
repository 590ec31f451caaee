//! Each dealloc, throttle and GPU-lock plugin, loaded from its `.so`, does what its
//! strategy says.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread::ThreadId;
use std::time::Duration;

use cuzk_alloc::{DeallocPolicy, Released, ThrottleControl};
use cuzk_gpu_backend::lock::{GpuLock, Region};
use cuzk_plugin_host::{load_dealloc, load_gpu_lock, load_throttle, PluginSpec, SearchPath};
use cuzk_synth::Throttle;

fn search() -> SearchPath {
    SearchPath::dir(common::plugin_dir())
}

/// A buffer whose destructor reports the thread it ran on, after waiting for `gate`
/// if given.
struct Probe {
    freed_on: mpsc::Sender<ThreadId>,
    gate: Option<mpsc::Receiver<()>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(g) = &self.gate {
            let _ = g.recv_timeout(Duration::from_secs(10));
        }
        let _ = self.freed_on.send(std::thread::current().id());
    }
}

fn probe(tx: &mpsc::Sender<ThreadId>) -> Released {
    Released::new(
        Probe {
            freed_on: tx.clone(),
            gate: None,
        },
        1 << 20,
        "probe",
    )
}

#[test]
fn inline_frees_on_the_calling_thread() {
    let d = load_dealloc(&PluginSpec::new("inline"), &search()).unwrap();
    let (tx, rx) = mpsc::channel();
    d.release(probe(&tx));
    assert_eq!(rx.try_recv().unwrap(), std::thread::current().id());
    d.drain();
    assert!(d.take_error().is_none());
}

#[test]
fn detached_frees_each_buffer_on_a_new_thread() {
    let d = load_dealloc(&PluginSpec::new("detached"), &search()).unwrap();
    let (tx, rx) = mpsc::channel();
    for _ in 0..8 {
        d.release(probe(&tx));
    }
    d.drain();
    let threads: Vec<ThreadId> = rx.try_iter().collect();
    assert_eq!(
        threads.len(),
        8,
        "drain returned before every buffer was freed"
    );
    assert!(!threads.contains(&std::thread::current().id()));
    assert_eq!(
        threads.iter().collect::<HashSet<_>>().len(),
        8,
        "one thread per free"
    );
}

#[test]
fn bounded_frees_on_one_thread_and_applies_back_pressure() {
    let d = load_dealloc(
        &PluginSpec::new("bounded").with_param("depth", "1"),
        &search(),
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    // The first buffer blocks the dealloc thread until `open` is sent.
    let (open, gate) = mpsc::channel();
    d.release(Released::new(
        Probe {
            freed_on: tx.clone(),
            gate: Some(gate),
        },
        1,
        "blocker",
    ));
    // Let the thread take it off the queue, then fill the queue (depth 1).
    std::thread::sleep(Duration::from_millis(100));
    d.release(probe(&tx));
    // The next release must wait for room.
    let returned = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (d, tx, returned) = (Arc::clone(&d), tx.clone(), Arc::clone(&returned));
        std::thread::spawn(move || {
            d.release(probe(&tx));
            returned.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !returned.load(Ordering::SeqCst),
        "release did not block on a full queue"
    );
    open.send(()).unwrap();
    waiter.join().unwrap();
    assert!(returned.load(Ordering::SeqCst));
    d.drain();
    let threads: Vec<ThreadId> = rx.try_iter().collect();
    assert_eq!(threads.len(), 3);
    assert_eq!(
        threads.iter().collect::<HashSet<_>>().len(),
        1,
        "one dealloc thread"
    );
    assert!(!threads.contains(&std::thread::current().id()));
    assert!(d.take_error().is_none());
}

/// Runs `workers` threads through one checkpoint each while the flag is raised;
/// returns which of them were still paused after a while, then lowers the flag and
/// checks that all of them finish.
fn paused_while_raised<T: ThrottleControl + Throttle + Send + Sync + 'static>(
    t: Arc<T>,
    workers: usize,
) -> Vec<usize> {
    t.raise();
    let done: Arc<Vec<AtomicBool>> =
        Arc::new((0..workers).map(|_| AtomicBool::new(false)).collect());
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (t, done) = (Arc::clone(&t), Arc::clone(&done));
            std::thread::spawn(move || {
                t.checkpoint(w);
                done[w].store(true, Ordering::SeqCst);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let paused: Vec<usize> = (0..workers)
        .filter(|&w| !done[w].load(Ordering::SeqCst))
        .collect();
    t.lower();
    for h in handles {
        h.join().unwrap();
    }
    paused
}

#[test]
fn flag_pauses_the_configured_workers_while_raised() {
    let spec = PluginSpec::new("flag").with_param("pause_workers", "2");
    let t = load_throttle(&spec, &search()).unwrap();
    assert_eq!(paused_while_raised(Arc::clone(&t), 5), vec![0, 1]);
    // Lowered: nobody waits.
    let start = std::time::Instant::now();
    for w in 0..5 {
        t.checkpoint(w);
    }
    assert!(start.elapsed() < Duration::from_millis(100));

    let all = load_throttle(&PluginSpec::new("flag"), &search()).unwrap();
    assert_eq!(paused_while_raised(all, 3), vec![0, 1, 2]);

    let off = load_throttle(&PluginSpec::new("off"), &search()).unwrap();
    assert_eq!(paused_while_raised(off, 3), Vec::<usize>::new());
}

#[test]
fn flag_checks_every_nth_checkpoint_and_bounds_pauses() {
    let spec = PluginSpec::new("flag")
        .with_param("check_every", "3")
        .with_param("max_pause_ms", "50");
    let t = load_throttle(&spec, &search()).unwrap();
    t.raise();
    // Checkpoints 0, 3, 6 of worker 0 look at the flag and pause (50 ms each, then
    // give up); the others pass straight through.
    let mut slow = Vec::new();
    for i in 0..7 {
        let s = std::time::Instant::now();
        t.checkpoint(0);
        if s.elapsed() >= Duration::from_millis(40) {
            slow.push(i);
        }
    }
    t.lower();
    assert_eq!(slow, vec![0, 3, 6]);
}

/// Two workers on device 0, one in a memory region and one in a compute region,
/// each inside its partition guard: whether the regions overlapped in time.
fn regions_overlap(lock: Arc<dyn GpuLock>) -> bool {
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(2));
    let hs: Vec<_> = [Region::Memory, Region::Compute]
        .into_iter()
        .map(|region| {
            let (lock, inside, max_inside, start) = (
                Arc::clone(&lock),
                Arc::clone(&inside),
                Arc::clone(&max_inside),
                Arc::clone(&start),
            );
            std::thread::spawn(move || {
                start.wait();
                let p = lock.partition(0);
                let r = lock.region(0, region);
                assert!(p.failure().is_none() && r.failure().is_none());
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(250));
                inside.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    max_inside.load(Ordering::SeqCst) == 2
}

#[test]
fn split_lock_overlaps_memory_and_compute_single_does_not() {
    let single = load_gpu_lock(&PluginSpec::new("single"), &search()).unwrap();
    let split = load_gpu_lock(&PluginSpec::new("split"), &search()).unwrap();
    assert!(!regions_overlap(single.clone()));
    assert!(regions_overlap(split.clone()));

    // Same region of a split lock: exclusive, and the wait is recorded.
    let m = split.region(1, Region::Memory);
    let s2 = Arc::clone(&split);
    let t = std::thread::spawn(move || s2.region(1, Region::Memory).waited());
    std::thread::sleep(Duration::from_millis(100));
    drop(m);
    assert!(t.join().unwrap() >= Duration::from_millis(50));
    // Different devices never contend.
    let _a = single.partition(0);
    assert!(single.partition(1).waited() < Duration::from_millis(50));
    assert!(single.take_error().is_none() && split.take_error().is_none());
}
