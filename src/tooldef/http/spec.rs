//! The configuration shapes: a definition's `[tools.http]` table ([`HttpSpec`]) and the
//! server-wide `[tools.http]` settings ([`HttpToolSettings`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::secret::{HeaderSpec, SecretSpec};

/// A definition's `[tools.http]` table: which endpoint the tool calls and how.
///
/// ```toml
/// [tools.http]
/// method = "POST"
/// url = "https://api.github.com/repos/{owner}/{repo}/issues"
/// headers = { Accept = "application/vnd.github+json", Authorization = { env = "GITHUB_TOKEN", prefix = "Bearer " } }
/// body = { title = "{title}", body = "{body}", labels = "{labels}" }
/// response = { text = "Created issue #{{ response.number }}: {{ response.html_url }}" }
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// `GET` (default), `HEAD`, `POST`, `PUT`, `PATCH` or `DELETE` (any case).
    #[serde(default)]
    pub method: HttpMethod,
    /// An RFC 6570 URI template over the tool's arguments: `{owner}` for a path segment (every
    /// reserved character percent-encoded, so `/` or `?` in a value cannot change the path),
    /// `{/a,b}` for path segments, `{?state,per_page}` for query parameters (left out when
    /// the argument is absent), `{+path}` for a value that may contain `/`. The scheme
    /// (`http`/`https`), host and port are fixed: no expression may change them, and an
    /// argument equal to `.` or `..` in the path is refused.
    pub url: String,
    /// Where the API lives, when `url` is a path (`/repos/{owner}/{repo}/issues`): a fixed
    /// `https://api.example.com`, or `{ env = "GITHUB_API_URL", default = "https://api.github.com" }`
    /// so one tools file serves production and a local stand-in. Read when the tool is built
    /// (at start-up and on every reload); it is a location, never a secret.
    pub base_url: Option<BaseUrl>,
    /// Extra query parameters: name → value template. `"{field}"` sends the argument as is
    /// (an array argument repeats the parameter); `"state:{state}"` interpolates text; a
    /// parameter whose fields are absent is left out; `{{`/`}}` are literal braces. An API that
    /// takes its key in the query string gets a secret like a header's,
    /// `api_key = { env = "VAR" }`, read at call time and redacted from everything returned.
    #[serde(default)]
    pub query: BTreeMap<String, QuerySpec>,
    /// Request headers: name → a literal non-secret string, or a secret read at call time:
    /// `{ env = "VAR", prefix = "Bearer " }` or `{ file = "/run/secrets/token" }`. A literal
    /// may use `{field}` placeholders like `query` (`"X-Request-Id" = "{request_id}"`; the
    /// header is left out when the argument is absent; `{{`/`}}` are literal braces). A literal
    /// value is refused for `Authorization`, `Proxy-Authorization`, `Cookie` and any name
    /// containing `key`, `token`, `secret` or `auth`.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderSpec>,
    /// A JSON body template (`POST`, `PUT`, `PATCH`, `DELETE`), sent as `application/json`: a
    /// string that is exactly `"{field}"` becomes the argument's typed value (its key is left
    /// out when the argument is absent); other strings interpolate `{field}` as text.
    pub body: Option<Value>,
    /// Further attempts after a connection failure, a timeout, 429, 502, 503 or 504. Default:
    /// 2 for `GET`, `HEAD`, `PUT` and `DELETE`, 0 otherwise; more than 0 for `POST`/`PATCH`
    /// needs `annotations.idempotent_hint = true`.
    pub retries: Option<u32>,
    /// Time for one attempt (connect, send, read the body), in milliseconds. Default
    /// `tools.http.request_timeout_ms`. The tool's own timeout still bounds the whole call.
    pub timeout_ms: Option<u64>,
    /// Largest response body read; a larger one is an error, never buffered. Default
    /// `tools.http.max_response_bytes`.
    pub max_response_bytes: Option<u64>,
    /// What of the response the tool returns, and how it is shown.
    #[serde(default)]
    pub response: ResponseSpec,
    /// Pagination pass-through, see [`PaginationSpec`].
    pub pagination: Option<PaginationSpec>,
}

/// The value of one query parameter: a template over the arguments, or a secret read at call
/// time (`{ env = "API_KEY" }`; a `prefix` is put before it).
#[derive(Clone, Debug)]
pub enum QuerySpec {
    Template(String),
    Secret(SecretSpec),
}

impl<'de> Deserialize<'de> for QuerySpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The same two shapes as a header's value: a string, or a secret's table.
        Ok(match HeaderSpec::deserialize(deserializer)? {
            HeaderSpec::Literal(template) => Self::Template(template),
            HeaderSpec::Secret(secret) => Self::Secret(secret),
        })
    }
}

/// `base_url`: a literal, or an environment variable with an optional default.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum BaseUrl {
    Fixed(String),
    Env {
        env: String,
        #[serde(default)]
        default: Option<String>,
    },
}

impl BaseUrl {
    /// The base URL now, or why there is none.
    pub fn resolve(&self) -> Result<String, String> {
        match self {
            Self::Fixed(url) => Ok(url.clone()),
            Self::Env { env, default } => match (std::env::var(env), default) {
                (Ok(url), _) if !url.trim().is_empty() => Ok(url.trim().to_owned()),
                (_, Some(default)) => Ok(default.clone()),
                _ => Err(format!("the environment variable {env} is not set and there is no `default`")),
            },
        }
    }
}

/// The request method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum HttpMethod {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
}

impl TryFrom<String> for HttpMethod {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        Ok(match value.to_ascii_uppercase().as_str() {
            "GET" => Self::Get,
            "HEAD" => Self::Head,
            "POST" => Self::Post,
            "PUT" => Self::Put,
            "PATCH" => Self::Patch,
            "DELETE" => Self::Delete,
            _ => return Err(format!("unknown method {value:?}: use GET, HEAD, POST, PUT, PATCH or DELETE")),
        })
    }
}

impl HttpMethod {
    /// Whether repeating the request has the same effect as sending it once (RFC 9110 9.2.2).
    pub fn is_idempotent(self) -> bool {
        matches!(self, Self::Get | Self::Head | Self::Put | Self::Delete)
    }

    pub fn takes_body(self) -> bool {
        !matches!(self, Self::Get | Self::Head)
    }

    pub(crate) fn as_http(self) -> http::Method {
        match self {
            Self::Get => http::Method::GET,
            Self::Head => http::Method::HEAD,
            Self::Post => http::Method::POST,
            Self::Put => http::Method::PUT,
            Self::Patch => http::Method::PATCH,
            Self::Delete => http::Method::DELETE,
        }
    }
}

/// `[tools.http.response]`: how a successful response becomes the tool's result.
///
/// The result's `structuredContent` is the mapped JSON value (an array or scalar is wrapped
/// as `{"items": [...]}` / `{"value": ...}`, since it must be an object; with pagination it
/// is the pagination envelope). Its text content is the `text` template when given;
/// otherwise pretty JSON for `response_format = "json"`, and for Markdown a compact rendering
/// (an object's keys as a bullet list, an array of objects as a table). A `text/*` response
/// is returned as text.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseSpec {
    /// A JSON pointer (RFC 6901) into the JSON response selecting what the tool returns, e.g.
    /// `"/items"` or `"/data/0"`. Default: the whole response.
    pub structured: Option<String>,
    /// A MiniJinja template for the text content, with `response` (the whole parsed body),
    /// `result` (the value `structured` selects), `args` (the call's arguments) and `status`
    /// (the HTTP status code) in scope: `"{{ result.name }}: {{ result.main.temp }}°C"`.
    pub text: Option<String>,
}

/// `[tools.http.pagination]`: passes the MCP pagination arguments through to the upstream
/// and reports where the next page starts.
///
/// The tool's input schema declares `limit`, `offset` and/or `cursor` (integers, and a string
/// for `cursor`) and this table names the upstream query parameters they become. The result
/// is an envelope: `{"items": <mapped value>, "count": n, "has_more": bool, "next_offset": n,
/// "next_cursor": "...", "total_count": n}` (absent values left out). `has_more` comes from
/// the `has_more` pointer, else a `next_cursor` value, else a `Link: <...>; rel="next"`
/// header, else `total_count`, else whether a full page (`count == limit`) came back.
///
/// ```toml
/// [tools.http.pagination]
/// limit = "per_page"   # argument `limit` → ?per_page=
/// page = "page"        # argument `offset` → ?page=offset/limit+1 (GitHub style); or `offset = "offset"`
/// default_limit = 20
/// total_count = "/total_count"
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaginationSpec {
    /// Query parameter that receives the `limit` argument.
    pub limit: Option<String>,
    /// Query parameter that receives the `offset` argument unchanged.
    pub offset: Option<String>,
    /// Query parameter that receives a 1-based page number computed from the `offset` and
    /// `limit` arguments (`offset / limit + 1`; `offset` must then be a multiple of `limit`).
    /// Excludes `offset`.
    pub page: Option<String>,
    /// Query parameter that receives the `cursor` argument (an opaque string from a previous
    /// result's `next_cursor`).
    pub cursor: Option<String>,
    /// The limit sent (and assumed) when the call gives none.
    pub default_limit: Option<u64>,
    /// JSON pointer to a boolean "more results" flag in the response.
    pub has_more: Option<String>,
    /// JSON pointer to the next page's offset in the response (otherwise computed as
    /// `offset + count` when there is more).
    pub next_offset: Option<String>,
    /// JSON pointer to the next page's cursor in the response.
    pub next_cursor: Option<String>,
    /// JSON pointer to the total number of results in the response.
    pub total_count: Option<String>,
}

pub use crate::config::http_tools::HttpToolSettings;
