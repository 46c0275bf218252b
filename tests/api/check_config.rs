//! `toolgate check-config` prints the effective settings as TOML, each value with where it came
//! from (default, file, environment), never a secret, and as a file that loads again.

use std::path::Path;

use toolgate::config::Settings;

/// Runs `check-config -c FILE` with `env` set (and no other `TOOLGATE__` variable of the
/// test's environment); its standard output.
fn check_config(file: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.args(["check-config", "-c"]).arg(file).env_remove("TOOLGATE_CONFIG");
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("TOOLGATE__")) {
        cmd.env_remove(name);
    }
    let out = cmd.envs(env.iter().copied()).output().expect("toolgate runs");
    assert!(out.status.success(), "check-config failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

fn settings_file(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("toolgate.toml");
    std::fs::write(&path, text).expect("write settings");
    path
}

fn line_of<'a>(report: &'a str, start: &str) -> &'a str {
    report.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no line starting {start:?} in:\n{report}"))
}

#[test]
fn each_value_names_the_file_the_variable_or_the_default_it_came_from() {
    let dir = tempfile::tempdir().expect("dir");
    let file = settings_file(dir.path(), "[server]\nname = \"from-the-file\"\nmax_batch_items = 3\n");
    let report = check_config(&file, &[("TOOLGATE__SERVER__MAX_BATCH_ITEMS", "7")]);
    let shown = file.display().to_string();
    assert_eq!(line_of(&report, "name = "), format!("name = \"from-the-file\" # file {shown}"));
    assert_eq!(line_of(&report, "max_batch_items = "), "max_batch_items = 7 # env TOOLGATE__SERVER__MAX_BATCH_ITEMS", "the variable wins");
    assert_eq!(line_of(&report, "legacy_sse = "), "legacy_sse = true # default");
}

#[test]
fn secrets_are_redacted_wherever_they_come_from() {
    let dir = tempfile::tempdir().expect("dir");
    let file = settings_file(dir.path(), "[sessions]\nsecret = \"file-secret-value-0123456789abcdef\"\n");
    let report = check_config(&file, &[("TOOLGATE__STORAGE__URL", "postgres://toolgate:hunter2@db.internal/toolgate")]);
    assert!(!report.contains("file-secret-value") && !report.contains("hunter2"), "{report}");
    assert!(line_of(&report, "secret = ").starts_with("secret = \"<redacted>\" # file"), "{report}");
    assert_eq!(line_of(&report, "url = \"<redacted>\" # env"), "url = \"<redacted>\" # env TOOLGATE__STORAGE__URL");
}

#[test]
fn an_upstreams_program_secrets_are_redacted() {
    let dir = tempfile::tempdir().expect("dir");
    let text = "[upstreams.db]\nallow_private = true\n[upstreams.db.stdio]\nprogram = \"npx\"\n\
                args = [\"server-postgres\", \"postgresql://app:pg-pass-4711@db/x\", \"--api-key=sk-live-0815\"]\n\
                env = { API_TOKEN = \"env-token-2342\" }\n";
    let report = check_config(&settings_file(dir.path(), text), &[]);
    for secret in ["pg-pass-4711", "sk-live-0815", "env-token-2342"] {
        assert!(!report.contains(secret), "{secret} in:\n{report}");
    }
    assert!(report.contains("API_TOKEN = \"<redacted>\""), "the variable's name stays: {report}");
}

#[test]
fn the_report_is_a_settings_file_that_loads_to_the_same_settings() {
    let dir = tempfile::tempdir().expect("dir");
    let file = settings_file(dir.path(), "[server]\nname = \"round-trip\"\n\n[tools.packs]\nexamples = false\n");
    let report = check_config(&file, &[]);
    let again = settings_file(dir.path(), &report);
    let loaded = Settings::load(Some(&again)).expect("the report loads as settings");
    let original = Settings::load(Some(&file)).expect("the original loads");
    assert_eq!(toml::Value::try_from(&loaded).expect("toml"), toml::Value::try_from(&original).expect("toml"));
}
