//! JSON lines for log pipelines: one object per event with the event's fields and the fields
//! of every span it happened in, flattened to the top level (the innermost span wins). So a
//! line logged deep inside a tool still carries the `request_id` and `trace_id` of its request,
//! which tracing-subscriber's own JSON format only nests under `span`/`spans`.
//! Every value is escaped and capped at [`LOG_FIELD_MAX`] bytes, as in readable lines: the JSON
//! encoder would escape newlines and C0 controls itself, but not DEL, C1, the line separators or
//! the bidirectional controls, which a log viewer shows as they are.

use std::fmt;

use serde_json::{Map, Value};

use crate::untrusted::text::{LOG_FIELD_MAX, escaped_debug};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A span's fields as JSON values, kept in the span's extensions.
struct Fields(Map<String, Value>);

/// Keeps every span's fields (and later `record`s) for [`JsonLines`]. Compose it with the
/// formatting layer under one filter, so it only works for spans that are logged.
#[derive(Debug, Default)]
pub struct SpanFields;

impl<S> Layer<S> for SpanFields
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = Map::new();
        attrs.record(&mut Visitor(&mut fields));
        span.extensions_mut().insert(Fields(fields));
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(Fields(fields)) = span.extensions_mut().get_mut::<Fields>() {
            values.record(&mut Visitor(fields));
        }
    }
}

/// The event format: `timestamp`, `level`, `target`, `span` (the span path, outermost first,
/// e.g. `request:mcp:tool`), every span field, then the event's own fields.
#[derive(Debug, Default)]
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        let now = time::OffsetDateTime::now_utc();
        let timestamp = now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), Value::String(meta.level().as_str().to_owned()));
        line.insert("target".into(), Value::String(meta.target().to_owned()));
        if let Some(replica) = super::replica() {
            line.insert("replica".into(), Value::String(replica.to_owned()));
        }
        if let Some(scope) = ctx.event_scope() {
            let mut path = String::new();
            for span in scope.from_root() {
                if let Some(Fields(fields)) = span.extensions().get::<Fields>() {
                    for (k, v) in fields {
                        line.insert(k.clone(), v.clone());
                    }
                }
                if !path.is_empty() {
                    path.push(':');
                }
                path.push_str(span.name());
            }
            line.insert("span".into(), Value::String(path));
        }
        event.record(&mut Visitor(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// Records fields as JSON values.
struct Visitor<'a>(&'a mut Map<String, Value>);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::String(escaped_debug(&format_args!("{value}"), LOG_FIELD_MAX)));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::Bool(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().to_owned(), Value::String(escaped_debug(&format_args!("{value}"), LOG_FIELD_MAX)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), Value::String(escaped_debug(value, LOG_FIELD_MAX)));
    }
}
