//! Graceful shutdown under load: with a thousand open streams (legacy GET streams, modern
//! `subscriptions/listen` streams, 2024-11-05 `/sse` connections) and tool calls in flight,
//! stopping the server (the path SIGTERM takes) flips readiness at once, ends every stream
//! with its closing frame, lets a call that fits in the grace period finish, stops one that
//! does not, exits within the grace period and loses no audit record.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{SseReader, TestServer, open_get};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, Durability, EventKind, Outcome};
use toolgate::protocol::CallToolResult;
use toolgate::tool::Tool;

/// Streams to open; fewer only when the file-descriptor limit cannot be raised.
const STREAMS: usize = 1000;
const GRACE_SECS: u64 = 3;
const DRAIN_MS: u64 = 1000;

/// Raises the soft limit on open files to the hard limit and returns how many streams fit:
/// each costs two descriptors here (client and server are this process).
fn stream_budget() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some() && limit.current < limit.maximum {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum });
    }
    let soft = getrlimit(Resource::Nofile).current.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let fits = soft.saturating_sub(256) / 2;
    if fits < STREAMS {
        eprintln!(
            "NOTE: the open-file limit is {soft} and cannot be raised (hard limit reached); testing {fits} streams instead of {STREAMS}"
        );
    }
    fits.min(STREAMS)
}

/// A tool that counts its start and then sleeps (honouring cancellation).
fn sleeper(name: &str, duration: Duration, started: Arc<AtomicUsize>) -> Tool {
    Tool::builder(name, "Sleeps, then answers.").handler(move |ctx| {
        let started = started.clone();
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            ctx.sleep(duration).await?;
            Ok(CallToolResult::text("finished"))
        }
    })
}

/// One open stream and how it is expected to end.
enum Open {
    /// Legacy GET stream (2025-11-25): a `retry` hint, then the end.
    Get(SseReader),
    /// Modern listen stream: its closing result for this id, then the end.
    Listen(SseReader, i64),
    /// 2024-11-05 `/sse`: the end.
    Sse(SseReader),
}

async fn open_stream(s: &TestServer, n: usize) -> Open {
    match n % 10 {
        0 => {
            let res = s.client.get(s.url("/sse")).header("accept", "text/event-stream").send().await.expect("GET /sse");
            assert_eq!(res.status(), 200);
            let mut r = SseReader::new(res);
            let endpoint = r.next_event().await.expect("endpoint event");
            assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
            Open::Sse(r)
        }
        1..=5 => {
            let sid = s.initialize("2025-11-25").await;
            let res = open_get(s, &sid, None).await;
            assert_eq!(res.status(), 200);
            let mut r = SseReader::new(res);
            let priming = r.next_event().await.expect("priming event");
            assert!(priming.data.is_empty());
            Open::Get(r)
        }
        _ => {
            let id = i64::try_from(n).expect("small");
            let res = s.modern(id, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({})).await;
            assert_eq!(res.status(), 200);
            let mut r = SseReader::new(res);
            let (_, ack) = r.next_message().await.expect("acknowledgement");
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
            Open::Listen(r, id)
        }
    }
}

/// Reads a stream to its end; true when it ended with the closing frame its kind sends.
async fn ends_cleanly(open: Open) -> bool {
    match open {
        Open::Get(mut r) => {
            let mut hinted = false;
            while let Some(ev) = r.next_event().await {
                hinted |= ev.retry.is_some() && ev.data.is_empty();
            }
            hinted
        }
        Open::Listen(mut r, id) => {
            let mut closed = false;
            while let Some((_, msg)) = r.next_message().await {
                closed |= msg["id"] == id && msg["result"]["resultType"] == "complete";
            }
            closed
        }
        Open::Sse(mut r) => {
            while r.next_event().await.is_some() {}
            true
        }
    }
}

fn legacy_call(id: i64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_1000_open_streams_and_calls_in_flight_a_stop_exits_within_the_grace_period_and_loses_no_audit_record() {
    let streams = stream_budget();
    let s = TestServer::with(|settings| {
        settings.server.shutdown_grace_secs = GRACE_SECS;
        settings.server.drain_delay_ms = DRAIN_MS;
        settings.audit.durability = Durability::Sync;
        settings.sse.keep_alive_secs = 30;
        // One test client holds every stream: the per-client caps are not what is tested here.
        settings.sessions.max_per_client = 10_000;
        settings.sse.max_streams_per_client = 10_000;
    })
    .await;
    let started = Arc::new(AtomicUsize::new(0));
    let tools = &s.state().server.tools;
    tools.upsert(sleeper("finishes_in_time", Duration::from_millis(1200), started.clone())).expect("valid tool");
    tools.upsert(sleeper("outlives_the_grace", Duration::from_secs(60), started.clone())).expect("valid tool");

    // A thousand streams, opened 64 at a time.
    let opened = Instant::now();
    let open: Vec<Open> = futures_util::stream::iter(0..streams).map(|n| open_stream(&s, n)).buffer_unordered(64).collect().await;
    eprintln!("opened {} streams in {:?}", open.len(), opened.elapsed());

    // Calls that completed before the shutdown: each has its record.
    let completed = 20;
    for id in 0..completed {
        let res = s.modern(id, "tools/call", json!({"name": "calculate_sum", "arguments": {"a": id, "b": 1}}), json!({})).await;
        assert_eq!(common::response_json(res).await["result"]["content"][0]["text"], (id + 1).to_string());
    }

    // In flight: a short and a long call in each era.
    let modern = |id: i64, tool: &'static str| {
        let request = s
            .client
            .post(s.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", common::ACCEPT_BOTH)
            .header("mcp-protocol-version", common::MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(
                json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"_meta":{
                    "io.modelcontextprotocol/protocolVersion": common::MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {}}}})
                .to_string(),
            );
        tokio::spawn(async move { common::response_json(request.send().await.expect("sent")).await })
    };
    let sid = s.initialize("2025-11-25").await;
    let legacy = |id: i64, tool: &str| {
        let post = common::spawn_post(&s, &sid, legacy_call(id, tool));
        async move { common::response_json(post.await.expect("join")).await }
    };
    let short_modern = modern(101, "finishes_in_time");
    let long_modern = modern(102, "outlives_the_grace");
    let short_legacy = tokio::spawn(legacy(103, "finishes_in_time"));
    let long_legacy = tokio::spawn(legacy(104, "outlives_the_grace"));
    let until = Instant::now() + Duration::from_secs(5);
    while started.load(Ordering::SeqCst) < 4 {
        assert!(Instant::now() < until, "the four calls started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Stop the way SIGTERM does.
    let state = s.state().clone();
    let (client, base) = (s.client.clone(), s.base.clone());
    let t0 = Instant::now();
    let stopped = tokio::spawn(s.running.stop());

    // Readiness flips at once.
    loop {
        let status = client.get(format!("{base}/readyz")).send().await.expect("readyz").status();
        if status == 503 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_millis(200), "readiness still {status} after {:?}", t0.elapsed());
    }

    // Every stream ends with its closing frame, long before the drain delay is over.
    let ended = tokio::time::timeout(Duration::from_secs(5), futures_util::future::join_all(open.into_iter().map(ends_cleanly)))
        .await
        .expect("every stream ends promptly");
    let streams_ended = t0.elapsed();
    let unclean = ended.iter().filter(|clean| !**clean).count();
    assert_eq!(unclean, 0, "{unclean} of {} streams ended without their closing frame", ended.len());
    assert!(streams_ended < Duration::from_millis(DRAIN_MS), "streams ended after {streams_ended:?}");

    // After the drain delay, new connections are refused.
    tokio::time::sleep(Duration::from_millis(DRAIN_MS + 200).saturating_sub(t0.elapsed())).await;
    let fresh = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");
    assert!(fresh.get(format!("{base}/healthz")).send().await.is_err(), "the listener no longer accepts");

    // The short calls finish normally; the long ones are stopped with an answer.
    for (call, name) in [(short_modern, "modern"), (short_legacy, "legacy")] {
        let v = call.await.expect("join");
        assert_eq!(v["result"]["content"][0]["text"], "finished", "{name} short call: {v}");
        assert_ne!(v["result"]["isError"], true);
    }
    for (call, name) in [(long_modern, "modern"), (long_legacy, "legacy")] {
        let v = call.await.expect("join");
        assert_eq!(v["result"]["isError"], true, "{name} long call: {v}");
        let text = v["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("shutting down"), "{name} long call: {text}");
    }

    tokio::time::timeout(Duration::from_secs(GRACE_SECS + 5), stopped).await.expect("stops").expect("join").expect("clean stop");
    let total = t0.elapsed();
    eprintln!("streams ended after {streams_ended:?}; the server stopped after {total:?} (grace {GRACE_SECS} s)");
    assert!(total < Duration::from_millis(GRACE_SECS * 1000 + 500), "stopped after {total:?}");

    // Exactly one record per call, none lost, each with its trace id.
    let filter = AuditFilter { kind: Some(EventKind::ToolCall), ..Default::default() };
    let records = toolgate::audit::query(&state.store, &filter).await.expect("audit query");
    let outcome = |o: Outcome| records.iter().filter(|r| r.outcome == o).count();
    assert_eq!(records.len(), usize::try_from(completed).expect("small") + 4, "{records:#?}");
    assert_eq!(outcome(Outcome::Ok), usize::try_from(completed).expect("small") + 2);
    assert_eq!(outcome(Outcome::Cancelled), 2);
    for tool in ["finishes_in_time", "outlives_the_grace"] {
        assert_eq!(records.iter().filter(|r| r.tool.as_deref() == Some(tool)).count(), 2, "{tool}");
    }
    assert!(records.iter().all(|r| r.trace_id.as_deref().is_some_and(|t| t.len() == 32)), "every record has a trace id");
    let audit = state.audit.as_ref().expect("audit on");
    assert_eq!(audit.records_lost(), 0);
    assert_eq!(audit.spool_bytes(), 0, "everything reached the database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_makes_the_real_binary_end_its_streams_stop_its_calls_and_exit_within_the_grace_period() {
    use tokio::io::AsyncBufReadExt as _;
    let data = tempfile::tempdir().expect("data dir");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("serve")
        .env_remove("RUST_LOG")
        .env_remove("TOOLGATE_CONFIG")
        .env("TOOLGATE__SERVER__BIND", "127.0.0.1:0")
        .env("TOOLGATE__ADMIN__BIND", "127.0.0.1:0")
        .env("TOOLGATE__AUTH__MODE", "off")
        .env("TOOLGATE__LIMITS__ENABLED", "false")
        .env("TOOLGATE__STORAGE__DATA_DIR", data.path())
        .env("TOOLGATE__SERVER__SHUTDOWN_GRACE_SECS", GRACE_SECS.to_string())
        .env("TOOLGATE__SERVER__DRAIN_DELAY_MS", DRAIN_MS.to_string())
        .env("TOOLGATE__AUDIT__DURABILITY", "sync")
        .env("TOOLGATE__LOG__FORMAT", "json")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("toolgate starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let listening = common::log_line(&mut lines, "toolgate listening", &mut seen).await;
    let base = format!("http://{}", listening["addr"].as_str().expect("addr field"));
    let client = reqwest::Client::new();
    let post = |body: Value, headers: &[(&str, &str)]| {
        let mut req = client.post(format!("{base}/mcp")).header("content-type", "application/json").header("accept", common::ACCEPT_BOTH);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(body.to_string()).send()
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion": common::MODERN, "io.modelcontextprotocol/clientCapabilities": {}, "progressToken": "p"});
    let modern = [("mcp-protocol-version", common::MODERN), ("mcp-method", "subscriptions/listen")];
    let listen = post(
        json!({"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":meta}}),
        &modern,
    )
    .await
    .expect("listen");
    let mut listen = SseReader::new(listen);
    listen.next_message().await.expect("acknowledgement");
    // A call that would run 100 s; its first progress event shows it runs.
    let call = [("mcp-protocol-version", common::MODERN), ("mcp-method", "tools/call"), ("mcp-name", "report_progress_steps")];
    let args = json!({"steps": 100, "delay_ms": 1000});
    let res = post(
        json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"report_progress_steps","arguments":args,"_meta":meta}}),
        &call,
    )
    .await
    .expect("call");
    let mut running = SseReader::new(res);
    let (_, progress) = running.next_message().await.expect("progress");
    assert_eq!(progress["method"], "notifications/progress");

    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id().expect("running")).expect("pid")).expect("pid");
    let t0 = Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM sent");

    let mut closed = false;
    while let Some((_, msg)) = listen.next_message().await {
        closed |= msg["id"] == 7 && msg["result"]["resultType"] == "complete";
    }
    assert!(closed, "the listen stream ended with its closing result");
    let answer = loop {
        let (_, msg) = running.next_message().await.expect("the call answers before its stream ends");
        if msg["id"] == 8 {
            break msg;
        }
    };
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("shutting down"), "{answer}");

    let status = tokio::time::timeout(Duration::from_secs(GRACE_SECS + 5), child.wait()).await.expect("exits").expect("wait");
    let total = t0.elapsed();
    assert!(status.success(), "exit status {status}");
    assert!(total < Duration::from_millis(GRACE_SECS * 1000 + 1500), "exited after {total:?}");
    let stopped = common::log_line(&mut lines, "tool stopped: the shutdown grace period is over", &mut seen).await;
    assert!(stopped["request_id"].is_string() && stopped["trace_id"].as_str().is_some_and(|t| t.len() == 32), "{stopped}");
    assert_eq!(stopped["tool"], "report_progress_steps");
    common::log_line(&mut lines, "shutdown complete", &mut seen).await;

    let storage = toolgate::store::StorageSettings { data_dir: data.path().to_owned(), ..Default::default() };
    let store = toolgate::store::Store::connect(&storage).await.expect("the database");
    let filter = AuditFilter { kind: Some(EventKind::ToolCall), ..Default::default() };
    let records = toolgate::audit::query(&store, &filter).await.expect("audit query");
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0].outcome, Outcome::Cancelled);
    assert_eq!(records[0].trace_id.as_deref(), stopped["trace_id"].as_str(), "the record and the log line name the same trace");
}
