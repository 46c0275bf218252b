//! The OTLP/HTTP (protobuf) trace pipeline (`--features otel`): toolgate's own spans at INFO and
//! above go to `tracing-opentelemetry`, batched on the SDK's thread, sampled by
//! `log.otlp.sample_ratio` unless the caller's `traceparent` already decided.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use super::TraceContext;
use crate::config::OtlpSettings;

/// The exporting layer and the provider to flush at exit.
pub(super) fn pipeline(
    endpoint: &str,
    settings: &OtlpSettings,
) -> Result<(Box<dyn Layer<Registry> + Send + Sync>, SdkTracerProvider), String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint))
        .with_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sample_ratio)));
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler)
        .with_resource(Resource::builder().with_service_name(settings.service_name.clone()).build())
        .build();
    let tracer = provider.tracer("toolgate");
    // Only our spans: the request, auth, rate limit, tool and audit spans, not every
    // dependency's internals.
    let targets = Targets::new().with_target("toolgate", tracing::Level::INFO);
    let layer = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(targets).boxed();
    Ok((layer, provider))
}

/// `endpoint` is the collector's base URL (`http://collector:4318`), as
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is; a URL already ending in `/v1/traces` is used as it is.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") }
}

/// Parents `span` on the caller's span when there is one and returns the span's OpenTelemetry
/// trace id; `None` when no exporter records this span. Must run before the span is entered.
pub(super) fn attach(span: &Span, incoming: Option<TraceContext>) -> Option<u128> {
    if let Some(t) = incoming
        && let Some(parent) = t.parent_id
    {
        let flags = if t.sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        let remote = SpanContext::new(
            TraceId::from_bytes(t.trace_id.to_be_bytes()),
            SpanId::from_bytes(parent.to_be_bytes()),
            flags,
            true,
            TraceState::default(),
        );
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    let cx = span.context();
    let context = cx.span().span_context().clone();
    context.is_valid().then(|| u128::from_be_bytes(context.trace_id().to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
    }
}
