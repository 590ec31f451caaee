//! Dealloc plugin `inline`: frees each buffer on the thread that releases it, at once.
//!
//! The baseline: no thread, no queue; the releasing stage pays the `munmap`.

use cuzk_plugin_api::{AbiError, DeallocPlugin, ParamDoc, Params, ReleasedBuf};

pub struct Inline;

impl DeallocPlugin for Inline {
    const PARAMS: &'static [ParamDoc] = &[];

    fn new(_params: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Inline)
    }

    fn release(&self, buf: ReleasedBuf) -> Result<(), AbiError> {
        buf.free();
        Ok(())
    }

    fn drain(&self) -> Result<(), AbiError> {
        Ok(())
    }
}

cuzk_plugin_api::export_plugin! {
    kind: dealloc,
    name: "inline",
    description: "free on the calling thread",
    type: Inline,
}

#[cfg(test)]
mod tests {
    use cuzk_plugin_api::abi_stable::std_types::RSlice;
    use cuzk_plugin_api::{ErrorCode, Param, PluginKind, ReleasedBuf};

    #[test]
    fn root_module_frees_on_the_calling_thread_and_rejects_parameters() {
        let root = super::cuzk_plugin_root();
        assert_eq!(root.kind(), PluginKind::DEALLOC);
        assert_eq!(root.name().as_str(), "inline");
        let m = root.dealloc().unwrap();
        let bad = [Param::new("depth", "1")];
        let e = m.instantiate()(RSlice::from_slice(&bad)).unwrap_err();
        assert_eq!(e.code, ErrorCode::UNKNOWN_PARAMETER);

        let inst = m.instantiate()(RSlice::from_slice(&[])).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        struct Report(std::sync::mpsc::Sender<std::thread::ThreadId>);
        impl Drop for Report {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().id());
            }
        }
        let buf = ReleasedBuf::from_value(Report(tx), 0, "t");
        m.release()(&inst, buf).unwrap();
        assert_eq!(rx.try_recv().unwrap(), std::thread::current().id());
        m.destroy()(inst);
    }
}
