//! Dealloc plugin `detached`: a new thread for every free, with no bound.
//!
//! The release never waits, but with several partitions in flight many threads
//! `munmap` at once, and each unmap interrupts every core (TLB shootdowns); the C2
//! history measured that storm slowing synthesis. Kept so it can be measured again.

use std::sync::Arc;

use cuzk_plugin_api::{pending::Pending, AbiError, DeallocPlugin, ParamDoc, Params, ReleasedBuf};

pub struct Detached {
    pending: Arc<Pending>,
}

impl DeallocPlugin for Detached {
    const PARAMS: &'static [ParamDoc] = &[];

    fn new(_params: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Self {
            pending: Arc::default(),
        })
    }

    fn release(&self, buf: ReleasedBuf) -> Result<(), AbiError> {
        self.pending.start();
        let pending = Arc::clone(&self.pending);
        let spawned = std::thread::Builder::new()
            .name("cuzk-dealloc-detached".into())
            .spawn(move || {
                buf.free();
                pending.finish();
            });
        if let Err(e) = spawned {
            // The closure (and so the buffer) was dropped by the failed spawn: the
            // buffer is already freed, here.
            self.pending.finish();
            return Err(AbiError::other(format!(
                "could not spawn a dealloc thread ({e}); freed inline"
            )));
        }
        Ok(())
    }

    fn drain(&self) -> Result<(), AbiError> {
        self.pending.wait_idle();
        Ok(())
    }
}

cuzk_plugin_api::export_plugin! {
    kind: dealloc,
    name: "detached",
    description: "a new thread per free, unbounded (the munmap-storm strategy)",
    type: Detached,
}
