//! The dashboard (issue 46): one HTML page, one script and one style
//! sheet, embedded in the binary, served by the admin listener at `/`.
//! No asset comes from the internet and nothing is built.
//!
//! The page itself holds no data: everything it shows it fetches from the
//! admin API (`/api/v1/shares`, `/sessions`, `/clients`, `/advice`) every
//! second, with the same bearer token the API asks for. So the three files
//! are served without the token (a browser cannot attach one to a
//! navigation); with `admin_token_file` set, open
//! `http://HOST:PORT/#token=TOKEN` (the fragment never leaves the browser:
//! the script moves it into the tab's sessionStorage and drops it from the
//! address bar) or paste the token when the page asks.

use axum::http::header;
use axum::response::IntoResponse;

const PAGE: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");

/// Scripts and styles only from this listener; no inline code, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

pub async fn get_page() -> impl IntoResponse {
    asset("text/html; charset=utf-8", PAGE)
}

pub async fn get_script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn get_style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small_and_offline() {
        let total = PAGE.len() + SCRIPT.len() + STYLE.len();
        assert!(total < 64 * 1024, "{total} bytes");
        for text in [PAGE, SCRIPT, STYLE] {
            // The SVG namespace is a name, not a URL that is fetched.
            let text = text.replace("\"http://www.w3.org/2000/svg\"", "");
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "an external URL"
            );
            assert!(!text.contains("//cdn") && !text.contains("@import"));
        }
        assert!(PAGE.contains("src=\"dashboard.js\"") && PAGE.contains("href=\"dashboard.css\""));
        assert!(!PAGE.contains("<script>"), "no inline script (CSP)");
    }

    #[test]
    fn the_script_uses_the_servers_latency_buckets() {
        let bounds: Vec<String> = crate::op_metrics::LATENCY_BOUNDS_US
            .iter()
            .map(|b| b.to_string())
            .collect();
        // The page reads them from /api/v1/shares; the fallback must agree.
        assert!(SCRIPT.contains(&format!("[{}]", bounds.join(", "))));
    }
}
