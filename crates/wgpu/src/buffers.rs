//! Vectors of Fr on the device, planned against the device's limits.
//!
//! A vector of `n = 2^k` scalars is `n / C` chunks of `C = 2^c` scalars, each its own
//! buffer and binding, `C` the largest power of two whose bytes fit the device's
//! `max_storage_buffer_binding_size` and `max_buffer_size` (and the configuration's
//! cap). A 2^27 vector (4 GiB) thus runs on a device that binds 128 MiB at a time;
//! the NTT's stages that pair elements of two chunks bind both (`ntt.wgsl`).
//!
//! Elements are blstrs' own bytes (Montgomery limbs, little-endian), so upload and
//! download are byte copies; buffers wgpu creates are zeroed, which is the padding
//! of `a, b, c` to the domain.

use blst::blst_fr;
use blstrs::Scalar;

use crate::context::Context;
use crate::WgpuError;

/// Bytes of one Fr element on the device.
pub const FR_BYTES: u64 = 32;

/// Bytes converted per write (and read) call: large enough to amortise the call,
/// small enough not to double a vector's host memory.
const BLOCK: usize = 1 << 16;

/// Host bytes of uploads staged at most before they are flushed to the device.
const STAGED_MAX: u64 = 256 << 20;

/// Scalars per chunk for a vector of `n` (a power of two) under a binding limit of
/// `max_binding` bytes; an error where the device binds less than one scalar.
pub fn chunk_len(n: usize, max_binding: u64) -> Result<usize, WgpuError> {
    let fit = max_binding / FR_BYTES;
    if fit == 0 {
        return Err(WgpuError::Plan(format!(
            "the device binds {max_binding} bytes, less than one scalar"
        )));
    }
    let pow = 1usize << (63 - fit.leading_zeros());
    Ok(n.max(1).min(pow))
}

pub(crate) fn put(out: &mut Vec<u8>, s: &Scalar) {
    for limb in blst_fr::from(*s).l {
        out.extend_from_slice(&limb.to_le_bytes());
    }
}

pub(crate) fn get(bytes: &[u8]) -> Scalar {
    let mut l = [0u64; 4];
    for (limb, b) in l.iter_mut().zip(bytes.chunks_exact(8)) {
        *limb = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    }
    Scalar::from(blst_fr { l })
}

/// A vector of `len` scalars on the device in chunks of `chunk` scalars: what
/// the NTT's resident transforms (`Ntt::fft_to_bitrev_resident` and its
/// siblings) take, made by `Ntt::upload` in the plan they expect.
#[derive(Debug)]
pub struct FrVec {
    pub(crate) chunks: Vec<wgpu::Buffer>,
    pub(crate) chunk: usize,
    pub(crate) len: usize,
}

impl FrVec {
    /// A zeroed vector of `len` scalars (`len` a multiple of `chunk`, or below it).
    pub fn zeroed(ctx: &Context, len: usize, chunk: usize) -> Result<Self, WgpuError> {
        let chunk = chunk.min(len.max(1));
        let count = len.div_ceil(chunk).max(1);
        let chunks = (0..count)
            .map(|_| {
                ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("cuzk fr chunk"),
                    size: chunk as u64 * FR_BYTES,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                })
            })
            .collect();
        Ok(Self { chunks, chunk, len })
    }

    /// A vector of `len` scalars whose first `data.len()` are `data`, the rest zero.
    pub fn upload(
        ctx: &Context,
        data: &[Scalar],
        len: usize,
        chunk: usize,
    ) -> Result<Self, WgpuError> {
        if data.len() > len {
            return Err(WgpuError::Plan(format!(
                "{} scalars do not fit a vector of {len}",
                data.len()
            )));
        }
        let v = Self::zeroed(ctx, len, chunk)?;
        let mut bytes = Vec::with_capacity(BLOCK * FR_BYTES as usize);
        let mut staged = 0u64;
        for (k, part) in data.chunks(v.chunk).enumerate() {
            for (j, block) in part.chunks(BLOCK).enumerate() {
                bytes.clear();
                for s in block {
                    put(&mut bytes, s);
                }
                let offset = (j * BLOCK) as u64 * FR_BYTES;
                ctx.queue.write_buffer(&v.chunks[k], offset, &bytes);
                staged += bytes.len() as u64;
                // Each write is staged in host memory until a submission copies it:
                // flush every STAGED_MAX so that 12 GiB of a, b, c never sit there twice.
                if staged >= STAGED_MAX {
                    ctx.queue.submit([]);
                    ctx.sync()?;
                    staged = 0;
                }
            }
        }
        Ok(v)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first `count` scalars, read back (waits for all submitted work).
    pub fn download(&self, ctx: &Context, count: usize) -> Result<Vec<Scalar>, WgpuError> {
        let count = count.min(self.len);
        let mut out = Vec::with_capacity(count);
        let staging_len = self.chunk.min(count.max(1));
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cuzk fr readback"),
            size: staging_len as u64 * FR_BYTES,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut left = count;
        for chunk in &self.chunks {
            if left == 0 {
                break;
            }
            let take = left.min(self.chunk);
            let bytes = take as u64 * FR_BYTES;
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            enc.copy_buffer_to_buffer(chunk, 0, &staging, 0, bytes);
            ctx.queue.submit([enc.finish()]);
            let slice = staging.slice(..bytes);
            let (tx, rx) = std::sync::mpsc::channel();
            slice.map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            ctx.sync()?;
            // The device was waited for, so the callback has run.
            let mapped = rx
                .try_recv()
                .map_err(|_| WgpuError::Device("the readback was never mapped".into()))?;
            mapped.map_err(|e| WgpuError::Device(format!("mapping a readback: {e}")))?;
            {
                let view = slice
                    .get_mapped_range()
                    .map_err(|e| WgpuError::Device(format!("reading a readback: {e}")))?;
                out.extend(view.chunks_exact(FR_BYTES as usize).map(get));
            }
            staging.unmap();
            left -= take;
        }
        Ok(out)
    }

    /// Bytes this vector holds on the device.
    pub fn device_bytes(&self) -> u64 {
        self.chunks.len() as u64 * self.chunk as u64 * FR_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;

    #[test]
    fn chunks_are_the_largest_power_of_two_that_binds() {
        assert_eq!(chunk_len(1 << 20, 128 << 20).unwrap(), 1 << 20);
        assert_eq!(chunk_len(1 << 27, 128 << 20).unwrap(), 1 << 22);
        assert_eq!(chunk_len(1 << 27, (128 << 20) - 1).unwrap(), 1 << 21);
        assert_eq!(chunk_len(1 << 12, 8192).unwrap(), 256);
        assert_eq!(chunk_len(1, 1 << 30).unwrap(), 1);
        assert!(chunk_len(16, 31).is_err());
    }

    #[test]
    fn bytes_round_trip() {
        let s = -Scalar::from(12345u64) * Scalar::ONE.double();
        let mut b = Vec::new();
        put(&mut b, &s);
        assert_eq!(b.len(), 32);
        assert_eq!(get(&b), s);
    }
}
