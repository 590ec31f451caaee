//! Throttle plugin `off`: the flag is ignored; synthesis never pauses.

use cuzk_plugin_api::{AbiError, ParamDoc, Params, ThrottlePlugin};

pub struct Off;

impl ThrottlePlugin for Off {
    const PARAMS: &'static [ParamDoc] = &[];

    fn new(_params: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Off)
    }
    fn raise(&self) {}
    fn lower(&self) {}
    fn checkpoint(&self, _worker: u64) {}
}

cuzk_plugin_api::export_plugin! {
    kind: throttle,
    name: "off",
    description: "never throttles",
    type: Off,
}
