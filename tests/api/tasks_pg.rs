//! Tasks across replicas on one Postgres database, as a load balancer without affinity would
//! spread a client's requests: a task created through one replica is polled and cancelled
//! through another, and a task whose replica stopped without finishing turns `failed` once its
//! lease lapses, reported by a replica that is still running; a listener on one replica hears
//! a task that ends on another.

use crate::{audit_support, common};

use std::time::Duration;

use audit_support::{PgDb, pg_settings};
use common::TestServer;
use common::tasks::opted_in;
use serde_json::{Value, json};
use toolgate::protocol::task::{Task, TaskStatus};

async fn replica(url: String) -> TestServer {
    let s = TestServer::with(move |s| {
        let data = s.storage.data_dir.clone();
        s.storage = pg_settings(url, &data);
        s.tasks.lease_secs = 3;
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
