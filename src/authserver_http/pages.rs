//! The authorization server's HTML pages (consent, errors): server-rendered, no script, every
//! value escaped, and headers that forbid framing (CON-01), inline code and caching.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::authserver::clients::ClientKind;
use crate::authserver::flow::ConsentView;

/// Escapes text for HTML element content and double-quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if crate::untrusted::text::needs_escape(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}\
h1{font-size:1.4rem}.box{border:1px solid #ccc;border-radius:8px;padding:1rem 1.2rem;margin:1rem 0}\
.warn{background:#fff4e5;border-color:#f0a020}.muted{color:#666;font-size:.9rem}code{word-break:break-all}\
button{font-size:1rem;padding:.55rem 1.2rem;margin-right:.6rem;border-radius:6px;border:1px solid #888;cursor:pointer}\
#approve{background:#1f6feb;color:#fff;border-color:#1f6feb}ul{padding-left:1.2rem}";

/// A whole page with the security headers.
pub(super) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <meta name=\"referrer\" content=\"no-referrer\"><title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>",
        esc(title)
    );
    let mut res = (status, html).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    // CON-01: no framing; no script at all. The consent page adds its form-action.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    res
}

/// An error page: the browser stays here (never a redirect to an unverified URI).
pub fn error(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = format!("<h1>Sign-in cannot continue</h1><div class=\"box\"><p>{}</p></div>", esc(message));
    page(status, "Sign-in error", &body)
}

/// A refused request of a client whose redirect URI the operator did not vouch for: the
/// user sees why, and returns to the application only by following the link (AUZ-11).
pub fn refused(message: &str, back_to_client: &str) -> Response {
    let body = format!(
        "<h1>The application's request was refused</h1><div class=\"box\"><p>{}</p></div>\
         <p><a id=\"back\" href=\"{}\">Return to the application</a></p>",
        esc(message),
        esc(back_to_client)
    );
    page(StatusCode::BAD_REQUEST, "Request refused", &body)
}

/// The consent page (CON-04, CLR-15): which client, its host, where it will redirect, the
/// scopes and the server; warnings for self-asserted names and loopback-only redirects.
pub fn consent(view: &ConsentView) -> Response {
    let scopes: String = view.scopes.iter().map(|s| format!("<li><code>{}</code></li>", esc(s))).collect();
    let origin = match (view.client_kind, &view.client_host) {
        (ClientKind::MetadataDocument, Some(host)) => format!(" <span class=\"muted\">(described at <code>{}</code>)</span>", esc(host)),
        (ClientKind::Registered, _) => " <span class=\"muted\">(name given by the application itself, unverified)</span>".to_owned(),
        _ => String::new(),
    };
    let loopback = if view.loopback_only {
        "<div class=\"box warn\">This application receives its answer on this computer (a local address). Approve only if you just started it yourself.</div>"
    } else {
        ""
    };
    let body = format!(
        "<h1>Allow access?</h1>\
         <div class=\"box\"><p><strong>{name}</strong>{origin}</p>\
         <p class=\"muted\">Client id: <code>{client_id}</code></p>\
         <p>wants to act as <strong>{user}</strong> on <code>{resource}</code> with:</p><ul>{scopes}</ul>\
         <p>If you allow it, you will be sent to <strong>{redirect_host}</strong> (<code>{redirect_uri}</code>).</p></div>{loopback}\
         <form method=\"post\" action=\"/oauth/consent\">\
         <input type=\"hidden\" name=\"tx\" value=\"{tx}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button id=\"approve\" type=\"submit\" name=\"decision\" value=\"approve\">Allow</button>\
         <button id=\"deny\" type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>",
        name = esc(&view.client_name),
        client_id = esc(&view.client_id),
        user = esc(&view.user),
        resource = esc(&view.resource),
        redirect_host = esc(&view.redirect_host),
        redirect_uri = esc(&view.redirect_uri),
        tx = esc(&view.tx),
        csrf = esc(&view.csrf),
    );
    let mut res = page(StatusCode::OK, "Allow access?", &body);
    // The form posts here only, and browsers also apply form-action to the redirect that
    // follows the POST: so the client's redirect target (its origin, or its private scheme)
    // is the one other destination allowed.
    let target = url::Url::parse(&view.redirect_uri).ok().map(|u| match u.scheme() {
        "http" | "https" => u.origin().ascii_serialization(),
        scheme => format!("{scheme}:"),
    });
    let csp = format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self' {}; frame-ancestors 'none'; base-uri 'none'",
        target.unwrap_or_default()
    );
    if let Ok(value) = HeaderValue::from_str(&csp) {
        res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, value);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_a_client_name_is_shown_as_text() {
        assert_eq!(esc("<script>\"x\"&'"), "&lt;script&gt;&quot;x&quot;&amp;&#39;");
    }

    #[test]
    fn control_and_bidirectional_characters_are_replaced() {
        assert_eq!(esc("a\u{202e}b\u{7}"), "a\u{fffd}b\u{fffd}");
    }
}
