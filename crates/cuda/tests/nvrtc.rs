//! Every kernel module compiles with NVRTC for sm_90 (where libnvrtc is found).

use cuzk_cuda::kernels;
use std::io::Write as _;

#[test]
fn every_kernel_module_compiles() {
    if !kernels::nvrtc_available() {
        let _ = writeln!(std::io::stderr(), "skipped: no NVRTC");
        return;
    }
    for module in kernels::MODULES {
        let t = std::time::Instant::now();
        match kernels::compile(&module, "sm_90") {
            Ok(c) => {
                assert!(!c.cubin.is_empty());
                println!(
                    "{}: {} bytes of CUBIN in {:?}",
                    module.name,
                    c.cubin.len(),
                    t.elapsed()
                );
            }
            Err(e) => panic!("{e}"),
        }
    }
}
