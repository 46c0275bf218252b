//! The admin console: a web page on the admin listener for operators (`GET /admin/console`).
//! Plain HTML, CSS and a few vanilla JavaScript modules from `assets/console/`, compiled into
//! the binary (`include_str!`): no CDN, no build step, nothing fetched from elsewhere.
//!
//! **The shell is outside the admin gate; the data is behind it.** A browser cannot send a
//! bearer token when it navigates, so the page, its assets and `boot.json` are served without
//! one: the same bytes for everyone, holding no data (`boot.json` says only whether a token is
//! needed, and which scope). Everything the page shows comes from the admin API with the
//! operator's token (`Authorization: Bearer`, kept in the tab's `sessionStorage` only), so it is
//! refused exactly like any other API request. With `auth.mode = "off"` the page just works (the
//! admin listener is then on loopback). What the shell does reveal, the API's routes, is
//! published anyway in `deploy/admin/openapi.yaml`.
//!
//! Every answer carries a strict `Content-Security-Policy` (scripts and styles only from this
//! origin, no inline script, no framing), `X-Content-Type-Options: nosniff`, and an `ETag` with
//! `Cache-Control: no-cache`: browsers revalidate, and an upgraded server is seen at once.

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::problem::Problem;
use super::state::AdminState;
use crate::auth::settings::AuthMode;

/// Same-origin scripts, styles and requests; `data:` images (tool results may carry them);
/// nothing else, and never in a frame.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One file of the console.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
    etag: LazyLock<HeaderValue>,
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../../assets/console/", $name)),
            etag: LazyLock::new(|| etag(include_str!(concat!("../../assets/console/", $name)))),
        }
    };
}

static PAGE: Asset = asset!("index.html", "text/html; charset=utf-8");
static ASSETS: [Asset; 17] = [
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("api.js", "text/javascript; charset=utf-8"),
    asset!("dom.js", "text/javascript; charset=utf-8"),
    asset!("form.js", "text/javascript; charset=utf-8"),
    asset!("views.js", "text/javascript; charset=utf-8"),
    asset!("grants.js", "text/javascript; charset=utf-8"),
    asset!("connections.js", "text/javascript; charset=utf-8"),
    asset!("approvals.js", "text/javascript; charset=utf-8"),
    asset!("servers.js", "text/javascript; charset=utf-8"),
    asset!("time.js", "text/javascript; charset=utf-8"),
    asset!("charts.js", "text/javascript; charset=utf-8"),
    asset!("tool.js", "text/javascript; charset=utf-8"),
    asset!("upstream.js", "text/javascript; charset=utf-8"),
    asset!("tasks.js", "text/javascript; charset=utf-8"),
    asset!("try.js", "text/javascript; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
];

/// A strong tag from the content: the first 16 hex digits of its SHA-256.
fn etag(body: &str) -> HeaderValue {
    let digest = Sha256::digest(body.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    HeaderValue::from_str(&format!("\"{hex}\"")).unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
}

/// `GET /admin/console`.
pub async fn page(headers: HeaderMap) -> Response {
    serve(&PAGE, &headers)
}

/// `GET /admin/console/{asset}`.
pub async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset, &headers),
        None => secured(Problem::not_found(format!("the console has no file {name:?}")).into_response()),
    }
}

/// `GET /admin/console/boot.json`: what the page must know before its first API request.
pub async fn boot(State(app): State<AdminState>) -> Response {
    let mode = match (&app.auth, app.settings.auth.mode) {
        (None, _) => "off",
        (Some(_), AuthMode::Dev) => "dev",
        (Some(_), _) => "token",
    };
    let body = json!({"auth": mode, "admin_scope": app.settings.admin.scope});
    let mut res = axum::Json(body).into_response();
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    secured(res)
}

fn serve(asset: &Asset, headers: &HeaderMap) -> Response {
    let tag = &*asset.etag;
    let fresh = headers.get_all(header::IF_NONE_MATCH).iter().any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim() == tag)));
    let mut res = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type))], asset.body).into_response()
    };
    let h = res.headers_mut();
    h.insert(header::ETAG, tag.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secured(res)
}

/// The headers every console answer carries.
fn secured(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin"));
    h.insert(HeaderName::from_static("cross-origin-resource-policy"), HeaderValue::from_static("same-origin"));
    res
}
