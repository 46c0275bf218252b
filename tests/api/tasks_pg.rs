//! Tasks across replicas on one Postgres database, as a load balancer without affinity would
//! spread a client's requests: a task created through one replica is polled and cancelled
//! through another, and a task whose replica stopped without finishing turns `failed` once its
//! lease lapses, reported by a replica that is still running; a listener on one replica hears
//! a task that ends on another; a cancel through one replica racing the run's completion on
//! another leaves one terminal audit record, the status stored; creates through two replicas at
//! once count against one running cap.

use crate::{audit_support, common};

use std::time::Duration;

use audit_support::{PgDb, pg_settings};
use common::TestServer;
use common::tasks::opted_in;
use serde_json::{Value, json};
use toolgate::protocol::task::{Task, TaskStatus};

async fn replica(url: String) -> TestServer {
    replica_with(url, |_| {}).await
}

async fn replica_with(url: String, more: impl FnOnce(&mut toolgate::config::Settings) + Send + 'static) -> TestServer {
    let s = TestServer::with(move |s| {
        let data = s.storage.data_dir.clone();
        s.storage = pg_settings(url, &data);
        s.tasks.lease_secs = 3;
        more(s);
    })
    .await;
    common::tasks::install(&s);
    s
}

async fn rpc(s: &TestServer, method: &str, params: Value) -> Value {
    common::response_json(s.modern(1, method, params, opted_in()).await).await
}

async fn status_within(s: &TestServer, id: &str, wanted: &str, within: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let v = rpc(s, "tasks/get", json!({"taskId": id})).await;
        if v["result"]["status"] == wanted || tokio::time::Instant::now() > deadline {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_created_through_one_replica_is_polled_to_its_result_through_another() {
    let db = PgDb::create().await;
    let (a, b) = (replica(db.url()).await, replica(db.url()).await);
    let created = rpc(&a, "tools/call", json!({"name":"slow","arguments":{"ms":200}})).await;
    let id = created["result"]["taskId"].as_str().expect("task id").to_owned();
    let v = status_within(&b, &id, "completed", Duration::from_secs(10)).await;
    assert_eq!(v["result"]["result"]["content"][0]["text"], "done after 200 ms", "{v}");
}

#[tokio::test]
async fn a_cancel_through_another_replica_stops_the_run_where_it_runs() {
    let db = PgDb::create().await;
    let (a, b) = (replica(db.url()).await, replica(db.url()).await);
    let created = rpc(&a, "tools/call", json!({"name":"slow","arguments":{"ms":60000}})).await;
    let id = created["result"]["taskId"].as_str().expect("task id").to_owned();
    assert_eq!(rpc(&b, "tasks/cancel", json!({"taskId": id})).await["result"]["resultType"], "complete");
    assert_eq!(status_within(&a, &id, "cancelled", Duration::from_secs(5)).await["result"]["status"], "cancelled");
    // The run on `a` was stopped: its call slot is free again.
    let stopped = audit_support::eventually(Duration::from_secs(5), || async { a.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "the tool on the creating replica is still running");
}

#[tokio::test]
async fn a_task_whose_replica_stopped_turns_failed_when_its_lease_lapses() {
    let db = PgDb::create().await;
    let b = replica(db.url()).await;
    // What a replica killed with -9 leaves behind: a working task it claimed, never renewed.
    let now = toolgate::tasks::now_ms();
    let row = toolgate::tasks::TaskRow {
        task: Task {
            id: "orphan-task-0001".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: Some(600_000),
            poll_ms: 1000,
        },
        owner: String::new(),
        era: "modern".into(),
        tool: "slow".into(),
        outcome: None,
        lease_owner: Some("a-replica-that-died".into()),
        input_requests: None,
        input_responses: None,
    };
    toolgate::tasks::db::insert(
        &toolgate::store::Store::connect(&pg_settings(db.url(), b.data.path())).await.expect("store"),
        &row,
        "",
        now + 1000,
    )
    .await
    .expect("insert");
    let v = status_within(&b, "orphan-task-0001", "failed", Duration::from_secs(10)).await;
    assert_eq!(v["result"]["status"], "failed", "{v}");
    assert!(v["result"]["statusMessage"].as_str().is_some_and(|m| m.contains("stopped")), "{v}");
    assert_eq!(v["result"]["error"]["code"], -32603);
}

#[tokio::test]
async fn a_listener_on_one_replica_hears_a_task_that_ends_on_another() {
    let db = PgDb::create().await;
    let (a, b) = (replica(db.url()).await, replica(db.url()).await);
    let created = rpc(&a, "tools/call", json!({"name": "slow", "arguments": {"ms": 1500}})).await;
    let id = created["result"]["taskId"].as_str().expect("task id").to_owned();
    let listen = b.modern(5, "subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), opted_in()).await;
    let mut stream = common::SseReader::new(listen);
    let (_, ack) = stream.next_message().await.expect("ack");
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]), "{ack}");
    let (_, n) = stream.next_message_within(Duration::from_secs(10)).await.expect("a notification from the other replica");
    assert_eq!(n["method"], "notifications/tasks");
    assert_eq!(n["params"]["status"], "completed", "{n}");
    assert_eq!(n["params"]["result"]["content"][0]["text"], "done after 1500 ms");
}

/// The sessions of this test's database waiting for a lock.
async fn lock_waiters(db: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
        .fetch_one(db)
        .await
        .expect("pg_stat_activity")
}

/// Waits until `n` sessions wait for a lock.
async fn until_waiting(db: &mut sqlx::PgConnection, n: i64) {
    for _ in 0..500 {
        if lock_waiters(db).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{n} sessions never waited for the task's row");
}

#[tokio::test]
async fn a_cancel_through_one_replica_racing_completion_on_another_leaves_one_terminal_record() {
    use sqlx::Connection as _;
    let db = PgDb::create().await;
    let audited = |url: String| async move {
        let s = TestServer::with(move |s| {
            let data = s.storage.data_dir.clone();
            s.storage = pg_settings(url, &data);
            s.audit.enabled = true;
        })
        .await;
        common::tasks::install(&s);
        s
    };
    let (a, b) = (audited(db.url()).await, audited(db.url()).await);
    let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let gate = release.clone();
    let held = toolgate::tool::Tool::builder("held", "Finishes when the test lets it.")
        .task_support(toolgate::protocol::task::TaskSupport::Optional)
        .handler(move |_| {
            let gate = gate.clone();
            async move {
                let _ = gate.acquire().await;
                Ok(toolgate::protocol::CallToolResult::text("done"))
            }
        });
    a.state().server.tools.upsert(held).expect("valid tool");
    let id = rpc(&a, "tools/call", json!({"name": "held"})).await["result"]["taskId"].as_str().expect("task id").to_owned();

    // The row is locked, so both writers queue on it in order: the cancel through `b` first,
    // then the run's completion on `a`, which has not heard of the cancel (it is not stored).
    let mut lock = sqlx::PgConnection::connect(&db.url()).await.expect("connect");
    let mut watch = sqlx::PgConnection::connect(&db.url()).await.expect("connect");
    sqlx::query("BEGIN").execute(&mut lock).await.expect("begin");
    sqlx::query("SELECT id FROM tasks WHERE id = $1 FOR UPDATE").bind(&id).execute(&mut lock).await.expect("lock the row");
    let cancel = tokio::spawn({
        let (client, url) = (b.client.clone(), b.url("/mcp"));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"taskId": id, "_meta": {
            "io.modelcontextprotocol/protocolVersion": common::MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": opted_in()}}});
        let id = id.clone();
        async move {
            client
                .post(url)
                .header("content-type", "application/json")
                .header("accept", common::ACCEPT_BOTH)
                .header("mcp-protocol-version", common::MODERN)
                .header("mcp-method", "tasks/cancel")
                .header("mcp-name", id)
                .body(body.to_string())
                .send()
                .await
                .expect("cancel sent")
        }
    });
    until_waiting(&mut watch, 1).await;
    release.add_permits(1);
    until_waiting(&mut watch, 2).await;
    sqlx::query("COMMIT").execute(&mut lock).await.expect("commit");
    assert_eq!(cancel.await.expect("cancel").status(), 200);
    let ended = audit_support::eventually(Duration::from_secs(10), || async { a.state().server.in_flight.is_empty() }).await;
    assert!(ended, "the run ended");

    let stored = rpc(&b, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(stored["result"]["status"], "cancelled", "the cancel was first on the row: {stored}");
    let settings = a.state().settings.storage.clone();
    a.running.stop().await.expect("a stops; its audit log is flushed");
    b.running.stop().await.expect("b stops; its audit log is flushed");
    let store = toolgate::store::Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &toolgate::audit::AuditFilter::default()).await.expect("query");
    let terminal: Vec<String> = records
        .iter()
        .filter_map(|r| r.detail.clone())
        .filter(|d| d.starts_with(&format!("task {id} ")) && !d.ends_with(" created"))
        .collect();
    assert_eq!(terminal, [format!("task {id} cancelled by the client")], "one terminal record, the status stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_created_at_once_through_two_replicas_cannot_pass_the_running_cap() {
    use sqlx::Connection as _;
    let db = PgDb::create().await;
    let capped = |s: &mut toolgate::config::Settings| s.tasks.max_running_per_client = 1;
    let (a, b) = (replica_with(db.url(), capped).await, replica_with(db.url(), capped).await);
    // Reads pass a SHARE lock and inserts queue behind it, so both creates are held at the
    // same point: each past whatever it counted, neither stored yet.
    let mut lock = sqlx::PgConnection::connect(&db.url()).await.expect("connect");
    let mut watch = sqlx::PgConnection::connect(&db.url()).await.expect("connect");
    sqlx::query("BEGIN").execute(&mut lock).await.expect("begin");
    sqlx::query("LOCK TABLE tasks IN SHARE MODE").execute(&mut lock).await.expect("lock the table");
    let slow = json!({"name":"slow","arguments":{"ms":30_000}});
    let release = async {
        until_waiting(&mut watch, 2).await;
        sqlx::query("COMMIT").execute(&mut lock).await.expect("release the table");
    };
    let (on_a, on_b, ()) = tokio::join!(rpc(&a, "tools/call", slow.clone()), rpc(&b, "tools/call", slow.clone()), release);
    let running = [on_a, on_b].iter().filter(|v| v["result"]["resultType"] == "task").count();
    assert_eq!(running, 1);
}
