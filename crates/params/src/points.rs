//! Decoded parameters on disk, memory-mapped: the "points file".
//!
//! A `.params` file holds its points big-endian and uncompressed; a prover needs
//! them as blstrs' affine points (Montgomery limbs), so [`read_params`] decodes the
//! whole file into anonymous memory: 44 GiB resident for a 32 GiB PoRep set, for
//! as long as the set is loaded, even where a GPU holds every base and the host
//! copy is never read again. A points file is that decoded form written once to
//! disk (page-aligned sections of blstrs' own layout, the verifying key in
//! bellperson's encoding) and then memory-mapped read-only. Its pages are the
//! kernel's page cache: read when a backend first uploads or streams a query,
//! dropped under memory pressure and read back when needed again. A host of
//! 64 GiB can then hold a 44 GiB set whose device-resident queries it never
//! touches, and a cgroup's limit reclaims clean pages instead of killing.
//!
//! The header names what the points were made from ([`Identity`]: the source
//! file's name, length and modification time, or a generator's description); a
//! file whose identity, format or point sizes differ is rebuilt, never used. The
//! file is written to a temporary name, synced and renamed, so a reader or a crash
//! never sees half of one.
//!
//! Layout (little-endian): a 4096-byte header (`MAGIC`, the G1 and G2 point sizes,
//! the verifying key's offset and length, each query's offset and count, the
//! identity's length and bytes), the verifying key, then `h`, `l`, `a`, `b_g1`,
//! `b_g2`, each starting on a 4096-byte boundary.
//!
//! [`read_params`]: crate::read_params

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blstrs::{Bls12, G1Affine, G2Affine};

use crate::{Parameters, ParamsError, VerifyingKey};

const MAGIC: &[u8; 8] = b"CUZKPTS1";
const PAGE: u64 = 4096;
const HEADER: u64 = PAGE;
/// Longest identity a header holds.
pub const MAX_IDENTITY: usize = 3900;

/// An affine point whose in-memory bytes are written to and mapped from a points
/// file. Sealed: only blstrs' affine points, plain structs of `u64` limbs with no
/// padding and no invalid bit patterns as types (`#[repr(transparent)]` over
/// blst's `#[repr(C)]` affine points).
pub trait MappedPoint: sealed::Sealed + Copy + Send + Sync + 'static {
    const BYTES: usize;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for blstrs::G1Affine {}
    impl Sealed for blstrs::G2Affine {}
}

impl MappedPoint for G1Affine {
    const BYTES: usize = 96;
}

impl MappedPoint for G2Affine {
    const BYTES: usize = 192;
}

const _: () = assert!(std::mem::size_of::<G1Affine>() == G1Affine::BYTES);
const _: () = assert!(std::mem::size_of::<G2Affine>() == G2Affine::BYTES);
const _: () = assert!(std::mem::align_of::<G1Affine>() <= PAGE as usize);
const _: () = assert!(std::mem::align_of::<G2Affine>() <= PAGE as usize);

/// What a points file was made from; a file is used only for the identity it was
/// written for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity(String);

impl Identity {
    /// A `.params` file as it is now: its name, length and modification time (a
    /// file replaced or rewritten gets a new identity, so its points are rebuilt).
    pub fn of_file(path: &Path) -> Result<Identity, ParamsError> {
        let meta = fs::metadata(path).map_err(|source| ParamsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        Ok(Identity(format!(
            "params file {name}, {} bytes, modified {mtime} ns",
            meta.len()
        )))
    }

    /// Points made by a generator (timing-only parameters: the shape and seed).
    pub fn generated(description: &str) -> Identity {
        Identity(format!("generated: {description}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One query of a mapped points file: a view of the map as `[G]`.
pub struct MappedQuery<G> {
    map: Arc<memmap2::Mmap>,
    offset: usize,
    len: usize,
    _point: PhantomData<fn() -> G>,
}

impl<G> Clone for MappedQuery<G> {
    fn clone(&self) -> Self {
        Self {
            map: Arc::clone(&self.map),
            offset: self.offset,
            len: self.len,
            _point: PhantomData,
        }
    }
}

impl<G> std::fmt::Debug for MappedQuery<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedQuery")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl<G: MappedPoint> MappedQuery<G> {
    /// The query at `(offset, len)` of `map` (checked by `open`).
    fn new((map, (offset, len)): (Arc<memmap2::Mmap>, (usize, usize))) -> Self {
        Self {
            map,
            offset,
            len,
            _point: PhantomData,
        }
    }

    #[allow(unsafe_code)]
    pub fn as_slice(&self) -> &[G] {
        let bytes = &self.map[self.offset..self.offset + self.len * G::BYTES];
        // SAFETY: `bytes` lies inside the map (checked when the file was opened:
        // `open`), starts on a page boundary (so it is aligned for `G`), and holds
        // `len` points of `G::BYTES` bytes, `size_of::<G>()` (asserted above). `G`
        // is sealed to blstrs' affine points, plain `u64` limbs for which every
        // bit pattern is a value of the type; the bytes are the ones `write`
        // copied out of such points. The map is read-only and lives as long as
        // `self` (the `Arc`).
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<G>(), self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A parameter set read from a points file: the verifying key, decoded, and the
/// five queries as views of the map.
#[derive(Clone, Debug)]
pub struct MappedParams {
    pub path: PathBuf,
    pub vk: VerifyingKey<Bls12>,
    pub h: MappedQuery<G1Affine>,
    pub l: MappedQuery<G1Affine>,
    pub a: MappedQuery<G1Affine>,
    pub b_g1: MappedQuery<G1Affine>,
    pub b_g2: MappedQuery<G2Affine>,
}

impl MappedParams {
    /// Bytes of the queries' points (what the map holds beyond the header and key).
    pub fn point_bytes(&self) -> u64 {
        ((self.h.len() + self.l.len() + self.a.len() + self.b_g1.len()) * G1Affine::BYTES
            + self.b_g2.len() * G2Affine::BYTES) as u64
    }
}

/// The points file for `identity` at `path`: mapped if one was written for it,
/// else `build` is called (decoding a `.params` file, or generating), its points
/// written to `path` (the directory is created) and then mapped, and the decoded
/// copy dropped. The returned queries are page cache, not anonymous memory.
pub fn map_or_build(
    path: &Path,
    identity: &Identity,
    build: impl FnOnce() -> Result<Parameters<Bls12>, ParamsError>,
) -> Result<MappedParams, ParamsError> {
    match open(path, identity) {
        Ok(Some(mapped)) => return Ok(mapped),
        Ok(None) => {}
        Err(e) => tracing::warn!(path = %path.display(), %e, "points file unusable; rebuilding it"),
    }
    let params = build()?;
    write(&params, identity, path)?;
    drop(params);
    open(path, identity)?.ok_or_else(|| ParamsError::Write {
        path: path.to_path_buf(),
        source: io::Error::other("the points file just written does not read back"),
    })
}

/// Writes `params`' points and verifying key to `path` for `identity`, atomically
/// (a temporary file in the same directory, synced, then renamed).
pub fn write(
    params: &Parameters<Bls12>,
    identity: &Identity,
    path: &Path,
) -> Result<(), ParamsError> {
    let _span = tracing::info_span!("write_points", path = %path.display()).entered();
    let werr = |source| ParamsError::Write {
        path: path.to_path_buf(),
        source,
    };
    if identity.0.len() > MAX_IDENTITY {
        return Err(werr(io::Error::other("the identity is too long")));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(werr)?;
    }
    let mut vk = Vec::new();
    params.vk.write(&mut vk).map_err(werr)?;
    let vk_offset = HEADER;
    let mut at = (vk_offset + vk.len() as u64).next_multiple_of(PAGE);
    let counts = [
        (params.h.len(), G1Affine::BYTES),
        (params.l.len(), G1Affine::BYTES),
        (params.a.len(), G1Affine::BYTES),
        (params.b_g1.len(), G1Affine::BYTES),
        (params.b_g2.len(), G2Affine::BYTES),
    ];
    let mut sections = [(0u64, 0u64); 5];
    for (s, (count, bytes)) in sections.iter_mut().zip(counts) {
        *s = (at, count as u64);
        at = (at + (count * bytes) as u64).next_multiple_of(PAGE);
    }
    let mut header = Vec::with_capacity(HEADER as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(G1Affine::BYTES as u32).to_le_bytes());
    header.extend_from_slice(&(G2Affine::BYTES as u32).to_le_bytes());
    header.extend_from_slice(&vk_offset.to_le_bytes());
    header.extend_from_slice(&(vk.len() as u64).to_le_bytes());
    for (offset, count) in sections {
        header.extend_from_slice(&offset.to_le_bytes());
        header.extend_from_slice(&count.to_le_bytes());
    }
    header.extend_from_slice(&(identity.0.len() as u16).to_le_bytes());
    header.extend_from_slice(identity.0.as_bytes());

    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| -> io::Result<()> {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(8 << 20, file);
        let mut written = 0u64;
        let mut put = |w: &mut BufWriter<File>, bytes: &[u8], to: u64| -> io::Result<()> {
            pad(w, to - written)?;
            w.write_all(bytes)?;
            written = to + bytes.len() as u64;
            Ok(())
        };
        put(&mut w, &header, 0)?;
        put(&mut w, &vk, vk_offset)?;
        put(&mut w, as_bytes(&params.h), sections[0].0)?;
        put(&mut w, as_bytes(&params.l), sections[1].0)?;
        put(&mut w, as_bytes(&params.a), sections[2].0)?;
        put(&mut w, as_bytes(&params.b_g1), sections[3].0)?;
        put(&mut w, as_bytes(&params.b_g2), sections[4].0)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(werr)
}

fn pad(w: &mut impl Write, mut n: u64) -> io::Result<()> {
    const ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];
    while n > 0 {
        let k = n.min(PAGE);
        w.write_all(&ZEROS[..k as usize])?;
        n -= k;
    }
    Ok(())
}

#[allow(unsafe_code)]
fn as_bytes<G: MappedPoint>(points: &[G]) -> &[u8] {
    // SAFETY: `G` is one of blstrs' affine points: `size_of::<G>() == G::BYTES`
    // (asserted above) bytes of `u64` limbs with no padding, so the slice's memory
    // is `points.len() * G::BYTES` initialised bytes, borrowed for as long as
    // `points` is.
    unsafe {
        std::slice::from_raw_parts(points.as_ptr().cast::<u8>(), std::mem::size_of_val(points))
    }
}

/// Opens the points file at `path` if it exists and was written for `identity`
/// in this format; `Ok(None)` if it is absent or for something else (a stale
/// file: rebuild it); `Err` if it claims to be ours but is damaged.
pub fn open(path: &Path, identity: &Identity) -> Result<Option<MappedParams>, ParamsError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ParamsError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let map = Arc::new(map(&file, path)?);
    let bad = |why: &str| ParamsError::Io {
        path: path.to_path_buf(),
        source: io::Error::other(format!("not a usable points file: {why}")),
    };
    let bytes: &[u8] = &map;
    if bytes.len() < HEADER as usize || &bytes[..8] != MAGIC {
        return Ok(None);
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    if u32_at(8) as usize != G1Affine::BYTES || u32_at(12) as usize != G2Affine::BYTES {
        return Ok(None);
    }
    let id_len = u16::from_le_bytes([bytes[112], bytes[113]]) as usize;
    if id_len > MAX_IDENTITY || bytes[114..114 + id_len] != *identity.0.as_bytes() {
        return Ok(None);
    }
    let (vk_offset, vk_len) = (u64_at(16), u64_at(24));
    let end = |offset: u64, len: u64| offset.checked_add(len).filter(|&e| e <= bytes.len() as u64);
    let vk_end = end(vk_offset, vk_len).ok_or_else(|| bad("its verifying key lies outside it"))?;
    let vk = VerifyingKey::<Bls12>::read(&bytes[vk_offset as usize..vk_end as usize])
        .map_err(|e| bad(&format!("its verifying key does not decode: {e}")))?;
    let mut queries = [(0usize, 0usize); 5];
    for (k, q) in queries.iter_mut().enumerate() {
        let (offset, count) = (u64_at(32 + 16 * k), u64_at(40 + 16 * k));
        let point = if k == 4 {
            G2Affine::BYTES
        } else {
            G1Affine::BYTES
        } as u64;
        let len = count
            .checked_mul(point)
            .ok_or_else(|| bad("a count overflows"))?;
        if offset % PAGE != 0 || end(offset, len).is_none() {
            return Err(bad("a query lies outside it or off a page boundary"));
        }
        *q = (offset as usize, count as usize);
    }
    let query = |k: usize| (Arc::clone(&map), queries[k]);
    Ok(Some(MappedParams {
        path: path.to_path_buf(),
        vk,
        h: MappedQuery::new(query(0)),
        l: MappedQuery::new(query(1)),
        a: MappedQuery::new(query(2)),
        b_g1: MappedQuery::new(query(3)),
        b_g2: MappedQuery::new(query(4)),
    }))
}

#[allow(unsafe_code)]
fn map(file: &File, path: &Path) -> Result<memmap2::Mmap, ParamsError> {
    // SAFETY: the map is read-only and read as bytes or, through `MappedQuery`, as
    // points whose every bit pattern is valid. Points files are only ever replaced
    // by rename (`write`), which leaves a live map on the old inode; truncating
    // one in place while it is mapped is unsupported (SIGBUS, as for any mapped
    // reader).
    unsafe { memmap2::Mmap::map(file) }.map_err(|source| ParamsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{timing_only_params, TimingShape};

    fn params(seed: u64) -> Parameters<Bls12> {
        let shape = TimingShape {
            num_inputs: 2,
            num_aux: 300,
            a_aux_dense: 290,
            b_inputs_dense: 1,
            b_aux_dense: 120,
            domain: 512,
        };
        timing_only_params(&shape, seed).unwrap().into_params()
    }

    fn same(mapped: &MappedParams, p: &Parameters<Bls12>) {
        assert_eq!(mapped.h.as_slice(), &p.h[..]);
        assert_eq!(mapped.l.as_slice(), &p.l[..]);
        assert_eq!(mapped.a.as_slice(), &p.a[..]);
        assert_eq!(mapped.b_g1.as_slice(), &p.b_g1[..]);
        assert_eq!(mapped.b_g2.as_slice(), &p.b_g2[..]);
        assert_eq!(mapped.vk, p.vk);
    }

    #[test]
    fn points_round_trip_and_are_rebuilt_only_for_another_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/set.points");
        let (one, two) = (Identity::generated("one"), Identity::generated("two"));
        let p = params(1);
        let mut builds = 0;
        let m = map_or_build(&path, &one, || {
            builds += 1;
            Ok(p.clone())
        })
        .unwrap();
        same(&m, &p);
        assert!(m.point_bytes() > 0);
        // Mapped again without building.
        let m = map_or_build(&path, &one, || unreachable!("built twice")).unwrap();
        same(&m, &p);
        assert_eq!(builds, 1);
        // Another identity: not this file; rebuilt with the new points, while the
        // old map stays valid (rename leaves it on the old inode).
        assert!(open(&path, &two).unwrap().is_none());
        let q = params(2);
        let n = map_or_build(&path, &two, || Ok(q.clone())).unwrap();
        same(&n, &q);
        same(&m, &p);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("set.points");
        let id = Identity::generated("x");
        // Not ours at all: rebuilt.
        fs::write(&path, b"something else entirely").unwrap();
        assert!(open(&path, &id).unwrap().is_none());
        let p = params(3);
        map_or_build(&path, &id, || Ok(p.clone())).unwrap();
        // Truncated: its queries lie outside it, an error (and map_or_build rebuilds).
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
        let err = open(&path, &id).unwrap_err().to_string();
        assert!(err.contains("outside"), "{err}");
        let m = map_or_build(&path, &id, || Ok(p.clone())).unwrap();
        same(&m, &p);
    }

    #[test]
    fn a_file_identity_changes_with_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v28-x.params");
        fs::write(&path, b"12345").unwrap();
        let a = Identity::of_file(&path).unwrap();
        assert!(a.as_str().contains("v28-x.params") && a.as_str().contains("5 bytes"));
        fs::write(&path, b"123456").unwrap();
        assert_ne!(Identity::of_file(&path).unwrap(), a);
    }
}
