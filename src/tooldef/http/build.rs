//! Compiling an [`HttpSpec`] into an [`HttpTool`]: every field is checked here, every problem
//! is reported with its path (`http.headers.Authorization`), and the tool's client is made.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

use super::HttpTool;
use super::pagination::Pagination;
use super::render::Renderer;
use super::retry::RetryPolicy;
use super::secret::{self, Header, HeaderSpec, SecretSource, SecretSpec};
use super::spec::{HttpSpec, QuerySpec};
use super::ssrf::{AddressPolicy, GuardedResolver, redirect_policy};
use super::template::{BodyTemplate, TextTemplate, UrlTemplate};
use crate::tooldef::{BuildCtx, FieldError};

/// Most retries a definition may ask for.
const MAX_RETRIES: u32 = 10;
/// Headers the client sets itself; a definition may not.
const RESERVED_HEADERS: [&str; 9] =
    ["host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive", "proxy-connection"];
/// Headers reqwest removes itself when a redirect leaves the origin.
const STRIPPED_ON_REDIRECT: [&str; 4] = ["authorization", "proxy-authorization", "cookie", "www-authenticate"];

pub(super) fn compile(spec: &HttpSpec, cx: &BuildCtx<'_>) -> Result<HttpTool, Vec<FieldError>> {
    let mut errors = Vec::new();
    let settings = &cx.settings.http;
    let policy = AddressPolicy::new(&settings.allow_hosts, &settings.resolve);

    let url = url(spec, cx, &policy, &mut errors);
    let (query, query_secrets) = query(spec, cx, &mut errors);
    let headers = headers(spec, cx, &mut errors);
    let body = body(spec, cx, &mut errors);
    let retry = retries(spec, cx, &mut errors);
    if spec.timeout_ms == Some(0) {
        errors.push(FieldError::new("http.timeout_ms", "must be at least 1"));
    }
    if spec.max_response_bytes == Some(0) {
        errors.push(FieldError::new("http.max_response_bytes", "must be at least 1"));
    }
    let render = Renderer::build(&spec.response, cx).map_err(|e| errors.extend(e)).ok();
    let pagination = match &spec.pagination {
        Some(p) => Pagination::build(p, cx).map_err(|e| errors.extend(e)).ok(),
        None => None,
    };

    let (Some(url), Some(render), true) = (url, render, errors.is_empty()) else {
        return Err(errors);
    };
    let same_origin_only = !query_secrets.is_empty()
        || headers.iter().any(|h| matches!(h, Header::Secret { name, .. } if !STRIPPED_ON_REDIRECT.contains(&name.as_str())));
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
        .redirect(redirect_policy(policy.clone(), settings.max_redirects, same_origin_only))
        .connect_timeout(Duration::from_millis(settings.connect_timeout_ms.max(1)))
        .user_agent(settings.user_agent.clone())
        .build()
        .map_err(|e| vec![FieldError::new("http", format!("the HTTP client could not be created: {e}"))])?;
    Ok(HttpTool {
        tool: cx.tool.to_owned(),
        method: spec.method,
        url,
        query,
        query_secrets,
        headers,
        body,
        retry,
        attempt_timeout: Duration::from_millis(spec.timeout_ms.unwrap_or(settings.request_timeout_ms).max(1)),
        max_response_bytes: spec.max_response_bytes.unwrap_or(settings.max_response_bytes),
        policy,
        client,
        render,
        pagination,
    })
}

/// Refuses template fields the input schema does not declare.
fn check_fields<'a>(field: &str, used: impl IntoIterator<Item = &'a str>, cx: &BuildCtx<'_>, errors: &mut Vec<FieldError>) {
    for name in used {
        if !cx.has_property(name) {
            errors.push(FieldError::new(field, format!("uses `{{{name}}}`, which the input schema does not declare as a property")));
        }
    }
}

fn url(spec: &HttpSpec, cx: &BuildCtx<'_>, policy: &AddressPolicy, errors: &mut Vec<FieldError>) -> Option<UrlTemplate> {
    let full = match &spec.base_url {
        None => spec.url.clone(),
        Some(base) => {
            let base = base.resolve().map_err(|e| errors.push(FieldError::new("http.base_url", e))).ok()?;
            if !spec.url.starts_with('/') {
                errors.push(FieldError::new("http.url", "with `base_url`, `url` is the path after it and starts with '/'"));
                return None;
            }
            format!("{}{}", base.trim_end_matches('/'), spec.url)
        }
    };
    let template = UrlTemplate::parse(&full).map_err(|e| errors.push(FieldError::new("http.url", e))).ok()?;
    let vars = template.variables();
    check_fields("http.url", vars.iter().map(String::as_str), cx, errors);
    if let Err(refusal) = policy.check_url(template.base()) {
        errors.push(FieldError::new("http.url", format!("{refusal}; add the host to tools.http.allow_hosts to allow it")));
    }
    Some(template)
}

type QueryParts = (Vec<(String, TextTemplate)>, Vec<(String, SecretSource, String)>);

fn query(spec: &HttpSpec, cx: &BuildCtx<'_>, errors: &mut Vec<FieldError>) -> QueryParts {
    let mut out = Vec::new();
    let mut secrets = Vec::new();
    for (name, value) in &spec.query {
        let field = format!("http.query.{name}");
        if name.is_empty() {
            errors.push(FieldError::new(field, "a query parameter needs a name"));
            continue;
        }
        let value = match value {
            QuerySpec::Template(value) => value,
            QuerySpec::Secret(s) => {
                match secret_source(s, cx) {
                    Ok(source) => secrets.push((name.clone(), source, s.prefix.clone())),
                    Err(e) => errors.push(FieldError::new(field, e)),
                }
                continue;
            }
        };
        match TextTemplate::parse(value) {
            Ok(t) => {
                check_fields(&field, t.fields(), cx, errors);
                out.push((name.clone(), t));
            }
            Err(e) => errors.push(FieldError::new(field, e)),
        }
    }
    (out, secrets)
}

fn headers(spec: &HttpSpec, cx: &BuildCtx<'_>, errors: &mut Vec<FieldError>) -> Vec<Header> {
    let mut out = Vec::new();
    for (name, value) in &spec.headers {
        let field = format!("http.headers.{name}");
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            errors.push(FieldError::new(field, "not a valid header name"));
            continue;
        };
        if RESERVED_HEADERS.contains(&header.as_str()) {
            errors.push(FieldError::new(field, "this header is set by the HTTP client; remove it"));
            continue;
        }
        match value {
            HeaderSpec::Literal(_) if secret::is_sensitive_name(name) => errors.push(FieldError::new(
                field,
                format!(
                    "a literal value is refused for `{name}`: credentials never go inline in a definition; \
                     use {{ env = \"VAR\" }} or {{ file = \"/path/to/secret\" }}, with an optional prefix (e.g. prefix = \"Bearer \")"
                ),
            )),
            HeaderSpec::Literal(v) if v.contains(['{', '}']) => match TextTemplate::parse(v) {
                Ok(t) if t.fields().next().is_some() => {
                    check_fields(&field, t.fields(), cx, errors);
                    out.push(Header::Template(header, t));
                }
                // Only escaped braces: a literal after all.
                Ok(t) => match HeaderValue::from_str(&t.render(&serde_json::Map::new()).unwrap_or_default()) {
                    Ok(v) => out.push(Header::Literal(header, v)),
                    Err(_) => errors.push(FieldError::new(field, "not a valid header value (visible ASCII and spaces only)")),
                },
                Err(e) => errors.push(FieldError::new(field, e)),
            },
            HeaderSpec::Literal(v) => match HeaderValue::from_str(v) {
                Ok(v) => out.push(Header::Literal(header, v)),
                Err(_) => errors.push(FieldError::new(field, "not a valid header value (visible ASCII and spaces only)")),
            },
            HeaderSpec::Secret(s) => match secret_source(s, cx) {
                Ok(source) => {
                    if !source.available_now() {
                        tracing::warn!(
                            tool = cx.tool,
                            header = name,
                            credential = source.describe(),
                            "http tool: a credential is not available now; calls will fail until it is"
                        );
                    }
                    out.push(Header::Secret { name: header, source, prefix: s.prefix.clone() });
                }
                Err(e) => errors.push(FieldError::new(field, e)),
            },
        }
        if let HeaderSpec::Secret(s) = value
            && HeaderValue::from_str(&s.prefix).is_err()
        {
            errors.push(FieldError::new(format!("http.headers.{name}.prefix"), "not a valid header value (visible ASCII and spaces only)"));
        }
    }
    out
}

fn secret_source(spec: &SecretSpec, cx: &BuildCtx<'_>) -> Result<SecretSource, String> {
    let settings = &cx.settings.http;
    match (&spec.env, &spec.file) {
        (Some(_), Some(_)) => Err("give `env` or `file`, not both".into()),
        (None, None) => Err("give `env = \"VAR\"` or `file = \"/path\"`: where the secret is read from at call time".into()),
        (Some(var), None) => {
            if var.is_empty() || var.contains(['=', '\0']) {
                return Err("`env` must name an environment variable".into());
            }
            if !secret::env_allowed(var, &settings.secret_env) {
                return Err(format!(
                    "the server does not allow secrets from the environment variable {var}: add it (or a PREFIX_* pattern) to tools.http.secret_env, which allows none by default"
                ));
            }
            Ok(SecretSource::Env(var.clone()))
        }
        (None, Some(path)) => {
            if path.as_os_str().is_empty() {
                return Err("`file` must name a file".into());
            }
            let resolved = cx.resolve(path);
            if !secret::is_under(&resolved, &settings.secret_dirs) {
                return Err(format!(
                    "the server does not allow secrets from the file {}: add its directory to tools.http.secret_dirs, which allows none by default",
                    resolved.display()
                ));
            }
            Ok(SecretSource::File(resolved))
        }
    }
}

fn body(spec: &HttpSpec, cx: &BuildCtx<'_>, errors: &mut Vec<FieldError>) -> Option<BodyTemplate> {
    let value = spec.body.as_ref()?;
    if !spec.method.takes_body() {
        errors.push(FieldError::new(
            "http.body",
            format!("a {} request has no body: use the URL template or `query`", spec.method.as_http()),
        ));
        return None;
    }
    match BodyTemplate::parse(value) {
        Ok(t) => {
            let fields = t.fields();
            check_fields("http.body", fields.iter().map(String::as_str), cx, errors);
            Some(t)
        }
        Err(problems) => {
            errors.extend(problems.into_iter().map(|(path, e)| FieldError::new(format!("http.body{path}"), e)));
            None
        }
    }
}

fn retries(spec: &HttpSpec, cx: &BuildCtx<'_>, errors: &mut Vec<FieldError>) -> RetryPolicy {
    let safe = spec.method.is_idempotent() || cx.idempotent;
    let retries = match spec.retries {
        Some(n) if n > MAX_RETRIES => {
            errors.push(FieldError::new("http.retries", format!("at most {MAX_RETRIES}")));
            0
        }
        Some(n) if n > 0 && !safe => {
            errors.push(FieldError::new(
                "http.retries",
                format!(
                    "{} is not idempotent, so a retry could repeat its effect (a second issue, a double charge); \
                     set annotations.idempotent_hint = true if repeating it is safe, or leave retries at 0",
                    spec.method.as_http()
                ),
            ));
            0
        }
        Some(n) => n,
        None if spec.method.is_idempotent() => 2,
        None => 0,
    };
    let settings = &cx.settings.http;
    RetryPolicy {
        retries,
        base: Duration::from_millis(settings.retry_base_delay_ms),
        max_backoff: Duration::from_secs(10),
        max_retry_after: Duration::from_secs(settings.max_retry_after_secs),
    }
}
