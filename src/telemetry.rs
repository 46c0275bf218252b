//! Logging setup: readable lines for people, JSON lines for log pipelines. `RUST_LOG`
//! overrides the configured filter.

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LogSettings};

/// Installs the global subscriber; a second call (tests) is a no-op.
pub fn init(settings: &LogSettings) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.filter));
    use std::io::IsTerminal as _;
    // Colour only for a person at a terminal; files and pipes get plain text.
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(true).with_ansi(std::io::stdout().is_terminal());
    let _ = match settings.format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}
