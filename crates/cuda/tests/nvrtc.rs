//! Every kernel module compiles with NVRTC for sm_90 (where libnvrtc is found), and
//! for sm_75, the oldest architecture the backend runs on (Turing cards are still in
//! proving farms): a kernel that reaches for a newer intrinsic fails here, not on a
//! farm's GPU. The first version's field products (`CUZK_FIELD_MUL=cios`, kept for
//! the device A/B) compile too, for sm_90.

use cuzk_cuda::kernels::{self, FieldMul};

#[test]
fn every_kernel_module_compiles() {
    // No GPU is needed to compile, so this test never skips: without libnvrtc on
    // the loader path it fails (scripts/nvrtc-env.sh installs it from PyPI).
    assert!(
        kernels::nvrtc_available(),
        "libnvrtc.so is not on the loader path: `source scripts/nvrtc-env.sh` installs it"
    );
    let builds = kernels::MODULES.into_iter().flat_map(|m| {
        [
            (m, "sm_90", FieldMul::EvenOdd),
            (m, "sm_75", FieldMul::EvenOdd),
            (m, "sm_90", FieldMul::Cios),
        ]
    });
    for (module, arch, mul) in builds {
        let t = std::time::Instant::now();
        match kernels::compile_with(&module, arch, mul) {
            Ok(c) => {
                assert!(!c.cubin.is_empty());
                println!(
                    "{} for {arch} ({} products): {} bytes of CUBIN in {:?}",
                    module.name,
                    mul.name(),
                    c.cubin.len(),
                    t.elapsed()
                );
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn the_product_variants_are_different_sources() {
    for m in kernels::MODULES {
        let (eo, cios) = (
            m.source_for(FieldMul::EvenOdd),
            m.source_for(FieldMul::Cios),
        );
        assert!(!eo.contains("#define CUZK_MUL_CIOS"));
        assert!(cios.starts_with("#define CUZK_MUL_CIOS 1\n"));
        assert!(cios.ends_with(&eo));
    }
}
