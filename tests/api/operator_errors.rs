//! Errors an operator meets in the first hour say what to change: the setting, the value given
//! and what would work, and the operating system's reason where there is one.

use toolgate::app::{self, AppState};
use toolgate::config::{Secret, Settings};

use crate::common::{load_toml, test_settings};

/// The error `serve` stops with on these settings (the whole chain of causes).
pub(crate) async fn start_error(adjust: impl FnOnce(&mut Settings)) -> String {
    let data = tempfile::tempdir().expect("data dir");
    let mut settings = test_settings(data.path());
    adjust(&mut settings);
    let state = match AppState::new(settings).await {
        Ok(state) => state,
        Err(e) => return format!("{e:#}"),
    };
    let bind = state.settings.server.bind;
    match app::start(state, bind).await {
        Ok(running) => {
            let _ = running.stop().await;
            panic!("the server started");
        }
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn an_unknown_auth_mode_lists_the_accepted_values() {
    let error = load_toml("[auth]\nmode = \"jwks\"\n").expect_err("refused");
    assert!(error.contains("auth.mode"), "{error}");
    assert!(error.contains("\"jwks\"") && error.contains("\"off\", \"jwt\", \"dev\""), "{error}");
}

#[test]
fn an_unknown_value_of_a_nested_enum_lists_the_accepted_values_too() {
    let error = load_toml("[audit]\ndurability = \"fast\"\n").expect_err("refused");
    assert!(error.contains("audit.durability") && error.contains("\"batched\""), "{error}");
}

#[test]
fn a_bind_address_with_a_host_name_says_an_ip_address_is_needed() {
    let error = load_toml("[server]\nbind = \"localhost:8080\"\n").expect_err("refused");
    assert!(error.contains("server.bind") && error.contains("127.0.0.1:8080"), "{error}");
}

#[tokio::test]
async fn a_port_in_use_names_the_address_and_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
    let addr = taken.local_addr().expect("addr");
    let error = start_error(|s| s.server.bind = addr).await;
    assert!(error.contains(&addr.to_string()), "{error}");
    assert!(error.contains("server.bind") && error.contains("TOOLGATE__SERVER__BIND"), "{error}");
}

#[tokio::test]
async fn an_admin_port_in_use_names_the_admin_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
    let addr = taken.local_addr().expect("addr");
    let error = start_error(|s| {
        s.server.bind = "127.0.0.1:0".parse().expect("addr");
        s.admin.bind = addr;
    })
    .await;
    assert!(error.contains("admin.bind") && error.contains(&addr.to_string()), "{error}");
}

#[tokio::test]
async fn a_data_directory_that_cannot_be_created_gives_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("written");
    let error = start_error(|s| s.storage.data_dir = file.join("data")).await;
    assert!(error.contains("a-file/data"), "{error}");
    assert!(error.to_lowercase().contains("not a directory"), "the operating system's reason: {error}");
}

#[tokio::test]
async fn a_database_that_cannot_be_reached_is_named_without_its_password() {
    let error = start_error(|s| {
        s.storage.url = Some(Secret::new("postgres://app:s3cret@127.0.0.1:1/toolgate".into()));
        s.storage.acquire_timeout_ms = 500;
    })
    .await;
    assert!(error.contains("127.0.0.1:1/toolgate") && error.contains("storage.url"), "{error}");
    assert!(error.to_lowercase().contains("refused"), "the reason: {error}");
    assert!(!error.contains("s3cret"), "{error}");
}

#[tokio::test]
async fn a_sqlite_file_that_cannot_be_opened_is_named_with_its_setting_and_reason() {
    let data = tempfile::tempdir().expect("data dir");
    // Where the database file should be, a directory: SQLite cannot open it.
    std::fs::create_dir(data.path().join("toolgate.db")).expect("dir");
    let error = start_error(|s| {
        s.storage.url = None;
        s.storage.data_dir = data.path().to_owned();
    })
    .await;
    assert!(error.contains("toolgate.db") && error.contains("storage.data_dir"), "{error}");
    assert!(error.contains("unable to open") || error.contains("directory"), "the reason: {error}");
}

fn toolgate(args: &[&str], data: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env("TOOLGATE__STORAGE__DATA_DIR", data)
        .env_remove("TOOLGATE_CONFIG")
        .output()
        .expect("toolgate runs")
}

#[test]
fn serve_bind_is_checked_like_the_setting() {
    let data = tempfile::tempdir().expect("data dir");
    let out = toolgate(&["serve", "--bind", "0.0.0.0:18557"], data.path());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("auth.mode") && stderr.contains("loopback"), "dev mode stays on loopback: {stderr}");
}

#[test]
fn serve_bind_that_is_not_an_address_is_refused_by_the_parser() {
    let data = tempfile::tempdir().expect("data dir");
    let out = toolgate(&["serve", "--bind", "localhost:8080"], data.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bind"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn every_commands_config_option_says_what_it_takes() {
    let data = tempfile::tempdir().expect("data dir");
    for command in [&["serve"][..], &["check-config"], &["dev-token"], &["migrate"], &["healthcheck"], &["audit"], &["tools", "validate"]] {
        let out = toolgate(&[command, &["--help"]].concat(), data.path());
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("--config <FILE>") && help.contains("TOOLGATE__SECTION__KEY"), "{command:?}: {help}");
    }
}

#[test]
fn the_top_level_help_ends_with_examples_and_the_environment_form() {
    let data = tempfile::tempdir().expect("data dir");
    let help = String::from_utf8_lossy(&toolgate(&["--help"], data.path()).stdout).into_owned();
    assert!(help.contains("Examples:") && help.contains("toolgate serve") && help.contains("toolgate dev-token"), "{help}");
    assert!(help.contains("TOOLGATE__SECTION__KEY"), "{help}");
}

#[test]
fn a_command_tool_that_wraps_a_shell_validates_with_a_warning() {
    let data = tempfile::tempdir().expect("data dir");
    let file = data.path().join("tools.toml");
    let definition = "[[tools]]\nname = \"grep_log\"\ndescription = \"Greps the log.\"\ninput_schema = { type = \"object\", properties = { q = { type = \"string\" } }, required = [\"q\"] }\n[tools.command]\nprogram = \"/bin/sh\"\nargs = [\"-c\", \"grep -- {q} /var/log/app.log\"]\n";
    std::fs::write(&file, definition).expect("written");
    let out = toolgate(&["tools", "validate", file.to_str().expect("utf-8")], data.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "a warning, not a refusal: {stderr}");
    assert!(stderr.contains("warning") && stderr.contains("grep_log") && stderr.contains("runs a shell"), "{stderr}");
}

/// The shipped tools directory on the defaults (the examples pack on): `tools validate` names
/// the pack setting in the same report as every other problem.
#[test]
fn validating_a_file_that_clashes_with_a_built_in_pack_names_the_pack_setting() {
    let data = tempfile::tempdir().expect("data dir");
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/tools");
    let out = toolgate(&["tools", "validate", tools], data.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("analyze_csv") && stderr.contains("TOOLGATE__TOOLS__PACKS__EXAMPLES=false"), "{stderr}");
}

/// The same clash when serving: the start-up error says which setting switches the pack off.
#[tokio::test]
async fn serving_a_file_that_clashes_with_a_built_in_pack_names_the_pack_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tools.toml");
    let definition = "[[tools]]\nname = \"analyze_csv\"\nbuiltin = { id = \"analyze_csv\" }\n";
    std::fs::write(&file, definition).expect("written");
    let error = start_error(|s| {
        s.tools.packs.examples = true;
        s.tools.path = Some(file.clone());
    })
    .await;
    assert!(error.contains("analyze_csv") && error.contains("TOOLGATE__TOOLS__PACKS__EXAMPLES=false"), "{error}");
}
