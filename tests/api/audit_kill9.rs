//! No acknowledged call loses its audit record to `kill -9`, with the default audit settings,
//! on SQLite and on Postgres: the real binary under concurrent `tools/call` load is killed,
//! restarted on the same storage, and its audit log is compared with the answers the clients
//! received (each call carries its own `x-request-id`, which its record keeps).

use crate::audit_support::{PgDb, pg_host};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sqlx::Connection as _;
use tokio::io::AsyncBufReadExt as _;

/// Clients calling at once.
const CLIENTS: usize = 16;

/// Where the process under test keeps its records.
enum Storage {
    Sqlite(tempfile::TempDir),
    Postgres(PgDb, tempfile::TempDir),
}

impl Storage {
    fn sqlite() -> Self {
        Self::Sqlite(tempfile::tempdir().expect("data dir"))
    }

    async fn postgres() -> Self {
        Self::Postgres(PgDb::create().await, tempfile::tempdir().expect("data dir"))
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            Self::Sqlite(dir) => vec![("TOOLGATE__STORAGE__DATA_DIR", dir.path().display().to_string())],
            Self::Postgres(db, dir) => {
                vec![("TOOLGATE__STORAGE__DATA_DIR", dir.path().display().to_string()), ("TOOLGATE__STORAGE__URL", db.url())]
            }
        }
    }

    /// The request ids of the `tool_call` records, read straight from the database.
    async fn recorded(&self) -> Vec<String> {
        let sql = "SELECT request_id FROM audit_log WHERE kind = 'tool_call'";
        match self {
            Self::Sqlite(dir) => {
                let url = format!("sqlite://{}", dir.path().join("toolgate.db").display());
                let mut db = sqlx::SqliteConnection::connect(&url).await.expect("open the SQLite database");
                sqlx::query_scalar(sql).fetch_all(&mut db).await.expect("read audit_log")
            }
            Self::Postgres(db, _) => {
                let mut conn =
                    sqlx::PgConnection::connect(&format!("postgres://postgres@{}/{}", pg_host(), db.name)).await.expect("connect");
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.expect("read audit_log")
            }
        }
    }
}

/// `toolgate serve` with the default audit settings (auth and rate limits off, so every call
/// is answered), and its MCP endpoint's URL.
async fn spawn(storage: &Storage) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .env_remove("RUST_LOG")
        .env_remove("TOOLGATE_CONFIG")
        .env("TOOLGATE__SERVER__BIND", "127.0.0.1:0")
        .env("TOOLGATE__ADMIN__BIND", "127.0.0.1:0")
        .env("TOOLGATE__AUTH__MODE", "off")
        .env("TOOLGATE__LIMITS__ENABLED", "false")
        .env("TOOLGATE__LOG__FORMAT", "json")
        .envs(storage.env())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("toolgate starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let listening = crate::common::log_line(&mut lines, "toolgate listening", &mut Vec::new()).await;
    let addr = listening["addr"].as_str().expect("addr field").to_owned();
    // Keep draining the log so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, format!("http://{addr}/mcp"))
}

/// One 2026-07-28 `tools/call` (stateless: no session to set up) under its own request id;
/// true when its answer arrived whole.
async fn call(client: &reqwest::Client, url: &str, request_id: &str) -> bool {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "calculate_sum", "arguments": {"a": 2, "b": 3}, "_meta": meta}});
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "calculate_sum")
        .header("x-request-id", request_id)
        .body(body.to_string())
        .send()
        .await;
    let Ok(res) = sent else { return false };
    if res.status() != 200 {
        return false;
    }
    let Ok(text) = res.text().await else { return false };
    text.contains("\"result\"") && text.contains("\"5\"")
}

/// Runs `CLIENTS` loops of calls until `stop` is set; returns the ids of the answered calls.
fn load(url: &str, stop: &Arc<std::sync::atomic::AtomicBool>) -> Vec<tokio::task::JoinHandle<Vec<String>>> {
    (0..CLIENTS)
        .map(|c| {
            let (url, stop) = (url.to_owned(), Arc::clone(stop));
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut answered = Vec::new();
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let id = format!("kill9-{c}-{i}");
                    if !call(&client, &url, &id).await {
                        break;
                    }
                    answered.push(id);
                }
                answered
            })
        })
        .collect()
}

async fn answered(loops: Vec<tokio::task::JoinHandle<Vec<String>>>) -> Vec<String> {
    let mut all = Vec::new();
    for l in loops {
        all.extend(l.await.expect("load loop"));
    }
    all
}

fn kill_9(child: &tokio::process::Child) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id().expect("running")).expect("pid")).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("SIGKILL sent");
}

/// Restarts the server on the same storage, so whatever start-up recovers (a spool left by
/// the killed process) is recovered, and returns the recorded request ids once every answered
/// one is there or 10 s have passed.
async fn after_restart(storage: &Storage, answered: &[String]) -> Vec<String> {
    let (mut again, _) = spawn(storage).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let recorded = loop {
        let recorded = storage.recorded().await;
        let have: HashSet<&String> = recorded.iter().collect();
        if answered.iter().all(|id| have.contains(id)) || tokio::time::Instant::now() > deadline {
            break recorded;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    again.kill().await.expect("stop the restarted server");
    recorded
}

/// Killed mid-load: every answered call has exactly one record; the only records beyond them
/// are of calls still in flight at the kill (at most one per client).
async fn killed_under_load(storage: Storage) {
    let (mut child, url) = spawn(&storage).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loops = load(&url, &stop);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    kill_9(&child);
    let _ = child.wait().await;
    let answered = answered(loops).await;
    assert!(answered.len() >= 100, "the load ran: only {} calls answered before the kill", answered.len());

    let recorded = after_restart(&storage, &answered).await;
    let unique: HashSet<&String> = recorded.iter().collect();
    assert_eq!(unique.len(), recorded.len(), "a request id recorded twice");
    let missing: Vec<&String> = answered.iter().filter(|id| !unique.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} answered calls have no audit record, e.g. {:?}",
        missing.len(),
        answered.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(recorded.len() <= answered.len() + CLIENTS, "{} records for {} answered calls", recorded.len(), answered.len());
    eprintln!("answered {} calls before kill -9; {} records after restart", answered.len(), recorded.len());
}

/// Killed right after the load ended: exactly one record per answered call.
async fn killed_after_load(storage: Storage) {
    let (mut child, url) = spawn(&storage).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loops = load(&url, &stop);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered = answered(loops).await;
    kill_9(&child);
    let _ = child.wait().await;

    let recorded = after_restart(&storage, &answered).await;
    let mut expected: Vec<&String> = answered.iter().collect();
    let mut got: Vec<&String> = recorded.iter().collect();
    expected.sort();
    got.sort();
    assert!(answered.len() >= 100, "the load ran: only {} calls answered", answered.len());
    assert!(expected == got, "{} answered calls, {} records", answered.len(), recorded.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_the_record_of_every_answered_call_when_killed_under_load() {
    killed_under_load(Storage::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_the_record_of_every_answered_call_when_killed_under_load() {
    killed_under_load(Storage::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_holds_exactly_one_record_per_answered_call_when_killed_after_the_load() {
    killed_after_load(Storage::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holds_exactly_one_record_per_answered_call_when_killed_after_the_load() {
    killed_after_load(Storage::postgres().await).await;
}
