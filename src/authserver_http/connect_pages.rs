//! The vault's pages (connect confirmation, done, connections): the sign-in pages' style and
//! headers, every value escaped, no script.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::pages::{esc, page};
use crate::vault::connect::ConfirmView;
use crate::vault::connections_page::ManageView;

/// "Connect your account at {upstream}?": who, which scopes, where the browser goes next.
pub fn confirm(view: &ConfirmView) -> Response {
    let scopes: String = view.scopes.iter().map(|s| format!("<li><code>{}</code></li>", esc(s))).collect();
    let scopes = if scopes.is_empty() { String::new() } else { format!("<p>It asks for:</p><ul>{scopes}</ul>") };
    let body = format!(
        "<h1>Connect your account at {upstream}?</h1>\
         <div class=\"box\"><p>Signed in as <strong>{user}</strong>.</p>\
         <p>Tools of <strong>{upstream}</strong> will act with <em>your own</em> account there. toolgate keeps the access it is given \
         encrypted, never shows it to any application, and you can disconnect at any time on <a href=\"/oauth/connections\">your connections page</a>.</p>\
         {scopes}<p>If you continue, you will be sent to <code>{origin}</code> to sign in there and approve.</p></div>\
         <form method=\"post\" action=\"/oauth/vault/confirm\">\
         <input type=\"hidden\" name=\"id\" value=\"{id}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button id=\"approve\" type=\"submit\" name=\"decision\" value=\"approve\">Connect</button>\
         <button id=\"deny\" type=\"submit\" name=\"decision\" value=\"deny\">Cancel</button></form>",
        upstream = esc(&view.upstream),
        user = esc(&view.user),
        origin = esc(&view.authorization_origin),
        id = esc(&view.id),
        csrf = esc(&view.csrf),
    );
    let mut res = page(StatusCode::OK, "Connect your account", &body);
    // Browsers apply form-action to the redirect after the POST: the upstream's server only.
    let csp = format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self' {}; frame-ancestors 'none'; base-uri 'none'",
        view.authorization_origin
    );
    if let Ok(value) = HeaderValue::from_str(&csp) {
        res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, value);
    }
    res
}

/// The end of a connect: nothing to click, back to the application (UEL-09: never a redirect
/// to a URL a client chose).
pub fn connected(upstream: &str) -> Response {
    let body = format!(
        "<h1>Account connected</h1><div class=\"box\"><p id=\"connected\">Your account at <strong>{}</strong> is connected.</p>\
         <p>You can close this page and return to your application; your call goes on there.</p></div>",
        esc(upstream)
    );
    page(StatusCode::OK, "Account connected", &body)
}

/// A step that ends here without an error (the user cancelled).
pub fn notice(message: &str) -> Response {
    let body = format!("<h1>Nothing was connected</h1><div class=\"box\"><p>{}</p></div>", esc(message));
    page(StatusCode::OK, "Nothing was connected", &body)
}

/// The user's connections: each with a Disconnect button; each per-user upstream not
/// connected with a Connect button.
pub fn connections(view: &ManageView) -> Response {
    let form = |action: &str, target: &str, label: &str, id: &str| {
        format!(
            "<form method=\"post\" action=\"/oauth/connections\" style=\"display:inline\">\
             <input type=\"hidden\" name=\"s\" value=\"{s}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <input type=\"hidden\" name=\"action\" value=\"{action}\"><input type=\"hidden\" name=\"target\" value=\"{target}\">\
             <button id=\"{id}\" type=\"submit\">{label}</button></form>",
            s = esc(&view.id),
            csrf = esc(&view.csrf),
            target = esc(target),
        )
    };
    let rows: String = view
        .connections
        .iter()
        .map(|c| {
            format!(
                "<li><strong>{}</strong> <span class=\"muted\">connected {}, scopes <code>{}</code></span> {}</li>",
                esc(&c.upstream),
                esc(&c.created_at),
                esc(&c.scopes),
                form("disconnect", &c.id, "Disconnect", &format!("disconnect-{}", esc(&c.upstream)))
            )
        })
        .collect();
    let open: String = view
        .unconnected
        .iter()
        .map(|u| format!("<li><strong>{}</strong> {}</li>", esc(u), form("connect", u, "Connect", &format!("connect-{}", esc(u)))))
        .collect();
    let body = format!(
        "<h1>Your connected accounts</h1><p class=\"muted\">Signed in as <strong>{user}</strong>.</p>\
         <div class=\"box\"><ul id=\"connections\">{rows}</ul>{none}</div>{more}",
        user = esc(&view.user),
        none = if rows.is_empty() { "<p>None.</p>" } else { "" },
        more = if open.is_empty() { String::new() } else { format!("<h2>Not connected</h2><div class=\"box\"><ul>{open}</ul></div>") },
    );
    page(StatusCode::OK, "Your connected accounts", &body)
}
