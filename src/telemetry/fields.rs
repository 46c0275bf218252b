//! How a field's value is written into a readable log line: every value, the message
//! included, through [`crate::untrusted::text`] (escaped, capped at
//! [`LOG_FIELD_MAX`](crate::untrusted::text::LOG_FIELD_MAX) bytes). A field may hold an
//! upstream's tool name, a client's header or an error an upstream wrote; escaping them all,
//! here, means no call site can forget one and no value can end its line or forge the next.

use std::fmt;

use tracing::field::Field;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{Writer, debug_fn};

use crate::untrusted::text::{LOG_FIELD_MAX, escaped_debug};

/// The field formatter of the readable format: `message key=value key=value`, as
/// tracing-subscriber's default, with every value escaped and capped.
pub fn escaped() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    debug_fn(|w: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug| {
        let text = escaped_debug(value, LOG_FIELD_MAX);
        match field.name() {
            "message" => w.write_str(&text),
            name => write!(w, "{name}={text}"),
        }
    })
    .delimited(" ")
}
