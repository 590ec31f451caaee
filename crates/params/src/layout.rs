//! Where each section lies in a parameters file, found from the counts alone and
//! checked against the file's length before anything is allocated.

use crate::{ParamsError, Section};

/// Bytes of an uncompressed G1 point.
pub(crate) const G1_BYTES: u64 = 96;
/// Bytes of an uncompressed G2 point.
pub(crate) const G2_BYTES: u64 = 192;
/// Bytes of a section's big-endian `u32` count.
const COUNT_BYTES: u64 = 4;

/// The points of one section: `count` encodings of `point_bytes` each from byte
/// `offset` (after the count field, for counted sections).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub section: Section,
    pub offset: u64,
    pub count: usize,
    pub point_bytes: u64,
}

impl Span {
    /// Byte offset of point `index` of this span.
    pub fn point_offset(&self, index: usize) -> u64 {
        self.offset + index as u64 * self.point_bytes
    }
}

/// The six single verifying-key points at the head of every file.
pub(crate) fn fixed_spans() -> [Span; 6] {
    let sizes = [
        (Section::AlphaG1, G1_BYTES),
        (Section::BetaG1, G1_BYTES),
        (Section::BetaG2, G2_BYTES),
        (Section::GammaG2, G2_BYTES),
        (Section::DeltaG1, G1_BYTES),
        (Section::DeltaG2, G2_BYTES),
    ];
    let mut offset = 0;
    sizes.map(|(section, point_bytes)| {
        let span = Span {
            section,
            offset,
            count: 1,
            point_bytes,
        };
        offset += point_bytes;
        span
    })
}

/// Where the counted sections start: right after the six single points.
fn fixed_end() -> u64 {
    fixed_spans().iter().map(|s| s.point_bytes).sum()
}

/// Fails with [`ParamsError::Truncated`] unless `needed` bytes exist from `offset`.
pub(crate) fn require(
    bytes: &[u8],
    section: Section,
    offset: u64,
    needed: u64,
) -> Result<(), ParamsError> {
    let available = (bytes.len() as u64).saturating_sub(offset);
    if needed > available {
        return Err(ParamsError::Truncated {
            section,
            offset,
            needed,
            available,
        });
    }
    Ok(())
}

/// The counted sections of a file whose counts and length agree exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub ic: Span,
    pub h: Span,
    pub l: Span,
    pub a: Span,
    pub b_g1: Span,
    pub b_g2: Span,
}

impl Layout {
    /// Walks the count fields from the end of the single verifying-key points,
    /// checking each section fits in `bytes` and that nothing follows `b_g2`.
    pub fn walk(bytes: &[u8]) -> Result<Layout, ParamsError> {
        let mut offset = fixed_end();
        let mut next = |section, point_bytes| -> Result<Span, ParamsError> {
            require(bytes, section, offset, COUNT_BYTES)?;
            let count = read_count(bytes, offset).ok_or(ParamsError::Truncated {
                section,
                offset,
                needed: COUNT_BYTES,
                available: (bytes.len() as u64).saturating_sub(offset),
            })?;
            offset += COUNT_BYTES;
            // At most 2^32 * 192 bytes: no overflow in u64.
            let needed = u64::from(count) * point_bytes;
            require(bytes, section, offset, needed)?;
            // The section fits in a slice, so its count fits in usize.
            let span = Span {
                section,
                offset,
                count: usize::try_from(count).map_err(|_| ParamsError::OutOfMemory {
                    section,
                    count: u64::from(count),
                })?,
                point_bytes,
            };
            offset += needed;
            Ok(span)
        };
        let layout = Layout {
            ic: next(Section::Ic, G1_BYTES)?,
            h: next(Section::H, G1_BYTES)?,
            l: next(Section::L, G1_BYTES)?,
            a: next(Section::A, G1_BYTES)?,
            b_g1: next(Section::BG1, G1_BYTES)?,
            b_g2: next(Section::BG2, G2_BYTES)?,
        };
        let end = layout.b_g2.point_offset(layout.b_g2.count);
        let len = bytes.len() as u64;
        if len > end {
            return Err(ParamsError::TrailingBytes {
                offset: end,
                count: len - end,
            });
        }
        Ok(layout)
    }
}

fn read_count(bytes: &[u8], offset: u64) -> Option<u32> {
    let start = usize::try_from(offset).ok()?;
    let field = bytes.get(start..start.checked_add(COUNT_BYTES as usize)?)?;
    Some(u32::from_be_bytes(field.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_spans_follow_bellperson_order() {
        let spans = fixed_spans();
        let offsets: Vec<u64> = spans.iter().map(|s| s.offset).collect();
        assert_eq!(offsets, [0, 96, 192, 384, 576, 672]);
        assert_eq!(fixed_end(), 864);
    }

    #[test]
    fn walk_of_empty_sections() {
        // 864 bytes of (unchecked) single points, then six zero counts.
        let mut bytes = vec![7u8; 864];
        bytes.extend_from_slice(&[0u8; 24]);
        let layout = Layout::walk(&bytes).unwrap();
        assert_eq!(layout.b_g2.offset, 864 + 24);
        assert_eq!(layout.h.count, 0);
        bytes.push(1);
        assert!(matches!(
            Layout::walk(&bytes),
            Err(ParamsError::TrailingBytes {
                offset: 888,
                count: 1
            })
        ));
    }
}
