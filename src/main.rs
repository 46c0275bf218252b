//! The `toolgate` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

mod cli;

/// mimalloc instead of the system allocator: measured ~20% of the request path in glibc
/// malloc/free under load (see ARCHITECTURE.md). The `system-alloc` feature keeps the system
/// allocator, for heap profilers (valgrind's dhat and massif, heaptrack) that only see malloc.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use toolgate::app::{self, AppState};
use toolgate::config::Settings;

#[derive(Debug, Parser)]
#[command(
    name = "toolgate",
    version,
    about = "A remote MCP server: tools over Streamable HTTP",
    after_help = "Examples:
  toolgate serve                                  serve on the defaults: http://127.0.0.1:8080/mcp, dev-mode auth
  toolgate serve --bind 0.0.0.0:8080 -c prod.toml  serve a settings file on every interface
  toolgate dev-token                              a token for the dev-mode server (scope mcp:tools, 1 h)
  toolgate check-config -c prod.toml              check a settings file and print what it sets
  toolgate tools validate tools.toml              check tool definitions, every problem listed
  toolgate tools import openapi api.yaml --out tools.toml   http tools from an OpenAPI 3 document

Every setting can come from the environment: TOOLGATE__SECTION__KEY (TOOLGATE__AUTH__MODE=jwt)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP (the default).
    Serve {
        #[command(flatten)]
        config: ConfigArg,
        /// The address to listen on, overriding server.bind: an IP address and a port
        /// ("127.0.0.1:8080", "0.0.0.0:8080").
        #[arg(long, value_name = "IP:PORT")]
        bind: Option<std::net::SocketAddr>,
    },
    /// Exit 0 if the server at the configured address answers /healthz (container health checks;
    /// the runtime image has no shell or curl).
    Healthcheck {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Print a development access token (for `auth.mode = "dev"`), signed with the local key.
    DevToken {
        #[command(flatten)]
        config: ConfigArg,
        /// Space-separated scopes.
        #[arg(long, default_value = "mcp:tools")]
        scope: String,
        /// The token's subject (who it speaks for).
        #[arg(long, default_value = "developer")]
        subject: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl_secs: u64,
    },
    /// Write a new signing key for the built-in authorization server
    /// (`authorization_server.signing_key_files`): EC P-256, PKCS#8 PEM, mode 0600.
    Keygen {
        /// The file to create; an existing file is never overwritten.
        #[arg(long, value_name = "FILE")]
        out: std::path::PathBuf,
    },
    /// Check a settings file and print the effective settings.
    CheckConfig {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Apply the database migrations embedded in this binary (also done at start-up).
    Migrate {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Check or list tool definitions.
    Tools {
        #[command(flatten)]
        config: ConfigArg,
        #[command(subcommand)]
        command: cli::tools::ToolsCommand,
    },
    /// Read or prune the audit log.
    Audit {
        #[command(flatten)]
        config: ConfigArg,
        #[command(subcommand)]
        command: AuditCommand,
    },
}

/// `--config`, the same on every command.
#[derive(Debug, clap::Args)]
struct ConfigArg {
    /// A TOML or YAML (*.yaml, *.yml) settings file (deploy/config/toolgate.example.toml lists
    /// every setting). Each setting can also come from the environment as
    /// TOOLGATE__SECTION__KEY, which wins over the file.
    #[arg(long, short, env = "TOOLGATE_CONFIG", global = true, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ConfigArg {
    /// The settings, and on standard error a warning for each variable that looks like a
    /// setting but is not read (`TOOLGATE_SERVER_BIND`).
    fn load(&self) -> anyhow::Result<Settings> {
        let settings = self.load_quietly()?;
        for warning in toolgate::config::env_names::warnings(&settings) {
            eprintln!("warning: {}", toolgate::untrusted::text::terminal(&warning));
        }
        Ok(settings)
    }

    /// The settings alone: `serve` logs the warnings once its log is set up. When they cannot
    /// be read the warnings come first, on standard error: a misnamed variable is often why.
    fn load_quietly(&self) -> anyhow::Result<Settings> {
        Settings::load(self.config.as_deref()).map_err(|error| {
            for warning in toolgate::config::env_names::warnings(&Settings::default()) {
                eprintln!("warning: {}", toolgate::untrusted::text::terminal(&warning));
            }
            error.into()
        })
    }
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Print matching records as JSON lines, oldest first.
    Query {
        #[command(flatten)]
        filter: AuditFilterArgs,
    },
    /// Export matching records as JSON lines or CSV to stdout.
    Export {
        #[arg(long, default_value = "jsonl")]
        format: toolgate::audit::ExportFormat,
        #[command(flatten)]
        filter: AuditFilterArgs,
    },
    /// Delete records older than the retention period.
    Prune {
        /// Age in days; default `audit.retention_days`.
        #[arg(long)]
        older_than_days: Option<u32>,
    },
}

#[derive(Debug, clap::Args)]
struct AuditFilterArgs {
    /// RFC 3339 time, inclusive.
    #[arg(long, value_parser = parse_rfc3339)]
    since: Option<time::OffsetDateTime>,
    /// RFC 3339 time, exclusive.
    #[arg(long, value_parser = parse_rfc3339)]
    until: Option<time::OffsetDateTime>,
    #[arg(long)]
    tool: Option<String>,
    #[arg(long)]
    subject: Option<String>,
    #[arg(long)]
    outcome: Option<toolgate::audit::Outcome>,
    #[arg(long)]
    kind: Option<toolgate::audit::EventKind>,
    #[arg(long)]
    limit: Option<u64>,
}

impl AuditFilterArgs {
    fn into_filter(self) -> toolgate::audit::AuditFilter {
        toolgate::audit::AuditFilter {
            since: self.since,
            until: self.until,
            tool: self.tool,
            subject: self.subject,
            outcome: self.outcome,
            kind: self.kind,
            limit: self.limit,
        }
    }
}

fn parse_rfc3339(s: &str) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).map_err(|e| format!("not an RFC 3339 time ({e})"))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve { config: ConfigArg { config: None }, bind: None });
    match run(command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // An error may quote a document, a server's answer or a client's text.
            eprintln!("toolgate: {}", toolgate::untrusted::text::terminal(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::CheckConfig { config } => {
            let settings = config.load()?;
            toolgate::transport::check_settings(&settings).map_err(|e| anyhow::anyhow!("{e}"))?;
            let layers = toolgate::config::effective::Layers::read(config.config.as_deref())?;
            let report = toolgate::config::effective::report(&settings, &layers)?;
            // A closed pipe (`check-config | head`) is not an error worth a panic.
            use std::io::Write as _;
            let _ = write!(std::io::stdout(), "{report}");
            Ok(())
        }
        Command::DevToken { config, scope, subject, ttl_secs } => {
            let settings = config.load()?;
            if settings.auth.mode != toolgate::auth::settings::AuthMode::Dev {
                eprintln!("note: auth.mode is not \"dev\"; the server only trusts this token in dev mode");
            }
            let resource = settings.auth.resource.clone().unwrap_or_else(|| toolgate::auth::dev::default_resource(&settings));
            let key = toolgate::auth::dev::load_or_create_key(&settings.auth.dev_key_file)?;
            let token = toolgate::auth::dev::mint(&key, &resource, &subject, &scope, ttl_secs).map_err(anyhow::Error::msg)?;
            use std::io::Write as _;
            let _ = writeln!(std::io::stdout(), "{token}");
            Ok(())
        }
        Command::Keygen { out } => {
            let pem = toolgate::authserver::keys::generate_pem().map_err(anyhow::Error::msg)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options
                .open(&out)
                .map_err(|e| anyhow::anyhow!("cannot create {} ({e}); an existing key is never overwritten", out.display()))?;
            use std::io::Write as _;
            file.write_all(pem.as_bytes())?;
            let _ = writeln!(std::io::stdout(), "wrote a new signing key to {}", out.display());
            Ok(())
        }
        Command::Migrate { config } => {
            let settings = config.load()?;
            let store = toolgate::store::Store::connect(&settings.storage).await?;
            use std::io::Write as _;
            let mut out = std::io::stdout();
            for (version, description) in store.embedded_migrations() {
                let _ = writeln!(out, "{} {version} {description}", store.backend_name());
            }
            let _ = writeln!(out, "{}: schema up to date", store.backend_name());
            store.close().await;
            Ok(())
        }
        Command::Audit { config, command } => {
            let settings = config.load()?;
            // Reads need no migration, but prune and reads of an empty database are clearer
            // with the table present; migrating is idempotent.
            let store = toolgate::store::Store::connect(&settings.storage).await?;
            let result = audit_command(&settings, &store, command).await;
            store.close().await;
            result
        }
        Command::Tools { config, command } => {
            let settings = config.load()?;
            cli::tools::run(settings, command).await
        }
        Command::Healthcheck { config } => {
            let settings = config.load()?;
            healthcheck(&settings.server).await
        }
        Command::Serve { config, bind } => {
            let mut settings = config.load_quietly()?;
            if let Some(bind) = bind {
                settings.server.bind = bind;
                // The same checks as a bind set in the file (dev mode stays on loopback).
                settings.validate()?;
            }
            toolgate::telemetry::set_replica(&settings.audit.resolved_replica_id());
            let telemetry = toolgate::telemetry::init(&settings.log);
            for warning in toolgate::config::env_names::warnings(&settings) {
                tracing::warn!("{warning}");
            }
            let bind = settings.server.bind;
            // Before the connection cap is derived from it (server.max_connections = 0).
            let files = toolgate::transport::connections::raise_file_limit();
            tracing::info!(open_file_limit = files, "open-file limit");
            let state = AppState::new(settings).await?;
            let running = app::start(state.clone(), bind).await?;
            wait_for_signal().await;
            tracing::info!("shutdown signal received");
            let stopped = running.stop().await;
            // Last: the spans of the shutdown itself are exported too.
            let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
            stopped?;
            Ok(())
        }
    }
}

async fn audit_command(settings: &Settings, store: &toolgate::store::Store, command: AuditCommand) -> anyhow::Result<()> {
    use toolgate::audit::{ExportFormat, export, prune};
    match command {
        AuditCommand::Query { filter } => {
            export(store, &filter.into_filter(), ExportFormat::Jsonl, std::io::stdout().lock()).await?;
        }
        AuditCommand::Export { format, filter } => {
            export(store, &filter.into_filter(), format, std::io::stdout().lock()).await?;
        }
        AuditCommand::Prune { older_than_days } => {
            let days = older_than_days.unwrap_or(settings.audit.retention_days);
            anyhow::ensure!(days > 0, "nothing to prune: audit.retention_days is 0 (keep forever); pass --older-than-days N");
            let cutoff = time::OffsetDateTime::now_utc() - time::Duration::days(i64::from(days));
            let deleted = prune(store, cutoff).await?;
            eprintln!("deleted {deleted} audit records older than {days} days");
        }
    }
    Ok(())
}

/// A minimal HTTP/1.1 GET of /healthz. Hand-written on purpose: the binary has no HTTP client
/// dependency, and this is one request to our own loopback listener (over TLS when it
/// terminates TLS; with client certificates required, the completed handshake is the answer,
/// since the probe has no certificate to present).
async fn healthcheck(server: &toolgate::config::ServerSettings) -> anyhow::Result<()> {
    let mut addr = server.bind;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let probe = async {
        if !server.tls.enabled() {
            return get_healthz(tokio::net::TcpStream::connect(addr).await?).await;
        }
        let stream = toolgate::transport::tls::probe::connect(addr).await?;
        if server.tls.client_ca_file.is_some() {
            return Ok("HTTP/1.1 200 (TLS handshake completed)".to_owned());
        }
        get_healthz(stream).await
    };
    let head = tokio::time::timeout(std::time::Duration::from_secs(3), probe)
        .await
        .map_err(|_| anyhow::anyhow!("no answer from {addr} within 3 s"))??;
    if head.starts_with("HTTP/1.1 200") { Ok(()) } else { anyhow::bail!("unhealthy: {}", head.lines().next().unwrap_or("empty answer")) }
}

/// Sends `GET /healthz` on `stream`; the first bytes of the answer.
async fn get_healthz(mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
    let mut head = vec![0u8; 64];
    let n = stream.read(&mut head).await?;
    Ok(String::from_utf8_lossy(&head[..n]).into_owned())
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
