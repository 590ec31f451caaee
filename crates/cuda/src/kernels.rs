//! Kernel sources (embedded `.cu` files) and their run-time compilation by NVRTC.
//!
//! Each module is the concatenation of a few `.cu` files (NVRTC has no file system
//! to `#include` from). Compilation goes straight to a CUBIN for the device's own
//! architecture (`sm_90` on the H200), so the driver has nothing left to JIT and
//! Hopper-specific code generation applies.

use std::ffi::{c_char, CStr, CString};

use crate::error::CudaError;

pub const FIELD_CU: &str = include_str!("../kernels/field.cu");
pub const EC_CU: &str = include_str!("../kernels/ec.cu");
pub const NTT_CU: &str = include_str!("../kernels/ntt.cu");
pub const MSM_CU: &str = include_str!("../kernels/msm.cu");
pub const SPMV_CU: &str = include_str!("../kernels/spmv.cu");

/// One compiled unit: a name for logs and the files it is made of, in order.
#[derive(Clone, Copy, Debug)]
pub struct ModuleSource {
    pub name: &'static str,
    pub parts: &'static [&'static str],
    /// The kernels the host looks up in it (all of them must exist after compiling).
    pub kernels: &'static [&'static str],
}

impl ModuleSource {
    /// The module's source: its parts, in order.
    pub fn source(&self) -> String {
        self.parts.concat()
    }
}

pub const NTT_MODULE: ModuleSource = ModuleSource {
    name: "ntt",
    parts: &[FIELD_CU, NTT_CU],
    kernels: &[
        "ntt_pass",
        "ntt_r2wf_dif",
        "ntt_r2wf_dit",
        "ntt_r2wg_dif",
        "ntt_r2wg_dit",
        "ntt_pass_g",
        "ntt_r2wg_table",
        "scale_by_powers",
        "bitrev_permute",
        "bitrev_tiled",
        "bitrev_scale_sub_copy",
        "bitrev_scale_sub",
        "ab_combine",
        "fr_ops_test",
        "fr_mul_bench",
    ],
};

pub const MSM_MODULE: ModuleSource = ModuleSource {
    name: "msm",
    parts: &[FIELD_CU, EC_CU, MSM_CU],
    kernels: &[
        "msm_histogram",
        "msm_scatter",
        "scan_tiles",
        "scan_tile_sums",
        "scan_apply",
        "msm_sum_points_g1",
        "msm_ba_round",
        "msm_ba_buckets",
        "max_u32",
        "ones_count",
        "ones_entries",
        "msm_sum_xyzz_g1",
        "msm_gather_buckets_g1",
        "msm_bucket_segments_g1",
        "xyzz_reduce_g1",
        "ones_sum_g1",
        "replicate_affine_g1",
        "fq_ops_test",
        "fq_mul_bench",
        "g1_ops_test",
    ],
};

/// G2's point kernels: the same sources with `CUZK_G2` defined, which instantiates
/// the point kernels over Fq2 instead of Fq. A module of its own so that NVRTC
/// compiles it in parallel with the G1 module (each takes seconds) and G1's module
/// is unchanged. The digit kernels (histogram, scans, scatter) are compiled here too
/// but looked up from `msm` only.
pub const MSM_G2_MODULE: ModuleSource = ModuleSource {
    name: "msm_g2",
    parts: &["#define CUZK_G2 1\n", FIELD_CU, EC_CU, MSM_CU],
    kernels: &[
        "msm_sum_points_g2",
        "msm_sum_xyzz_g2",
        "msm_gather_buckets_g2",
        "msm_bucket_segments_g2",
        "xyzz_reduce_g2",
        "ones_sum_g2",
        "replicate_affine_g2",
        "msm_ba_round_g2",
        "msm_ba_buckets_g2",
        "fq2_ops_test",
        "g2_ops_test",
    ],
};

/// The device mat-vec `a, b, c = A·w, B·w, C·w` ([`crate::spmv`]): a module of its
/// own (Fr arithmetic only), compiled in parallel with the others.
pub const SPMV_MODULE: ModuleSource = ModuleSource {
    name: "spmv",
    parts: &[FIELD_CU, SPMV_CU],
    kernels: &["spmv_abc"],
};

pub const MODULES: [ModuleSource; 4] = [NTT_MODULE, MSM_MODULE, MSM_G2_MODULE, SPMV_MODULE];

/// The NVRTC options besides the architecture (also part of the disk-cache key).
pub(crate) const OPTIONS_TAG: &str =
    "--std=c++17 --device-as-default-execution-space -DCUZK_NVRTC=1";

/// Whether libnvrtc can be loaded (checked first: cudarc panics on a missing library).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }).unwrap_or(false)
}

/// A compiled module: the CUBIN image and the compiler's log (warnings).
#[derive(Debug)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// Read by the NVRTC test (`tests/nvrtc.rs` prints the warnings); the disk
    /// cache keeps only the CUBIN.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub log: String,
}

/// Compiles `module` for `arch` (e.g. `sm_90`), returning the CUBIN, or the full
/// compiler log as the error.
pub fn compile(module: &ModuleSource, arch: &str) -> Result<Compiled, CudaError> {
    use cudarc::nvrtc::{result, sys};
    if !nvrtc_available() {
        return Err(CudaError::NoNvrtc(
            "libnvrtc.so was not found on the loader path".into(),
        ));
    }
    let src = CString::new(module.source())
        .map_err(|_| CudaError::Shape("kernel source contains a NUL byte".into()))?;
    let name = CString::new(format!("{}.cu", module.name)).expect("module names have no NUL");
    let prog = result::create_program(&src, Some(&name)).map_err(|e| CudaError::Compile {
        module: module.name,
        arch: arch.into(),
        log: format!("nvrtcCreateProgram: {e:?}"),
    })?;
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(OPTIONS_TAG.split(' ').map(str::to_owned));
    // SAFETY: `prog` was created above and is destroyed exactly once, below.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    // SAFETY: as above; the log is a NUL-terminated C string.
    let log = unsafe { result::get_program_log(prog) }
        .map(|raw| cstr_lossy(&raw))
        .unwrap_or_default();
    let out = match compiled {
        Err(e) => Err(CudaError::Compile {
            module: module.name,
            arch: arch.into(),
            log: format!("{e:?}\n{log}"),
        }),
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: `prog` compiled successfully; the buffer has the size NVRTC reported.
            unsafe {
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .and_then(|()| {
                        let mut cubin = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast::<c_char>())
                            .result()
                            .map(|()| cubin)
                    })
            }
            .map(|cubin| Compiled { cubin, log })
            .map_err(|e| CudaError::Compile {
                module: module.name,
                arch: arch.into(),
                log: format!("nvrtcGetCUBIN: {e:?}"),
            })
        }
    };
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

fn cstr_lossy(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}
