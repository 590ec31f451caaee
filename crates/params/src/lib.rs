//! Groth16 parameters for BLS12-381, read from Filecoin's `.params` files.
//!
//! The file layout is exactly what `bellperson::groth16::Parameters::write` (0.27)
//! produces: the verifying key (`alpha_g1`, `beta_g1`, `beta_g2`, `gamma_g2`,
//! `delta_g1`, `delta_g2` uncompressed, then a big-endian `u32` count and the `ic`
//! points), then the `h`, `l`, `a`, `b_g1` and `b_g2` queries, each a big-endian
//! `u32` count followed by that many uncompressed points (96 bytes in G1, 192 in
//! G2), with no padding and nothing after `b_g2`.
//!
//! # Design: map, measure, then decode in parallel
//!
//! A 32 GiB PoRep parameter file is ~44 GiB. bellperson's `Parameters::read` pulls
//! it through a `Read` one point at a time on one thread, so loading is bounded by
//! one core's decoding speed; its `read_mmap` maps the file but still decodes
//! serially and grows each `Vec` by `push`. Here the file is memory-mapped and read
//! in two passes:
//!
//! 1. **Layout.** The counts are walked (a few bytes per section) and every
//!    section's extent is checked against the file's length *before anything is
//!    allocated*. A corrupt count such as `0xFFFF_FFFF` therefore becomes a
//!    [`ParamsError::Truncated`] naming the section, not a 400 GB allocation, and an
//!    allocation can never exceed what the file itself holds.
//! 2. **Decode.** Each section is decoded by rayon straight from the map into a
//!    `Vec` reserved once at its exact length: `par_extend` over an indexed
//!    iterator writes into the vector's spare capacity, so the only copy of a point
//!    is the decode itself. The vectors become [`Parameters`]' `Arc<Vec<..>>`
//!    fields without moving, so the result is bellperson's own type and works with
//!    both bellperson and cuzk.
//!
//! Decoding runs on the current rayon pool: call inside `pool.install(..)` to choose
//! the threads.
//!
//! # Validation, and how it mirrors bellperson
//!
//! [`Validation`] picks how much each `h`, `l`, `a`, `b_g1` and `b_g2` point is
//! checked. Independently of it, this reader accepts and rejects what bellperson's
//! `Parameters::read` does, with the differences listed below:
//!
//! * The six single verifying-key points and every `ic` point are always checked
//!   fully (canonical encoding, on the curve, in the prime-order subgroup), as
//!   bellperson's `VerifyingKey::read` does whatever `checked` says. They are a few
//!   hundred points, so this costs milliseconds.
//! * The point at infinity is rejected in `ic`, `h`, `l`, `a`, `b_g1` and `b_g2` at
//!   every validation level (bellperson rejects it there even with
//!   `checked = false`: its generator filters identities out of `a`/`b` and refuses
//!   circuits that would put one in `l`). Like bellperson, it is accepted for the six
//!   single verifying-key points.
//! * [`Validation::None`] decodes with blstrs' `from_uncompressed_unchecked`, as
//!   bellperson's `read(.., false)` does. Despite its name that function goes
//!   through blst's deserializer, which already rejects non-canonical coordinates and
//!   points off the curve; only the subgroup check is skipped.
//!   [`Validation::OnCurve`] adds an explicit on-curve check, so the guarantee is
//!   ours rather than an implementation detail of blst (today it rejects nothing more
//!   than `None`). [`Validation::Subgroup`] is bellperson's `read(.., true)`.
//!
//! Stricter than bellperson: an encoding with the *compression* flag set is
//! rejected (blst would silently decode it from its first 48 bytes), and bytes after
//! `b_g2` are an error ([`ParamsError::TrailingBytes`]) where bellperson ignores them.
//!
//! Architecture invariant: this crate knows nothing of proving. It turns bytes into
//! points (and, for demos and tests, circuits into fresh parameters) and reports
//! precisely where a file is wrong.

// The memory map is the one thing that needs `unsafe`; it is allowed on that single
// function.
#![deny(unsafe_code)]

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blstrs::{Bls12, G1Affine, G2Affine};

pub use bellperson::groth16::{Parameters, VerifyingKey};
pub use bellperson::SynthesisError;

pub mod fast;
pub mod generate;
mod layout;
mod point;
pub mod points;
pub mod timing;

pub use fast::generate_params_fast;
pub use generate::{generate_params, load_or_generate};
pub use point::PointError;

use layout::Layout;

/// How thoroughly the points of the `h`, `l`, `a`, `b_g1` and `b_g2` queries are
/// checked while reading. The verifying key is always checked fully (see the crate
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Validation {
    /// Canonical encoding only (as bellperson's `read(.., false)`); blst's decoder
    /// also rejects points off the curve. For trusted files whose digest was
    /// checked, which is how Filecoin nodes load their parameters.
    #[default]
    None,
    /// Also check explicitly that each point is on its curve.
    OnCurve,
    /// Also check that each point is in the prime-order subgroup (as bellperson's
    /// `read(.., true)`). For untrusted files only: the check is a scalar
    /// multiplication per point. The bench at 2^12 constraints on the 2-core
    /// development machine: 4.0 s with `Subgroup` against 22 ms with `None`, so a
    /// 44 GiB file would take CPU-hours.
    Subgroup,
}

/// A section of the parameters file, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    AlphaG1,
    BetaG1,
    BetaG2,
    GammaG2,
    DeltaG1,
    DeltaG2,
    Ic,
    H,
    L,
    A,
    BG1,
    BG2,
}

impl Section {
    /// The field's name in bellperson's `Parameters`, e.g. `vk.alpha_g1` or `h`.
    pub fn name(self) -> &'static str {
        match self {
            Section::AlphaG1 => "vk.alpha_g1",
            Section::BetaG1 => "vk.beta_g1",
            Section::BetaG2 => "vk.beta_g2",
            Section::GammaG2 => "vk.gamma_g2",
            Section::DeltaG1 => "vk.delta_g1",
            Section::DeltaG2 => "vk.delta_g2",
            Section::Ic => "vk.ic",
            Section::H => "h",
            Section::L => "l",
            Section::A => "a",
            Section::BG1 => "b_g1",
            Section::BG2 => "b_g2",
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that can go wrong reading, writing or generating parameters.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// Opening, measuring or mapping the file failed.
    #[error("cannot read parameters file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Creating, writing, syncing or renaming the file failed.
    #[error("cannot write parameters file {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The file is shorter than its counts say: `section` needs `needed` bytes from
    /// byte `offset` (its count field, or its points) but only `available` remain.
    #[error(
        "the parameters file ends inside section {section} at byte {offset}: \
         {needed} bytes are needed from there but only {available} remain"
    )]
    Truncated {
        section: Section,
        offset: u64,
        needed: u64,
        available: u64,
    },

    /// Point `index` of `section`, at byte `offset` of the file, was rejected.
    #[error("in section {section}, point {index} at byte {offset} is invalid: {reason}")]
    InvalidPoint {
        section: Section,
        index: usize,
        offset: u64,
        reason: PointError,
    },

    /// The file goes on for `count` bytes after the end of `b_g2` at byte `offset`.
    #[error(
        "the parameters file has {count} bytes after its last section (b_g2 ends at \
         byte {offset}); it is not a bellperson parameters file, or not only one"
    )]
    TrailingBytes { offset: u64, count: u64 },

    /// The memory for a section's decoded points could not be reserved.
    #[error("cannot allocate memory for the {count} points of section {section}")]
    OutOfMemory { section: Section, count: u64 },

    /// A section has more points than the format's `u32` count can express.
    #[error("section {section} has {count} points, more than a parameters file can hold")]
    TooManyPoints { section: Section, count: usize },

    /// Generating parameters failed because the circuit could not be synthesized.
    #[error("while generating parameters, the circuit failed to synthesize: {0}")]
    Synthesis(#[source] SynthesisError),
}

/// The shape of a parameters file, from its counts alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsSummary {
    pub ic: usize,
    pub h: usize,
    pub l: usize,
    pub a: usize,
    pub b_g1: usize,
    pub b_g2: usize,
    pub file_bytes: u64,
}

/// Reads the parameters file at `path` through a memory map, decoding points in
/// parallel on the current rayon pool.
///
/// The file must not be truncated or rewritten in place while it is read (replacing
/// it by rename, as [`write_params`] does, is fine).
pub fn read_params(path: &Path, validation: Validation) -> Result<Parameters<Bls12>, ParamsError> {
    let _span = tracing::info_span!("read_params", path = %path.display(), ?validation).entered();
    let map = map_file(path)?;
    read_params_bytes(&map, validation)
}

/// Reads parameters from bytes in the `.params` layout (see [`read_params`]).
pub fn read_params_bytes(
    bytes: &[u8],
    validation: Validation,
) -> Result<Parameters<Bls12>, ParamsError> {
    let start = std::time::Instant::now();
    // The six single points come first and are decoded one by one, before the counts
    // are trusted: a file that is not parameters at all fails on its first point
    // ("not a valid encoding") instead of on an absurd count.
    let fixed = layout::fixed_spans();
    let alpha_g1: G1Affine = point::decode_single(bytes, &fixed[0])?;
    let beta_g1: G1Affine = point::decode_single(bytes, &fixed[1])?;
    let beta_g2: G2Affine = point::decode_single(bytes, &fixed[2])?;
    let gamma_g2: G2Affine = point::decode_single(bytes, &fixed[3])?;
    let delta_g1: G1Affine = point::decode_single(bytes, &fixed[4])?;
    let delta_g2: G2Affine = point::decode_single(bytes, &fixed[5])?;

    let layout = Layout::walk(bytes)?;

    // bellperson checks `ic` fully whatever `checked` says; so do we.
    let ic = point::decode_section::<G1Affine>(bytes, &layout.ic, Validation::Subgroup)?;
    let h = point::decode_section::<G1Affine>(bytes, &layout.h, validation)?;
    let l = point::decode_section::<G1Affine>(bytes, &layout.l, validation)?;
    let a = point::decode_section::<G1Affine>(bytes, &layout.a, validation)?;
    let b_g1 = point::decode_section::<G1Affine>(bytes, &layout.b_g1, validation)?;
    let b_g2 = point::decode_section::<G2Affine>(bytes, &layout.b_g2, validation)?;

    tracing::debug!(
        bytes = bytes.len(),
        ms = start.elapsed().as_secs_f64() * 1e3,
        "decoded parameters"
    );
    Ok(Parameters {
        vk: VerifyingKey {
            alpha_g1,
            beta_g1,
            beta_g2,
            gamma_g2,
            delta_g1,
            delta_g2,
            ic,
        },
        h: Arc::new(h),
        l: Arc::new(l),
        a: Arc::new(a),
        b_g1: Arc::new(b_g1),
        b_g2: Arc::new(b_g2),
    })
}

/// The counts of the parameters file at `path` and its size, after checking that
/// the counts account for every byte of the file. Decodes no point, so it reads only
/// the few pages holding the counts, even of a 44 GiB file.
pub fn summarize(path: &Path) -> Result<ParamsSummary, ParamsError> {
    let map = map_file(path)?;
    let bytes: &[u8] = &map;
    for span in &layout::fixed_spans() {
        layout::require(bytes, span.section, span.offset, span.point_bytes)?;
    }
    let layout = Layout::walk(bytes)?;
    Ok(ParamsSummary {
        ic: layout.ic.count,
        h: layout.h.count,
        l: layout.l.count,
        a: layout.a.count,
        b_g1: layout.b_g1.count,
        b_g2: layout.b_g2.count,
        file_bytes: bytes.len() as u64,
    })
}

/// Writes `params` to `path` in bellperson's layout, atomically: the bytes go to a
/// temporary file in the same directory, which is synced and then renamed over
/// `path`, so a reader (or a crash) never sees a half-written file.
pub fn write_params(params: &Parameters<Bls12>, path: &Path) -> Result<(), ParamsError> {
    let _span = tracing::info_span!("write_params", path = %path.display()).entered();
    // bellperson writes each count as `len as u32`; refuse what would wrap.
    let counts = [
        (Section::Ic, params.vk.ic.len()),
        (Section::H, params.h.len()),
        (Section::L, params.l.len()),
        (Section::A, params.a.len()),
        (Section::BG1, params.b_g1.len()),
        (Section::BG2, params.b_g2.len()),
    ];
    for (section, count) in counts {
        if u32::try_from(count).is_err() {
            return Err(ParamsError::TooManyPoints { section, count });
        }
    }

    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ParamsError::Write { path, source }
    };
    let file_name = path.file_name().ok_or_else(|| {
        write_err(path)(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path does not name a file",
        ))
    })?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // Unique per process and call, so concurrent writers never share a temp file.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);

    let result = (|| {
        let file = File::create(&tmp).map_err(write_err(&tmp))?;
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        params.write(&mut writer).map_err(write_err(&tmp))?;
        writer.flush().map_err(write_err(&tmp))?;
        let file = writer
            .into_inner()
            .map_err(|e| write_err(&tmp)(e.into_error()))?;
        file.sync_all().map_err(write_err(&tmp))?;
        std::fs::rename(&tmp, path).map_err(write_err(path))
    })();
    if result.is_err() {
        // Best effort: the error being returned is the one that matters.
        let _ = std::fs::remove_file(&tmp);
    } else if let Ok(dir) = File::open(dir) {
        // Make the rename itself durable; not every platform can sync a directory.
        let _ = dir.sync_all();
    }
    result
}

#[allow(unsafe_code)]
fn map_file(path: &Path) -> Result<memmap2::Mmap, ParamsError> {
    let io_err = |source| ParamsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    // SAFETY: the map is only read, and only as `&[u8]`, so the one hazard is the
    // file changing underneath it. Parameter files are written once and replaced by
    // rename (`write_params` does so), which leaves an existing map on the old inode;
    // truncating a file in place while it is read is documented as unsupported on
    // `read_params` (the kernel would answer with SIGBUS, as for any mapped reader).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?;
    // A hint only: each rayon worker walks its share of a section front to back,
    // so aggressive read-ahead pays; an error here changes nothing.
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(map)
}
