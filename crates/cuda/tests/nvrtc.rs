//! Every kernel module compiles with NVRTC for sm_90 (the H200) and for sm_75, the
//! oldest architecture the backend runs on (Turing cards are still in proving farms):
//! a kernel that reaches for a newer intrinsic fails here, not on a farm's GPU.
//! No GPU is needed, so this never skips: without libnvrtc on the loader path it
//! fails (`source scripts/nvrtc-env.sh` installs it from PyPI).

use cuzk_cuda::testing::kernels;

#[test]
fn every_kernel_module_compiles() {
    assert!(
        kernels::nvrtc_available(),
        "libnvrtc.so is not on the loader path: `source scripts/nvrtc-env.sh` installs it"
    );
    for module in kernels::MODULES {
        for arch in ["sm_90", "sm_75"] {
            let t = std::time::Instant::now();
            match kernels::compile(&module, arch) {
                Ok(c) => {
                    assert!(!c.cubin.is_empty());
                    if !c.log.trim().is_empty() {
                        println!("{} for {arch}: NVRTC says: {}", module.name, c.log.trim());
                    }
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
}
