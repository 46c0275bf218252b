//! Replicas sharing one Postgres: a tool stored through one replica's admin API is announced
//! on every replica's streams, and a replica that lost its event connection over-notifies
//! once it is back.

mod audit_support;
mod common;

use std::time::{Duration, Instant};

use audit_support::{PgDb, Proxy, pg_settings};
use common::{SseReader, TestServer, open_get};
use serde_json::json;

async fn replica(url: String) -> TestServer {
    TestServer::with(move |s| {
        let data = s.storage.data_dir.clone();
        s.storage = pg_settings(url, &data);
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
