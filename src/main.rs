//! The `toolgate` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use toolgate::app::{self, AppState};
use toolgate::config::Settings;

#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about = "A remote MCP server: tools over Streamable HTTP")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP (the default).
    Serve {
        /// A TOML settings file; every setting can also come from TOOLGATE__SECTION__KEY.
        #[arg(long, short, env = "TOOLGATE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Check a settings file and print the effective settings.
    CheckConfig {
        #[arg(long, short, env = "TOOLGATE_CONFIG")]
        config: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve { config: None });
    match run(command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::CheckConfig { config } => {
            let settings = Settings::load(config.as_deref())?;
            println!("{settings:#?}");
            Ok(())
        }
        Command::Serve { config } => {
            let settings = Settings::load(config.as_deref())?;
            toolgate::telemetry::init(&settings.log);
            let bind = settings.server.bind;
            let state = AppState::new(settings)?;
            let running = app::start(state.clone(), bind).await?;
            wait_for_signal().await;
            tracing::info!("shutting down");
            running.stop().await?;
            Ok(())
        }
    }
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
