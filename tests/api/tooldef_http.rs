//! `http` declarative tools against real HTTP servers (wiremock on loopback): definitions are
//! written as tools-file TOML, compiled through `HttpTool::build` and called with a detached
//! `ToolContext`, so these tests exercise the real config shape and the real client (guarded
//! resolver, redirect policy, retries, caps).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use toolgate::config::ToolSettings;
use toolgate::protocol::{CallToolResult, Content};
use toolgate::tool::{ToolContext, ToolError};
use toolgate::tooldef::http::HttpTool;
use toolgate::tooldef::{BuildCtx, FieldError, ResponseFormat, ToolsFile};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Settings that let tools reach the mock servers on 127.0.0.1, with fast retries, and read
/// secrets from the variable and the temporary files the tests use (none by default).
fn loopback_settings() -> ToolSettings {
    let mut settings = ToolSettings::default();
    settings.http.allow_hosts = vec!["127.0.0.1".into()];
    settings.http.retry_base_delay_ms = 10;
    settings.http.secret_env = vec!["CARGO_*".into(), "TOOLGATE_TEST_*".into()];
    settings.http.secret_dirs = vec![std::env::temp_dir(), "/nonexistent".into()];
    settings
}

/// Compiles the first tool of a tools-file TOML text; `MOCK` in it becomes `base`.
fn build_with(toml_text: &str, base: &str, settings: &ToolSettings) -> Result<HttpTool, Vec<FieldError>> {
    let file: ToolsFile = toml::from_str(&toml_text.replace("MOCK", base)).expect("a valid tools file");
    let def = &file.tools[0];
    let schema = def.input_schema.clone().unwrap_or_else(|| json!({"type": "object"}));
    let cx = BuildCtx {
        tool: &def.name,
        input_schema: &schema,
        idempotent: def.annotations.as_ref().and_then(|a| a.idempotent_hint).unwrap_or(false),
        base_dir: Path::new("/"),
        settings,
    };
    HttpTool::build(def.http.as_ref().expect("an http tool"), &cx)
}

fn build(toml_text: &str, server: &MockServer) -> HttpTool {
    build_with(toml_text, &server.uri(), &loopback_settings()).expect("the definition compiles")
}

async fn call_as(tool: &HttpTool, args: Value, format: ResponseFormat) -> Result<CallToolResult, ToolError> {
    let args = args.as_object().cloned().unwrap_or_default();
    tool.call(&ToolContext::detached("t", args, CancellationToken::new()), format).await
}

async fn call(tool: &HttpTool, args: Value) -> Result<CallToolResult, ToolError> {
    call_as(tool, args, ResponseFormat::Markdown).await
}

fn text(result: &CallToolResult) -> &str {
    match result.content.first() {
        Some(Content::Text { text, .. }) => text,
        other => panic!("expected a text block, got {other:?}"),
    }
}

/// The message of a `Failed` (isError) outcome.
fn failure(outcome: Result<CallToolResult, ToolError>) -> String {
    match outcome {
        Err(ToolError::Failed(message)) => message,
        other => panic!("expected ToolError::Failed, got {other:?}"),
    }
}

fn field_errors(outcome: Result<HttpTool, Vec<FieldError>>) -> Vec<FieldError> {
    match outcome {
        Err(errors) => errors,
        Ok(tool) => panic!("expected build errors, got {tool:?}"),
    }
}

fn has_error(errors: &[FieldError], field: &str, needle: &str) -> bool {
    errors.iter().any(|e| e.field == field && e.message.contains(needle))
}

async fn requests(server: &MockServer) -> Vec<wiremock::Request> {
    server.received_requests().await.expect("request recording is on")
}

const REPO_TOOL: &str = r#"
[[tools]]
name = "list_issues"
description = "Lists issues."
input_schema = { type = "object", properties = { owner = { type = "string" }, repo = { type = "string" }, state = { type = "string" }, per_page = { type = "integer" }, labels = { type = "array", items = { type = "string" } }, q = { type = "string" } } }

[tools.http]
url = "MOCK/repos/{owner}/{repo}/issues{?state,per_page}"
query = { labels = "{labels}", search = "repo:{owner}/{repo} {q}" }
"#;

#[tokio::test]
async fn path_and_query_values_are_percent_encoded() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200).set_body_json(json!([]))).mount(&server).await;
    let tool = build(REPO_TOOL, &server);

    call(&tool, json!({"owner": "a b", "repo": "x/../y?z", "state": "open"})).await.expect("success");
    call(&tool, json!({"owner": "zoë", "repo": "r", "per_page": 5, "labels": ["bug", "p 1"], "q": "is:open"})).await.expect("success");

    let seen = requests(&server).await;
    assert_eq!(seen[0].url.path(), "/repos/a%20b/x%2F..%2Fy%3Fz/issues");
    assert_eq!(seen[0].url.query(), Some("state=open"), "absent arguments are left out of the query");
    assert_eq!(seen[1].url.path(), "/repos/zo%C3%AB/r/issues");
    let pairs: Vec<(String, String)> = seen[1].url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    let expected = [("per_page", "5"), ("labels", "bug"), ("labels", "p 1"), ("search", "repo:zoë/r is:open")];
    assert_eq!(pairs, expected.map(|(k, v)| (k.to_owned(), v.to_owned())));
}

#[tokio::test]
async fn a_dot_dot_path_argument_is_refused_before_sending() {
    let server = MockServer::start().await;
    let tool = build(REPO_TOOL, &server);
    for owner in ["..", "."] {
        match call(&tool, json!({"owner": owner, "repo": "r"})).await {
            Err(ToolError::InvalidArguments(m)) => assert!(m.contains("`.` or `..`"), "{m}"),
            other => panic!("expected invalid arguments, got {other:?}"),
        }
    }
    assert!(requests(&server).await.is_empty());
}

const CREATE_ISSUE: &str = r#"
[[tools]]
name = "create_issue"
description = "Creates an issue."
input_schema = { type = "object", properties = { owner = { type = "string" }, repo = { type = "string" }, title = { type = "string" }, body = { type = "string" }, labels = { type = "array" }, priority = { type = "integer" } }, required = ["owner", "repo", "title"] }

[tools.http]
method = "POST"
url = "MOCK/repos/{owner}/{repo}/issues"
body = { title = "{title}", body = "{body}", labels = "{labels}", meta = { priority = "{priority}", source = "toolgate", summary = "{title} (p{priority})" } }
response = { text = "Created issue #{{ response.number }}: {{ response.html_url }}" }
"#;

#[tokio::test]
async fn the_body_template_substitutes_typed_values_and_drops_absent_ones() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/repos/o/r/issues"))
        .and(header("content-type", "application/json"))
        .and(body_json(
            json!({"title": "Crash", "labels": ["bug", "p1"], "meta": {"priority": 2, "source": "toolgate", "summary": "Crash (p2)"}}),
        ))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"number": 7, "html_url": "https://example.com/o/r/issues/7"})))
        .expect(1)
        .mount(&server)
        .await;
    let tool = build(CREATE_ISSUE, &server);
    let result =
        call(&tool, json!({"owner": "o", "repo": "r", "title": "Crash", "labels": ["bug", "p1"], "priority": 2})).await.expect("created");
    assert_eq!(text(&result), "Created issue #7: https://example.com/o/r/issues/7");
    assert_eq!(result.structured_content, Some(json!({"number": 7, "html_url": "https://example.com/o/r/issues/7"})));
}

#[tokio::test]
async fn credentials_come_from_env_and_files_at_call_time() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("token");
    std::fs::write(&secret_file, "file-secret-1\n").expect("write secret");
    // Cargo sets CARGO_MANIFEST_DIR for test processes; the Rust 2024 crate forbids the unsafe
    // `set_var`, so an existing variable stands in for a token.
    let env_value = env!("CARGO_MANIFEST_DIR");
    Mock::given(header("authorization", "Bearer file-secret-1"))
        .and(header("x-env-credential", format!("env {env_value}").as_str()))
        .and(header("accept", "application/json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": 1})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(header("authorization", "Bearer file-secret-2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": 2})))
        .expect(1)
        .mount(&server)
        .await;
    let definition = format!(
        r#"
[[tools]]
name = "secret_headers"
[tools.http]
url = "MOCK/me"
headers = {{ Accept = "application/json", Authorization = {{ file = "{}", prefix = "Bearer " }}, X-Env-Credential = {{ env = "CARGO_MANIFEST_DIR", prefix = "env " }} }}
"#,
        secret_file.display()
    );
    let tool = build(&definition, &server);
    assert!(!format!("{tool:?}").contains("file-secret"), "Debug never shows a secret");
    let first = call(&tool, json!({})).await.expect("success");
    assert_eq!(first.structured_content, Some(json!({"ok": 1})));
    std::fs::write(&secret_file, "file-secret-2\n").expect("rotate secret");
    let second = call(&tool, json!({})).await.expect("success after rotation");
    assert_eq!(second.structured_content, Some(json!({"ok": 2})));
}

#[tokio::test]
async fn a_missing_credential_is_a_misconfiguration_and_nothing_is_sent() {
    let server = MockServer::start().await;
    for header_value in [r#"{ env = "TOOLGATE_TEST_SURELY_UNSET_7F3A" }"#, r#"{ file = "/nonexistent/toolgate/secret" }"#] {
        let tool = build(
            &format!("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/x\"\nheaders = {{ X-Api-Key = {header_value} }}\n"),
            &server,
        );
        let message = failure(call(&tool, json!({})).await);
        assert_eq!(message, "The tool is misconfigured on the server: a credential is unavailable; tell the operator.");
    }
    assert!(requests(&server).await.is_empty());
}

#[tokio::test]
async fn secret_values_never_reach_results_or_error_messages() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("token");
    let secret = "sk-live-0123456789abcdef";
    std::fs::write(&secret_file, format!("{secret}\n")).expect("write secret");
    Mock::given(path("/echo"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"you_sent": format!("Bearer {secret}"), "items": [{"token": secret}]})),
        )
        .mount(&server)
        .await;
    Mock::given(path("/denied"))
        .respond_with(ResponseTemplate::new(401).set_body_string(format!("invalid token {secret} for this resource")))
        .mount(&server)
        .await;
    let tool_for = |p: &str| {
        build(
            &format!(
                "[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK{p}\"\nheaders = {{ Authorization = {{ file = \"{}\", prefix = \"Bearer \" }} }}\n",
                secret_file.display()
            ),
            &server,
        )
    };
    for format in [ResponseFormat::Markdown, ResponseFormat::Json] {
        let result = call_as(&tool_for("/echo"), json!({}), format).await.expect("success");
        let everything = serde_json::to_string(&result).expect("serializable");
        assert!(!everything.contains(secret), "{everything}");
        assert!(everything.contains("[redacted]"), "{everything}");
    }
    let message = failure(call(&tool_for("/denied"), json!({})).await);
    assert!(message.contains("401 Unauthorized") && message.contains("invalid token [redacted]"), "{message}");
    assert!(!message.contains(secret), "{message}");
}

#[tokio::test]
async fn literal_credentials_are_refused_at_build_time() {
    let errors = field_errors(build_with(
        r#"
[[tools]]
name = "t"
[tools.http]
url = "https://api.example.com/x"
headers = { Authorization = "Bearer abc", X-Api-Key = "abc", Cookie = "s=1", Accept = "application/json", Host = "evil" }
"#,
        "",
        &ToolSettings::default(),
    ));
    for name in ["Authorization", "X-Api-Key", "Cookie"] {
        assert!(has_error(&errors, &format!("http.headers.{name}"), "use { env = \"VAR\" } or { file"), "{name}: {errors:?}");
    }
    assert!(has_error(&errors, "http.headers.Host", "set by the HTTP client"), "{errors:?}");
    assert!(!errors.iter().any(|e| e.field == "http.headers.Accept"), "{errors:?}");
}

#[tokio::test]
async fn every_build_problem_is_reported_with_its_field() {
    let errors = field_errors(build_with(
        r#"
[[tools]]
name = "t"
input_schema = { type = "object", properties = { id = { type = "string" } } }
[tools.http]
method = "post"
url = "https://api.example.com/items/{id}/{nope}"
query = { a = "{missing}", b = "{bad field}" }
body = { x = "{ghost}", y = ["{id}", "{oops"] }
retries = 3
response = { structured = "items", text = "{% for x in result %}{{ x }}" }
headers = { Authorization = { env = "A", file = "/b" } }
"#,
        "",
        &ToolSettings::default(),
    ));
    let expected = [
        ("http.url", "`{nope}`"),
        ("http.query.a", "`{missing}`"),
        ("http.query.b", "not a placeholder"),
        ("http.body.y[1]", "not closed"),
        ("http.retries", "POST is not idempotent"),
        ("http.response.structured", "JSON pointer"),
        ("http.response.text", "does not compile"),
        ("http.headers.Authorization", "not both"),
    ];
    for (field, needle) in expected {
        assert!(has_error(&errors, field, needle), "{field} / {needle}: {errors:?}");
    }

    let errors = field_errors(build_with(
        r#"
[[tools]]
name = "t"
input_schema = { type = "object", properties = { id = { type = "string" } } }
[tools.http]
url = "https://{id}.example.com/"
body = { a = 1 }
response = { text = "{{ args.secret }} {{ env }}" }
"#,
        "",
        &ToolSettings::default(),
    ));
    assert!(has_error(&errors, "http.url", "host part of the URL must be fixed"), "{errors:?}");
    assert!(has_error(&errors, "http.body", "GET request has no body"), "{errors:?}");
    assert!(has_error(&errors, "http.response.text", "`env`"), "{errors:?}");

    // An idempotent POST may retry.
    let ok = build_with(
        "[[tools]]\nname = \"t\"\nannotations = { idempotent_hint = true }\n[tools.http]\nmethod = \"POST\"\nurl = \"https://api.example.com/\"\nretries = 2\n",
        "",
        &ToolSettings::default(),
    );
    assert!(ok.is_ok(), "{ok:?}");
}

const WEATHER: &str = r#"
[[tools]]
name = "get_weather"
input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
[tools.http]
url = "MOCK/weather{?city}"
[tools.http.response]
structured = "/current"
text = "{{ args.city }}: {{ result.temp }}°C, {{ result.sky }} (HTTP {{ status }})"
"#;

#[tokio::test]
async fn responses_are_mapped_by_pointer_and_rendered_by_the_text_template() {
    let server = MockServer::start().await;
    Mock::given(path("/weather"))
        .and(query_param("city", "Zürich"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"current": {"temp": 21.5, "sky": "clear"}, "noise": [1, 2, 3]})))
        .mount(&server)
        .await;
    let tool = build(WEATHER, &server);
    let md = call(&tool, json!({"city": "Zürich"})).await.expect("success");
    assert_eq!(text(&md), "Zürich: 21.5°C, clear (HTTP 200)");
    assert_eq!(md.structured_content, Some(json!({"temp": 21.5, "sky": "clear"})));

    let js = call_as(&tool, json!({"city": "Zürich"}), ResponseFormat::Json).await.expect("success");
    let parsed: Value = serde_json::from_str(text(&js)).expect("JSON text");
    assert_eq!(parsed, json!({"temp": 21.5, "sky": "clear"}));
    assert!(text(&js).contains('\n'), "pretty-printed");
}

#[tokio::test]
async fn default_markdown_renders_objects_as_bullets_and_arrays_as_tables() {
    let server = MockServer::start().await;
    Mock::given(path("/users"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!([{"login": "ann", "id": 1, "site_admin": false}, {"login": "bob", "id": 2}])),
        )
        .mount(&server)
        .await;
    Mock::given(path("/repo"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"name": "toolgate", "stars": 42})))
        .mount(&server)
        .await;
    let users = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/users\"\n", &server);
    let result = call(&users, json!({})).await.expect("success");
    let md = text(&result);
    assert!(md.starts_with("| id | login | site_admin |\n| --- | --- | --- |\n| 1 | ann | false |\n| 2 | bob |  |"), "{md}");
    assert_eq!(
        result.structured_content,
        Some(json!({"items": [{"login": "ann", "id": 1, "site_admin": false}, {"login": "bob", "id": 2}]}))
    );
    let repo = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/repo\"\n", &server);
    assert_eq!(text(&call(&repo, json!({})).await.expect("success")), "- **name**: toolgate\n- **stars**: 42");
}

#[tokio::test]
async fn text_responses_come_back_as_text() {
    let server = MockServer::start().await;
    Mock::given(path("/plain")).respond_with(ResponseTemplate::new(200).set_body_raw("just words", "text/plain")).mount(&server).await;
    let tool = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/plain\"\n", &server);
    let result = call(&tool, json!({})).await.expect("success");
    assert_eq!(text(&result), "just words");
    assert_eq!(result.structured_content, None);
}

const LIST_PAGED: &str = r#"
[[tools]]
name = "list_repos"
input_schema = { type = "object", properties = { limit = { type = "integer" }, offset = { type = "integer" } } }
[tools.http]
url = "MOCK/repos"
response = { structured = "/items" }
[tools.http.pagination]
limit = "per_page"
page = "page"
default_limit = 2
total_count = "/total_count"
"#;

#[tokio::test]
async fn pagination_arguments_pass_through_and_the_result_says_where_to_continue() {
    let server = MockServer::start().await;
    Mock::given(path("/repos"))
        .and(query_param("per_page", "2"))
        .and(query_param("page", "2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"total_count": 5, "items": [{"name": "c"}, {"name": "d"}]})))
        .expect(1)
        .mount(&server)
        .await;
    let tool = build(LIST_PAGED, &server);
    let result = call(&tool, json!({"offset": 2})).await.expect("success");
    assert_eq!(
        result.structured_content,
        Some(json!({"items": [{"name": "c"}, {"name": "d"}], "count": 2, "has_more": true, "next_offset": 4, "total_count": 5}))
    );
    assert!(text(&result).ends_with("Showing 2 of 5. More results: call again with offset = 4."), "{}", text(&result));
    match call(&tool, json!({"offset": 3})).await {
        Err(ToolError::InvalidArguments(m)) => assert!(m.contains("multiple of `limit` (2)"), "{m}"),
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

#[tokio::test]
async fn a_link_header_with_rel_next_means_there_is_more() {
    let server = MockServer::start().await;
    Mock::given(path("/events"))
        .and(query_param("cursor", "abc"))
        .respond_with(
            ResponseTemplate::new(200).insert_header("link", "<https://x/events?page=3>; rel=\"next\"").set_body_json(json!([{"id": 1}])),
        )
        .mount(&server)
        .await;
    let tool = build(
        r#"
[[tools]]
name = "events"
input_schema = { type = "object", properties = { limit = { type = "integer" }, offset = { type = "integer" }, cursor = { type = "string" } } }
[tools.http]
url = "MOCK/events"
pagination = { limit = "limit", offset = "offset", cursor = "cursor" }
"#,
        &server,
    );
    let result = call_as(&tool, json!({"cursor": "abc", "limit": 10}), ResponseFormat::Json).await.expect("success");
    let structured = result.structured_content.expect("structured");
    assert_eq!(structured["has_more"], true);
    assert_eq!(structured["next_offset"], 1);
    let seen = requests(&server).await;
    assert_eq!(seen[0].url.query(), Some("limit=10&cursor=abc"));
}

#[tokio::test]
async fn upstream_errors_become_useful_messages() {
    let server = MockServer::start().await;
    Mock::given(path("/missing"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found", "documentation_url": "https://docs"})))
        .mount(&server)
        .await;
    Mock::given(path("/broken")).respond_with(ResponseTemplate::new(500).set_body_string("panic at db 10.1.2.3")).mount(&server).await;
    Mock::given(path("/bad-json")).respond_with(ResponseTemplate::new(200).set_body_raw("{oops", "application/json")).mount(&server).await;

    let tool = |p: &str| build(&format!("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK{p}\"\nretries = 0\n"), &server);
    let m = failure(call(&tool("/missing"), json!({})).await);
    assert!(m.contains("404 Not Found") && m.contains(r#""message":"Not Found""#), "{m}");
    let m = failure(call(&tool("/broken"), json!({})).await);
    assert_eq!(m, "The upstream failed with 500 Internal Server Error; try again later.");
    let m = failure(call(&tool("/bad-json"), json!({})).await);
    assert!(m.contains("invalid JSON"), "{m}");
}

#[tokio::test]
async fn a_slow_upstream_times_out_with_a_clear_message() {
    let server = MockServer::start().await;
    Mock::given(path("/slow")).respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5))).mount(&server).await;
    let tool = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/slow\"\ntimeout_ms = 300\nretries = 0\n", &server);
    let started = Instant::now();
    let m = failure(call(&tool, json!({})).await);
    assert!(m.contains("did not answer within 300 ms"), "{m}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn an_unreachable_upstream_says_so_without_addresses() {
    // A port nobody listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let tool = build_with(
        "[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/\"\nretries = 0\n",
        &format!("http://127.0.0.1:{port}"),
        &loopback_settings(),
    )
    .expect("compiles");
    let m = failure(call(&tool, json!({})).await);
    assert_eq!(m, "The upstream 127.0.0.1 is unreachable (the connection failed); try again later.");
}

#[tokio::test]
async fn gets_retry_on_503_but_posts_never_retry() {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(503)).up_to_n_times(2).mount(&server).await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true}))).mount(&server).await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).mount(&server).await;

    let get = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/flaky\"\n", &server);
    let result = call(&get, json!({})).await.expect("succeeds on the third attempt");
    assert_eq!(result.structured_content, Some(json!({"ok": true})));
    assert_eq!(requests(&server).await.len(), 3);

    let post = build("[[tools]]\nname = \"t\"\n[tools.http]\nmethod = \"POST\"\nurl = \"MOCK/flaky\"\n", &server);
    let m = failure(call(&post, json!({})).await);
    assert!(m.contains("503 Service Unavailable") && m.contains("try again later"), "{m}");
    let posts = requests(&server).await.iter().filter(|r| r.method.as_str() == "POST").count();
    assert_eq!(posts, 1, "a POST is never repeated");
}

#[tokio::test]
async fn retries_give_up_after_the_limit_and_honour_retry_after() {
    let server = MockServer::start().await;
    Mock::given(path("/limited")).respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1")).mount(&server).await;
    let tool = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/limited\"\nretries = 1\n", &server);
    let started = Instant::now();
    let m = failure(call(&tool, json!({})).await);
    assert!(started.elapsed() >= Duration::from_millis(950), "waited for Retry-After: {:?}", started.elapsed());
    assert_eq!(m, "The upstream is rate limiting requests (429 Too Many Requests); try again in 1 seconds.");
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn cancellation_ends_a_retry_wait() {
    let server = MockServer::start().await;
    Mock::given(path("/down")).respond_with(ResponseTemplate::new(503).insert_header("retry-after", "8")).mount(&server).await;
    let tool = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/down\"\n", &server);
    let cancel = CancellationToken::new();
    let ctx = ToolContext::detached("t", serde_json::Map::new(), cancel.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let outcome = tool.call(&ctx, ResponseFormat::Markdown).await;
    assert!(matches!(outcome, Err(ToolError::Cancelled)), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(4));
    canceller.await.expect("join");
}

#[tokio::test]
async fn a_response_larger_than_the_cap_is_refused() {
    let server = MockServer::start().await;
    Mock::given(path("/big")).respond_with(ResponseTemplate::new(200).set_body_raw("x".repeat(10_000), "text/plain")).mount(&server).await;
    let tool = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/big\"\nmax_response_bytes = 1000\n", &server);
    assert_eq!(
        failure(call(&tool, json!({})).await),
        "The upstream's response is larger than 1000 bytes, the most this tool reads; narrow the request (a smaller limit, more specific filters)."
    );
}

#[tokio::test]
async fn an_endless_streamed_response_stops_at_the_cap() {
    // A chunked body with no Content-Length that never ends: the tool must stop reading.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = format!("{:x}\r\n{}\r\n", 4096, "a".repeat(4096));
        while socket.write_all(chunk.as_bytes()).await.is_ok() {}
    });
    let tool = build_with(
        "[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/stream\"\nmax_response_bytes = 65536\n",
        &format!("http://{addr}"),
        &loopback_settings(),
    )
    .expect("compiles");
    let outcome = tokio::time::timeout(Duration::from_secs(10), call(&tool, json!({}))).await.expect("stops reading");
    assert!(failure(outcome).contains("larger than 65536 bytes"));
}

// === SSRF ===

#[tokio::test]
async fn private_and_local_literal_hosts_are_refused() {
    for url in [
        "http://127.0.0.1/",
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fd00:ec2::254]/",
        "http://0.0.0.0:8080/",
    ] {
        let errors =
            field_errors(build_with(&format!("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"{url}\"\n"), "", &ToolSettings::default()));
        assert!(has_error(&errors, "http.url", "is a private or local network address"), "{url}: {errors:?}");
    }
}

#[tokio::test]
async fn allow_hosts_lets_the_loopback_mock_through() {
    let server = MockServer::start().await;
    Mock::given(path("/ok")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true}))).mount(&server).await;
    let definition = "[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/ok\"\n";
    assert!(build_with(definition, &server.uri(), &ToolSettings::default()).is_err(), "refused without the allow list");
    let tool = build_with(definition, &server.uri(), &loopback_settings()).expect("allowed");
    assert_eq!(call(&tool, json!({})).await.expect("success").structured_content, Some(json!({"ok": true})));
}

#[tokio::test]
async fn host_names_that_resolve_to_private_addresses_are_refused() {
    let server = MockServer::start().await;
    let port = server.address().port();
    let mut settings = loopback_settings();
    settings.http.resolve.insert("api.internal".into(), "10.0.0.7".parse().expect("ip"));
    settings.http.resolve.insert("sneaky.example".into(), "127.0.0.1".parse().expect("ip"));
    for host in ["api.internal", "sneaky.example", "localhost"] {
        let tool = build_with(
            "[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/x\"\nretries = 0\n",
            &format!("http://{host}:{port}"),
            &settings,
        )
        .expect("a host name compiles");
        let m = failure(call(&tool, json!({})).await);
        assert_eq!(m, format!("refused: the address of {host} resolves to a private or local network address"));
    }
    assert!(requests(&server).await.is_empty(), "nothing reached the loopback server");
}

#[tokio::test]
async fn an_allowed_host_name_connects_through_the_guarded_resolver() {
    let server = MockServer::start().await;
    Mock::given(path("/x")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"via": "resolver"}))).mount(&server).await;
    let mut settings = ToolSettings::default();
    settings.http.allow_hosts = vec!["Mock.Internal".into()];
    settings.http.resolve.insert("mock.internal".into(), "127.0.0.1".parse().expect("ip"));
    let base = format!("http://mock.internal:{}", server.address().port());
    let tool = build_with("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/x\"\n", &base, &settings).expect("compiles");
    assert_eq!(call(&tool, json!({})).await.expect("success").structured_content, Some(json!({"via": "resolver"})));
}

#[tokio::test]
async fn redirects_to_private_addresses_or_other_schemes_are_refused() {
    let server = MockServer::start().await;
    let port = server.address().port();
    let redirects = [
        ("/to-private", "http://10.0.0.1/admin".to_owned(), "refused: 10.0.0.1 is a private or local network address"),
        (
            "/to-metadata",
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "refused: 169.254.169.254 is a private or local network address",
        ),
        ("/to-mapped", "http://[::ffff:7f00:1]/".to_owned(), "refused: [::ffff:7f00:1] is a private or local network address"),
        (
            "/to-private-name",
            format!("http://db.internal:{port}/ok"),
            "refused: the address of db.internal resolves to a private or local network address",
        ),
        // reqwest itself hands back a redirect to a non-http(s) URL instead of following it.
        ("/to-file", "file:///etc/passwd".to_owned(), "The upstream answered with 302 Found, a redirect this tool does not follow."),
    ];
    for (from, to, _) in &redirects {
        Mock::given(path(*from)).respond_with(ResponseTemplate::new(302).insert_header("location", to.as_str())).mount(&server).await;
    }
    Mock::given(path("/ok")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"reached": true}))).mount(&server).await;
    let mut settings = loopback_settings();
    settings.http.resolve.insert("db.internal".into(), "127.0.0.1".parse().expect("ip"));
    for (from, _, expected) in redirects {
        let tool =
            build_with(&format!("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK{from}\"\nretries = 0\n"), &server.uri(), &settings)
                .expect("compiles");
        let m = failure(call(&tool, json!({})).await);
        assert!(m.starts_with(expected), "{from}: {m}");
    }
    let reached_ok = requests(&server).await.iter().any(|r| r.url.path() == "/ok");
    assert!(!reached_ok, "the redirect to a private host name never connected");
}

#[tokio::test]
async fn redirects_are_limited_and_same_host_redirects_are_followed() {
    let server = MockServer::start().await;
    Mock::given(path("/hop")).respond_with(ResponseTemplate::new(302).insert_header("location", "/ok")).mount(&server).await;
    Mock::given(path("/loop")).respond_with(ResponseTemplate::new(302).insert_header("location", "/loop")).mount(&server).await;
    Mock::given(path("/ok")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"hopped": true}))).mount(&server).await;
    let tool = |p: &str| build(&format!("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK{p}\"\n"), &server);
    assert_eq!(call(&tool("/hop"), json!({})).await.expect("followed").structured_content, Some(json!({"hopped": true})));
    assert_eq!(failure(call(&tool("/loop"), json!({})).await), "refused: the upstream redirected more than 3 times");
    let loops = requests(&server).await.iter().filter(|r| r.url.path() == "/loop").count();
    assert_eq!(loops, 4, "the first request and three redirects, never retried");
}

#[tokio::test]
async fn a_request_with_credentials_never_follows_a_redirect_to_another_origin() {
    let server = MockServer::start().await;
    let elsewhere = MockServer::start().await;
    Mock::given(path("/moved"))
        .respond_with(ResponseTemplate::new(301).insert_header("location", format!("{}/collect", elsewhere.uri()).as_str()))
        .mount(&server)
        .await;
    Mock::given(path("/collect")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"stolen": true}))).mount(&elsewhere).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("key");
    std::fs::write(&secret_file, "api-key-value").expect("write secret");
    let tool = build(
        &format!(
            "[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/moved\"\nheaders = {{ X-Api-Key = {{ file = \"{}\" }} }}\n",
            secret_file.display()
        ),
        &server,
    );
    let m = failure(call(&tool, json!({})).await);
    assert_eq!(m, "refused: a redirect to another site (127.0.0.1) while the request carries credentials");
    assert!(requests(&elsewhere).await.is_empty(), "the key never left for the other origin");

    // Without credentials the same redirect is followed.
    let plain = build("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/moved\"\n", &server);
    assert_eq!(call(&plain, json!({})).await.expect("followed").structured_content, Some(json!({"stolen": true})));
}

/// The examples in the report and docs: a GitHub create-issue tool and a weather lookup.
const EXAMPLES: &str = r#"
[[tools]]
name = "github_create_issue"
title = "Create a GitHub issue"
description = "Opens an issue in a GitHub repository. Example: {\"owner\": \"rust-lang\", \"repo\": \"rust\", \"title\": \"ICE on nightly\"}."
annotations = { destructive_hint = false, idempotent_hint = false, open_world_hint = true }
timeout_secs = 20

[tools.input_schema]
type = "object"
required = ["owner", "repo", "title"]
properties.owner = { type = "string", description = "Repository owner (user or organization)" }
properties.repo = { type = "string", description = "Repository name" }
properties.title = { type = "string" }
properties.body = { type = "string", description = "Markdown body" }
properties.labels = { type = "array", items = { type = "string" } }

[tools.http]
method = "POST"
url = "https://api.github.com/repos/{owner}/{repo}/issues"
body = { title = "{title}", body = "{body}", labels = "{labels}" }

[tools.http.headers]
Accept = "application/vnd.github+json"
X-GitHub-Api-Version = "2022-11-28"
Authorization = { env = "GITHUB_TOKEN", prefix = "Bearer " }

[tools.http.response]
text = "Created issue #{{ response.number }} in {{ args.owner }}/{{ args.repo }}: {{ response.html_url }}"

[[tools]]
name = "get_weather"
description = "Current weather at a place. Example: {\"latitude\": 47.37, \"longitude\": 8.54}."
annotations = { read_only_hint = true, idempotent_hint = true, open_world_hint = true }
response_format_argument = true

[tools.input_schema]
type = "object"
required = ["latitude", "longitude"]
properties.latitude = { type = "number", minimum = -90, maximum = 90 }
properties.longitude = { type = "number", minimum = -180, maximum = 180 }

[tools.http]
url = "https://api.open-meteo.com/v1/forecast{?latitude,longitude}"
query = { current = "temperature_2m,wind_speed_10m" }
timeout_ms = 5000
max_response_bytes = 65536

[tools.http.response]
structured = "/current"
text = "{{ result.temperature_2m }} °C, wind {{ result.wind_speed_10m }} km/h (at {{ result.time }})"
"#;

#[test]
fn the_documented_examples_compile() {
    let file: ToolsFile = toml::from_str(EXAMPLES).expect("a valid tools file");
    let mut settings = ToolSettings::default();
    // What the examples' operator opts into: the variables and the directory they name.
    settings.http.secret_env = vec!["GITHUB_TOKEN".into(), "*_TOKEN".into(), "*_KEY".into()];
    settings.http.secret_dirs = vec!["/run/secrets".into()];
    for def in &file.tools {
        let schema = def.input_schema.clone().expect("a schema");
        let cx = BuildCtx {
            tool: &def.name,
            input_schema: &schema,
            idempotent: def.annotations.as_ref().and_then(|a| a.idempotent_hint).unwrap_or(false),
            base_dir: Path::new("/"),
            settings: &settings,
        };
        let built = HttpTool::build(def.http.as_ref().expect("http"), &cx);
        assert!(built.is_ok(), "{}: {built:?}", def.name);
    }
}

const ENV_SECRET: &str = r#"
[[tools]]
name = "env_secret"
[tools.http]
url = "MOCK/x"
headers = { Authorization = { env = "TOOLGATE_SESSIONS__SECRET", prefix = "Bearer " } }
"#;

#[test]
fn by_default_no_definition_may_read_a_secret_from_the_environment() {
    let errors = build_with(ENV_SECRET, "https://api.example.com", &ToolSettings::default()).expect_err("refused");
    assert!(errors.iter().any(|e| e.message.contains("tools.http.secret_env")), "{errors:?}");
}

#[test]
fn a_secret_variable_is_allowed_once_secret_env_names_it() {
    let mut settings = ToolSettings::default();
    settings.http.secret_env = vec!["TOOLGATE_SESSIONS__*".into()];
    assert!(build_with(ENV_SECRET, "https://api.example.com", &settings).is_ok());
}

#[test]
fn by_default_no_definition_may_read_a_secret_file() {
    let definition = r#"
[[tools]]
name = "file_secret"
[tools.http]
url = "MOCK/x"
headers = { Authorization = { file = "/etc/shadow" } }
"#;
    let errors = build_with(definition, "https://api.example.com", &ToolSettings::default()).expect_err("refused");
    assert!(errors.iter().any(|e| e.message.contains("tools.http.secret_dirs")), "{errors:?}");
}

#[tokio::test]
async fn a_redirect_to_another_port_of_an_allowed_host_port_is_refused() {
    let allowed = MockServer::start().await;
    let other_port = MockServer::start().await;
    Mock::given(path("/moved"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", format!("{}/inside", other_port.uri()).as_str()))
        .mount(&allowed)
        .await;
    Mock::given(path("/inside")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"reached": true}))).mount(&other_port).await;
    let mut settings = loopback_settings();
    let port = allowed.address().port();
    settings.http.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let tool = build_with("[[tools]]\nname = \"t\"\n[tools.http]\nurl = \"MOCK/moved\"\n", &allowed.uri(), &settings).expect("compiles");
    let m = failure(call(&tool, json!({})).await);
    let other = other_port.address().port();
    assert_eq!(m, format!("refused: tools.http.allow_hosts lists 127.0.0.1 only with other ports than {other}"));
    assert!(requests(&other_port).await.is_empty(), "the other port was never reached");
}
