//! The spmv's timing and read-back for the device checks and cuzk-gpu-check.

use blstrs::Scalar;

use crate::error::{Ctx, CudaError};
use crate::gpu::Gpu;
use crate::ntt::AbcUpload;
use crate::spmv::{eval_abc, upload_witness, DeviceR1cs};

use super::gpu::scalar_from_repr;

/// The spmv over a freshly uploaded witness, timed on the compute stream from
/// after the upload to the end of the kernel (milliseconds).
fn eval_timed<'a>(
    gpu: &Gpu,
    r1cs: &DeviceR1cs,
    input: &'a [Scalar],
    aux: &'a [Scalar],
) -> Result<(AbcUpload<'a>, f32), CudaError> {
    let w = upload_witness(gpu, r1cs, input, aux, None)?;
    if let Some(ev) = &w.copied {
        ev.synchronize().ctx("cuEventSynchronize")?;
    }
    let mut up = None;
    let ms = gpu.time_ms(|| {
        up = Some(eval_abc(gpu, r1cs, w)?);
        Ok(())
    })?;
    let up = up.ok_or_else(|| CudaError::Shape("the spmv produced nothing".into()))?;
    Ok((up, ms))
}

/// The kernel's time (milliseconds) for `a, b, c` of `r1cs` on `input, aux`, the
/// witness upload excluded; the results are dropped (the check tool's timing).
pub fn time_spmv(
    gpu: &Gpu,
    r1cs: &DeviceR1cs,
    input: &[Scalar],
    aux: &[Scalar],
) -> Result<f32, CudaError> {
    Ok(eval_timed(gpu, r1cs, input, aux)?.1)
}

/// `a, b, c` of `r1cs` on `input, aux` evaluated on the device and read back over
/// the whole NTT domain (the zero padding included), with the kernel's time in
/// milliseconds (the witness upload is done before the clock starts): what the
/// device checks compare with `cuzk_synth::spmv_slices`.
pub fn eval_abc_to_host(
    gpu: &Gpu,
    r1cs: &DeviceR1cs,
    input: &[Scalar],
    aux: &[Scalar],
) -> Result<([Vec<Scalar>; 3], f32), CudaError> {
    let (up, ms) = eval_timed(gpu, r1cs, input, aux)?;
    let domain = 1usize << crate::log_domain(r1cs.rows());
    let mut out = [Vec::new(), Vec::new(), Vec::new()];
    for (o, buf) in out.iter_mut().zip(up.buffers()) {
        *o = gpu
            .download(buf, domain)?
            .iter()
            .map(scalar_from_repr)
            .collect();
    }
    drop(up);
    Ok((out, ms))
}
