//! The admin API's bearer token (`admin_token_file`, docs/ADMIN.md).
//!
//! The session list names users and client addresses, so an admin API
//! reachable by anyone but the operator needs a secret. With a token
//! configured every request must carry `Authorization: Bearer <token>`
//! (RFC 6750 2.1), as Prometheus sends it from `authorization:
//! credentials_file`; anything else is 401 (RFC 6750 3).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

/// Shortest token accepted: 128 bits as hex.
const MIN_TOKEN_LEN: usize = 32;

/// The secret, never printed (its Debug is redacted).
#[derive(Clone)]
pub struct AdminToken(String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

/// A reload compares the token it read with the one in force.
impl PartialEq for AdminToken {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

impl AdminToken {
    /// Read the token from `path`: one line, at least 32 characters, in a
    /// file no other user may read (as ssh requires of a private key).
    /// Errors are one line naming `admin_token_file` and the fix.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("admin_token_file {shown}: {e}"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(format!(
                    "admin_token_file {shown}: other users may read it (mode {mode:03o}); chmod 600 {shown}"
                ));
            }
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("admin_token_file {shown}: {e}"))?;
        Self::new(text.trim()).map_err(|why| {
            format!(
                "admin_token_file {shown}: {why}; make one with `openssl rand -hex 32 > {shown}`"
            )
        })
    }

    /// A token given as text, held to the same rules as the file's.
    pub fn new(token: &str) -> Result<Self, String> {
        if token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token is shorter than {MIN_TOKEN_LEN} characters"
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token must be one line of printable characters".into());
        }
        Ok(Self(token.to_string()))
    }

    /// Whether `authorization` is `Bearer <this token>` (the scheme is
    /// case-insensitive, RFC 6750 2.1 / RFC 9110 11.1). The token is
    /// compared in constant time.
    pub fn admits(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(value) = authorization.and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let Some((scheme, given)) = value.split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer")
            && bool::from(given.trim().as_bytes().ct_eq(self.0.as_bytes()))
    }
}

/// Middleware: 401 with `WWW-Authenticate: Bearer` unless the request
/// carries the token.
pub async fn require_token(
    State(token): State<Arc<AdminToken>>,
    request: Request,
    next: Next,
) -> Response {
    if token.admits(request.headers().get(header::AUTHORIZATION)) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"braid\"")],
        "admin API: send Authorization: Bearer <the token in admin_token_file>\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn only_the_bearer_token_is_admitted() {
        let t = AdminToken::new(TOKEN).unwrap();
        let h = |s: &str| HeaderValue::from_str(s).unwrap();
        assert!(t.admits(Some(&h(&format!("Bearer {TOKEN}")))));
        assert!(t.admits(Some(&h(&format!("bearer {TOKEN}")))));
        assert!(!t.admits(None));
        assert!(!t.admits(Some(&h(TOKEN))));
        assert!(!t.admits(Some(&h(&format!("Basic {TOKEN}")))));
        assert!(!t.admits(Some(&h(&format!("Bearer {TOKEN}0")))));
        assert!(!t.admits(Some(&h(&format!("Bearer {}", &TOKEN[1..])))));
        assert!(!t.admits(Some(&h("Bearer "))));
    }

    #[test]
    fn short_or_multi_line_tokens_are_refused() {
        assert!(AdminToken::new("short").unwrap_err().contains("shorter"));
        assert!(AdminToken::new(&format!("{TOKEN} {TOKEN}")).is_err());
        assert_eq!(
            format!("{:?}", AdminToken::new(TOKEN).unwrap()),
            "AdminToken(..)"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("braid-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = AdminToken::from_file(&path).unwrap_err();
        assert!(
            e.starts_with("admin_token_file ") && e.contains("chmod 600"),
            "{e}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(AdminToken::from_file(&path).unwrap().admits(Some(
            &HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap()
        )));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
