//! Extractors whose refusals are problem documents: a JSON body (415, 413, 400 naming the
//! line and column), a tool name from the path, and the `If-Match` precondition.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use super::problem::{Kind, Problem};
use crate::tooldef::FieldError;

/// A request body that is a JSON document (`application/json` or `application/<x>+json`).
#[derive(Debug)]
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Problem> {
        if !is_json(req.headers()) {
            return Err(Problem::new(Kind::UnsupportedMediaType, "send the body as JSON with `Content-Type: application/json`"));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Problem::new(Kind::PayloadTooLarge, "the request body is larger than the admin API accepts")
            } else {
                Problem::new(Kind::MalformedRequest, format!("cannot read the request body: {}", rejection.body_text()))
            }
        })?;
        serde_json::from_slice(&bytes).map(Self).map_err(|e| malformed_json(&e))
    }
}

/// 400 naming where the JSON breaks: `line`/`column` members and a `body` field error.
fn malformed_json(e: &serde_json::Error) -> Problem {
    let message = e.to_string();
    Problem::new(Kind::MalformedRequest, format!("the body is not valid JSON: {message}"))
        .with_errors(vec![FieldError::new("body", message)])
        .with_member("line", json!(e.line()))
        .with_member("column", json!(e.column()))
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(mime) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<mime::Mime>().ok()) else {
        return false;
    };
    mime.type_() == mime::APPLICATION && (mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON))
}

/// The `{name}` path segment.
#[derive(Debug)]
pub struct ToolName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ToolName {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(name)| Self(name))
            .map_err(|e| Problem::new(Kind::MalformedRequest, format!("the tool name in the path cannot be read: {}", e.body_text())))
    }
}

/// What `If-Match` asks for (RFC 9110 §13.1.1, strong comparison; our ETags are `"<revision>"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfMatch {
    /// No `If-Match`, or `*`: any stored revision will do.
    Any,
    /// Exactly this revision.
    Revision(i64),
    /// Only tags that can never match (weak, or not one of ours): always 412.
    Never,
}

impl IfMatch {
    /// The revision a conditional write must find; `None` for any.
    pub fn expected(self) -> Option<i64> {
        match self {
            Self::Revision(n) => Some(n),
            // No stored revision is 0 or less: the write matches nothing and reports 412.
            Self::Never => Some(0),
            Self::Any => None,
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let mut values = parts.headers.get_all(header::IF_MATCH).iter().peekable();
        if values.peek().is_none() {
            return Ok(Self::Any);
        }
        let bad = |why: &str| {
            Problem::new(Kind::MalformedRequest, format!("If-Match: {why}")).with_errors(vec![FieldError::new("If-Match", why.to_owned())])
        };
        let mut revisions = Vec::new();
        for value in values {
            let text = value.to_str().map_err(|_| bad("not visible ASCII"))?;
            for tag in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if tag == "*" {
                    return Ok(Self::Any);
                }
                let weak = tag.starts_with("W/");
                let opaque = tag.trim_start_matches("W/");
                let Some(inner) = opaque.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
                    return Err(bad("expected an entity tag such as \"3\" (the revision, quoted) or *"));
                };
                // Strong comparison: a weak tag never matches.
                if let (false, Ok(n)) = (weak, inner.parse::<i64>()) {
                    revisions.push(n);
                }
            }
        }
        revisions.dedup();
        match revisions.as_slice() {
            [] => Ok(Self::Never),
            [one] => Ok(Self::Revision(*one)),
            _ => Err(bad("send one entity tag: the revision you read")),
        }
    }
}

/// The ETag of a stored revision.
pub fn etag(revision: i64) -> String {
    format!("\"{revision}\"")
}
