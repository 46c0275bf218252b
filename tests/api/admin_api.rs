//! The admin REST API for tool definitions over real HTTP on the admin listener: CRUD with
//! revisions and `If-Match`, precise validation errors, conflicts with tools served from the
//! tools file and code, the admin gate (bearer token with the admin scope), RFC 9457 problem
//! documents, and the behaviour that matters most: a definition written here is served at
//! once, announced to live sessions, and audited.

use crate::{audit_support, common};

use std::time::Duration;

use audit_support::{PgDb, pg_settings};
use common::{SseReader, TestServer, open_get};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, EventKind};
use toolgate::auth::settings::AuthMode;

const PROBLEM: &str = "application/problem+json";
const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// A valid definition of the kind that needs nothing outside the server.
fn say(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Repeat the given text. Example: {\"text\": \"hi\"} returns \"hi\".",
        "builtin": {"id": "echo"}
    })
}

/// A response's status, headers and JSON body (`Null` when empty).
struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    /// Asserts a problem document with `status` and `type` ending in `slug`.
    fn assert_problem(&self, status: u16, slug: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.body);
        assert_eq!(self.header("content-type"), PROBLEM, "{}", self.body);
        assert_eq!(self.body["status"], status, "{}", self.body);
        assert_eq!(self.body["type"], format!("urn:toolgate:problem:{slug}"), "{}", self.body);
        assert!(self.body["title"].as_str().is_some_and(|t| !t.is_empty()), "{}", self.body);
        assert!(self.body["detail"].as_str().is_some_and(|t| !t.is_empty()), "{}", self.body);
    }

    /// The `field` of every entry of `errors`.
    fn fields(&self) -> Vec<String> {
        self.body["errors"].as_array().into_iter().flatten().filter_map(|e| e["field"].as_str().map(str::to_owned)).collect()
    }
}

/// A client for the admin API of one test server, optionally with a bearer token.
struct Admin<'a> {
    server: &'a TestServer,
    token: Option<String>,
}

impl<'a> Admin<'a> {
    fn new(server: &'a TestServer) -> Self {
        Self { server, token: None }
    }

    fn with_token(server: &'a TestServer, token: &str) -> Self {
        Self { server, token: Some(token.to_owned()) }
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> Answer {
        let mut req = self.server.client.request(method, self.server.admin_url(path));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body.to_string());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        answer(req.send().await.expect("admin request sent")).await
    }

    async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, None, &[]).await
    }

    async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(Method::POST, path, Some(body), &[]).await
    }

    async fn post_empty(&self, path: &str) -> Answer {
        self.send(Method::POST, path, None, &[]).await
    }

    async fn put(&self, path: &str, body: &Value, if_match: Option<&str>) -> Answer {
        let headers: Vec<(&str, &str)> = if_match.map(|m| ("if-match", m)).into_iter().collect();
        self.send(Method::PUT, path, Some(body), &headers).await
    }

    async fn delete(&self, path: &str, if_match: Option<&str>) -> Answer {
        let headers: Vec<(&str, &str)> = if_match.map(|m| ("if-match", m)).into_iter().collect();
        self.send(Method::DELETE, path, None, &headers).await
    }
}

async fn answer(res: reqwest::Response) -> Answer {
    let status = res.status();
    let headers = res.headers().clone();
    let text = res.text().await.expect("body");
    let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")) };
    Answer { status, headers, body }
}

async fn tool_names(s: &TestServer, session: &str) -> Vec<String> {
    let v = s.call(session, 9, "tools/list", json!({})).await;
    v["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// The `admin_change` audit records so far, waiting (up to 10 s) until there are `at_least`.
async fn admin_changes(s: &TestServer, at_least: usize) -> Vec<toolgate::audit::AuditRecord> {
    let filter = AuditFilter { kind: Some(EventKind::AdminChange), ..AuditFilter::default() };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let records = toolgate::audit::query(&s.state().store, &filter).await.expect("audit query");
        if records.len() >= at_least || tokio::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Create, read, list, replace with `If-Match`, disable, enable and delete: each answer
/// carries the row and its revision as the ETag, and a stale revision changes nothing.
#[tokio::test]
async fn definitions_go_through_a_full_crud_round_trip_with_revisions() {
    let s = TestServer::start().await;
    let admin = Admin::new(&s);

    let created = admin.post("/admin/tools", &say("say")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.header("location"), "/admin/tools/say");
    assert_eq!(created.header("etag"), "\"1\"");
    assert_eq!(created.header("content-type"), "application/json");
    let row = &created.body;
    assert_eq!((row["name"].as_str(), row["enabled"].as_bool(), row["revision"].as_i64()), (Some("say"), Some(true), Some(1)));
    assert_eq!(row["served"], true, "served as soon as the create returns");
    assert_eq!(row["definition"], say("say"));
    assert!(row["updated_by"].is_null(), "auth is off: nobody to name");
    assert_eq!(row["created_at"], row["updated_at"]);
    assert!(time::OffsetDateTime::parse(row["created_at"].as_str().expect("time"), &time::format_description::well_known::Rfc3339).is_ok());

    let got = admin.get("/admin/tools/say").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.header("etag"), "\"1\"");
    assert_eq!(got.body, created.body);

    let list = admin.get("/admin/tools").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["tools"], json!([created.body]));
    let read_only = list.body["read_only"].as_array().expect("read_only");
    assert!(read_only.contains(&json!({"name": "echo", "origin": "code"})), "{read_only:?}");
    assert!(!read_only.iter().any(|t| t["name"] == "say"), "stored tools are listed once, under tools");
    let only_code = admin.get("/admin/tools?origin=code").await;
    assert_eq!(only_code.body["tools"], json!([]));
    assert!(!only_code.body["read_only"].as_array().expect("list").is_empty());
    let only_db = admin.get("/admin/tools?origin=database").await;
    assert_eq!((only_db.body["tools"].as_array().map(Vec::len), &only_db.body["read_only"]), (Some(1), &json!([])));
    admin.get("/admin/tools?origin=moon").await.assert_problem(400, "malformed-request");

    // Replace, conditionally: the body's `enabled` goes to the column, not the definition.
    let mut changed = say("say");
    changed["description"] = json!("Say it back. Example: {\"text\": \"a\"} returns \"a\".");
    changed["title"] = json!("Say");
    changed["enabled"] = json!(true);
    let replaced = admin.put("/admin/tools/say", &changed, Some("\"1\"")).await;
    assert_eq!(replaced.status, StatusCode::OK, "{}", replaced.body);
    assert_eq!(replaced.header("etag"), "\"2\"");
    assert_eq!(replaced.body["revision"], 2);
    assert_eq!(replaced.body["definition"]["title"], "Say");
    assert!(replaced.body["definition"].get("enabled").is_none(), "stored without `enabled`: {}", replaced.body);
    assert_eq!(replaced.body["created_at"], created.body["created_at"]);

    // A writer holding revision 1 has lost the race: 412, the current ETag, nothing changed.
    let stale = admin.put("/admin/tools/say", &say("say"), Some("\"1\"")).await;
    stale.assert_problem(412, "precondition-failed");
    assert_eq!(stale.header("etag"), "\"2\"");
    assert_eq!(stale.body["current_revision"], 2);
    assert_eq!(admin.get("/admin/tools/say").await.body["definition"]["title"], "Say");

    // Disable and enable are idempotent: the revision moves only when the state does.
    let disabled = admin.post_empty("/admin/tools/say/disable").await;
    assert_eq!(
        (disabled.status, disabled.body["enabled"].as_bool(), disabled.body["revision"].as_i64()),
        (StatusCode::OK, Some(false), Some(3))
    );
    assert_eq!(disabled.body["served"], false);
    let again = admin.post_empty("/admin/tools/say/disable").await;
    assert_eq!((again.status, again.body["revision"].as_i64(), again.header("etag")), (StatusCode::OK, Some(3), "\"3\""));
    let enabled = admin.post_empty("/admin/tools/say/enable").await;
    assert_eq!((enabled.body["enabled"].as_bool(), enabled.body["revision"].as_i64()), (Some(true), Some(4)));
    assert_eq!(enabled.body["served"], true);

    admin.delete("/admin/tools/say", Some("\"3\"")).await.assert_problem(412, "precondition-failed");
    let deleted = admin.delete("/admin/tools/say", Some("\"4\"")).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert!(deleted.body.is_null());
    admin.get("/admin/tools/say").await.assert_problem(404, "not-found");
    admin.delete("/admin/tools/say", None).await.assert_problem(404, "not-found");
    admin.post_empty("/admin/tools/say/enable").await.assert_problem(404, "not-found");
    admin.put("/admin/tools/say", &say("say"), None).await.assert_problem(404, "not-found");
    assert_eq!(admin.get("/admin/tools").await.body["tools"], json!([]));
}

/// The point of the API: a definition created here is served at once, every live session
/// hears `list_changed`, calls work; disabling takes it away again; each change is audited.
#[tokio::test]
async fn a_created_tool_is_announced_served_and_audited_and_disabling_removes_it() {
    let s = TestServer::start().await;
    let admin = Admin::new(&s);
    let sid = s.initialize("2025-11-25").await;
    let mut stream = SseReader::new(open_get(&s, &sid, None).await);
    stream.next_event().await.expect("priming event");
    assert!(!tool_names(&s, &sid).await.contains(&"say".to_owned()));

    assert_eq!(admin.post("/admin/tools", &say("say")).await.status, StatusCode::CREATED);
    let (_, msg) = stream.next_message_within(Duration::from_secs(10)).await.expect("list_changed arrives");
    assert_eq!(msg, json!({"jsonrpc": "2.0", "method": LIST_CHANGED}));
    assert!(tool_names(&s, &sid).await.contains(&"say".to_owned()));
    let v = s.call(&sid, 2, "tools/call", json!({"name": "say", "arguments": {"text": "héllo"}})).await;
    assert_eq!(v["result"]["content"][0]["text"], "héllo", "{v}");
    assert_ne!(v["result"]["isError"], true);

    assert_eq!(admin.post_empty("/admin/tools/say/disable").await.status, StatusCode::OK);
    let (_, msg) = stream.next_message_within(Duration::from_secs(10)).await.expect("list_changed arrives");
    assert_eq!(msg["method"], LIST_CHANGED);
    assert!(!tool_names(&s, &sid).await.contains(&"say".to_owned()));
    let v = s.call(&sid, 3, "tools/call", json!({"name": "say", "arguments": {"text": "x"}})).await;
    assert!(v.get("error").is_some() || v["result"]["isError"] == true, "a disabled tool cannot be called: {v}");

    // Disabling again changes nothing, so nothing is announced.
    assert_eq!(admin.post_empty("/admin/tools/say/disable").await.status, StatusCode::OK);
    assert!(stream.next_message_within(Duration::from_millis(400)).await.is_none());

    let records = admin_changes(&s, 2).await;
    let details: Vec<&str> = records.iter().filter_map(|r| r.detail.as_deref()).collect();
    assert_eq!(details, ["created tool say (revision 1)", "disabled tool say (revision 2)"]);
    assert!(records.iter().all(|r| r.tool.as_deref() == Some("say") && r.outcome == toolgate::audit::Outcome::Ok));
    assert!(records.iter().all(|r| r.request_id.is_some() && r.client_ip.as_deref() == Some("127.0.0.1")), "{records:?}");
}

/// A body the compiler refuses gets 422 listing every field at fault, with paths from the
/// definition's root; nothing is stored.
#[tokio::test]
async fn invalid_definitions_are_refused_with_precise_field_paths() {
    let s = TestServer::start().await;
    let admin = Admin::new(&s);
    let cases = [
        (json!({"name": "bad name!", "description": "d", "builtin": {"id": "echo"}}), "name"),
        (json!({"name": "t1", "description": "d", "builtin": {"id": "no_such_builtin"}}), "builtin.id"),
        (json!({"name": "t2", "description": "d", "builtin": {"id": "echo"}, "input_schema": {"type": "object"}}), "input_schema"),
        (json!({"name": "t3", "description": "d", "builtin": {"id": "echo", "settings": {"dir": "/tmp"}}}), "builtin.settings.dir"),
        (json!({"name": "t4", "description": "   ", "builtin": {"id": "echo"}}), "description"),
        (json!({"name": "t5", "description": "d", "builtin": {"id": "echo"}, "timeout_secs": 0}), "timeout_secs"),
        (json!({"name": "t6", "description": "d", "builtin": {"id": "echo"}, "scopes": ["ok", "not ok"]}), "scopes[1]"),
        (json!({"name": "t7", "description": "d"}), "definition"),
        (json!({"description": "d", "builtin": {"id": "echo"}}), "name"),
        (json!({"name": 7, "description": "d", "builtin": {"id": "echo"}}), "name"),
        (json!({"name": "t8", "description": "nul \u{0} inside", "builtin": {"id": "echo"}}), "description"),
        (json!(["not", "an", "object"]), "definition"),
    ];
    for (body, field) in cases {
        let a = admin.post("/admin/tools", &body).await;
        a.assert_problem(422, "invalid-definition");
        assert!(a.fields().contains(&field.to_owned()), "{field} in {}", a.body);
        assert!(a.body["errors"].as_array().expect("errors").iter().all(|e| e["message"].as_str().is_some_and(|m| !m.is_empty())));
    }
    // Several problems in one definition are reported together.
    let two = admin.post("/admin/tools", &json!({"name": "t9", "description": " ", "builtin": {"id": "echo"}, "concurrency": 0})).await;
    two.assert_problem(422, "invalid-definition");
    let fields = two.fields();
    assert!(fields.contains(&"description".to_owned()) && fields.contains(&"concurrency".to_owned()), "{fields:?}");
    assert_eq!(admin.get("/admin/tools").await.body["tools"], json!([]), "nothing was stored");
}

/// Names are unique across sources: a stored name, a name from code (the examples pack) and
/// a name from the tools file are all taken; file and code tools cannot be changed here.
#[tokio::test]
async fn names_already_taken_conflict_and_other_sources_are_read_only() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    std::fs::write(&file, "[[tools]]\nname = \"from_file\"\ndescription = \"Echo from the file.\"\nbuiltin = { id = \"echo\" }\n")
        .expect("write");
    let path = file.clone();
    let s = TestServer::with(move |c| c.tools.path = Some(path)).await;
    let admin = Admin::new(&s);

    assert_eq!(admin.post("/admin/tools", &say("say")).await.status, StatusCode::CREATED);
    admin.post("/admin/tools", &say("say")).await.assert_problem(409, "name-taken");

    let echo = admin.post("/admin/tools", &say("echo")).await;
    echo.assert_problem(409, "defined-elsewhere");
    assert_eq!(echo.body["origin"], "code");
    let from_file = admin.post("/admin/tools", &say("from_file")).await;
    from_file.assert_problem(409, "defined-elsewhere");
    assert_eq!(from_file.body["origin"], "file");

    let del = admin.delete("/admin/tools/from_file", None).await;
    del.assert_problem(409, "defined-elsewhere");
    assert!(del.body["detail"].as_str().expect("detail").contains("defined in the tools file; edit the file"), "{}", del.body);
    admin.delete("/admin/tools/echo", None).await.assert_problem(409, "defined-elsewhere");
    admin.put("/admin/tools/echo", &say("echo"), None).await.assert_problem(409, "defined-elsewhere");
    admin.post_empty("/admin/tools/from_file/disable").await.assert_problem(409, "defined-elsewhere");
    let read = admin.get("/admin/tools/echo").await;
    read.assert_problem(404, "not-found");
    assert_eq!(read.body["origin"], "code");

    let list = admin.get("/admin/tools?origin=file").await;
    assert_eq!(list.body["read_only"], json!([{"name": "from_file", "origin": "file"}]));
}

/// Racing creates of one name: the primary key decides, exactly one wins, the rest get 409.
#[tokio::test]
async fn concurrent_creates_of_one_name_store_it_once() {
    let s = TestServer::start().await;
    let requests = (0..8).map(|_| {
        let req = s.client.post(s.admin_url("/admin/tools")).header("content-type", "application/json").body(say("raced").to_string());
        tokio::spawn(async move { req.send().await.expect("sent").status() })
    });
    let mut statuses = Vec::new();
    for r in requests {
        statuses.push(r.await.expect("task"));
    }
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::CREATED).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == StatusCode::CREATED || *s == StatusCode::CONFLICT), "{statuses:?}");
}

/// PUT replaces only the tool its path names, and `If-Match` follows RFC 9110: strong
/// comparison, `*` for any revision, unreadable tags refused.
#[tokio::test]
async fn replace_checks_the_name_and_the_precondition() {
    let s = TestServer::start().await;
    let admin = Admin::new(&s);
    assert_eq!(admin.post("/admin/tools", &say("say")).await.status, StatusCode::CREATED);

    let renamed = admin.put("/admin/tools/say", &say("other"), None).await;
    renamed.assert_problem(422, "invalid-definition");
    assert_eq!(renamed.fields(), ["name"]);
    admin.put("/admin/tools/say", &say("say"), Some("W/\"1\"")).await.assert_problem(412, "precondition-failed");
    admin.put("/admin/tools/say", &say("say"), Some("1")).await.assert_problem(400, "malformed-request");
    let invalid =
        admin.put("/admin/tools/say", &json!({"name": "say", "description": "d", "builtin": {"id": "nope"}}), Some("\"1\"")).await;
    invalid.assert_problem(422, "invalid-definition");
    assert_eq!(invalid.fields(), ["builtin.id"]);
    let any = admin.put("/admin/tools/say", &say("say"), Some("*")).await;
    assert_eq!((any.status, any.body["revision"].as_i64()), (StatusCode::OK, Some(2)));
    let list = admin.put("/admin/tools/say", &say("say"), Some("\"7\", \"2\"")).await;
    list.assert_problem(400, "malformed-request");
    // `enabled: false` in a body disables; leaving it out keeps the state.
    let mut off = say("say");
    off["enabled"] = json!(false);
    assert_eq!(admin.put("/admin/tools/say", &off, Some("\"2\"")).await.body["enabled"], false);
    assert_eq!(admin.put("/admin/tools/say", &say("say"), None).await.body["enabled"], false);
    let mut created_off = say("quiet");
    created_off["enabled"] = json!(false);
    let quiet = admin.post("/admin/tools", &created_off).await;
    assert_eq!(
        (quiet.status, quiet.body["enabled"].as_bool(), quiet.body["served"].as_bool()),
        (StatusCode::CREATED, Some(false), Some(false))
    );
}

/// `command` tools run programs on the host: refused unless `admin.allow_command_tools`.
#[tokio::test]
async fn command_tools_need_to_be_allowed_explicitly() {
    let command = json!({
        "name": "list_dir",
        "description": "List a directory. Example: {} lists the working directory.",
        "command": {"program": "/bin/ls", "args": ["-1"]}
    });
    let s = TestServer::start().await;
    let refused = Admin::new(&s).post("/admin/tools", &command).await;
    refused.assert_problem(403, "command-tools-disabled");
    assert!(refused.body["detail"].as_str().expect("detail").contains("allow_command_tools"), "{}", refused.body);
    assert_eq!(Admin::new(&s).get("/admin/tools").await.body["tools"], json!([]));

    let allowed = TestServer::with(|c| c.admin.allow_command_tools = true).await;
    let a = Admin::new(&allowed).post("/admin/tools", &command).await;
    assert_ne!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    assert!(a.status == StatusCode::CREATED || a.status == StatusCode::UNPROCESSABLE_ENTITY, "{}", a.body);
}

/// Malformed requests get problem documents that say what is wrong and where.
#[tokio::test]
async fn malformed_requests_get_useful_problems() {
    let s = TestServer::start().await;
    let raw = |method: Method, path: &str, content_type: &str, body: String| {
        s.client.request(method, s.admin_url(path)).header("content-type", content_type.to_owned()).body(body)
    };

    let broken =
        answer(raw(Method::POST, "/admin/tools", "application/json", "{\n  \"name\": \"x\",,\n}".into()).send().await.expect("sent")).await;
    broken.assert_problem(400, "malformed-request");
    assert_eq!((broken.body["line"].as_u64(), broken.body["column"].as_u64()), (Some(2), Some(15)), "{}", broken.body);
    assert!(broken.body["detail"].as_str().expect("detail").contains("line 2 column 15"), "{}", broken.body);
    assert_eq!(broken.fields(), ["body"]);

    let empty = answer(raw(Method::POST, "/admin/tools", "application/json", String::new()).send().await.expect("sent")).await;
    empty.assert_problem(400, "malformed-request");

    let text = answer(raw(Method::POST, "/admin/tools", "text/plain", say("x").to_string()).send().await.expect("sent")).await;
    text.assert_problem(415, "unsupported-media-type");

    let huge = json!({"name": "big", "description": "x".repeat(1024 * 1024 + 1), "builtin": {"id": "echo"}});
    let too_big = answer(raw(Method::POST, "/admin/tools", "application/json", huge.to_string()).send().await.expect("sent")).await;
    too_big.assert_problem(413, "payload-too-large");

    let admin = Admin::new(&s);
    admin.get("/admin/nothing-here").await.assert_problem(404, "not-found");
    admin.get("/").await.assert_problem(404, "not-found");
    let wrong = admin.send(Method::PATCH, "/admin/tools", Some(&say("x")), &[]).await;
    wrong.assert_problem(405, "method-not-allowed");
    let allow = wrong.header("allow");
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    let wrong = admin.get("/admin/tools/x/enable").await;
    wrong.assert_problem(405, "method-not-allowed");
    assert_eq!(wrong.header("allow"), "POST");
}

const DEV_RESOURCE: &str = "http://127.0.0.1:8080/mcp";

/// A server on dev tokens, with the signing key that mints them (and the directory holding it).
async fn dev_auth_server() -> (TestServer, tempfile::TempDir, toolgate::config::Secret) {
    let dir = tempfile::tempdir().expect("dir");
    let key_file = dir.path().join("dev.key");
    let kf = key_file.clone();
    let s = TestServer::with(move |c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = kf;
        c.auth.resource = Some(DEV_RESOURCE.into());
    })
    .await;
    let key = toolgate::auth::dev::load_or_create_key(&key_file).expect("key");
    (s, dir, key)
}

/// The admin scope alone is enough, and a refusal says exactly that (not the MCP scopes).
#[tokio::test]
async fn the_admin_scope_alone_is_enough_and_the_refusal_names_only_it() {
    let (s, _dir, key) = dev_auth_server().await;
    let mint = |scope: &str| toolgate::auth::dev::mint(&key, DEV_RESOURCE, "dana", scope, 300).expect("token");
    let refused = Admin::with_token(&s, &mint("mcp:tools")).get("/admin/tools").await;
    refused.assert_problem(403, "insufficient-scope");
    let detail = refused.body["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("toolgate:admin") && detail.contains("MCP scopes are not needed"), "{detail}");
    let challenge = refused.header("www-authenticate");
    assert!(challenge.contains(r#"error="insufficient_scope""#) && challenge.contains(r#"scope="toolgate:admin""#), "{challenge}");
    let missing = Admin::new(&s).get("/admin/tools").await;
    assert!(missing.header("www-authenticate").contains("scope=\"toolgate:admin\""), "{}", missing.header("www-authenticate"));
    assert_eq!(Admin::with_token(&s, &mint("toolgate:admin")).get("/admin/tools").await.status, StatusCode::OK);
}

/// With auth on, the admin API needs a valid token that carries `admin.scope`; the refusal
/// keeps the bearer challenge. Unknown routes are refused the same way, revealing nothing.
#[tokio::test]
async fn with_auth_on_admin_requests_need_a_token_with_the_admin_scope() {
    let (s, _dir, key) = dev_auth_server().await;
    let mint = |scope: &str| toolgate::auth::dev::mint(&key, DEV_RESOURCE, "dana", scope, 300).expect("token");

    let none = Admin::new(&s).get("/admin/tools").await;
    none.assert_problem(401, "unauthorized");
    let challenge = none.header("www-authenticate");
    assert!(challenge.starts_with("Bearer ") && challenge.contains("resource_metadata="), "{challenge}");
    assert!(challenge.contains("toolgate:admin"), "the hint names the admin scope: {challenge}");
    Admin::new(&s).get("/admin/no-such-route").await.assert_problem(401, "unauthorized");
    Admin::with_token(&s, "not.a.token").get("/admin/tools").await.assert_problem(401, "unauthorized");

    let narrow = Admin::with_token(&s, &mint("mcp:tools")).post("/admin/tools", &say("say")).await;
    narrow.assert_problem(403, "insufficient-scope");
    let challenge = narrow.header("www-authenticate");
    assert!(challenge.contains("error=\"insufficient_scope\"") && challenge.contains("toolgate:admin"), "{challenge}");

    let admin = Admin::with_token(&s, &mint("toolgate:admin"));
    assert_eq!(admin.get("/admin/tools").await.status, StatusCode::OK);
    let created = admin.post("/admin/tools", &say("say")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["updated_by"], "dana");
    admin.get("/admin/no-such-route").await.assert_problem(404, "not-found");

    let records = admin_changes(&s, 1).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].subject.as_deref(), Some("dana"));
    assert_eq!(records[0].detail.as_deref(), Some("created tool say (revision 1)"));
    assert_eq!(Admin::new(&s).get("/admin/tools").await.status, StatusCode::UNAUTHORIZED, "still refused without a token");
}

/// `GET /admin/sources` shows each source's last reload and the tools file's last error;
/// `POST /admin/reload` re-reads now and reports what changed or every problem.
#[tokio::test]
async fn sources_show_the_last_reload_error_and_reload_reports_it() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    let good = "[[tools]]\nname = \"from_file\"\ndescription = \"Echo from the file.\"\nbuiltin = { id = \"echo\" }\n";
    std::fs::write(&file, good).expect("write");
    let path = file.clone();
    let s = TestServer::with(move |c| {
        c.tools.path = Some(path);
        c.tools.watch = false;
    })
    .await;
    let admin = Admin::new(&s);
    assert_eq!(admin.post("/admin/tools", &say("say")).await.status, StatusCode::CREATED);

    let sources = admin.get("/admin/sources").await;
    assert_eq!(sources.status, StatusCode::OK);
    assert_eq!(sources.body["file"]["tools"], 1);
    assert_eq!(sources.body["file"]["configured"], true);
    assert!(sources.body["file"]["last_error"].is_null());
    assert!(sources.body["file"]["loaded_at"].is_string());
    assert_eq!(sources.body["database"]["tools"], 1);
    assert!(sources.body["code"]["tools"].as_u64().is_some_and(|n| n > 0));

    std::fs::write(&file, format!("{good}\n[[tools]]\nname = \"broken\"\ndescription = \"x\"\nbuiltin = {{ id = \"no_such_builtin\" }}\n"))
        .expect("write");
    let refused = admin.post_empty("/admin/reload").await;
    refused.assert_problem(422, "reload-failed");
    assert_eq!(refused.fields(), ["file"]);
    let message = refused.body["errors"][0]["message"].as_str().expect("message");
    assert!(message.contains("broken") && message.contains("builtin.id"), "{message}");
    assert_eq!(refused.body["sources"]["file"]["status"], "refused");
    assert_eq!(refused.body["sources"]["database"]["status"], "ok");
    let last = &admin.get("/admin/sources").await.body["file"]["last_error"];
    assert_eq!(last["tools"][0]["tool"], "broken", "{last}");
    assert_eq!(last["tools"][0]["errors"][0]["field"], "builtin.id", "{last}");

    std::fs::write(&file, "[[tools]]\nname = \"renamed\"\ndescription = \"Echo from the file.\"\nbuiltin = { id = \"echo\" }\n")
        .expect("write");
    let ok = admin.post_empty("/admin/reload").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert_eq!(ok.body["file"]["report"], json!({"added": ["renamed"], "changed": [], "removed": ["from_file"]}));
    assert_eq!(ok.body["database"]["status"], "ok");
    assert!(admin.get("/admin/sources").await.body["file"]["last_error"].is_null());
    let records = admin_changes(&s, 3).await;
    assert!(records.iter().any(|r| r.detail.as_deref() == Some("reloaded tool definitions on request (refused: file)")), "{records:?}");
}

/// The same round trip on Postgres (JSONB definitions, timestamptz, transactions), through
/// the project's per-test database.
#[tokio::test]
async fn postgres_stores_definitions_the_same_way() {
    let db = PgDb::create().await;
    let url = db.url();
    let s = TestServer::with(move |c| c.storage = pg_settings(url, &c.storage.data_dir.clone())).await;
    assert_eq!(s.state().store.backend_name(), "postgres");
    let admin = Admin::new(&s);
    let sid = s.initialize("2025-11-25").await;

    let mut def = say("say");
    def["labels"] = json!({"team": "ops", "ünïcode": "✓"});
    let created = admin.post("/admin/tools", &def).await;
    assert_eq!((created.status, created.header("etag")), (StatusCode::CREATED, "\"1\""), "{}", created.body);
    assert_eq!(created.body["definition"], def);
    assert_eq!(admin.get("/admin/tools/say").await.body, created.body, "read back exactly as written");
    admin.post("/admin/tools", &say("say")).await.assert_problem(409, "name-taken");
    assert!(tool_names(&s, &sid).await.contains(&"say".to_owned()));
    let v = s.call(&sid, 2, "tools/call", json!({"name": "say", "arguments": {"text": "pg"}})).await;
    assert_eq!(v["result"]["content"][0]["text"], "pg");

    assert_eq!(admin.post("/admin/tools", &say("another")).await.status, StatusCode::CREATED);
    let names: Vec<Value> =
        admin.get("/admin/tools").await.body["tools"].as_array().expect("tools").iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, [json!("another"), json!("say")], "sorted by name");

    let replaced = admin.put("/admin/tools/say", &say("say"), Some("\"1\"")).await;
    assert_eq!(replaced.body["revision"], 2, "{}", replaced.body);
    admin.put("/admin/tools/say", &say("say"), Some("\"1\"")).await.assert_problem(412, "precondition-failed");
    assert_eq!(admin.post_empty("/admin/tools/say/disable").await.body["revision"], 3);
    assert_eq!(admin.post_empty("/admin/tools/say/disable").await.body["revision"], 3);
    assert!(!tool_names(&s, &sid).await.contains(&"say".to_owned()));
    assert_eq!(admin.post_empty("/admin/tools/say/enable").await.body["enabled"], true);
    assert_eq!(admin.delete("/admin/tools/say", Some("\"4\"")).await.status, StatusCode::NO_CONTENT);
    admin.get("/admin/tools/say").await.assert_problem(404, "not-found");
    assert!(!tool_names(&s, &sid).await.contains(&"say".to_owned()));
    let details: Vec<String> = admin_changes(&s, 6).await.into_iter().filter_map(|r| r.detail).collect();
    assert_eq!(details.len(), 6, "{details:?}");
    s.running.stop().await.expect("stops");
}

/// A stored `command` tool that hands a script to a shell is valid, and the API says what
/// `tools validate` says about it; a plain one has no warnings.
#[tokio::test]
async fn a_stored_shell_wrapper_comes_back_with_a_warning() {
    let s = TestServer::with(|c| {
        c.admin.allow_command_tools = true;
        c.tools.command.allowed_programs = vec!["/bin/sh".into(), "/bin/ls".into()];
    })
    .await;
    let wrapper = json!({
        "name": "grep_log",
        "description": "Greps the log. Example: {\"q\": \"error\"} lists the error lines.",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "command": {"program": "/bin/sh", "args": ["-c", "grep -- {q} /var/log/app.log"]}
    });
    let created = Admin::new(&s).post("/admin/tools", &wrapper).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let warnings = created.body["warnings"].as_array().expect("warnings").clone();
    assert!(warnings.len() == 1 && warnings[0].as_str().is_some_and(|w| w.contains("runs a shell")), "{warnings:?}");
    assert_eq!(Admin::new(&s).get("/admin/tools/grep_log").await.body["warnings"], json!(warnings));

    let plain = json!({"name": "list_dir", "description": "List a directory. Example: {} lists it.", "command": {"program": "/bin/ls", "args": ["-1"]}});
    let created = Admin::new(&s).post("/admin/tools", &plain).await;
    assert_eq!((created.status, &created.body["warnings"]), (StatusCode::CREATED, &json!([])), "{}", created.body);
}
