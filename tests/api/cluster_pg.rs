//! Replicas sharing one Postgres: a tool stored through one replica's admin API is announced
//! on every replica's streams; a replica that lost its event connection over-notifies once it
//! is back; a legacy session created through one replica works through any other (requests,
//! GET streams, a client's answer to a call waiting on another replica, cancellation, log
//! level, DELETE, the 2024-11-05 transport), with no load-balancer affinity.

use crate::{audit_support, common};

use std::time::{Duration, Instant};

use audit_support::{PgDb, Proxy, pg_settings};
use common::{SseReader, TestServer, open_get};
use serde_json::json;

const SECRET: &str = "test secret shared by every replica";

async fn replica(url: String) -> TestServer {
    TestServer::with(move |s| {
        let data = s.storage.data_dir.clone();
        s.storage = pg_settings(url, &data);
        s.sessions.secret = Some(toolgate::config::Secret::new(SECRET.into()));
        s.tools.packs.conformance = true;
    })
    .await
}

async fn stream_of(s: &TestServer) -> (String, SseReader) {
    let sid = s.initialize("2025-11-25").await;
    let mut reader = SseReader::new(open_get(s, &sid, None).await);
    reader.next_event().await.expect("priming");
    (sid, reader)
}

async fn names(s: &TestServer, sid: &str) -> Vec<String> {
    let v = s.call(sid, 5, "tools/list", json!({})).await;
    v["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn a_stored_tool_reaches_every_replica_with_list_changed() {
    let db = PgDb::create().await;
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    let (sid_a, mut on_a) = stream_of(&a).await;
    let (sid_b, mut on_b) = stream_of(&b).await;

    let definition =
        json!({"name": "say", "description": "Repeat the given text. Example: {\"text\": \"hi\"}.", "builtin": {"id": "echo"}});
    let started = Instant::now();
    let created = a.client.post(a.admin_url("/admin/tools")).json(&definition).send().await.expect("admin request");
    assert_eq!(created.status(), 201);
    for (name, reader) in [("A (where the change was made)", &mut on_a), ("B (another replica)", &mut on_b)] {
        let (_, msg) = reader.next_message_within(Duration::from_secs(5)).await.unwrap_or_else(|| panic!("{name}: no list_changed"));
        assert_eq!(msg["method"], "notifications/tools/list_changed", "{name}");
    }
    eprintln!("list_changed on the other replica after {:?}", started.elapsed());
    assert!(names(&b, &sid_b).await.contains(&"say".to_owned()));
    let v = b.call(&sid_b, 6, "tools/call", json!({"name": "say", "arguments": {"text": "from B"}})).await;
    assert_eq!(v["result"]["content"][0]["text"], "from B");

    // And back: disabling it through B removes it from A.
    let disabled = b.client.post(b.admin_url("/admin/tools/say/disable")).send().await.expect("admin request");
    assert_eq!(disabled.status(), 200);
    let (_, msg) = on_a.next_message_within(Duration::from_secs(5)).await.expect("A hears of B's change");
    assert_eq!(msg["method"], "notifications/tools/list_changed");
    assert!(!names(&a, &sid_a).await.contains(&"say".to_owned()));
    // A replica hears of each change once, not once per replica.
    assert!(on_a.next_message_within(Duration::from_millis(300)).await.is_none());
}

#[tokio::test]
async fn a_replica_that_lost_its_event_connection_over_notifies_when_back() {
    let db = PgDb::create().await;
    let proxy = Proxy::start(audit_support::pg_host()).await;
    let b = replica(db.url_via(&proxy.addr.to_string())).await;
    let (_sid, mut on_b) = stream_of(&b).await;
    proxy.cut();
    // The LISTEN connection notices the cut on its next read; Postgres sends nothing on an idle
    // LISTEN, so give the keepalive-free connection a moment, then restore.
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.restore();
    // Nothing changed, but B cannot know that: it announces a change rather than risk a miss.
    let (_, msg) = on_b.next_message_within(Duration::from_secs(15)).await.expect("over-notified after the reconnect");
    assert_eq!(msg["method"], "notifications/tools/list_changed");
}

#[tokio::test]
async fn a_session_created_on_one_replica_works_on_another() {
    let db = PgDb::create().await;
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    let sid = a.initialize("2025-11-25").await;
    // Requests through B: it has never seen the session and loads it from the shared store.
    let v = b.call(&sid, 2, "tools/call", json!({"name": "echo", "arguments": {"text": "via B"}})).await;
    assert_eq!(v["result"]["content"][0]["text"], "via B");
    // A GET stream through B hears of changes.
    let mut on_b = SseReader::new(open_get(&b, &sid, None).await);
    on_b.next_event().await.expect("priming");
    let definition =
        json!({"name": "say", "description": "Repeat the given text. Example: {\"text\": \"hi\"}.", "builtin": {"id": "echo"}});
    assert_eq!(a.client.post(a.admin_url("/admin/tools")).json(&definition).send().await.expect("admin").status(), 201);
    let (_, msg) = on_b.next_message_within(Duration::from_secs(5)).await.expect("list_changed on B");
    assert_eq!(msg["method"], "notifications/tools/list_changed");

    // logging/setLevel through B reaches A's copy.
    let v = b.call(&sid, 3, "logging/setLevel", json!({"level": "error"})).await;
    assert!(v.get("result").is_some(), "{v}");
    let on_a = a.state().sessions.get(&sid).expect("A holds the session it created");
    let mut level = 0;
    for _ in 0..100 {
        level = on_a.log_level.load(std::sync::atomic::Ordering::Relaxed);
        if level == toolgate::tool::LogLevel::Error as u8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(level, toolgate::tool::LogLevel::Error as u8);

    // A forged id is refused without a lookup; another secret's ids too.
    let forged = format!("{}{}", &sid[..32], "0".repeat(32));
    let res = b.post(&json!({"jsonrpc":"2.0","id":4,"method":"tools/list"}).to_string(), &[("mcp-session-id", &forged)]).await;
    assert_eq!(res.status(), 404);

    // DELETE through B ends it everywhere: A answers 404 too, and A's streams close.
    let deleted = b.client.delete(b.url("/mcp")).header("mcp-session-id", &sid).send().await.expect("delete");
    assert_eq!(deleted.status(), 200);
    for s in [&a, &b] {
        let mut status = 0;
        for _ in 0..100 {
            status = s
                .post(&json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}).to_string(), &[("mcp-session-id", &sid)])
                .await
                .status()
                .as_u16();
            if status == 404 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(status, 404, "the session is gone on every replica");
    }
}

#[tokio::test]
async fn a_clients_answer_reaches_the_call_waiting_on_another_replica() {
    let db = PgDb::create().await;
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    let sid = a.initialize("2025-11-25").await;
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"Who?"}}});
    let mut stream = SseReader::new(a.post(&call.to_string(), &[("mcp-session-id", &sid)]).await);
    let (_, request) = stream.next_message_within(Duration::from_secs(5)).await.expect("the elicitation request");
    assert_eq!(request["method"], "elicitation/create");
    // The answer lands on B (round-robin); the call waits on A.
    let answer =
        json!({"jsonrpc":"2.0","id":request["id"],"result":{"action":"accept","content":{"username":"ada","email":"ada@example.com"}}});
    assert_eq!(b.post(&answer.to_string(), &[("mcp-session-id", &sid)]).await.status(), 202);
    let (_, done) = stream.next_message_within(Duration::from_secs(5)).await.expect("the call completes on A");
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("ada"), "{done}");

    // notifications/cancelled through B stops a call running on A.
    let slow = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"Wait"}}});
    let mut stream = SseReader::new(a.post(&slow.to_string(), &[("mcp-session-id", &sid)]).await);
    let _ = stream.next_message_within(Duration::from_secs(5)).await.expect("the elicitation request");
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"changed my mind"}});
    assert_eq!(b.post(&cancel.to_string(), &[("mcp-session-id", &sid)]).await.status(), 202);
    let next = tokio::time::timeout(Duration::from_secs(5), stream.next_message()).await.expect("the stream ends promptly");
    assert!(next.is_none(), "a cancelled request gets no response: {next:?}");
}

#[tokio::test]
async fn resuming_a_stream_held_elsewhere_gets_a_fresh_stream_and_a_list_changed() {
    let db = PgDb::create().await;
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    let sid = a.initialize("2025-11-25").await;
    let mut on_a = SseReader::new(open_get(&a, &sid, None).await);
    let priming = on_a.next_event().await.expect("priming");
    let last = priming.id.expect("2025-11-25 priming events carry an id");
    // The client reconnects through the load balancer and reaches B.
    let mut on_b = SseReader::new(open_get(&b, &sid, Some(&last)).await);
    let (_, msg) = on_b.next_message_within(Duration::from_secs(5)).await.expect("over-notified");
    assert_eq!(msg["method"], "notifications/tools/list_changed");
}

#[tokio::test]
async fn the_2024_transport_works_when_messages_land_on_another_replica() {
    let db = PgDb::create().await;
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    let res = a.client.get(a.url("/sse")).header("accept", "text/event-stream").send().await.expect("sse");
    let mut sse = SseReader::new(res);
    let endpoint = sse.next_event().await.expect("endpoint event").data;
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old","version":"1"}}});
    let posted =
        b.client.post(b.url(&endpoint)).header("content-type", "application/json").body(init.to_string()).send().await.expect("post");
    assert_eq!(posted.status(), 202);
    let (_, reply) = sse.next_message_within(Duration::from_secs(5)).await.expect("the answer arrives on A's SSE connection");
    assert_eq!(reply["result"]["protocolVersion"], "2024-11-05");
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"old but working"}}});
    let posted =
        b.client.post(b.url(&endpoint)).header("content-type", "application/json").body(call.to_string()).send().await.expect("post");
    assert_eq!(posted.status(), 202);
    let (_, reply) = sse.next_message_within(Duration::from_secs(5)).await.expect("the call's answer");
    assert_eq!(reply["result"]["content"][0]["text"], "old but working");
}

#[tokio::test]
async fn stream_ids_never_collide_across_replicas() {
    let db = PgDb::create().await;
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    let sid = a.initialize("2025-11-25").await;
    // A call with progress answers as a stream on each replica: event ids name their stream.
    let call = |id: i64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"report_progress_steps","arguments":{"steps":2,"delay_ms":10},"_meta":{"progressToken":id}}})
            .to_string()
    };
    let mut stream_ids = Vec::new();
    for (s, id) in [(&a, 1), (&b, 2)] {
        let mut reader = SseReader::new(s.post(&call(id), &[("mcp-session-id", &sid)]).await);
        let mut last = None;
        while let Some(event) = reader.next_event().await {
            if event.id.is_some() {
                last = event.id;
            }
        }
        let last = last.expect("stream events carry ids");
        stream_ids.push(last.split_once('_').expect("<stream>_<seq>").0.to_owned());
    }
    assert_ne!(stream_ids[0], stream_ids[1], "each replica's streams of one session have distinct ids");
    // B cannot resume A's stream: it must not replay its own stream of the same number.
    let a_event = format!("{}_1", stream_ids[0]);
    let mut on_b = SseReader::new(open_get(&b, &sid, Some(&a_event)).await);
    let (_, msg) = on_b.next_message_within(Duration::from_secs(5)).await.expect("a fresh stream");
    assert_eq!(msg["method"], "notifications/tools/list_changed", "never another stream's events: {msg}");
}

#[tokio::test]
async fn sessions_idle_on_every_replica_are_swept_from_the_shared_store() {
    let db = PgDb::create().await;
    let url = db.url();
    let short = |url: String| {
        TestServer::with(move |s| {
            let data = s.storage.data_dir.clone();
            s.storage = pg_settings(url, &data);
            s.sessions.secret = Some(toolgate::config::Secret::new(SECRET.into()));
            s.sessions.idle_timeout_secs = 1;
        })
    };
    let a = short(url.clone()).await;
    let b = short(url).await;
    let sid = a.initialize("2025-11-25").await;
    assert!(b.call(&sid, 2, "tools/list", json!({})).await["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "B serves it");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(a.state().sessions.sweep_shared().await, 1, "the idle session is deleted once");
    let mut status = 0;
    for _ in 0..100 {
        status =
            b.post(&json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}).to_string(), &[("mcp-session-id", &sid)]).await.status().as_u16();
        if status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 404, "B dropped its copy when told");
}
