//! YAML tools files and settings files: the same definitions and settings as TOML, the same
//! checks, every problem named by file, tool and field, syntax errors by line and column, and
//! documents that would exhaust the parser (alias bombs, deep nesting) refused.

use std::path::Path;

use serde_json::json;
use toolgate::config::Settings;
use toolgate::tool::Origin;
use toolgate::tooldef::{Compiled, DefinitionErrors, Format, compile_all, parse_text, parse_text_as, read_path};

const TOML: &str = r#"
[[tools]]
name = "get_weather"
title = "Weather"
description = "Current weather for a city. Example: {\"city\": \"Oslo\"}."
scopes = ["weather:read"]
timeout_secs = 10
annotations = { read_only_hint = true }
input_schema = { type = "object", properties = { city = { type = "string", enum = ["Oslo", "NO", "yes"] } }, required = ["city"] }
[tools.http]
url = "https://api.example.com/weather{?city}"
headers = { Accept = "application/json" }
"#;

const YAML: &str = r#"
tools:
  - name: get_weather
    title: Weather
    description: 'Current weather for a city. Example: {"city": "Oslo"}.'
    scopes: [weather:read]
    timeout_secs: 10
    annotations: { read_only_hint: true }
    input_schema:
      type: object
      properties:
        city: { type: string, enum: [Oslo, NO, yes] }   # YAML 1.1 booleans stay strings
      required: [city]
    http:
      url: "https://api.example.com/weather{?city}"
      headers:
        Accept: application/json
"#;

fn compile_yaml(text: &str) -> Result<Vec<Compiled>, DefinitionErrors> {
    let raws = parse_text_as(text, Format::Yaml, "tools.yaml", Path::new("."))?;
    compile_all(&raws, &Settings::default(), Origin::File, "tools.yaml")
}

fn errors_of(text: &str) -> Vec<(String, String, String)> {
    let err = compile_yaml(text).expect_err("invalid");
    err.tools.iter().flat_map(|t| t.errors.iter().map(|e| (t.tool.clone(), e.field.clone(), e.message.clone()))).collect()
}

#[test]
fn a_yaml_definition_reads_exactly_as_the_same_toml() {
    let from_toml = parse_text(TOML, false, "tools.toml", Path::new(".")).expect("toml parses");
    let from_yaml = parse_text_as(YAML, Format::Yaml, "tools.yaml", Path::new(".")).expect("yaml parses");
    assert_eq!(from_toml[0].value, from_yaml[0].value, "the same definition, so the same fingerprint");
    assert_eq!(from_yaml[0].value["input_schema"]["properties"]["city"]["enum"], json!(["Oslo", "NO", "yes"]));
    let compiled = compile_yaml(YAML).expect("valid");
    let tool = compiled[0].tool.as_ref().expect("enabled");
    assert_eq!(tool.descriptor().title.as_deref(), Some("Weather"));
    assert_eq!(tool.scopes(), ["weather:read"]);
}

#[test]
fn every_problem_of_a_yaml_definition_is_reported_with_its_tool_and_field() {
    let errors = errors_of(
        "tools:\n  - name: bad name!\n    description: x\n    colour: red\n    http:\n      method: FETCH\n      url: https://example.com/x\n  - name: no_kind\n    description: y\n",
    );
    let has = |tool: &str, field: &str| errors.iter().any(|(t, f, _)| t == tool && f == field);
    for field in ["name", "colour", "http.method"] {
        assert!(has("bad name!", field), "{field}: {errors:#?}");
    }
    assert!(has("no_kind", "definition"), "{errors:#?}");
}

#[test]
fn header_templates_and_query_secrets_are_checked_like_the_rest() {
    let errors = errors_of(
        r#"
tools:
  - name: t
    description: x
    input_schema: { type: object, properties: { trace: { type: string } } }
    http:
      url: https://api.example.com/x
      headers:
        X-Trace: "{trace}"
        X-Span: "{span}"
        X-Literal: "{{not a field}}"
        Authorization: "Bearer {trace}"
      query:
        api_key: { env: NOT_ALLOWED }
"#,
    );
    let has = |field: &str, text: &str| errors.iter().any(|(_, f, m)| f == field && m.contains(text));
    assert!(has("http.headers.X-Span", "`{span}`"), "{errors:#?}");
    assert!(has("http.headers.Authorization", "credentials never go inline"), "{errors:#?}");
    assert!(has("http.query.api_key", "tools.http.secret_env"), "{errors:#?}");
    assert!(!errors.iter().any(|(_, f, _)| f == "http.headers.X-Trace" || f == "http.headers.X-Literal"), "{errors:#?}");
}

#[test]
fn a_yaml_syntax_error_names_the_file_line_and_column() {
    let err = compile_yaml("tools:\n  - name: t\n    description: \"x\n").expect_err("syntax");
    let text = err.to_string();
    assert!(text.starts_with("tools.yaml: invalid YAML: line 3 column 18"), "{text}");
    assert!(text.contains("--> tools.yaml:3:18") && text.contains('^'), "the line, with a caret: {text}");
}

#[test]
fn the_file_shape_is_explained_in_yaml_terms() {
    let err = compile_yaml("- name: t\n").expect_err("a bare list");
    assert!(err.to_string().contains("`tools:` followed by `- name: ...`"), "{err}");
    let err = compile_yaml("tool:\n  - name: t\n").expect_err("a typo");
    assert!(err.to_string().contains("unknown top-level key `tool`"), "{err}");
    assert!(compile_yaml("# nothing yet\n").expect("an empty file has no tools").is_empty());
}

#[test]
fn an_alias_bomb_is_refused_before_it_is_expanded() {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    text.push_str("tools: []\n");
    let started = std::time::Instant::now();
    let err = compile_yaml(&text).expect_err("refused");
    assert!(err.to_string().starts_with("tools.yaml: invalid YAML"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "refused quickly");
}

#[test]
fn deep_nesting_is_refused_with_a_message() {
    let text = format!("tools: {}{}\n", "[".repeat(50_000), "]".repeat(50_000));
    let err = compile_yaml(&text).expect_err("refused");
    assert!(err.to_string().starts_with("tools.yaml: invalid YAML"), "{err}");
}

#[test]
fn a_directory_reads_toml_yaml_yml_and_json_files_and_names_duplicates_by_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = |name: &str| format!("tools:\n  - name: {name}\n    description: Echo.\n    builtin: {{ id: echo }}\n");
    std::fs::write(dir.path().join("a.yaml"), one("from_yaml")).expect("written");
    std::fs::write(dir.path().join("b.yml"), one("from_yml")).expect("written");
    std::fs::write(dir.path().join("c.toml"), "[[tools]]\nname = \"from_toml\"\ndescription = \"Echo.\"\nbuiltin = { id = \"echo\" }\n")
        .expect("written");
    std::fs::write(
        dir.path().join("d.json"),
        json!({"tools": [{"name": "from_json", "description": "Echo.", "builtin": {"id": "echo"}}]}).to_string(),
    )
    .expect("written");
    std::fs::write(dir.path().join(".e.yaml.swp"), "not: [yaml").expect("written");
    let raws = read_path(dir.path()).expect("reads");
    let names: Vec<String> = raws.iter().enumerate().map(|(i, r)| r.label(i)).collect();
    assert_eq!(names, ["from_yaml", "from_yml", "from_toml", "from_json"]);
    assert!(raws[0].source.ends_with("a.yaml") && raws[1].source.ends_with("b.yml"), "each definition names its file");

    std::fs::write(dir.path().join("e.yaml"), one("from_toml")).expect("written");
    let raws = read_path(dir.path()).expect("reads");
    let err = compile_all(&raws, &Settings::default(), Origin::File, "tools.d").expect_err("duplicate");
    assert!(err.to_string().contains("\"from_toml\" is defined twice (in ") && err.to_string().contains("e.yaml"), "{err}");
}

fn toolgate(args: &[&str], data: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.args(args).env("TOOLGATE__STORAGE__DATA_DIR", data).env_remove("TOOLGATE_CONFIG");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("toolgate runs")
}

#[test]
fn tools_validate_and_list_read_yaml_files() {
    let data = tempfile::tempdir().expect("data dir");
    let file = data.path().join("weather.yaml");
    std::fs::write(&file, YAML).expect("written");
    let out = toolgate(&["tools", "validate", file.to_str().expect("utf-8")], data.path(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 valid tool definitions: get_weather"));

    let out = toolgate(&["tools", "list", "--json"], data.path(), &[("TOOLGATE__TOOLS__PATH", file.to_str().expect("utf-8"))]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.lines().any(|l| l.contains("\"get_weather\"") && l.contains("\"file\"") && l.contains("\"http\"")), "{listed}");

    std::fs::write(&file, "tools:\n  - name: t\n    descriptio: x\n    builtin: { id: echo }\n").expect("written");
    let out = toolgate(&["tools", "validate", file.to_str().expect("utf-8")], data.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("weather.yaml: tool \"t\": descriptio: unknown field"), "{stderr}");
}

// ===== settings =====

fn load(name: &str, text: &str) -> Result<Settings, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("written");
    Settings::load(Some(&path)).map_err(|e| format!("{:#}", anyhow::Error::from(e)))
}

#[test]
fn a_yaml_settings_file_sets_what_the_same_toml_sets() {
    let yaml = load(
        "toolgate.yaml",
        "server:\n  bind: 127.0.0.1:9999\n  allowed_hosts: [localhost, example.com]\ntools:\n  packs:\n    conformance: true\n  http:\n    secret_env: [GITHUB_TOKEN]\nupstreams:\n  docs:\n    url: https://mcp.example.com/mcp\n",
    )
    .expect("loads");
    let toml = load(
        "toolgate.toml",
        "[server]\nbind = \"127.0.0.1:9999\"\nallowed_hosts = [\"localhost\", \"example.com\"]\n[tools.packs]\nconformance = true\n[tools.http]\nsecret_env = [\"GITHUB_TOKEN\"]\n[upstreams.docs]\nurl = \"https://mcp.example.com/mcp\"\n",
    )
    .expect("loads");
    assert_eq!(format!("{yaml:?}"), format!("{toml:?}"));
    assert_eq!(yaml.server.bind.port(), 9999);
    assert!(yaml.tools.packs.conformance && yaml.upstreams.contains_key("docs"));
    let yml = load("toolgate.yml", "sessions:\n  max_per_client: 3\n").expect("loads");
    assert_eq!(yml.sessions.max_per_client, 3);
}

#[test]
fn an_unknown_key_in_a_yaml_settings_file_is_refused_by_name() {
    let error = load("toolgate.yaml", "server:\n  bnd: 127.0.0.1:9999\n").expect_err("refused");
    assert!(error.contains("unknown field `bnd`") && error.contains("server"), "{error}");
    let error = load("toolgate.yaml", "auth:\n  mode: jwks\n").expect_err("refused");
    assert!(error.contains("auth.mode") && error.contains("\"off\", \"jwt\", \"dev\""), "{error}");
}

#[test]
fn a_yaml_settings_syntax_error_names_the_file_line_and_column() {
    let error = load("toolgate.yaml", "server:\n  bind: [\n").expect_err("refused");
    assert!(error.contains("invalid YAML: line 2 column 9") && error.contains("toolgate.yaml"), "{error}");
}

#[test]
fn toolgate_config_may_name_a_yaml_file_and_the_environment_still_wins() {
    let data = tempfile::tempdir().expect("data dir");
    let tools = data.path().join("weather.yaml");
    std::fs::write(&tools, YAML).expect("written");
    let file = data.path().join("toolgate.yaml");
    std::fs::write(&file, format!("tools:\n  path: {}\n  packs:\n    examples: true\n", tools.display())).expect("written");
    let path = file.to_str().expect("utf-8");
    let list = |env: &[(&str, &str)]| {
        let out = toolgate(&["tools", "list", "--json"], data.path(), env);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = list(&[("TOOLGATE_CONFIG", path)]);
    assert!(listed.contains("\"get_weather\"") && listed.contains("\"analyze_csv\""), "the file's tools and the packs: {listed}");
    let listed = list(&[("TOOLGATE_CONFIG", path), ("TOOLGATE__TOOLS__PACKS__EXAMPLES", "false")]);
    assert!(listed.contains("\"get_weather\"") && !listed.contains("\"analyze_csv\""), "the environment wins: {listed}");

    std::fs::write(&file, "server:\n  nmae: x\n").expect("written");
    let out = toolgate(&["dev-token", "--config", path], data.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("unknown field `nmae`"), "{stderr}");
}
