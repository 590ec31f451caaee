//! Safe launches of the kernels that exist for the device checks and benchmarks
//! (`fr_ops_test`, `g1_ops_test`, `fq2_ops_test`, `g2_ops_test`, `fr_mul_bench`,
//! `fq_mul_bench`, `replicate_affine_g1`/`_g2`): each checks its buffers' lengths
//! against the launch, so that the check tool needs no access to the crate's
//! unsafe launch macro.

use cudarc::driver::{CudaSlice, LaunchConfig};

use crate::error::CudaError;
use crate::gpu::{
    grid, Affine2Repr, AffineRepr, CurvePoint, DeviceCurve, FqRepr, FrRepr, Gpu, Xyzz2Repr,
    XyzzRepr, G1, G2,
};

fn need<T>(what: &str, buf: &CudaSlice<T>, len: usize) -> Result<(), CudaError> {
    if buf.len() < len {
        return Err(CudaError::Shape(format!(
            "{what} holds {} elements, the launch needs {len}",
            buf.len()
        )));
    }
    Ok(())
}

fn count(n: usize) -> Result<u32, CudaError> {
    u32::try_from(n).map_err(|_| CudaError::Shape(format!("{n} test elements")))
}

/// Threads of a one-dimensional launch.
fn threads(cfg: &LaunchConfig) -> usize {
    cfg.grid_dim.0 as usize * cfg.block_dim.0 as usize
}

impl Gpu {
    /// `fr_ops_test`: `out[4i..4i+4)` = a+b, a−b, a·b, a out of Montgomery form, for
    /// i < n.
    pub fn fr_ops_test(
        &self,
        a: &CudaSlice<FrRepr>,
        b: &CudaSlice<FrRepr>,
        out: &mut CudaSlice<FrRepr>,
        n: usize,
    ) -> Result<(), CudaError> {
        need("a", a, n)?;
        need("b", b, n)?;
        need("out", out, 4 * n)?;
        let nn = count(n)?;
        crate::launch!(self, "fr_ops_test", grid(n, 256), a, b, &mut *out, &nn)
    }

    /// `fq2_ops_test`: `out[4i..4i+4)` = a+b, a−b, a·b, a² over Fq2 (an Fq2 is the
    /// size of an [`AffineRepr`]), for i < n.
    pub fn fq2_ops_test(
        &self,
        a: &CudaSlice<AffineRepr>,
        b: &CudaSlice<AffineRepr>,
        out: &mut CudaSlice<AffineRepr>,
        n: usize,
    ) -> Result<(), CudaError> {
        need("a", a, n)?;
        need("b", b, n)?;
        need("out", out, 4 * n)?;
        let nn = count(n)?;
        crate::launch!(self, "fq2_ops_test", grid(n, 128), a, b, &mut *out, &nn)
    }

    /// `g1_ops_test`: `out[4i..4i+4)` = a+b (mixed), 2a, (a+b)+b (full), 2(a+b).
    pub fn g1_ops_test(
        &self,
        a: &CudaSlice<AffineRepr>,
        b: &CudaSlice<AffineRepr>,
        out: &mut CudaSlice<XyzzRepr>,
        n: usize,
    ) -> Result<(), CudaError> {
        need("a", a, n)?;
        need("b", b, n)?;
        need("out", out, 4 * n)?;
        let nn = count(n)?;
        crate::launch!(self, "g1_ops_test", grid(n, 64), a, b, &mut *out, &nn)
    }

    /// [`Self::g1_ops_test`] over G2.
    pub fn g2_ops_test(
        &self,
        a: &CudaSlice<Affine2Repr>,
        b: &CudaSlice<Affine2Repr>,
        out: &mut CudaSlice<Xyzz2Repr>,
        n: usize,
    ) -> Result<(), CudaError> {
        need("a", a, n)?;
        need("b", b, n)?;
        need("out", out, 4 * n)?;
        let nn = count(n)?;
        crate::launch!(self, "g2_ops_test", grid(n, 64), a, b, &mut *out, &nn)
    }

    /// `fr_mul_bench`: each thread t of `cfg` runs `iters` rounds of two product
    /// chains on `data[3t..3t+3)` (x, y, z: x·y^iters, z·y^iters); `which` 0 is
    /// `Fr::mul`, 1 `fr_mul_nt`.
    pub fn fr_mul_bench(
        &self,
        cfg: LaunchConfig,
        data: &mut CudaSlice<FrRepr>,
        iters: u32,
        which: u32,
    ) -> Result<(), CudaError> {
        need("data", data, 3 * threads(&cfg))?;
        crate::launch!(self, "fr_mul_bench", cfg, &mut *data, &iters, &which)
    }

    /// `fq_mul_bench`: [`Self::fr_mul_bench`] over Fq; `which` 0 is the called
    /// product, 1 the inlined one.
    pub fn fq_mul_bench(
        &self,
        cfg: LaunchConfig,
        data: &mut CudaSlice<FqRepr>,
        iters: u32,
        which: u32,
    ) -> Result<(), CudaError> {
        need("data", data, 3 * threads(&cfg))?;
        crate::launch!(self, "fq_mul_bench", cfg, &mut *data, &iters, &which)
    }
}

/// A curve's benchmark kernel that fills a buffer with copies of a few bases.
pub trait Replicate: DeviceCurve {
    const REPLICATE: &'static str;
}

impl Replicate for G1 {
    const REPLICATE: &'static str = "replicate_affine_g1";
}

impl Replicate for G2 {
    const REPLICATE: &'static str = "replicate_affine_g2";
}

/// Fills `out` with copies of `src` (benchmark bases).
pub fn replicate_bases<A: CurvePoint>(
    gpu: &Gpu,
    src: &CudaSlice<A>,
    out: &mut CudaSlice<A>,
) -> Result<(), CudaError>
where
    A::Curve: Replicate,
{
    let (m, n) = (src.len() as u32, out.len() as u32);
    crate::launch!(
        gpu,
        <A::Curve as Replicate>::REPLICATE,
        grid(n as usize, 256),
        src,
        &m,
        &mut *out,
        &n
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The benchmark kernels launched here are in a module's list.
    #[test]
    fn replicate_kernels_are_compiled() {
        for name in [G1::REPLICATE, G2::REPLICATE] {
            assert!(
                crate::kernels::MODULES
                    .iter()
                    .any(|m| m.kernels.contains(&name)),
                "{name} is in no module"
            );
        }
    }
}
