//! Declarative tools end to end on a real server: a tools file is served, watched and
//! re-read (on change and on SIGHUP); a valid change reaches every GET stream as
//! `list_changed`; an invalid one keeps the previous tools and says exactly what is wrong.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{SseReader, TestServer, open_get};
use serde_json::{Value, json};
use toolgate::tool::Origin;

const ECHO_TOOL: &str = r#"
[[tools]]
name = "say"
description = "Repeat the given text. Example: {\"text\": \"hi\"} returns \"hi\"."
builtin = { id = "echo" }
"#;

const SUM_TOOL: &str = r#"
[[tools]]
name = "add_numbers"
title = "Add"
description = "Add two numbers. Example: {\"a\": 1, \"b\": 2} returns 3."
scopes = ["math"]
timeout_secs = 5
annotations = { read_only_hint = true }
builtin = { id = "calculate_sum" }
"#;

fn write(path: &Path, text: &str) {
    // Write-then-rename, as editors and config management do: the watcher must see it.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

async fn server_with_file(text: &str, watch: bool) -> (TestServer, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    write(&file, text);
    let path = file.clone();
    let server = TestServer::with(move |s| {
        s.tools.path = Some(path);
        s.tools.watch = watch;
    })
    .await;
    (server, dir, file)
}

async fn tool_names(s: &TestServer, session: &str) -> Vec<String> {
    let v = s.call(session, 9, "tools/list", json!({})).await;
    v["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

async fn next_list_changed(reader: &mut SseReader) -> Value {
    let (_, msg) = reader.next_message_within(Duration::from_secs(10)).await.expect("a notification arrives");
    msg
}

#[tokio::test]
async fn a_tools_file_is_served_and_a_valid_edit_is_announced() {
    let (s, _dir, file) = server_with_file(ECHO_TOOL, true).await;
    let sid = s.initialize("2025-11-25").await;
    let names = tool_names(&s, &sid).await;
    assert!(names.contains(&"say".to_owned()) && names.contains(&"echo".to_owned()), "{names:?}");
    let v = s.call(&sid, 2, "tools/call", json!({"name": "say", "arguments": {"text": "héllo"}})).await;
    assert_eq!(v["result"]["content"][0]["text"], "héllo");

    let mut stream = SseReader::new(open_get(&s, &sid, None).await);
    stream.next_event().await.expect("priming");
    write(&file, &format!("{ECHO_TOOL}\n{SUM_TOOL}"));
    assert_eq!(next_list_changed(&mut stream).await, json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    let names = tool_names(&s, &sid).await;
    assert!(names.contains(&"add_numbers".to_owned()), "{names:?}");
    let listed = s.call(&sid, 3, "tools/list", json!({})).await;
    let add = listed["result"]["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "add_numbers").cloned().expect("listed");
    assert_eq!(add["title"], "Add");
    assert_eq!(add["annotations"]["readOnlyHint"], true);
    let v = s.call(&sid, 4, "tools/call", json!({"name": "add_numbers", "arguments": {"a": 2, "b": 3}})).await;
    assert_eq!(v["result"]["structuredContent"]["sum"], 5.0);

    // Removing a tool from the file removes it from the server, and is announced too.
    write(&file, SUM_TOOL);
    assert_eq!(next_list_changed(&mut stream).await["method"], "notifications/tools/list_changed");
    let names = tool_names(&s, &sid).await;
    assert!(!names.contains(&"say".to_owned()) && names.contains(&"add_numbers".to_owned()), "{names:?}");
    let status = s.state().definitions.status(Origin::File);
    assert_eq!(status.tools, 1);
    assert!(status.last_error.is_none());
}

#[tokio::test]
async fn an_invalid_edit_keeps_the_old_tools_and_names_file_tool_and_field() {
    let (s, _dir, file) = server_with_file(ECHO_TOOL, true).await;
    let sid = s.initialize("2025-11-25").await;
    let mut stream = SseReader::new(open_get(&s, &sid, None).await);
    stream.next_event().await.expect("priming");

    // A valid tool and a broken one: nothing of the file is applied.
    let broken = format!("{SUM_TOOL}\n[[tools]]\nname = \"broken\"\ndescription = \"x\"\nbuiltin = {{ id = \"no_such_builtin\" }}\n");
    write(&file, &broken);
    let error = wait_for(|| s.state().definitions.status(Origin::File).last_error).await;
    let text = error.to_string();
    assert!(text.contains("tools.toml") && text.contains("\"broken\"") && text.contains("builtin.id"), "{text}");
    assert!(text.contains("no_such_builtin") && text.contains("echo"), "the message lists what is known: {text}");
    let names = tool_names(&s, &sid).await;
    assert!(names.contains(&"say".to_owned()) && !names.contains(&"add_numbers".to_owned()), "old set kept: {names:?}");
    assert!(stream.next_message_within(Duration::from_millis(500)).await.is_none(), "nothing announced");

    // TOML syntax errors say where.
    write(&file, "[[tools]]\nname = \"x\nbuiltin = 1\n");
    let error = wait_for(|| s.state().definitions.status(Origin::File).last_error.filter(|e| e.general.is_some())).await;
    let text = error.to_string();
    assert!(text.contains("invalid TOML") && text.contains("line"), "{text}");
    assert!(tool_names(&s, &sid).await.contains(&"say".to_owned()));

    // Fixing the file applies it and clears the error.
    write(&file, SUM_TOOL);
    assert_eq!(next_list_changed(&mut stream).await["method"], "notifications/tools/list_changed");
    assert!(s.state().definitions.status(Origin::File).last_error.is_none());
}

#[tokio::test]
async fn sighup_rereads_the_file_when_watching_is_off() {
    let (s, _dir, file) = server_with_file(ECHO_TOOL, false).await;
    let sid = s.initialize("2025-11-25").await;
    write(&file, SUM_TOOL);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(tool_names(&s, &sid).await.contains(&"say".to_owned()), "not watched: no reload without a signal");
    let mut stream = SseReader::new(open_get(&s, &sid, None).await);
    stream.next_event().await.expect("priming");
    // nextest runs every test in its own process, so the signal reaches only this server.
    rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::HUP).expect("SIGHUP");
    assert_eq!(next_list_changed(&mut stream).await["method"], "notifications/tools/list_changed");
    let names = tool_names(&s, &sid).await;
    assert!(names.contains(&"add_numbers".to_owned()) && !names.contains(&"say".to_owned()), "{names:?}");
}

#[tokio::test]
async fn an_unchanged_rewrite_announces_nothing() {
    let (s, _dir, file) = server_with_file(ECHO_TOOL, true).await;
    let sid = s.initialize("2025-11-25").await;
    let mut stream = SseReader::new(open_get(&s, &sid, None).await);
    stream.next_event().await.expect("priming");
    // Same definitions, different formatting and key order.
    write(
        &file,
        "[[tools]]\nbuiltin = { id = \"echo\" }\ndescription = \"Repeat the given text. Example: {\\\"text\\\": \\\"hi\\\"} returns \\\"hi\\\".\"\nname = \"say\"\n",
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(stream.next_message_within(Duration::from_millis(300)).await.is_none(), "an equal set is not a change");
    assert!(s.state().definitions.status(Origin::File).loaded_at.is_some());
}

#[tokio::test]
async fn tool_scopes_from_a_definition_hide_the_tool_from_callers_without_them() {
    // Auth on (dev mode), with a token that lacks the tool's scope.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    write(&file, SUM_TOOL);
    let key_file = dir.path().join("dev.key");
    let (path, key) = (file.clone(), key_file.clone());
    let s = TestServer::with(move |st| {
        st.tools.path = Some(path);
        st.auth.mode = toolgate::auth::settings::AuthMode::Dev;
        st.auth.dev_key_file = key;
    })
    .await;
    let resource = s.state().settings.auth.resource.clone().expect("dev mode sets the resource");
    let key = toolgate::auth::dev::load_or_create_key(&key_file).expect("key");
    let token = |scope: &str| toolgate::auth::dev::mint(&key, &resource, "tester", scope, 600).expect("token");
    for (scope, visible) in [("mcp:tools", false), ("mcp:tools math", true)] {
        let bearer = format!("Bearer {}", token(scope));
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
        let res = s.post(&init.to_string(), &[("authorization", &bearer)]).await;
        assert_eq!(res.status(), 200);
        let sid = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
        let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}});
        let res = s.post(&list.to_string(), &[("authorization", &bearer), ("mcp-session-id", &sid)]).await;
        let v = common::response_json(res).await;
        let listed = v["result"]["tools"].as_array().expect("tools").iter().any(|t| t["name"] == "add_numbers");
        assert_eq!(listed, visible, "scope {scope:?}");
        let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add_numbers","arguments":{"a":1,"b":1}}});
        let res = s.post(&call.to_string(), &[("authorization", &bearer), ("mcp-session-id", &sid)]).await;
        let v = common::response_json(res).await;
        assert_eq!(v.get("error").is_none(), visible, "scope {scope:?}: {v}");
    }
}

/// Polls `probe` until it returns something (reloads are asynchronous), for up to 10 s.
async fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(v) = probe() {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("condition not reached within 10 s");
}
