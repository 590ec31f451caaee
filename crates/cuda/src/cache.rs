//! The on-disk kernel cache: the CUBINs NVRTC compiled, kept between processes, since
//! compiling a module costs about 10 s (the MSM modules; measured on the H200 and on
//! the development machine alike).
//!
//! Where it looks, in order: the `kernels/` folders given as staged (beside the
//! plugin `.so` and beside the executable: `scripts/stage-device.sh` ships CUBINs
//! compiled on the development machine there, so the device spends no time in
//! NVRTC), then the cache folder (`CudaConfig::kernel_cache_dir`, by default
//! `$XDG_CACHE_HOME/cuzk/kernels`, else `~/.cache/cuzk/kernels`). A miss compiles,
//! says so in the log, and writes the cache folder.
//!
//! A file is named after its module, architecture and the SHA-256 of what it was
//! compiled from (source, architecture, options), and holds that hash, its length
//! and the SHA-256 of the CUBIN in a header, all checked when it is read: a stale,
//! truncated or damaged file is compiled anew, never loaded. Files are written to a
//! temporary name in the same folder and renamed, so a reader never sees half a
//! file, and two processes filling the cache at once each write a whole one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::CudaError;
use crate::kernels::{self, ModuleSource};

/// First bytes of a cache file (the format's version is its last character).
const MAGIC: &[u8; 10] = b"CUZKCUBIN1";
const HEADER: usize = MAGIC.len() + 32 + 8 + 32;

/// Where compiled kernels are looked for and kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelCache {
    /// Read-only folders of staged kernels, looked in first.
    staged: Vec<PathBuf>,
    /// The folder misses are written to (`None`: no disk cache at all).
    dir: Option<PathBuf>,
}

impl KernelCache {
    /// Kernels in `dir`, or in [`KernelCache::default_dir`] when `None`; staged
    /// kernels in `kernels/` beside the executable.
    pub fn new(dir: Option<&Path>) -> Self {
        let staged = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|p| p.join("kernels")))
            .into_iter()
            .collect();
        Self {
            staged,
            dir: dir.map(Path::to_path_buf).or_else(Self::default_dir),
        }
    }

    /// Also looks in `dir` (read-only) before the cache folder: the `kernels/`
    /// folder beside a plugin `.so`.
    pub fn with_staged(mut self, dir: PathBuf) -> Self {
        if !self.staged.contains(&dir) {
            self.staged.insert(0, dir);
        }
        self
    }

    /// `$XDG_CACHE_HOME/cuzk/kernels`, else `$HOME/.cache/cuzk/kernels`; `None`
    /// when neither is set.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("cuzk").join("kernels"))
    }

    /// The folder misses are written to.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The module's CUBIN for `arch`: from a staged folder or the cache when a valid
    /// file is there, else compiled by NVRTC (logged) and written to the cache.
    pub fn load_or_compile(&self, module: &ModuleSource, arch: &str) -> Result<Vec<u8>, CudaError> {
        let key = key(module, arch);
        let name = file_name(module, arch, &key);
        for dir in self.staged.iter().chain(self.dir.as_ref()) {
            let path = dir.join(&name);
            match read(&path, &key) {
                Ok(Some(cubin)) => return Ok(cubin),
                Ok(None) => {}
                Err(why) => tracing::warn!("ignoring the cached kernels {}: {why}", path.display()),
            }
        }
        let t = std::time::Instant::now();
        tracing::info!(
            "compiling the {} kernels for {arch} with NVRTC (about 10 s; cached in {})",
            module.name,
            self.dir
                .as_ref()
                .map_or_else(|| "no folder".to_owned(), |d| d.display().to_string())
        );
        let compiled = kernels::compile(module, arch)?;
        tracing::info!(
            "compiled the {} kernels in {:.1?}",
            module.name,
            t.elapsed()
        );
        if let Some(dir) = &self.dir {
            // A cache that cannot be written costs the next process a compile only.
            if let Err(e) = write(dir, &name, &key, &compiled.cubin) {
                tracing::warn!("could not write the kernel cache in {}: {e}", dir.display());
            }
        }
        Ok(compiled.cubin)
    }

    /// Compiles `module` for `arch` and writes it into `dir` (staging kernels for a
    /// machine without NVRTC time to spare); returns the file written.
    pub fn compile_into(
        dir: &Path,
        module: &ModuleSource,
        arch: &str,
    ) -> Result<PathBuf, CudaError> {
        let key = key(module, arch);
        let name = file_name(module, arch, &key);
        let compiled = kernels::compile(module, arch)?;
        write(dir, &name, &key, &compiled.cubin)
            .map_err(|e| CudaError::Cache(format!("writing {}: {e}", dir.join(&name).display())))?;
        Ok(dir.join(name))
    }
}

/// SHA-256 of what a CUBIN is compiled from: the module's source (with the field
/// product switch), the architecture and the NVRTC options.
fn key(module: &ModuleSource, arch: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        module.source().as_bytes(),
        b"\0",
        arch.as_bytes(),
        b"\0",
        kernels::OPTIONS_TAG.as_bytes(),
    ] {
        h.update(part);
    }
    h.finalize().into()
}

fn file_name(module: &ModuleSource, arch: &str, key: &[u8; 32]) -> String {
    let short: String = key[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{arch}-{short}.cubin", module.name)
}

/// The CUBIN in `path` if the file is there and valid for `key`; `Ok(None)` if
/// there is no such file; an error saying what is wrong with one that is there.
fn read(path: &Path, key: &[u8; 32]) -> Result<Option<Vec<u8>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    parse(&bytes, key).map(Some)
}

fn parse(bytes: &[u8], key: &[u8; 32]) -> Result<Vec<u8>, String> {
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a cuzk kernel cache file".into());
    }
    let (head, cubin) = bytes.split_at(HEADER);
    let at = MAGIC.len();
    if &head[at..at + 32] != key {
        return Err("compiled from another source or with other options".into());
    }
    let len = u64::from_le_bytes(head[at + 32..at + 40].try_into().expect("8 bytes"));
    if len != cubin.len() as u64 || cubin.is_empty() {
        return Err(format!(
            "{} bytes of CUBIN where the header says {len}",
            cubin.len()
        ));
    }
    let sum: [u8; 32] = Sha256::digest(cubin).into();
    if head[at + 40..at + 72] != sum {
        return Err("the CUBIN does not match its checksum".into());
    }
    Ok(cubin.to_vec())
}

fn encode(key: &[u8; 32], cubin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + cubin.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(key);
    out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(cubin));
    out.extend_from_slice(cubin);
    out
}

/// Writes `dir/name` atomically: a temporary file in `dir`, synced, then renamed.
fn write(dir: &Path, name: &str, key: &[u8; 32], cubin: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{name}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&encode(key, cubin))?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_file_round_trips_and_every_damage_is_refused() {
        let module = kernels::NTT_MODULE;
        let k = key(&module, "sm_90");
        let cubin: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 1) as u8).collect();
        let file = encode(&k, &cubin);
        assert_eq!(parse(&file, &k).unwrap(), cubin);
        // Another architecture's key, a flipped CUBIN byte, a truncation, a foreign
        // file: each refused with its reason.
        assert!(parse(&file, &key(&module, "sm_75"))
            .unwrap_err()
            .contains("another source"));
        let mut bad = file.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(parse(&bad, &k).unwrap_err().contains("checksum"));
        assert!(parse(&file[..file.len() - 1], &k)
            .unwrap_err()
            .contains("header says"));
        assert!(parse(b"\x7fELF....", &k)
            .unwrap_err()
            .contains("not a cuzk"));
        // The key depends on the module and the architecture.
        assert_ne!(key(&kernels::MSM_MODULE, "sm_90"), k);
    }

    #[test]
    fn writes_are_whole_files_under_their_final_name() {
        let dir =
            std::env::temp_dir().join(format!("cuzk-kernel-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let module = kernels::MSM_MODULE;
        let k = key(&module, "sm_90");
        let name = file_name(&module, "sm_90", &k);
        write(&dir, &name, &k, b"cubin bytes").unwrap();
        assert_eq!(read(&dir.join(&name), &k).unwrap().unwrap(), b"cubin bytes");
        // Nothing else is left in the folder (the temporary file was renamed).
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from(&name)]);
        assert_eq!(read(&dir.join("missing.cubin"), &k), Ok(None));
        // A staged folder is looked in before the cache folder.
        let cache = KernelCache::new(Some(&dir.join("cache"))).with_staged(dir.clone());
        assert_eq!(cache.staged[0], dir);
        assert_eq!(cache.dir(), Some(dir.join("cache").as_path()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
