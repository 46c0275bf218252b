//! Every admin API error as an RFC 9457 problem document (`application/problem+json`):
//! `type`, `title`, `status`, `detail`, and for validation errors `errors`, one entry per
//! field at fault. Handlers return [`Problem`]; nothing else builds error responses.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::tooldef::{DefinitionErrors, FieldError};

/// The media type of problem documents.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// What went wrong, as a stable identifier (the last part of the `type` URI) and its title.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    MalformedRequest,
    UnsupportedMediaType,
    PayloadTooLarge,
    InvalidDefinition,
    NameTaken,
    DefinedElsewhere,
    /// An approval or rejection of a catalog entry that is not pending any more.
    AlreadyDecided,
    /// A cancel of a task that has ended (completed, failed or cancelled).
    TaskEnded,
    CommandToolsDisabled,
    /// Only the server's settings (the operator) may allow what the request asks.
    OperatorOnly,
    NotFound,
    /// What the request is about is turned off in the server's settings (`tasks.enabled =
    /// false`): nothing of it exists here, whatever the request names.
    FeatureOff,
    MethodNotAllowed,
    PreconditionFailed,
    Unauthorized,
    InsufficientScope,
    TooManyRequests,
    ReloadFailed,
    /// A tool try-out answered with a JSON-RPC error (not a tool failure: that is a result).
    CallFailed,
    Unavailable,
    Internal,
}

impl Kind {
    fn slug(self) -> &'static str {
        match self {
            Self::MalformedRequest => "malformed-request",
            Self::UnsupportedMediaType => "unsupported-media-type",
            Self::PayloadTooLarge => "payload-too-large",
            Self::InvalidDefinition => "invalid-definition",
            Self::NameTaken => "name-taken",
            Self::DefinedElsewhere => "defined-elsewhere",
            Self::AlreadyDecided => "already-decided",
            Self::TaskEnded => "task-ended",
            Self::CommandToolsDisabled => "command-tools-disabled",
            Self::OperatorOnly => "operator-only",
            Self::NotFound => "not-found",
            Self::FeatureOff => "feature-off",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::PreconditionFailed => "precondition-failed",
            Self::Unauthorized => "unauthorized",
            Self::InsufficientScope => "insufficient-scope",
            Self::TooManyRequests => "too-many-requests",
            Self::ReloadFailed => "reload-failed",
            Self::CallFailed => "call-failed",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::MalformedRequest => "Malformed request",
            Self::UnsupportedMediaType => "Unsupported media type",
            Self::PayloadTooLarge => "Request body too large",
            Self::InvalidDefinition => "Invalid tool definition",
            Self::NameTaken => "Tool name already taken",
            Self::DefinedElsewhere => "Tool defined outside the database",
            Self::AlreadyDecided => "Already decided",
            Self::TaskEnded => "Task already ended",
            Self::CommandToolsDisabled => "Command tools cannot be managed through the admin API",
            Self::OperatorOnly => "Only the server's settings may allow this",
            Self::NotFound => "Not found",
            Self::FeatureOff => "Turned off in the server's settings",
            Self::MethodNotAllowed => "Method not allowed",
            Self::PreconditionFailed => "Precondition failed",
            Self::Unauthorized => "Unauthorized",
            Self::InsufficientScope => "Insufficient scope",
            Self::TooManyRequests => "Too many requests",
            Self::ReloadFailed => "Reload refused",
            Self::CallFailed => "The tool call was answered with an error",
            Self::Unavailable => "Service unavailable",
            Self::Internal => "Internal error",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Self::MalformedRequest => StatusCode::BAD_REQUEST,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::InvalidDefinition | Self::ReloadFailed | Self::CallFailed => StatusCode::UNPROCESSABLE_ENTITY,
            Self::NameTaken | Self::DefinedElsewhere | Self::AlreadyDecided | Self::TaskEnded => StatusCode::CONFLICT,
            Self::CommandToolsDisabled | Self::OperatorOnly | Self::InsufficientScope => StatusCode::FORBIDDEN,
            Self::NotFound | Self::FeatureOff => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// One problem document, with the headers that go with it.
#[derive(Debug)]
pub struct Problem {
    kind: Kind,
    /// Overrides the kind's status (auth refusals keep the status the bearer gate chose).
    status: Option<StatusCode>,
    detail: String,
    errors: Vec<FieldError>,
    /// Extension members (RFC 9457 §3.2).
    extra: Map<String, Value>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

#[derive(Serialize)]
struct Document<'a> {
    #[serde(rename = "type")]
    type_: String,
    title: &'static str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    errors: &'a [FieldError],
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

impl Problem {
    pub fn new(kind: Kind, detail: impl Into<String>) -> Self {
        Self { kind, status: None, detail: detail.into(), errors: Vec::new(), extra: Map::new(), headers: Vec::new() }
    }

    /// A definition refused by the compiler: one entry per field, paths from the definition's root.
    pub fn invalid_definition(errors: &DefinitionErrors) -> Self {
        let mut fields: Vec<FieldError> = errors.tools.iter().flat_map(|t| t.errors.iter().cloned()).collect();
        if let Some(general) = &errors.general {
            fields.insert(0, FieldError::new("definition", general.clone()));
        }
        let detail = match fields.len() {
            1 => "the definition has 1 problem; nothing was changed".to_owned(),
            n => format!("the definition has {n} problems; nothing was changed"),
        };
        Self::new(Kind::InvalidDefinition, detail).with_errors(fields)
    }

    /// A database failure: logged here with its cause, answered without it.
    pub fn database(e: &impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "admin API: database error");
        Self::new(Kind::Unavailable, "the database cannot be used right now; retry shortly (the server logged the cause)")
            .with_header(header::RETRY_AFTER, HeaderValue::from_static("5"))
    }

    /// 412 for a write naming a stale revision of `what` (`tool "x"`, `upstream "y"`): the
    /// current revision as `current_revision` and as the `ETag`.
    pub fn stale_revision(what: &str, current: i64) -> Self {
        let problem = Self::new(
            Kind::PreconditionFailed,
            format!("{what} is at revision {current}, not the one If-Match names; read it again and retry"),
        )
        .with_member("current_revision", serde_json::json!(current));
        match HeaderValue::from_str(&super::extract::etag(current)) {
            Ok(tag) => problem.with_header(header::ETAG, tag),
            Err(_) => problem,
        }
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, detail)
    }

    /// A 400 about one field (most often a query parameter): `message` is the detail and the
    /// field's error alike.
    pub fn bad_field(field: impl Into<String>, message: String) -> Self {
        Self::new(Kind::MalformedRequest, message.clone()).with_errors(vec![FieldError::new(field, message)])
    }

    pub fn with_errors(mut self, errors: Vec<FieldError>) -> Self {
        self.errors = errors;
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = Some(status);
        self
    }

    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn with_member(mut self, name: &str, value: Value) -> Self {
        self.extra.insert(name.to_owned(), value);
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.status.unwrap_or_else(|| self.kind.status());
        let doc = Document {
            type_: format!("urn:toolgate:problem:{}", self.kind.slug()),
            title: self.kind.title(),
            status: status.as_u16(),
            detail: &self.detail,
            errors: &self.errors,
            extra: &self.extra,
        };
        let body = serde_json::to_string(&doc).unwrap_or_else(|_| format!(r#"{{"title":"Internal error","status":{}}}"#, status.as_u16()));
        let mut res = (status, [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))], body).into_response();
        for (name, value) in self.headers {
            res.headers_mut().append(name, value);
        }
        res
    }
}
