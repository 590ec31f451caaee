//! Reaching the queue's PostgreSQL: the URL, and TLS as its `sslmode` says.
//!
//! `sslmode=disable` talks plain TCP. `prefer` (PostgreSQL's default) uses TLS when
//! the server offers it and plain TCP when it does not; `require` refuses a server
//! without TLS. Whenever TLS is used the server's certificate is verified (unlike
//! libpq's `require`, which only encrypts): against Mozilla's roots (webpki-roots)
//! and the certificates of [`Database::ca_file`], so a farm's own CA is one PEM file
//! (`[queue] ca_file`, `--ca-file`), and a certificate that does not verify is an
//! error, never a silent downgrade.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use postgres::{config::SslMode, Client, Config, NoTls};
use rustls::pki_types::{pem::PemObject, CertificateDer};

use crate::QueueError;

/// Where the queue is: a PostgreSQL URL (`postgres://user@host:port/db?sslmode=require`,
/// or any libpq-style string) and the CA file its server's certificate is verified
/// against, if not a public one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Database {
    pub url: String,
    /// PEM certificates trusted beside Mozilla's roots.
    pub ca_file: Option<PathBuf>,
}

impl Database {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ca_file: None,
        }
    }

    pub fn with_ca_file(mut self, path: Option<PathBuf>) -> Self {
        self.ca_file = path;
        self
    }

    /// The URL parsed, with cuzk's defaults (a 10 s connect timeout, the
    /// application name `cuzk`) where it sets none.
    pub(crate) fn config(&self) -> Result<Config, QueueError> {
        let mut config: Config = self.url.parse().map_err(QueueError::Url)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("cuzk");
        }
        Ok(config)
    }

    /// Opens one connection.
    pub(crate) fn open(&self) -> Result<Client, QueueError> {
        let config = self.config()?;
        match config.get_ssl_mode() {
            SslMode::Disable => config.connect(NoTls).map_err(QueueError::Connect),
            mode => {
                let tls = tls(self.ca_file.as_deref())?;
                config.connect(tls).map_err(|e| {
                    // tokio-postgres keeps the reason in the error's source.
                    let no_tls = std::error::Error::source(&e)
                        .is_some_and(|s| s.to_string().contains("does not support TLS"));
                    if mode == SslMode::Require && no_tls {
                        QueueError::TlsRefused(e)
                    } else {
                        QueueError::Connect(e)
                    }
                })
            }
        }
    }
}

impl From<&str> for Database {
    fn from(url: &str) -> Self {
        Database::new(url)
    }
}

impl From<&String> for Database {
    fn from(url: &String) -> Self {
        Database::new(url.as_str())
    }
}

impl From<String> for Database {
    fn from(url: String) -> Self {
        Database::new(url)
    }
}

impl From<&Database> for Database {
    fn from(db: &Database) -> Self {
        db.clone()
    }
}

/// rustls with ring, Mozilla's roots and the CA file's certificates.
fn tls(ca_file: Option<&Path>) -> Result<tokio_postgres_rustls::MakeRustlsConnect, QueueError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let bad = |why: String| QueueError::CaFile {
            path: path.to_path_buf(),
            why,
        };
        let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let mut n = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| bad(format!("not PEM certificates: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("a certificate rustls refuses: {e}")))?;
            n += 1;
        }
        if n == 0 {
            return Err(bad("no PEM certificate in it".into()));
        }
    }
    // ring, named here rather than taken from a process-wide default, so the
    // queue's TLS never depends on what another crate installed. (rustls marks
    // it deprecated for lacking post-quantum key exchange, which only its
    // aws-lc-rs provider has; that one needs cmake and a longer C build.)
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| QueueError::TlsSetup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
