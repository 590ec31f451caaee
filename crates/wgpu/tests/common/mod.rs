//! Opening a device for the tests. No adapter is a failure, not a skip: CI has
//! lavapipe (Debian's mesa-vulkan-drivers). A machine without any Vulkan, Metal or
//! DX12 device skips only where `CUZK_WGPU_ALLOW_NO_ADAPTER=1` says so, and says it.

#![allow(dead_code)]

use std::sync::Arc;

use blstrs::Scalar;
use cuzk_wgpu::{Context, Ntt, WgpuConfig, WgpuError};
use ff::Field;
use rand_chacha::ChaCha8Rng;

pub const ALLOW_NO_ADAPTER: &str = "CUZK_WGPU_ALLOW_NO_ADAPTER";

/// The configured context, `None` (with a printed "skipped") only where allowed.
pub fn context(config: &WgpuConfig) -> Option<Arc<Context>> {
    match Context::new(config) {
        Ok(ctx) => {
            eprintln!(
                "wgpu adapter: {} ({:?}), memory {:?}",
                ctx.info.name, ctx.info.backend, ctx.memory
            );
            Some(Arc::new(ctx))
        }
        Err(e @ WgpuError::NoAdapter { .. })
            if std::env::var(ALLOW_NO_ADAPTER).as_deref() == Ok("1") =>
        {
            eprintln!("skipped: no wgpu adapter ({e})");
            None
        }
        Err(e) => panic!(
            "no usable wgpu adapter: {e}. Install a Vulkan driver (CI: mesa-vulkan-drivers, \
             lavapipe) or set {ALLOW_NO_ADAPTER}=1 to skip on a machine without one"
        ),
    }
}

/// The NTT on the default adapter with at most `max_binding_bytes` per binding
/// (0: the device's limit).
pub fn ntt(max_binding_bytes: u64) -> Option<Ntt> {
    let config = WgpuConfig {
        max_binding_bytes,
        ..WgpuConfig::default()
    };
    let ctx = context(&config)?;
    Some(Ntt::new(ctx, &config).expect("the kernels compile"))
}

/// Random scalars with a few edge values mixed in, never all zero.
pub fn scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
    let edges = [Scalar::ONE, -Scalar::ONE, Scalar::ZERO, Scalar::from(2u64)];
    let mut v: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut *rng)).collect();
    for (x, e) in v.iter_mut().step_by(7).zip(edges.iter().cycle()) {
        *x = *e;
    }
    if let Some(x) = v.last_mut() {
        *x = Scalar::random(&mut *rng) + Scalar::ONE;
    }
    v
}

pub fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("test pool")
}
