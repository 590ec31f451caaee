//! Who may call: the shared token (checked on every call's headers, before its
//! message is read) and a Unix socket's group. The threat model is in
//! ARCHITECTURE.md.

use std::{path::Path, sync::Arc};

use subtle::ConstantTimeEq;
use tonic::{
    metadata::{Ascii, MetadataValue},
    service::Interceptor,
    Request, Status,
};

use crate::config::Access;

/// The shortest token accepted: 128 bits as hex.
pub const MIN_TOKEN_BYTES: usize = 32;

/// Reads a token file: one line (surrounding white space dropped) of at least
/// [`MIN_TOKEN_BYTES`] visible ASCII characters, in a file other users cannot
/// read (a token anyone on the host can read protects nothing).
pub fn read_token(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(path).map_err(|e| format!("token_file {}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o004 != 0 {
        return Err(format!(
            "token_file {} is readable by every user of the host (mode {:o}): chmod o-rwx it",
            path.display(),
            meta.permissions().mode() & 0o777
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("token_file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_BYTES || !token.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(format!(
            "token_file {}: the token must be one line of at least {MIN_TOKEN_BYTES} visible ASCII characters (e.g. `openssl rand -hex 32`)",
            path.display()
        ));
    }
    Ok(token.to_owned())
}

/// The server's check: with a token configured, a call without
/// `authorization: Bearer <token>` is UNAUTHENTICATED; without one, every call
/// passes (a loopback address or a Unix socket of restricted mode).
#[derive(Clone)]
pub struct RequireToken {
    expected: Option<Arc<[u8]>>,
}

impl RequireToken {
    /// From `access` (reads the token file).
    pub fn from_access(access: &Access) -> Result<Self, String> {
        let expected = match &access.token_file {
            Some(path) => Some(Arc::from(
                format!("Bearer {}", read_token(path)?).as_bytes(),
            )),
            None => None,
        };
        Ok(Self { expected })
    }
}

impl Interceptor for RequireToken {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.expected else {
            return Ok(request);
        };
        let given = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        // Constant time in the token's bytes: a wrong guess learns nothing of
        // how much of it was right.
        if bool::from(given.ct_eq(expected)) {
            Ok(request)
        } else {
            Err(Status::unauthenticated(
                "this daemon requires `authorization: Bearer <token>` metadata with its token",
            ))
        }
    }
}

/// The client's side: adds `authorization: Bearer <token>` to every call when
/// it has a token.
#[derive(Clone, Default)]
pub struct BearerToken {
    header: Option<MetadataValue<Ascii>>,
}

impl BearerToken {
    /// A client that sends `token` (`None`: nothing).
    pub fn new(token: Option<&str>) -> Result<Self, String> {
        let header = match token {
            Some(t) => Some(
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| "the token must be visible ASCII".to_owned())?,
            ),
            None => None,
        };
        Ok(Self { header })
    }
}

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(h) = &self.header {
            request.metadata_mut().insert("authorization", h.clone());
        }
        Ok(request)
    }
}

/// A group's id from its name or number.
pub fn group_id(group: &str) -> Result<u32, String> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!("socket_group `{group}`: no such group")),
        Err(e) => Err(format!("socket_group `{group}`: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn token_file(text: &str, mode: u32) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    #[test]
    fn tokens_weak_or_readable_by_all_are_refused() {
        let good = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            read_token(token_file(&format!("{good}\n"), 0o600).path()).unwrap(),
            good
        );
        let e = read_token(token_file(good, 0o644).path()).unwrap_err();
        assert!(e.contains("readable by every user"), "{e}");
        let e = read_token(token_file("short", 0o600).path()).unwrap_err();
        assert!(e.contains("at least"), "{e}");
        let e = read_token(token_file(&format!("{good} {good}"), 0o600).path()).unwrap_err();
        assert!(e.contains("visible ASCII"), "{e}");
        assert!(read_token(Path::new("/nonexistent/token")).is_err());
    }

    #[test]
    fn only_the_exact_bearer_header_passes() {
        let f = token_file("0123456789abcdef0123456789abcdef", 0o600);
        let access = Access {
            token_file: Some(f.path().to_owned()),
            ..Access::default()
        };
        let mut check = RequireToken::from_access(&access).unwrap();
        let with = |h: Option<&str>| {
            let mut r = Request::new(());
            if let Some(h) = h {
                r.metadata_mut().insert("authorization", h.parse().unwrap());
            }
            r
        };
        assert!(check
            .call(with(Some("Bearer 0123456789abcdef0123456789abcdef")))
            .is_ok());
        for bad in [
            None,
            Some("Bearer 0123456789abcdef0123456789abcdee"),
            Some("Bearer 0123456789abcdef0123456789abcdef0"),
            Some("bearer 0123456789abcdef0123456789abcdef"),
            Some("0123456789abcdef0123456789abcdef"),
            Some(""),
        ] {
            let e = check.call(with(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        // No token configured: every call passes.
        let mut open = RequireToken::from_access(&Access::default()).unwrap();
        assert!(open.call(with(None)).is_ok());
        // The client adds what the server wants.
        let mut client = BearerToken::new(Some("0123456789abcdef0123456789abcdef")).unwrap();
        assert!(check.call(client.call(with(None)).unwrap()).is_ok());
    }

    #[test]
    fn groups_by_number_or_name() {
        assert_eq!(group_id("0").unwrap(), 0);
        assert_eq!(group_id("root").unwrap(), 0);
        assert!(group_id("no-such-group-cuzk")
            .unwrap_err()
            .contains("no such group"));
    }
}
