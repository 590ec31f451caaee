//! Dealloc plugin `bounded`: one dealloc thread behind a queue of `depth` buffers
//! (Phase 11 of the C2 history).
//!
//! One thread means at most one `munmap` in flight from this process's big buffers,
//! so no shootdown storm; the bound means a stage that releases faster than the
//! thread frees is held back (back-pressure) instead of letting freed-but-not-yet-
//! unmapped memory pile up past the memory budget.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use cuzk_plugin_api::{pending::Pending, AbiError, DeallocPlugin, ParamDoc, Params, ReleasedBuf};

pub struct Bounded {
    queue: Mutex<Option<SyncSender<ReleasedBuf>>>,
    pending: Arc<Pending>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl DeallocPlugin for Bounded {
    const PARAMS: &'static [ParamDoc] = &[ParamDoc::new(
        "depth",
        "4",
        "buffers queued before release blocks (0: release waits for the thread to take it)",
    )];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let depth: usize = params.get("depth")?;
        let (tx, rx) = sync_channel::<ReleasedBuf>(depth);
        let pending = Arc::new(Pending::default());
        let p = Arc::clone(&pending);
        let thread = std::thread::Builder::new()
            .name("cuzk-dealloc".into())
            .spawn(move || {
                for buf in rx {
                    buf.free();
                    p.finish();
                }
            })
            .map_err(|e| AbiError::other(format!("could not start the dealloc thread: {e}")))?;
        Ok(Self {
            queue: Mutex::new(Some(tx)),
            pending,
            thread: Mutex::new(Some(thread)),
        })
    }

    fn release(&self, buf: ReleasedBuf) -> Result<(), AbiError> {
        let tx = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(tx) = tx else {
            buf.free();
            return Ok(());
        };
        self.pending.start();
        // Blocks while the queue is full: the back-pressure.
        if let Err(returned) = tx.send(buf) {
            // The thread is gone (it cannot panic: frees are contained); free here.
            returned.0.free();
            self.pending.finish();
            return Err(AbiError::other(
                "the dealloc thread has stopped; freed inline",
            ));
        }
        Ok(())
    }

    fn drain(&self) -> Result<(), AbiError> {
        self.pending.wait_idle();
        Ok(())
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has freed what is queued (at
        // most `depth` buffers, so the wait is bounded).
        drop(
            self.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = t.join();
        }
    }
}

cuzk_plugin_api::export_plugin! {
    kind: dealloc,
    name: "bounded",
    description: "one dealloc thread behind a bounded queue (back-pressure when full)",
    type: Bounded,
}
