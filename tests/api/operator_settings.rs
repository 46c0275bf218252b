//! Settings mistakes reported whole: every problem of a settings file at once (as `tools
//! validate` reports a tools file), an unknown key from the environment named by its variable,
//! and a `TOOLGATE_…` variable with single underscores, which is never read, warned about with
//! the variable it probably meant.

use std::path::Path;

use crate::common::load_toml;

/// `toolgate <args>` with `env` set and no other `TOOLGATE_` variable of the test's own.
fn toolgate(args: &[&str], data: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("TOOLGATE_")) {
        cmd.env_remove(name);
    }
    cmd.args(args).env("TOOLGATE__STORAGE__DATA_DIR", data).envs(env.iter().copied()).output().expect("toolgate runs")
}

const SEVERAL_MISTAKES: &str =
    "[server]\nbnd = \"127.0.0.1:8080\"\nmax_body_bytes = 10\n\n[sessions]\nidle_timeout_secs = \"soon\"\n\n[auth]\nmode = \"jwks\"\n";

#[test]
fn a_settings_file_with_several_mistakes_reports_every_one() {
    let error = load_toml(SEVERAL_MISTAKES).expect_err("refused");
    assert!(error.contains("4 problems"), "{error}");
    assert!(error.contains("server.bnd") && error.contains("did you mean `bind`?"), "an unknown key: {error}");
    assert!(
        error.contains("sessions.idle_timeout_secs") && error.contains("a string (4 characters)") && !error.contains("soon"),
        "a wrong type, its value not echoed: {error}"
    );
    assert!(error.contains("auth.mode") && error.contains("\"off\", \"jwt\", \"dev\""), "a value outside its set: {error}");
    assert!(error.contains("server.max_body_bytes") && error.contains("at least 1024"), "a value that reads but cannot work: {error}");
}

#[test]
fn each_problem_of_a_settings_file_names_the_file() {
    let error = load_toml(SEVERAL_MISTAKES).expect_err("refused");
    let from_file = error.lines().filter(|l| l.contains("set in ") && l.contains("toolgate.toml")).count();
    assert_eq!(from_file, 3, "the unknown key, the wrong type and the bad value were set in the file:\n{error}");
}

#[test]
fn check_config_lists_every_problem_of_the_file() {
    let data = tempfile::tempdir().expect("data dir");
    let file = data.path().join("toolgate.toml");
    std::fs::write(&file, SEVERAL_MISTAKES).expect("written");
    let out = toolgate(&["check-config", "-c", file.to_str().expect("utf-8")], data.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for key in ["server.bnd", "sessions.idle_timeout_secs", "auth.mode", "server.max_body_bytes"] {
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

#[test]
fn an_unknown_key_from_the_environment_names_the_variable() {
    let data = tempfile::tempdir().expect("data dir");
    let out = toolgate(&["check-config"], data.path(), &[("TOOLGATE__SERVER__BINDD", "127.0.0.1:9000")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("server.bindd") && stderr.contains("TOOLGATE__SERVER__BINDD"), "{stderr}");
    assert!(stderr.contains("did you mean `bind`?"), "{stderr}");
}

#[test]
fn a_wrong_value_from_the_environment_names_the_variable() {
    let data = tempfile::tempdir().expect("data dir");
    let out = toolgate(&["check-config"], data.path(), &[("TOOLGATE__SESSIONS__MAX_SESSIONS", "many")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sessions.max_sessions") && stderr.contains("TOOLGATE__SESSIONS__MAX_SESSIONS"), "{stderr}");
}

#[test]
fn a_single_underscore_variable_is_warned_about_with_the_variable_meant() {
    let data = tempfile::tempdir().expect("data dir");
    let out = toolgate(&["check-config"], data.path(), &[("TOOLGATE_SERVER_BIND", "0.0.0.0:9000")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "a warning, not a refusal: {stderr}");
    let warning = stderr.lines().find(|l| l.starts_with("warning:")).unwrap_or_default();
    assert!(warning.contains("TOOLGATE_SERVER_BIND") && warning.contains("did you mean TOOLGATE__SERVER__BIND"), "{stderr}");
}

#[test]
fn toolgates_own_variables_are_not_warned_about() {
    let data = tempfile::tempdir().expect("data dir");
    let out = toolgate(&["check-config"], data.path(), &[("TOOLGATE_GIT_SHA", "abc123"), ("TOOLGATE_TOKEN", "x")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("warning"), "{stderr}");
}

#[tokio::test]
async fn serve_logs_the_warning_at_start() {
    use tokio::io::AsyncBufReadExt as _;
    let data = tempfile::tempdir().expect("data dir");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("TOOLGATE_") || k == "RUST_LOG") {
        cmd.env_remove(name);
    }
    let mut child = cmd
        .arg("serve")
        .env("TOOLGATE__SERVER__BIND", "127.0.0.1:0")
        .env("TOOLGATE__ADMIN__BIND", "127.0.0.1:0")
        .env("TOOLGATE__STORAGE__DATA_DIR", data.path())
        .env("TOOLGATE__LOG__FORMAT", "json")
        .env("TOOLGATE_SERVER_MAX_BODY_BYTES", "1024")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("toolgate starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    crate::common::log_line(&mut lines, "toolgate listening", &mut seen).await;
    let warned =
        seen.iter().find(|l| l["level"] == "WARN" && l["message"].as_str().is_some_and(|m| m.contains("TOOLGATE_SERVER_MAX_BODY_BYTES")));
    let message = warned.and_then(|l| l["message"].as_str()).unwrap_or_default();
    assert!(message.contains("TOOLGATE__SERVER__MAX_BODY_BYTES"), "{seen:#?}");
}

/// A secret written as a literal where a `HeaderSource` belongs: a likely mistake.
const LITERAL_SECRETS: &str = "[upstreams.x]\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer sk-live-header-77\" }\n\n[upstreams.x.oauth]\ngrant = \"client_credentials\"\ntoken_url = \"https://example.com/token\"\nclient_id = \"toolgate\"\nclient_secret = \"s3cr3t-oauth-99\"\n";

fn assert_secret_refused(text: &str) {
    for secret in ["sk-live-header-77", "s3cr3t-oauth-99"] {
        assert!(!text.contains(secret), "the secret {secret} is echoed:\n{text}");
    }
    for key in ["upstreams.x.headers.Authorization", "upstreams.x.oauth.client_secret"] {
        let line = text.lines().find(|l| l.contains(key)).unwrap_or_else(|| panic!("{key} is named:\n{text}"));
        assert!(line.contains("{ env = \"VAR\" }") && line.contains("{ file = \"path\" }"), "what to write instead: {line}");
        assert!(line.contains("a string ("), "the value described, not shown: {line}");
    }
}

#[test]
fn operator_settings_a_literal_secret_is_refused_without_echoing_it() {
    let error = load_toml(LITERAL_SECRETS).expect_err("refused");
    assert_secret_refused(&error);
    let data = tempfile::tempdir().expect("data dir");
    let file = data.path().join("toolgate.toml");
    std::fs::write(&file, LITERAL_SECRETS).expect("written");
    for args in [&["check-config", "-c"][..], &["serve", "-c"][..]] {
        let mut args = args.to_vec();
        args.push(file.to_str().expect("utf-8"));
        let out = toolgate(&args, data.path(), &[]);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{args:?} refused: {stderr}");
        assert!(!stdout.contains("s3cr3t-oauth-99") && !stdout.contains("sk-live-header-77"), "{stdout}");
        assert_secret_refused(&stderr);
    }
}

#[test]
fn operator_settings_a_literal_secret_from_the_environment_is_not_echoed() {
    let data = tempfile::tempdir().expect("data dir");
    let env = [
        ("TOOLGATE__UPSTREAMS__X__URL", "https://example.com/mcp"),
        ("TOOLGATE__UPSTREAMS__X__HEADERS__AUTHORIZATION", "Bearer sk-env-secret-55"),
    ];
    let out = toolgate(&["check-config"], data.path(), &env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("sk-env-secret-55") && stderr.contains("TOOLGATE__UPSTREAMS__X__HEADERS__AUTHORIZATION"), "{stderr}");
    assert!(stderr.contains("{ env = \"VAR\" }"), "{stderr}");
}

#[test]
fn operator_settings_a_misnamed_variable_is_warned_about_when_the_settings_fail() {
    let data = tempfile::tempdir().expect("data dir");
    let file = data.path().join("toolgate.toml");
    std::fs::write(&file, "[server]\nmax_body_bytes = 10\n").expect("written");
    let env = [("TOOLGATE_SERVER_BIND", "127.0.0.1:9000")];
    for command in ["check-config", "serve"] {
        let out = toolgate(&[command, "-c", file.to_str().expect("utf-8")], data.path(), &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("TOOLGATE_SERVER_BIND") && stderr.contains("TOOLGATE__SERVER__BIND"), "{command}: {stderr}");
    }
}

#[test]
fn operator_settings_a_bad_value_is_not_judged_by_its_default() {
    let error = load_toml("[server]\nbind = \"0.0.0.0:8080\"\n\n[auth]\nmode = \"JWT\"\n").expect_err("refused");
    assert!(error.contains("auth.mode") && error.contains("is not one of the accepted values"), "{error}");
    assert!(!error.contains("trusts locally minted tokens"), "the default \"dev\" judged instead of \"JWT\": {error}");
}

#[test]
fn operator_settings_each_bad_list_entry_is_reported_at_its_own_index() {
    let error = load_toml("[server]\nallowed_hosts = [\"a.example\", { x = 1 }, \"b.example\", { y = 2 }]\n").expect_err("refused");
    assert!(error.contains("server.allowed_hosts[1]") && error.contains("server.allowed_hosts[3]"), "{error}");
    assert!(!error.contains("allowed_hosts[2]"), "a shifted index: {error}");
}

#[test]
fn operator_settings_a_missing_member_is_reported_beside_a_sibling_upstreams_mistake() {
    // upstreams.a.oauth.grant is left out as a wrong value; upstreams.ab.oauth misses its own
    // grant: a key that only starts like upstreams.a's must not be taken for its consequence.
    let text = "[upstreams.a]\nurl = \"https://a.example/mcp\"\n[upstreams.a.oauth]\ngrant = \"nope\"\n\n[upstreams.ab]\nurl = \"https://b.example/mcp\"\n[upstreams.ab.oauth]\ntoken_url = \"https://b.example/token\"\n";
    let error = load_toml(text).expect_err("refused");
    assert!(error.contains("upstreams.a.oauth.grant"), "{error}");
    assert!(error.contains("upstreams.ab.oauth") && error.contains("`grant` is required here"), "{error}");
}

#[test]
fn operator_settings_a_left_out_member_does_not_hide_its_tables_other_mistakes() {
    let text = "[upstreams.a]\nurl = \"https://a.example/mcp\"\nconnect_timeout_ms = \"slow\"\n[upstreams.a.oauth]\ngrant = \"nope\"\nclient_secret = \"s3cr3t-x\"\n";
    let error = load_toml(text).expect_err("refused");
    for key in ["upstreams.a.oauth.grant", "upstreams.a.oauth.client_secret", "upstreams.a.connect_timeout_ms"] {
        assert!(error.contains(key), "{key}: {error}");
    }
    assert!(!error.contains("s3cr3t-x"), "{error}");
}
