//! `GET /admin/audit` and `GET /admin/audit/export`: the audit log read through the admin API,
//! with the filters of `toolgate audit query` (tool, subject, outcome, kind, since, until,
//! limit), through [`crate::audit::for_each`] and [`crate::audit::export`].
//!
//! The list is newest first, which the audit module's oldest-first reads do not give directly:
//! it reads a window back from `until` (or now), widening it fourfold until `limit` records
//! match or the window reaches `since` (or the oldest matching record), and keeps only the
//! newest `limit` while reading. Each window is an indexed range on `time`, so the cost follows
//! how far back the records are, not the size of the log.
//!
//! The export streams every matching record (oldest first, as the command line does) as the
//! body of a download; the database is read only as fast as the client takes the bytes.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::mpsc;

use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::audit::{AuditFilter, AuditRecord, ExportFormat};
use crate::tooldef::FieldError;

/// Records listed unless `limit` says otherwise, and the most one page may hold.
const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 1000;
/// The first window read back from the end; each next one is four times as long.
const FIRST_WINDOW: Duration = Duration::from_secs(3600);
/// Bytes of export collected before they are handed to the connection.
const CHUNK: usize = 64 * 1024;
/// Chunks the export may run ahead of the client.
const CHUNKS_AHEAD: usize = 4;

/// `GET /admin/audit`: matching records, newest first, at most `limit` (default 100, at most
/// 1000); `truncated` says whether older ones match too.
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let (filter, _) = parse(query.as_deref(), Endpoint::List)?;
    settled(&app).await;
    let limit = filter.limit.unwrap_or(DEFAULT_LIMIT);
    let (records, truncated) = newest(&app, &filter, limit).await.map_err(|e| Problem::database(&e))?;
    Ok(Json(json!({
        "records": records,
        "limit": limit,
        "truncated": truncated,
        // Off: nothing new is recorded, but what was recorded before can still be read.
        "audit_enabled": app.audit.is_some(),
    })))
}

/// Reads see every call answered before them: the audit journal's records are in the database.
async fn settled(app: &AdminState) {
    if let Some(audit) = &app.audit {
        audit.settled().await;
    }
}

/// The newest `limit` records matching `filter` (its own `limit` ignored), newest first, and
/// whether older ones match too.
async fn newest(app: &AdminState, filter: &AuditFilter, limit: u64) -> Result<(Vec<AuditRecord>, bool), sqlx::Error> {
    let cap = usize::try_from(limit).unwrap_or(usize::MAX);
    // The oldest matching record bounds how far back the windows need to go.
    let first = AuditFilter { limit: Some(1), ..filter.clone() };
    let Some(oldest) = crate::audit::query(&app.store, &first).await?.into_iter().next() else { return Ok((Vec::new(), false)) };
    let floor = filter.since.map_or(oldest.time, |s| s.max(oldest.time));
    // `until` is exclusive; without it, a little past now so a record stamped this instant counts.
    let end = filter.until.unwrap_or_else(|| OffsetDateTime::now_utc() + Duration::from_secs(1));
    let mut window = FIRST_WINDOW;
    loop {
        let start = end.checked_sub(time::Duration::try_from(window).unwrap_or(time::Duration::MAX)).unwrap_or(floor).max(floor);
        let mut kept: VecDeque<AuditRecord> = VecDeque::with_capacity(cap.min(1024));
        let mut matched = 0usize;
        let range = AuditFilter { since: Some(start), until: Some(end), limit: None, ..filter.clone() };
        crate::audit::for_each(&app.store, &range, |r| {
            matched += 1;
            if kept.len() == cap {
                kept.pop_front();
            }
            kept.push_back(r);
            Ok(())
        })
        .await?;
        let reached_floor = start <= floor;
        if matched >= cap || reached_floor {
            let truncated = matched > cap || (!reached_floor && matched == cap && older_exist(app, filter, start).await?);
            return Ok((kept.into_iter().rev().collect(), truncated));
        }
        window = window.saturating_mul(4);
    }
}

/// Whether a record matching `filter` is older than `before`.
async fn older_exist(app: &AdminState, filter: &AuditFilter, before: OffsetDateTime) -> Result<bool, sqlx::Error> {
    let probe = AuditFilter { until: Some(before), limit: Some(1), ..filter.clone() };
    Ok(!crate::audit::query(&app.store, &probe).await?.is_empty())
}

/// `GET /admin/audit/export?format=jsonl|csv`: every matching record, oldest first, as a
/// download (`Content-Disposition: attachment`).
pub async fn export(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Response, Problem> {
    let (filter, format) = parse(query.as_deref(), Endpoint::Export)?;
    let (content_type, extension) = match format {
        ExportFormat::Jsonl => ("application/jsonl", "jsonl"),
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv"),
    };
    settled(&app).await;
    let mut rx = start_export(&app, filter, format);
    // Wait for the first chunk (or the end): an export that fails at once (the database is
    // away) is still a problem document, not a truncated download.
    let first = match rx.recv().await {
        Some(Ok(chunk)) => Some(chunk),
        Some(Err(e)) => return Err(Problem::database(&e)),
        None => None,
    };
    let stream = body_stream(first, rx);
    let stamp = OffsetDateTime::now_utc().format(time::macros::format_description!("[year][month][day]T[hour][minute][second]Z"));
    let filename = format!("toolgate-audit-{}.{extension}", stamp.unwrap_or_default());
    let mut res = Body::from_stream(stream).into_response();
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(res)
}

type Chunk = Result<Bytes, std::io::Error>;

/// The chunks of the export, then its end; an error mid-way ends the body abnormally, so the
/// client sees a failed download rather than a silently short file.
fn body_stream(first: Option<Bytes>, rx: mpsc::Receiver<Chunk>) -> impl futures_util::Stream<Item = Chunk> {
    let head = futures_util::stream::iter(first.map(Ok));
    let rest = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    futures_util::StreamExt::chain(head, rest)
}

/// Runs [`crate::audit::export`] on a blocking thread: it writes to a synchronous `Write`, and
/// a blocking thread may wait there for the client to take the previous chunks (backpressure)
/// without holding up a runtime worker. The future itself is driven on that thread
/// ([`drive`]); the database connections it polls are woken by the runtime as usual.
fn start_export(app: &AdminState, filter: AuditFilter, format: ExportFormat) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::channel(CHUNKS_AHEAD);
    let store = app.store.clone();
    tokio::task::spawn_blocking(move || {
        let out = ChunkWriter { tx: tx.clone(), buf: Vec::with_capacity(CHUNK) };
        let result = drive(crate::audit::export(&store, &filter, format, out));
        if let Err(e) = result {
            tracing::error!(error = %format!("{e:#}"), "admin API: the audit export failed");
            let _ = tx.blocking_send(Err(std::io::Error::other("the audit export failed; the server logged the cause")));
        }
    });
    rx
}

/// Hands the export's bytes to the response in [`CHUNK`]-sized pieces, waiting while the client
/// is [`CHUNKS_AHEAD`] behind. A client gone is `BrokenPipe`, which ends the export.
struct ChunkWriter {
    tx: mpsc::Sender<Chunk>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// Polls `future` to completion on this (blocking) thread, parking between wake-ups. Not
/// `Handle::block_on`: that enters the runtime, and [`ChunkWriter`] must be free to block.
fn drive<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// Which endpoint a query is for: the list caps `limit`; only the export reads `format`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    List,
    Export,
}

/// The query as a filter (and the export's format, default `jsonl`). Every value is checked;
/// an unknown parameter, a bad time, outcome or kind is a 400 that names what is accepted.
fn parse(query: Option<&str>, endpoint: Endpoint) -> Result<(AuditFilter, ExportFormat), Problem> {
    let mut filter = AuditFilter::default();
    let mut format = ExportFormat::Jsonl;
    let mut errors = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let value = value.trim();
        // An empty value (a blank field of the console's form) means no filter.
        if value.is_empty() {
            continue;
        }
        let checked: Result<(), String> = match key.as_ref() {
            "tool" => {
                filter.tool = Some(value.to_owned());
                Ok(())
            }
            "subject" => {
                filter.subject = Some(value.to_owned());
                Ok(())
            }
            "outcome" => value.parse().map(|o| filter.outcome = Some(o)),
            "kind" => value.parse().map(|k| filter.kind = Some(k)),
            "since" => time(value).map(|t| filter.since = Some(t)),
            "until" => time(value).map(|t| filter.until = Some(t)),
            "limit" => limit(value, endpoint).map(|n| filter.limit = Some(n)),
            "format" if endpoint == Endpoint::Export => value.parse().map(|f| format = f),
            other => {
                let known = match endpoint {
                    Endpoint::List => "tool, subject, outcome, kind, since, until, limit",
                    Endpoint::Export => "format, tool, subject, outcome, kind, since, until, limit",
                };
                Err(format!("unknown query parameter {other:?}; the accepted ones are {known}"))
            }
        };
        if let Err(message) = checked {
            errors.push(FieldError::new(key.into_owned(), message));
        }
    }
    if let (Some(since), Some(until)) = (filter.since, filter.until)
        && since >= until
    {
        errors.push(FieldError::new("until", "must be later than since"));
    }
    match errors.len() {
        0 => Ok((filter, format)),
        _ => {
            let detail = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            Err(Problem::new(Kind::MalformedRequest, detail).with_errors(errors))
        }
    }
}

fn time(value: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(value, &Rfc3339)
        .map_err(|e| format!("{value:?} is not an RFC 3339 time ({e}); write it like 2026-11-21T10:00:00Z or 2026-11-21T11:00:00+01:00"))
}

fn limit(value: &str, endpoint: Endpoint) -> Result<u64, String> {
    let max = match endpoint {
        Endpoint::List => MAX_LIMIT,
        Endpoint::Export => u64::MAX,
    };
    match value.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ if endpoint == Endpoint::List => Err(format!("must be a whole number from 1 to {MAX_LIMIT}, not {value:?}")),
        _ => Err(format!("must be a whole number of at least 1, not {value:?}")),
    }
}
