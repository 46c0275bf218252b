//! The task rules a hostile client tries to break, over real HTTP: a task with a short TTL
//! still counts against `tasks.max_running_per_client` while its tool runs and its owner can
//! still cancel it, tasks created all at once cannot pass the cap, and a run whose task was
//! ended elsewhere stops; another principal polling the owner's task spends only its own poll
//! allowance and is answered exactly as for an unknown id; and a run that ends after its task
//! was cancelled records nothing, so the canceller's is the one terminal audit record (the
//! race across two replicas, made deterministic with a row lock, is in `tasks_pg`); a stored
//! task whose run is gone is not renewed, so its lease lapses and it fails.

use crate::{audit_support, common};

use std::sync::Arc;
use std::time::Duration;

use common::TestServer;
use common::idp::Issuer;
use common::tasks::rpc_as;
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, EventKind};
use toolgate::protocol::CallToolResult;
use toolgate::protocol::task::{TaskStatus, TaskSupport};
use toolgate::store::Store;
use toolgate::tasks::{db, now_ms};
use toolgate::tool::Tool;

async fn start_slow(s: &TestServer, bearer: Option<&str>) -> Value {
    rpc_as(s, bearer, "tools/call", json!({"name": "slow", "arguments": {"ms": 30_000}})).await
}

fn task_id(created: &Value) -> String {
    created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned()
}

/// A server whose tasks live one second (the shortest TTL), at most four running per client,
/// with four tasks of 30 s created and past their TTL, and expired tasks pruned as the upkeep
/// loop would.
async fn expired_but_running() -> (TestServer, Vec<String>) {
    let s = TestServer::with(|c| {
        c.tasks.default_ttl_secs = 1;
        c.tasks.max_running_per_client = 4;
    })
    .await;
    common::tasks::install(&s);
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(task_id(&start_slow(&s, None).await));
    }
    // Past the TTL in real time (what `tasks/get` and the cap read), then the upkeep's prune.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    db::prune(&s.state().store, now_ms()).await.expect("prune");
    (s, ids)
}

#[tokio::test]
async fn a_task_past_its_ttl_whose_tool_still_runs_counts_against_the_running_cap() {
    let (s, _) = expired_but_running().await;
    let refused = start_slow(&s, None).await;
    assert_eq!(refused["error"]["data"]["limit"], "tasks", "a fifth task while four still run: {refused}");
    assert_eq!(s.state().server.in_flight.len(), 4, "the four runs go on");
}

#[tokio::test]
async fn the_owner_can_cancel_a_running_task_past_its_ttl() {
    let (s, ids) = expired_but_running().await;
    for id in &ids {
        let ack = rpc_as(&s, None, "tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    }
    let stopped = audit_support::eventually(Duration::from_secs(5), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "every run stopped");
    let ok = rpc_as(&s, None, "tools/call", json!({"name": "slow", "arguments": {"ms": 0}})).await;
    assert_eq!(ok["result"]["resultType"], "task", "the cap is free again: {ok}");
}

/// A server with authentication (alice and bob), a poll burst of 3 per minute, and a task of
/// alice's running.
async fn alices_task() -> (TestServer, Issuer, String) {
    let idp = Issuer::start().await;
    let s = TestServer::with(|c| {
        idp.trust(c);
        c.tasks.poll_interval_ms = 60_000;
        c.tasks.poll_burst = 3;
    })
    .await;
    common::tasks::install(&s);
    let id = task_id(&start_slow(&s, Some(&idp.token("alice", "mcp:tools"))).await);
    (s, idp, id)
}

#[tokio::test]
async fn another_principal_polling_a_task_does_not_spend_its_owners_poll_allowance() {
    let (s, idp, id) = alices_task().await;
    let bob = idp.token("bob", "mcp:tools");
    for _ in 0..10 {
        rpc_as(&s, Some(&bob), "tasks/get", json!({"taskId": id})).await;
    }
    let alice = idp.token("alice", "mcp:tools");
    let polled = rpc_as(&s, Some(&alice), "tasks/get", json!({"taskId": id})).await;
    assert_eq!(polled["result"]["status"], "working", "alice's first poll: {polled}");
}

#[tokio::test]
async fn another_principals_polls_of_a_task_are_answered_exactly_as_for_an_unknown_id() {
    let (s, idp, id) = alices_task().await;
    let bob = idp.token("bob", "mcp:tools");
    let unknown = "AAAAAAAAAAAAAAAAAAAAAA";
    for _ in 0..10 {
        let foreign = rpc_as(&s, Some(&bob), "tasks/get", json!({"taskId": id})).await;
        let never = rpc_as(&s, Some(&bob), "tasks/get", json!({"taskId": unknown})).await;
        assert_eq!(foreign.to_string().replace(&id, unknown), never.to_string());
        assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    }
}

/// A server with the audit log on, the shortest lease (renewed every second), and a tool
/// `held` that finishes when the test releases it.
async fn held(release: Arc<tokio::sync::Semaphore>) -> TestServer {
    let s = TestServer::with(|c| {
        c.audit.enabled = true;
        c.tasks.lease_secs = 3;
    })
    .await;
    let tool = Tool::builder("held", "Finishes when the test lets it.").task_support(TaskSupport::Optional).handler(move |_| {
        let release = release.clone();
        async move {
            let _ = release.acquire().await;
            Ok(CallToolResult::text("done"))
        }
    });
    s.state().server.tools.upsert(tool).expect("valid tool");
    s
}

/// The details of the `task_change` records that end task `id` (all but its creation).
fn terminal_records(records: &[toolgate::audit::AuditRecord], id: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.kind == EventKind::TaskChange)
        .filter_map(|r| r.detail.clone())
        .filter(|d| d.starts_with(&format!("task {id} ")) && !d.ends_with(" created"))
        .collect()
}

/// Stops the server (flushing its audit log) and returns every record.
async fn audit_records(s: TestServer) -> Vec<toolgate::audit::AuditRecord> {
    let settings = s.state().settings.storage.clone();
    let TestServer { running, data, .. } = s;
    running.stop().await.expect("stopped; the audit log is flushed");
    let store = Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &AuditFilter { limit: Some(10_000), ..AuditFilter::default() }).await.expect("query");
    drop(data);
    records
}

#[tokio::test]
async fn a_run_ending_after_its_task_was_cancelled_elsewhere_writes_no_terminal_record() {
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let s = held(release.clone()).await;
    let id = task_id(&rpc_as(&s, None, "tools/call", json!({"name": "held"})).await);
    // What a cancel through another replica leaves before its signal reaches this one: the
    // row is `cancelled` (and that replica records it), the run here still goes on.
    let cancelled = db::finish(&s.state().store, &id, TaskStatus::Cancelled, Some("cancelled by the client"), None, now_ms()).await;
    assert!(cancelled.expect("stored"), "the cancel won the row");
    release.add_permits(1);
    let ended = audit_support::eventually(Duration::from_secs(10), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(ended, "the run ended");
    let records = audit_records(s).await;
    assert_eq!(terminal_records(&records, &id), Vec::<String>::new(), "the run lost the row to the cancel: it records nothing");
}

#[tokio::test]
async fn an_ended_task_past_its_ttl_is_deleted() {
    let s = TestServer::with(|c| c.tasks.default_ttl_secs = 1).await;
    common::tasks::install(&s);
    let id = task_id(&rpc_as(&s, None, "tools/call", json!({"name": "slow", "arguments": {"ms": 0}})).await);
    let done = audit_support::eventually(Duration::from_secs(5), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(done, "the run ended");
    // As the upkeep loop would, two seconds from now: past the TTL.
    let later = now_ms() + 2000;
    assert_eq!(db::prune(&s.state().store, later).await.expect("prune"), 1);
    assert_eq!(db::get(&s.state().store, &id, later).await.expect("read"), None);
}

#[tokio::test]
async fn a_run_whose_task_was_failed_elsewhere_for_a_lapsed_lease_is_stopped() {
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let s = held(release).await;
    let id = task_id(&rpc_as(&s, None, "tools/call", json!({"name": "held"})).await);
    // What another replica does when this one's renewals stopped reaching the database.
    let later = now_ms() + 10 * s.state().settings.tasks.lease_ms();
    let failed = db::fail_lapsed(&s.state().store, later).await.expect("fail lapsed");
    assert_eq!(failed, [(id, "held".to_owned())]);
    let stopped = audit_support::eventually(Duration::from_secs(5), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "the run ended with its task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_created_at_once_cannot_pass_the_running_cap() {
    let s = TestServer::with(|c| c.tasks.max_running_per_client = 4).await;
    common::tasks::install(&s);
    let calls = (0..16).map(|_| start_slow(&s, None));
    let created = futures_util::future::join_all(calls).await;
    let running = created.iter().filter(|v| v["result"]["resultType"] == "task").count();
    assert_eq!(running, 4, "{created:?}");
}

#[tokio::test]
async fn a_stored_task_without_a_run_here_is_not_renewed_and_fails_when_its_lease_lapses() {
    let s = TestServer::with(|c| c.tasks.lease_secs = 3).await;
    common::tasks::install(&s);
    // What a run leaves when its result could not be stored: its row, live, claimed by this
    // replica, and no run.
    let now = now_ms();
    let task = toolgate::protocol::task::Task {
        id: "orphan-task-0000000000000000".into(),
        status: TaskStatus::Working,
        status_message: None,
        created_ms: now,
        updated_ms: now,
        ttl_ms: Some(60_000),
        poll_ms: 1000,
    };
    let row = db::TaskRow {
        task,
        owner: String::new(),
        era: "modern".into(),
        tool: "slow".into(),
        outcome: None,
        lease_owner: Some(s.state().cluster.replica().to_owned()),
        input_requests: None,
        input_responses: None,
    };
    let store = &s.state().store;
    db::insert(store, &row, "127.0.0.1", now + s.state().settings.tasks.lease_ms()).await.expect("stored");
    let failed = audit_support::eventually(Duration::from_secs(8), || async {
        db::get(store, &row.task.id, now_ms()).await.ok().flatten().is_some_and(|r| r.task.status == TaskStatus::Failed)
    })
    .await;
    assert!(failed, "the orphaned task was renewed instead of failing");
}
