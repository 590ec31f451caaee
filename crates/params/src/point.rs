//! Decoding uncompressed points, one at a time or a whole section in parallel.

use std::sync::atomic::{AtomicUsize, Ordering};

use blstrs::{Fp, Fp2, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use crate::layout::{self, Span};
use crate::{ParamsError, Validation};

/// Why a point's bytes were rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PointError {
    /// The flag bits or a coordinate (not below the field modulus) make the bytes
    /// no uncompressed encoding of any point.
    #[error("its bytes are not a valid uncompressed point encoding")]
    InvalidEncoding,
    /// The coordinates are canonical but do not satisfy the curve equation.
    #[error("the point is not on the curve")]
    NotOnCurve,
    /// The point is on the curve but outside the prime-order subgroup.
    #[error("the point is not in the prime-order subgroup")]
    NotInSubgroup,
    /// The point at infinity, which bellperson never stores in this section.
    #[error("the point is the point at infinity, which this section never holds")]
    Identity,
}

// Flag bits of the first byte of a (ZCash-style) encoding.
const COMPRESSED_FLAG: u8 = 0x80;
const INFINITY_FLAG: u8 = 0x40;
const SORT_FLAG: u8 = 0x20;

/// What the two curves' points need for decoding; blstrs offers these as inherent
/// methods only.
pub(crate) trait Point: PrimeCurveAffine + Send + Sync {
    /// blst's deserializer (blstrs' `from_uncompressed_unchecked`): canonical
    /// encoding and on-curve, no subgroup check. `None` when it refuses.
    fn deserialize(bytes: &[u8]) -> Option<Self>;
    fn on_curve(&self) -> bool;
    fn in_subgroup(&self) -> bool;
    /// The point with these coordinates, with no check at all, or `None` when a
    /// coordinate is not canonical. Only used to explain a refusal.
    fn from_coordinates(bytes: &[u8]) -> Option<Self>;
}

impl Point for G1Affine {
    fn deserialize(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; 96] = bytes.try_into().ok()?;
        G1Affine::from_uncompressed_unchecked(bytes).into()
    }
    fn on_curve(&self) -> bool {
        self.is_on_curve().into()
    }
    fn in_subgroup(&self) -> bool {
        self.is_torsion_free().into()
    }
    fn from_coordinates(bytes: &[u8]) -> Option<Self> {
        let x = fp_at(bytes, 0)?;
        let y = fp_at(bytes, 48)?;
        Some(G1Affine::from_raw_unchecked(x, y, false))
    }
}

impl Point for G2Affine {
    fn deserialize(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; 192] = bytes.try_into().ok()?;
        G2Affine::from_uncompressed_unchecked(bytes).into()
    }
    fn on_curve(&self) -> bool {
        self.is_on_curve().into()
    }
    fn in_subgroup(&self) -> bool {
        self.is_torsion_free().into()
    }
    fn from_coordinates(bytes: &[u8]) -> Option<Self> {
        // Each Fp2 coordinate is written imaginary part (c1) first.
        let x = Fp2::new(fp_at(bytes, 48)?, fp_at(bytes, 0)?);
        let y = Fp2::new(fp_at(bytes, 144)?, fp_at(bytes, 96)?);
        Some(G2Affine::from_raw_unchecked(x, y, false))
    }
}

/// The big-endian field element at `start`, flag bits cleared; `None` if not
/// canonical.
fn fp_at(bytes: &[u8], start: usize) -> Option<Fp> {
    let mut be: [u8; 48] = bytes.get(start..start + 48)?.try_into().ok()?;
    if start == 0 {
        be[0] &= !(COMPRESSED_FLAG | INFINITY_FLAG | SORT_FLAG);
    }
    Fp::from_bytes_be(&be).into()
}

/// Decodes one point's bytes at the given validation level, rejecting the point at
/// infinity when `reject_identity`.
pub(crate) fn decode<P: Point>(
    bytes: &[u8],
    validation: Validation,
    reject_identity: bool,
) -> Result<P, PointError> {
    // blst would read a compressed encoding from the first half and ignore the rest.
    match bytes.first() {
        Some(flags) if flags & COMPRESSED_FLAG == 0 => {}
        _ => return Err(PointError::InvalidEncoding),
    }
    let point = P::deserialize(bytes).ok_or_else(|| explain_refusal::<P>(bytes))?;
    if bool::from(point.is_identity()) {
        return if reject_identity {
            Err(PointError::Identity)
        } else {
            Ok(point)
        };
    }
    match validation {
        Validation::None => {}
        Validation::OnCurve => {
            if !point.on_curve() {
                return Err(PointError::NotOnCurve);
            }
        }
        Validation::Subgroup => {
            if !point.on_curve() {
                return Err(PointError::NotOnCurve);
            }
            if !point.in_subgroup() {
                return Err(PointError::NotInSubgroup);
            }
        }
    }
    Ok(point)
}

/// Why blst refused `bytes` (only called on that cold path).
fn explain_refusal<P: Point>(bytes: &[u8]) -> PointError {
    let flags = bytes.first().copied().unwrap_or(0);
    if flags & (INFINITY_FLAG | SORT_FLAG) != 0 {
        // A valid infinity encoding would have been accepted.
        return PointError::InvalidEncoding;
    }
    match P::from_coordinates(bytes) {
        None => PointError::InvalidEncoding,
        Some(p) if !p.on_curve() => PointError::NotOnCurve,
        // blst also refuses the on-curve points with x = 0, none of which is in
        // the subgroup.
        Some(_) => PointError::NotInSubgroup,
    }
}

/// The slice of `bytes` holding `span`'s points, or `Truncated`.
fn region<'a>(bytes: &'a [u8], span: &Span) -> Result<&'a [u8], ParamsError> {
    let needed = span.count as u64 * span.point_bytes;
    layout::require(bytes, span.section, span.offset, needed)?;
    let truncated = || ParamsError::Truncated {
        section: span.section,
        offset: span.offset,
        needed,
        available: (bytes.len() as u64).saturating_sub(span.offset),
    };
    let start = usize::try_from(span.offset).map_err(|_| truncated())?;
    let end = usize::try_from(span.offset + needed).map_err(|_| truncated())?;
    bytes.get(start..end).ok_or_else(truncated)
}

fn invalid(span: &Span, index: usize, reason: PointError) -> ParamsError {
    ParamsError::InvalidPoint {
        section: span.section,
        index,
        offset: span.point_offset(index),
        reason,
    }
}

/// Decodes one of the six single verifying-key points, fully checked and with the
/// point at infinity allowed, as bellperson's `VerifyingKey::read` does.
pub(crate) fn decode_single<P: Point>(bytes: &[u8], span: &Span) -> Result<P, ParamsError> {
    let region = region(bytes, span)?;
    decode(region, Validation::Subgroup, false).map_err(|reason| invalid(span, 0, reason))
}

/// Points per rayon task at least: decoding a point takes about a microsecond
/// (bench, 2-core development machine), so smaller tasks would spend a noticeable
/// share on scheduling, while 1024 still gives thousands of tasks on real files.
const MIN_POINTS_PER_TASK: usize = 1 << 10;

/// Decodes a counted section in parallel into a vector reserved once at its exact
/// length (rayon's indexed `par_extend` writes into its spare capacity), rejecting
/// the point at infinity. On failure reports the lowest failing index, whatever
/// the thread timing.
pub(crate) fn decode_section<P: Point>(
    bytes: &[u8],
    span: &Span,
    validation: Validation,
) -> Result<Vec<P>, ParamsError> {
    let region = region(bytes, span)?;
    let point_bytes = span.point_bytes as usize;
    let mut points = Vec::new();
    points
        .try_reserve_exact(span.count)
        .map_err(|_| ParamsError::OutOfMemory {
            section: span.section,
            count: span.count as u64,
        })?;

    // Lowest index seen to fail so far. Points above it are skipped (a placeholder
    // fills their slot, and the vector is dropped); points below it are still
    // decoded, so the final value is the lowest failing index overall.
    let first_bad = AtomicUsize::new(usize::MAX);
    points.par_extend(
        region
            .par_chunks_exact(point_bytes)
            .with_min_len(MIN_POINTS_PER_TASK)
            .enumerate()
            .map(|(index, chunk)| {
                if index > first_bad.load(Ordering::Relaxed) {
                    return P::identity();
                }
                decode::<P>(chunk, validation, true).unwrap_or_else(|_| {
                    first_bad.fetch_min(index, Ordering::Relaxed);
                    P::identity()
                })
            }),
    );

    let index = first_bad.into_inner();
    if index != usize::MAX {
        // Decode the failing point again, once, to say why.
        let start = index * point_bytes;
        let reason = region
            .get(start..start + point_bytes)
            .map_or(Err(PointError::InvalidEncoding), |chunk| {
                decode::<P>(chunk, validation, true)
            })
            .err()
            .unwrap_or(PointError::InvalidEncoding);
        return Err(invalid(span, index, reason));
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use group::Group;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn coordinates_match_blst_decoding() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for _ in 0..8 {
            let g1 = blstrs::G1Projective::random(&mut rng).to_affine();
            let bytes = g1.to_uncompressed();
            assert_eq!(G1Affine::from_coordinates(&bytes), Some(g1));
            let g2 = blstrs::G2Projective::random(&mut rng).to_affine();
            let bytes = g2.to_uncompressed();
            assert_eq!(G2Affine::from_coordinates(&bytes), Some(g2));
        }
    }

    #[test]
    fn identity_and_flags() {
        let id = G1Affine::identity().to_uncompressed();
        assert_eq!(
            decode::<G1Affine>(&id, Validation::None, false),
            Ok(G1Affine::identity())
        );
        assert_eq!(
            decode::<G1Affine>(&id, Validation::None, true),
            Err(PointError::Identity)
        );
        let g = G1Affine::generator().to_uncompressed();
        let mut compressed = g;
        compressed[0] |= COMPRESSED_FLAG;
        assert_eq!(
            decode::<G1Affine>(&compressed, Validation::None, true),
            Err(PointError::InvalidEncoding)
        );
        let mut sorted = g;
        sorted[0] |= SORT_FLAG;
        assert_eq!(
            decode::<G1Affine>(&sorted, Validation::None, true),
            Err(PointError::InvalidEncoding)
        );
        let mut bad_infinity = id;
        bad_infinity[95] = 1;
        assert_eq!(
            decode::<G1Affine>(&bad_infinity, Validation::None, true),
            Err(PointError::InvalidEncoding)
        );
        // An x coordinate above the modulus (0x1a01...) is not canonical.
        let mut big = g;
        big[..48].copy_from_slice(&[0x1f; 48]);
        assert_eq!(
            decode::<G1Affine>(&big, Validation::None, true),
            Err(PointError::InvalidEncoding)
        );
        // (0, 2) is on y^2 = x^3 + 4 but not in the subgroup; blst refuses it.
        let mut zero_x = [0u8; 96];
        zero_x[95] = 2;
        assert_eq!(
            decode::<G1Affine>(&zero_x, Validation::None, true),
            Err(PointError::NotInSubgroup)
        );
        let mut off_curve = g;
        off_curve[95] ^= 1;
        for validation in [Validation::None, Validation::OnCurve, Validation::Subgroup] {
            assert_eq!(
                decode::<G1Affine>(&off_curve, validation, true),
                Err(PointError::NotOnCurve)
            );
        }
        let g2 = G2Affine::generator().to_uncompressed();
        let mut off_curve = g2;
        off_curve[191] ^= 1;
        assert_eq!(
            decode::<G2Affine>(&off_curve, Validation::None, true),
            Err(PointError::NotOnCurve)
        );
    }
}
