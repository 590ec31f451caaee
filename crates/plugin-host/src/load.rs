//! Finding a plugin file and opening it, checking at each step that it is what it
//! claims to be, from the cheapest check to the most thorough.

use std::collections::BTreeMap;
use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::path::{Path, PathBuf};

use cuzk_gpu_backend::Capabilities;
use cuzk_plugin_api::abi_stable::library::{lib_header_from_raw_library, LibraryError, RawLibrary};
use cuzk_plugin_api::{
    Param, PluginHeader, PluginKind, PluginMod_Ref, ABI_VERSION, HEADER_SYMBOL, PLUGIN_MAGIC,
};

use crate::PluginError;

/// Where plugins are looked up by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchPath {
    dirs: Vec<PathBuf>,
}

impl SearchPath {
    /// `<exe dir>/plugins/`, then `<exe dir>/`: plugins ship next to the binary, and a
    /// `cargo build` leaves both the binary and the plugins in `target/<profile>/`.
    pub fn next_to_exe() -> Self {
        let dirs = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .map(|d| vec![d.join("plugins"), d])
            .unwrap_or_default();
        Self { dirs }
    }

    /// Only `dir` (a configured `plugin_dir`).
    pub fn dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            dirs: vec![dir.into()],
        }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The file a plugin spec names: `plugin` is a path if it contains a path
    /// separator or ends with the library suffix, else a name looked up as
    /// `libcuzk_plugin_<kind>_<name>.so` in each directory in turn.
    pub fn resolve(&self, kind: PluginKind, plugin: &str) -> Result<PathBuf, PluginError> {
        if plugin.contains(std::path::MAIN_SEPARATOR)
            || plugin.contains('/')
            || plugin.ends_with(DLL_SUFFIX)
        {
            let path = PathBuf::from(plugin);
            return if path.exists() {
                Ok(path)
            } else {
                Err(PluginError::Missing { path })
            };
        }
        let file = file_name(kind, plugin);
        for d in &self.dirs {
            let p = d.join(&file);
            if p.is_file() {
                return Ok(p);
            }
        }
        let searched = if self.dirs.is_empty() {
            "no directory (the executable's directory is unknown)".to_string()
        } else {
            self.dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(PluginError::NotFound {
            kind: kind.as_str(),
            name: plugin.to_string(),
            file,
            searched,
        })
    }
}

/// `libcuzk_plugin_<kind>_<name>.so` (with this platform's prefix and suffix).
pub fn file_name(kind: PluginKind, name: &str) -> String {
    format!(
        "{DLL_PREFIX}cuzk_plugin_{}_{name}{DLL_SUFFIX}",
        kind.as_str()
    )
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    pub name: String,
    pub default: String,
    pub help: String,
}

/// What `cuzk plugins list` and `cuzk plugins check` print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginInfo {
    pub kind: PluginKind,
    pub name: String,
    pub description: String,
    pub abi_version: u32,
    pub params: Vec<ParamInfo>,
    /// A backend's capabilities with its default parameters; `None` for other kinds.
    pub capabilities: Option<Capabilities>,
    /// Why a backend that loaded cannot start on this machine (no device, ...).
    pub unavailable: Option<String>,
    pub path: PathBuf,
}

/// An opened, checked plugin library. Never unloaded: the library handle is leaked,
/// so function pointers and `'static` strings from it stay valid.
#[derive(Clone, Copy)]
pub(crate) struct Library {
    pub root: PluginMod_Ref,
}

impl Library {
    pub fn name(&self) -> String {
        self.root.name().as_str().to_string()
    }

    pub fn params(&self) -> Vec<ParamInfo> {
        self.root
            .params()
            .iter()
            .map(|p| ParamInfo {
                name: p.name.to_string(),
                default: p.default.to_string(),
                help: p.help.to_string(),
            })
            .collect()
    }

    /// Checks `params` against the declared ones (so the error can name the key),
    /// and turns them into the ABI's borrowed pairs.
    pub fn check_params<'a>(
        &self,
        params: &'a BTreeMap<String, String>,
    ) -> Result<Vec<Param<'a>>, PluginError> {
        let declared = self.root.params();
        for key in params.keys() {
            if !declared.iter().any(|d| d.name.as_str() == key) {
                let names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
                let known = if names.is_empty() {
                    "it takes no parameters".to_string()
                } else {
                    format!("it takes: {}", names.join(", "))
                };
                return Err(PluginError::UnknownParameter {
                    kind: self.root.kind().as_str(),
                    plugin: self.name(),
                    key: key.clone(),
                    known,
                });
            }
        }
        Ok(params.iter().map(|(k, v)| Param::new(k, v)).collect())
    }
}

/// Opens `path` and checks, in order: that it is a shared library, that it carries a
/// cuzk plugin header, that the header's ABI version is this host's, that abi_stable
/// agrees the types match, and (if `expect` is given) that it is of that kind.
pub(crate) fn open(path: &Path, expect: Option<PluginKind>) -> Result<Library, PluginError> {
    if !path.exists() {
        return Err(PluginError::Missing {
            path: path.to_path_buf(),
        });
    }
    let raw = RawLibrary::load_at(path).map_err(|e| PluginError::Open {
        path: path.to_path_buf(),
        reason: match e {
            LibraryError::OpenError { err, .. } => err.to_string(),
            other => other.to_string(),
        },
    })?;
    // Never unloaded: whatever happens next, nothing from the library is freed while
    // something might still point into it.
    let raw: &'static RawLibrary = Box::leak(Box::new(raw));

    // SAFETY: a cuzk plugin exports `cuzk_plugin_header` as a `PluginHeader` static,
    // whose layout is fixed for all ABI versions. A foreign library exporting a
    // symbol of that name with another type is not defended against beyond the
    // magic check.
    let header: PluginHeader = unsafe {
        match raw.get::<*const PluginHeader>(HEADER_SYMBOL) {
            Ok(sym) => std::ptr::read(*sym),
            Err(_) => {
                return Err(PluginError::NotAPlugin {
                    path: path.to_path_buf(),
                    reason: "it does not export `cuzk_plugin_header`".into(),
                })
            }
        }
    };
    if header.magic != PLUGIN_MAGIC {
        return Err(PluginError::NotAPlugin {
            path: path.to_path_buf(),
            reason: "its `cuzk_plugin_header` does not start with the cuzk magic".into(),
        });
    }
    if header.abi_version != ABI_VERSION {
        return Err(PluginError::AbiVersion {
            path: path.to_path_buf(),
            found: header.abi_version,
            expected: ABI_VERSION,
        });
    }
    if let Some(expect) = expect {
        if header.kind != expect {
            return Err(PluginError::WrongKind {
                path: path.to_path_buf(),
                expected: expect.as_str(),
                found: header.kind.as_str(),
            });
        }
    }
    let layout = |detail: String| PluginError::Layout {
        path: path.to_path_buf(),
        version: header.abi_version,
        detail,
    };
    // SAFETY: `raw` is leaked, so the 'static header it returns stays valid.
    let lib_header = unsafe { lib_header_from_raw_library(raw) }.map_err(|e| match e {
        LibraryError::GetSymbolError { .. } => PluginError::NotAPlugin {
            path: path.to_path_buf(),
            reason: "it has a cuzk header but no abi_stable root module".into(),
        },
        other => layout(first_lines(&other.to_string())),
    })?;
    let root = lib_header
        .init_root_module::<PluginMod_Ref>()
        .map_err(|e| match e {
            LibraryError::RootModule { err, .. } => PluginError::Panicked {
                plugin: path.display().to_string(),
                call: "its root module",
                message: err.to_string(),
            },
            other => layout(first_lines(&other.to_string())),
        })?;
    if root.abi_version() != header.abi_version || root.kind() != header.kind {
        return Err(layout(format!(
            "its header says ABI {} / {}, its root module ABI {} / {}",
            header.abi_version,
            header.kind.as_str(),
            root.abi_version(),
            root.kind().as_str()
        )));
    }
    Ok(Library { root })
}

/// abi_stable's layout reports run to hundreds of lines; the first few say what
/// differs.
fn first_lines(s: &str) -> String {
    const MAX: usize = 12;
    let lines: Vec<&str> = s.lines().collect();
    if lines.len() <= MAX {
        s.to_string()
    } else {
        format!(
            "{}\n… ({} more lines)",
            lines[..MAX].join("\n"),
            lines.len() - MAX
        )
    }
}

/// Loads `path` (any kind) and describes it. A backend is instantiated with its
/// default parameters to read its capabilities; one that loads but cannot start here
/// (a GPU backend on a machine without a GPU) is described with the reason in
/// `unavailable` rather than refused.
pub fn check_plugin(path: &Path) -> Result<PluginInfo, PluginError> {
    let lib = open(path, None)?;
    let root = lib.root;
    let (capabilities, unavailable) = if root.kind() == PluginKind::BACKEND {
        match crate::backend::PluginBackend::instantiate(lib, &BTreeMap::new()) {
            Ok(b) => (Some(cuzk_gpu_backend::GpuBackend::capabilities(&b)), None),
            Err(e @ PluginError::Panicked { .. }) => return Err(e),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, None)
    };
    Ok(PluginInfo {
        kind: root.kind(),
        name: lib.name(),
        description: root.description().to_string(),
        abi_version: root.abi_version(),
        params: lib.params(),
        capabilities,
        unavailable,
        path: path.to_path_buf(),
    })
}

/// The parameters `path` declares, with their defaults, without instantiating it
/// (for run manifests: the values a run used where its configuration gave none).
pub fn declared_params(path: &Path) -> Result<Vec<ParamInfo>, PluginError> {
    Ok(open(path, None)?.params())
}

/// Every `libcuzk_plugin_*` file in `dir`, sorted by file name, each checked: a
/// broken file is listed with its error rather than hidden.
pub fn list_plugins(dir: &Path) -> Vec<Result<PluginInfo, PluginError>> {
    let prefix = format!("{DLL_PREFIX}cuzk_plugin_");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(DLL_SUFFIX))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files.iter().map(|p| check_plugin(p)).collect()
}
