//! The admin API's tasks, over real HTTP on the admin listener with JWT auth (alice and bob
//! create tasks at `/mcp`, the operator "ops" holds the admin scope): every owner's tasks newest
//! first with their tool, owner, age and TTL; filtered by status, tool and owner in the
//! database; a waiting task's questions by key and method only; an operator's cancel, which the
//! owner sees through the protocol, stops the run and is audited once, under the operator and
//! naming the owner; 409 for an ended task, 404 for an unknown one, `feature-off` with tasks
//! off; unknown query parameters named clipped; the admin gate. On Postgres with two replicas, the same
//! filters, and a cancel through one replica stopping the run on the other. The examples pack's
//! `countdown` is the task-capable tool under test. One rule per test.

use crate::{audit_support, common};

use std::time::Duration;

use common::TestServer;
use common::idp::Issuer;
use common::tasks::rpc_as;
use reqwest::StatusCode;
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, EventKind, Outcome};

const ADMIN_SCOPE: &str = "toolgate:admin";

/// A server trusting `idp`, with the task tools of `common::tasks` besides the examples pack.
async fn server(idp: &Issuer) -> TestServer {
    let s = TestServer::with(|c| idp.trust(c)).await;
    common::tasks::install(&s);
    s
}

/// A replica trusting `idp` on the Postgres database at `url`.
async fn pg_replica(idp: &Issuer, url: String) -> TestServer {
    let s = TestServer::with(|c| {
        idp.trust(c);
        c.storage = audit_support::pg_settings(url, &c.storage.data_dir.clone());
    })
    .await;
    common::tasks::install(&s);
    s
}

/// Creates a task of `tool` as `subject`; returns its id.
async fn task_of(s: &TestServer, idp: &Issuer, subject: &str, tool: &str, arguments: Value) -> String {
    let created = rpc_as(s, Some(&idp.token(subject, "mcp:tools")), "tools/call", json!({"name": tool, "arguments": arguments})).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().expect("task id").to_owned()
}

/// A countdown long enough to be working throughout a test.
async fn working_task(s: &TestServer, idp: &Issuer, subject: &str) -> String {
    task_of(s, idp, subject, "countdown", json!({"seconds": 60})).await
}

/// Waits until task `id` is listed `working` and its run is in flight on `s`: a cancel is
/// then known to stop a live run (a countdown that failed early would pass "stopped" too).
async fn running(s: &TestServer, idp: &Issuer, id: &str) {
    reaches(s, idp, id, "working").await;
    let in_flight = audit_support::eventually(Duration::from_secs(20), || async { s.state().server.in_flight.len() == 1 }).await;
    assert!(in_flight, "the countdown of task {id} runs");
}

/// One admin request: its status and JSON body.
async fn admin(s: &TestServer, method: reqwest::Method, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut req = s.client.request(method, s.admin_url(path));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let res = req.send().await.expect("admin request sent");
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn list(s: &TestServer, idp: &Issuer, query: &str) -> Value {
    let (status, body) = admin(s, reqwest::Method::GET, &format!("/admin/tasks{query}"), Some(&idp.token("ops", ADMIN_SCOPE))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn cancel(s: &TestServer, idp: &Issuer, id: &str) -> (StatusCode, Value) {
    admin(s, reqwest::Method::POST, &format!("/admin/tasks/{id}/cancel"), Some(&idp.token("ops", ADMIN_SCOPE))).await
}

fn ids(listed: &Value) -> Vec<&str> {
    listed["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str()).collect()
}

/// Polls the list until the task `id` has `status`.
async fn reaches(s: &TestServer, idp: &Issuer, id: &str, status: &str) -> Value {
    for _ in 0..100 {
        let listed = list(s, idp, "").await;
        if let Some(task) = listed["tasks"].as_array().into_iter().flatten().find(|t| t["id"] == id && t["status"] == status) {
            return task.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never reached {status}");
}

#[tokio::test]
async fn every_owners_tasks_are_listed_newest_first_with_tool_owner_age_and_ttl() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let alices = working_task(&s, &idp, "alice").await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let bobs = working_task(&s, &idp, "bob").await;
    let listed = list(&s, &idp, "").await;
    assert_eq!(listed["enabled"], true);
    assert_eq!(ids(&listed), [bobs.as_str(), alices.as_str()], "newest first: {listed}");
    let task = &listed["tasks"][1];
    assert_eq!(
        (&task["status"], &task["tool"], &task["owner"], &task["issuer"]),
        (&json!("working"), &json!("countdown"), &json!("alice"), &json!(idp.url))
    );
    assert!(task["age_seconds"].as_i64().is_some_and(|a| a >= 0), "{task}");
    assert_eq!(task["ttl_seconds"], 3600, "tasks.default_ttl_secs: {task}");
    assert!(task["expires_at"].as_str().is_some_and(|e| e > task["created_at"].as_str().unwrap_or_default()), "{task}");
    assert_eq!(task["input_requests"], json!({"count": 0, "waiting": []}));
}

#[tokio::test]
async fn the_owner_filter_selects_one_subjects_tasks() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let alices = working_task(&s, &idp, "alice").await;
    working_task(&s, &idp, "bob").await;
    working_task(&s, &idp, "alice2").await;
    assert_eq!(ids(&list(&s, &idp, "?owner=alice").await), [alices.as_str()]);
    assert!(ids(&list(&s, &idp, "?owner=Alice").await).is_empty(), "a subject is compared exactly");
}

#[tokio::test]
async fn the_status_and_tool_filters_select_in_the_database() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let working = working_task(&s, &idp, "alice").await;
    let stepped = task_of(&s, &idp, "alice", "steps", json!({})).await;
    reaches(&s, &idp, &stepped, "completed").await;
    assert_eq!(ids(&list(&s, &idp, "?status=completed").await), [stepped.as_str()]);
    assert_eq!(ids(&list(&s, &idp, "?tool=countdown").await), [working.as_str()]);
    assert!(ids(&list(&s, &idp, "?status=working&tool=steps").await).is_empty());
    assert_eq!(ids(&list(&s, &idp, "?limit=1").await).len(), 1);
    assert_eq!(list(&s, &idp, "?limit=1").await["truncated"], true);
}

#[tokio::test]
async fn an_unknown_status_is_refused_naming_the_statuses() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let (status, body) = admin(&s, reqwest::Method::GET, "/admin/tasks?status=done", Some(&idp.token("ops", ADMIN_SCOPE))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("input_required")), "{body}");
}

#[tokio::test]
async fn a_task_waiting_for_input_lists_its_questions_by_key_and_method_only() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let id = task_of(&s, &idp, "alice", "two_questions", json!({})).await;
    let task = reaches(&s, &idp, &id, "input_required").await;
    let waiting = &task["input_requests"];
    assert_eq!(waiting["count"], 2, "{task}");
    let mut keys: Vec<_> =
        waiting["waiting"].as_array().expect("waiting").iter().map(|w| (w["key"].clone(), w["method"].clone())).collect();
    keys.sort_by_key(|(k, _)| k.to_string());
    assert_eq!(keys, [(json!("first"), json!("elicitation/create")), (json!("second"), json!("elicitation/create"))]);
    assert!(!task.to_string().contains("First?"), "never a question's contents: {task}");
}

#[tokio::test]
async fn an_operators_cancel_ends_the_task_for_its_owner_and_stops_the_run() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let id = working_task(&s, &idp, "alice").await;
    running(&s, &idp, &id).await;
    let (status, task) = cancel(&s, &idp, &id).await;
    assert_eq!(status, StatusCode::OK, "{task}");
    assert_eq!((&task["status"], &task["status_message"]), (&json!("cancelled"), &json!("cancelled by an operator")));
    let seen = rpc_as(&s, Some(&idp.token("alice", "mcp:tools")), "tasks/get", json!({"taskId": id})).await;
    assert_eq!(seen["result"]["status"], "cancelled", "the owner sees it through the protocol: {seen}");
    let stopped = audit_support::eventually(Duration::from_secs(20), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "the countdown stopped");
}

#[tokio::test]
async fn an_operators_cancel_is_audited_as_a_task_change_under_the_operator() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let id = working_task(&s, &idp, "alice").await;
    assert_eq!(cancel(&s, &idp, &id).await.0, StatusCode::OK);
    let filter = AuditFilter { kind: Some(EventKind::TaskChange), outcome: Some(Outcome::Cancelled), ..AuditFilter::default() };
    let mut records = Vec::new();
    for _ in 0..100 {
        records = toolgate::audit::query(&s.state().store, &filter).await.expect("audit query");
        if !records.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(records.len(), 1, "one task_change record: {records:?}");
    let record = &records[0];
    assert_eq!((record.subject.as_deref(), record.tool.as_deref()), (Some("ops"), Some("countdown")));
    assert_eq!(
        record.detail.as_deref(),
        Some(format!("task {id} cancelled by an operator (owned by alice)").as_str()),
        "whose task: {record:?}"
    );
}

#[tokio::test]
async fn a_second_cancel_of_the_same_task_writes_no_second_record() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let id = working_task(&s, &idp, "alice").await;
    assert_eq!(cancel(&s, &idp, &id).await.0, StatusCode::OK);
    assert_eq!(cancel(&s, &idp, &id).await.0, StatusCode::CONFLICT);
    let owners = rpc_as(&s, Some(&idp.token("alice", "mcp:tools")), "tasks/cancel", json!({"taskId": id})).await;
    assert!(owners.get("error").is_none() && owners["result"].is_object(), "the owner's cancel of an ended task is acknowledged: {owners}");
    let settings = s.state().settings.storage.clone();
    let TestServer { running, data, .. } = s;
    running.stop().await.expect("stopped; the audit log is flushed");
    let store = toolgate::store::Store::connect(&settings).await.expect("store");
    let filter = AuditFilter { kind: Some(EventKind::TaskChange), outcome: Some(Outcome::Cancelled), ..AuditFilter::default() };
    let records = toolgate::audit::query(&store, &filter).await.expect("audit query");
    drop(data);
    assert_eq!(records.len(), 1, "only the write that ended the task is audited: {records:?}");
}

#[tokio::test]
async fn cancelling_an_ended_task_is_409_naming_its_status() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let id = working_task(&s, &idp, "alice").await;
    assert_eq!(cancel(&s, &idp, &id).await.0, StatusCode::OK);
    let (status, problem) = cancel(&s, &idp, &id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!((&problem["type"], &problem["task_status"]), (&json!("urn:toolgate:problem:task-ended"), &json!("cancelled")));
}

#[tokio::test]
async fn cancelling_an_unknown_task_is_404() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let (status, problem) = cancel(&s, &idp, "AAAAAAAAAAAAAAAAAAAAAA").await;
    assert_eq!((status, &problem["type"]), (StatusCode::NOT_FOUND, &json!("urn:toolgate:problem:not-found")), "{problem}");
}

#[tokio::test]
async fn cancelling_with_tasks_off_says_they_are_off_not_that_the_task_is_unknown() {
    let idp = Issuer::start().await;
    let s = TestServer::with(|c| {
        idp.trust(c);
        c.tasks.enabled = false;
    })
    .await;
    let (status, problem) = cancel(&s, &idp, "AAAAAAAAAAAAAAAAAAAAAA").await;
    assert_eq!((status, &problem["type"]), (StatusCode::NOT_FOUND, &json!("urn:toolgate:problem:feature-off")), "{problem}");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("tasks.enabled")), "{problem}");
}

#[tokio::test]
async fn an_unknown_query_parameter_is_named_clipped() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let long = "x".repeat(1000);
    let (status, body) = admin(&s, reqwest::Method::GET, &format!("/admin/tasks?{long}=1"), Some(&idp.token("ops", ADMIN_SCOPE))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let field = body["errors"][0]["field"].as_str().expect("the parameter named");
    assert!(field.len() <= 64 && long.starts_with(field) && !field.is_empty(), "{field}");
    assert!(body["detail"].as_str().is_some_and(|d| d.len() < 200), "{body}");
}

#[tokio::test]
async fn the_tasks_api_needs_an_admin_token() {
    let idp = Issuer::start().await;
    let s = server(&idp).await;
    let id = working_task(&s, &idp, "alice").await;
    let alice = idp.token("alice", "mcp:tools");
    for (method, path) in [(reqwest::Method::GET, "/admin/tasks".to_owned()), (reqwest::Method::POST, format!("/admin/tasks/{id}/cancel"))]
    {
        assert_eq!(admin(&s, method.clone(), &path, None).await.0, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(admin(&s, method, &path, Some(&alice)).await.0, StatusCode::FORBIDDEN, "{path}: the owner is no operator");
    }
    let seen = rpc_as(&s, Some(&alice), "tasks/get", json!({"taskId": id})).await;
    assert_eq!(seen["result"]["status"], "working", "{seen}");
}

#[tokio::test]
async fn the_filters_select_the_same_tasks_on_postgres() {
    let (idp, db) = (Issuer::start().await, audit_support::PgDb::create().await);
    let s = pg_replica(&idp, db.url()).await;
    let alices = working_task(&s, &idp, "alice").await;
    working_task(&s, &idp, "alice2").await;
    let stepped = task_of(&s, &idp, "bob", "steps", json!({})).await;
    reaches(&s, &idp, &stepped, "completed").await;
    assert_eq!(ids(&list(&s, &idp, "?owner=alice").await), [alices.as_str()]);
    assert_eq!(ids(&list(&s, &idp, "?status=completed&tool=steps").await), [stepped.as_str()]);
    assert_eq!(ids(&list(&s, &idp, "?limit=1").await), [stepped.as_str()], "newest first");
}

#[tokio::test]
async fn an_operators_cancel_through_one_replica_stops_the_run_on_another() {
    let (idp, db) = (Issuer::start().await, audit_support::PgDb::create().await);
    let (a, b) = (pg_replica(&idp, db.url()).await, pg_replica(&idp, db.url()).await);
    let id = working_task(&a, &idp, "alice").await;
    running(&a, &idp, &id).await;
    let (status, task) = cancel(&b, &idp, &id).await;
    assert_eq!((status, &task["status"]), (StatusCode::OK, &json!("cancelled")), "{task}");
    let stopped = audit_support::eventually(Duration::from_secs(20), || async { a.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "the countdown on the replica running it stopped");
}
