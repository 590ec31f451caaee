//! Dealloc plugin `bounded`: [`cuzk_alloc::BoundedDealloc`] (one dealloc thread
//! behind a queue of `depth` buffers, Phase 11 of the C2 history) behind the plugin
//! ABI, so the same strategy runs in-process (`builtin = "bounded"` in `cuzk.toml`)
//! or as a plugin, and the two can be compared.

use cuzk_alloc::{BoundedDealloc, DeallocPolicy, Released};
use cuzk_plugin_api::{AbiError, DeallocPlugin, ParamDoc, Params, ReleasedBuf};

pub struct Bounded(BoundedDealloc);

impl DeallocPlugin for Bounded {
    const PARAMS: &'static [ParamDoc] = &[ParamDoc::new(
        "depth",
        "4",
        "buffers queued before release blocks (0: release waits for the thread to take it)",
    )];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let depth: usize = params.get("depth")?;
        BoundedDealloc::new(depth)
            .map(Self)
            .map_err(|e| AbiError::other(format!("could not start the dealloc thread: {e}")))
    }

    fn release(&self, buf: ReleasedBuf) -> Result<(), AbiError> {
        // A `ReleasedBuf` frees its buffer when dropped, so it travels as a value.
        let (bytes, label) = (buf.bytes() as usize, buf.label());
        self.0.release(Released::new(buf, bytes, label));
        Ok(())
    }

    fn drain(&self) -> Result<(), AbiError> {
        self.0.drain();
        Ok(())
    }
}

cuzk_plugin_api::export_plugin! {
    kind: dealloc,
    name: "bounded",
    description: "one dealloc thread behind a bounded queue (back-pressure when full)",
    type: Bounded,
}
