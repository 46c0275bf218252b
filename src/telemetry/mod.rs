//! Logs and traces: readable lines for people, JSON lines for log pipelines (`RUST_LOG`
//! overrides the configured filter), and with the `otel` feature OpenTelemetry spans exported
//! over OTLP/HTTP.
//!
//! Every request runs in a `request` span carrying `request_id` and `trace_id` ([`http`]); an
//! MCP request whose `_meta` names another trace gets an `mcp` span with that `trace_id`
//! ([`mcp_span`]). Inside them: `auth` (bearer verification), `rate_limit`, `tool` (one
//! execution, with the tool's name) and, in the audit writer, `audit.write`. Spans carry ids,
//! names and outcomes only: never a token, a secret or an argument value. Every field value is
//! escaped and capped on its way into a line ([`fields`]), whoever logged it.

mod fields;
pub mod http;
mod json;
#[cfg(feature = "otel")]
mod otel;
pub mod throttle;
pub mod trace_context;

use tracing::Span;
use tracing::field::{Empty, display};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

pub use trace_context::{TraceContext, TraceIdHex};

use crate::config::{LogFormat, LogSettings};

/// What [`init`] set up; [`Telemetry::shutdown`] flushes spans still waiting for export.
#[must_use = "dropping it without shutdown() can lose the last spans"]
#[derive(Debug, Default)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Exports what is buffered and stops the exporter. Blocks (up to the exporter's timeout):
    /// call it from a blocking context, e.g. `spawn_blocking`.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("toolgate: cannot flush the last trace spans: {e}");
        }
    }
}

/// Names this process in every JSON log line (`replica`), so lines from several replicas
/// can be told apart once collected. Set once, before [`init`].
pub fn set_replica(replica: &str) {
    let _ = REPLICA.set(replica.to_owned());
}

static REPLICA: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn replica() -> Option<&'static str> {
    REPLICA.get().map(String::as_str)
}

/// Installs the global subscriber writing to stdout; a second call (tests) is a no-op.
pub fn init(settings: &LogSettings) -> Telemetry {
    use std::io::IsTerminal as _;
    // Colour only for a person at a terminal; files and pipes get plain text.
    install(settings, std::io::stdout, std::io::stdout().is_terminal())
}

/// Like [`init`], writing to `writer` (tests capture log lines this way).
pub fn init_with_writer<W>(settings: &LogSettings, writer: W) -> Telemetry
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    install(settings, writer, false)
}

fn install<W>(settings: &LogSettings, writer: W, ansi: bool) -> Telemetry
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.filter));
    let log: Box<dyn Layer<Registry> + Send + Sync> = match settings.format {
        // One filter for both: span fields are kept only for spans that are logged.
        LogFormat::Json => {
            json::SpanFields.and_then(tracing_subscriber::fmt::layer().event_format(json::JsonLines).with_writer(writer)).boxed()
        }
        LogFormat::Pretty => tracing_subscriber::fmt::layer()
            .compact()
            .with_target(true)
            .with_ansi(ansi)
            .fmt_fields(fields::escaped())
            .with_writer(writer)
            .boxed(),
    };
    #[cfg_attr(not(feature = "otel"), expect(unused_mut, reason = "only the otel feature adds the provider"))]
    let mut telemetry = Telemetry::default();
    #[cfg_attr(not(feature = "otel"), expect(unused_mut, reason = "only the otel feature adds a layer"))]
    let mut traces: Option<Box<dyn Layer<Registry> + Send + Sync>> = None;
    #[cfg(feature = "otel")]
    let otel_error = match settings.otlp.endpoint.as_deref() {
        None => None,
        Some(endpoint) => match otel::pipeline(endpoint, &settings.otlp) {
            Ok((layer, provider)) => {
                traces = Some(layer);
                telemetry.provider = Some(provider);
                None
            }
            Err(e) => Some(e),
        },
    };
    // Alone, the log layer's filter is the whole subscriber's. A per-layer filter drops events
    // when a library asks `enabled` with other metadata in between, as sqlx's query logger
    // does after every query on Postgres (tokio-rs/tracing#2519); with the OTLP layer beside
    // it each keeps its own filter, so traces are not cut to the log level.
    let installed = match traces {
        None => tracing_subscriber::registry().with(log).with(filter).try_init(),
        Some(traces) => tracing_subscriber::registry().with(vec![log.with_filter(filter).boxed(), traces]).try_init(),
    };
    if installed.is_err() {
        return telemetry;
    }
    #[cfg(feature = "otel")]
    match (otel_error, settings.otlp.endpoint.as_deref()) {
        (Some(e), _) => tracing::error!(error = %e, "cannot start the OTLP trace exporter; traces are not exported"),
        (None, Some(endpoint)) => tracing::info!(endpoint, sample_ratio = settings.otlp.sample_ratio, "exporting traces over OTLP/HTTP"),
        (None, None) => {}
    }
    #[cfg(not(feature = "otel"))]
    if let Some(endpoint) = &settings.otlp.endpoint {
        tracing::warn!(
            endpoint = %endpoint,
            "log.otlp.endpoint is set, but this build of toolgate has no OTLP exporter (built without the `otel` feature): traces are NOT exported; logs still carry trace_id"
        );
    }
    telemetry
}

/// The span of one JSON-RPC request when its `_meta` carries a `traceparent` (SEP-414) naming
/// another trace than the HTTP request's: an `mcp` span with the method and that `trace_id`,
/// parented on the caller's span. Otherwise no span (the request span says it all, and the
/// request path saves one). Returns the trace the request belongs to: `_meta`'s, else
/// `inherited` (the HTTP request's).
pub fn mcp_span(
    method: &str,
    params: &serde_json::Map<String, serde_json::Value>,
    inherited: Option<TraceContext>,
) -> (Span, Option<TraceContext>) {
    match TraceContext::from_meta(params) {
        Some(meta) if inherited.is_none_or(|i| i.trace_id != meta.trace_id) => {
            let span = tracing::info_span!("mcp", mcp_method = %method, trace_id = Empty);
            let trace = adopt(&span, Some(meta));
            span.record("trace_id", display(trace.trace_id_hex()));
            (span, Some(trace))
        }
        _ => (Span::none(), inherited),
    }
}

/// Makes `span` the local root of `incoming` (or of a new trace) and returns the trace it is
/// in. With an OpenTelemetry exporter the id is the exporter's, so logs and exported spans
/// agree; otherwise `incoming`'s, or a random one.
pub(crate) fn adopt(span: &Span, incoming: Option<TraceContext>) -> TraceContext {
    let ours = incoming.unwrap_or_else(TraceContext::generate);
    #[cfg(feature = "otel")]
    if let Some(trace_id) = otel::attach(span, incoming) {
        return TraceContext { trace_id, ..ours };
    }
    #[cfg(not(feature = "otel"))]
    let _ = span;
    ours
}
