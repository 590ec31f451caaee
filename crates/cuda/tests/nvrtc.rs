//! Every kernel module compiles with NVRTC for sm_90 (where libnvrtc is found), and
//! for sm_75, the oldest architecture the backend runs on (Turing cards are still in
//! proving farms): a kernel that reaches for a newer intrinsic fails here, not on a
//! farm's GPU.

use cuzk_cuda::kernels;
use std::io::Write as _;

#[test]
fn every_kernel_module_compiles() {
    if !kernels::nvrtc_available() {
        let _ = writeln!(std::io::stderr(), "skipped: no NVRTC");
        return;
    }
    for (module, arch) in kernels::MODULES
        .into_iter()
        .flat_map(|m| ["sm_90", "sm_75"].map(|a| (m, a)))
    {
        let t = std::time::Instant::now();
        match kernels::compile(&module, arch) {
            Ok(c) => {
                assert!(!c.cubin.is_empty());
                println!(
                    "{} for {arch}: {} bytes of CUBIN in {:?}",
                    module.name,
                    c.cubin.len(),
                    t.elapsed()
                );
            }
            Err(e) => panic!("{e}"),
        }
    }
}
