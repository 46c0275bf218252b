//! Soak load for `benches/soak.sh` (not a test): mixed traffic against a running toolgate for a
//! fixed time, the server's resident memory and open files sampled from `/proc` as it runs.
//!
//! ```text
//! cargo run --release --example soak -- <base-url> <token> <server-pid> <seconds> <out.jsonl>
//! ```
//!
//! Five loops run side by side, each bounded by the deadline: tool calls in a session (2025-11-25)
//! and stateless (2026-07-28); sessions opened and deleted; GET, `/sse` and
//! `subscriptions/listen` streams opened, read briefly and dropped; requests with bad tokens.
//! Every 5 s a line `{"t": s, "rss_kb": .., "fds": .., "ok": .., "refused": .., "errors": ..}`
//! goes to `out.jsonl`. The rate limits stay on: refusals (429) are counted, not errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";
const MODERN: &str = "2026-07-28";

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    refused: AtomicU64,
    errors: AtomicU64,
}

impl Counts {
    fn count(&self, status: Option<u16>) {
        let slot = match status {
            Some(200..=299) => &self.ok,
            Some(429) | Some(401) => &self.refused,
            _ => &self.errors,
        };
        slot.fetch_add(1, Ordering::Relaxed);
    }
}

struct Load {
    base: String,
    bearer: String,
    http: reqwest::Client,
    deadline: Instant,
    counts: Counts,
}

impl Load {
    fn post(&self, body: &Value, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("authorization", &self.bearer)
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req
    }

    async fn initialize(&self) -> Option<String> {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}});
        let res = self.post(&init, &[]).send().await.ok()?;
        self.counts.count(Some(res.status().as_u16()));
        let id = res.headers().get("mcp-session-id")?.to_str().ok()?.to_owned();
        let done = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        let _ = self.post(&done, &[("mcp-session-id", &id)]).send().await;
        Some(id)
    }

    async fn delete(&self, session: &str) {
        let res = self
            .http
            .delete(format!("{}/mcp", self.base))
            .header("authorization", &self.bearer)
            .header("mcp-session-id", session)
            .send()
            .await;
        self.counts.count(res.ok().map(|r| r.status().as_u16()));
    }

    fn running(&self) -> bool {
        Instant::now() < self.deadline
    }
}

async fn session_calls(load: Arc<Load>) {
    let Some(sid) = load.initialize().await else { return };
    let mut i = 0;
    while load.running() {
        i += 1;
        let call = json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"echo","arguments":{"text":"soak"}}});
        let res = load.post(&call, &[("mcp-session-id", &sid)]).send().await;
        load.counts.count(res.ok().map(|r| r.status().as_u16()));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    load.delete(&sid).await;
}

async fn stateless_calls(load: Arc<Load>) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let mut i = 0;
    while load.running() {
        i += 1;
        let call = json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"echo","arguments":{"text":"soak"},"_meta":meta}});
        let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "echo")];
        let res = load.post(&call, &headers).send().await;
        load.counts.count(res.ok().map(|r| r.status().as_u16()));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn session_churn(load: Arc<Load>) {
    while load.running() {
        if let Some(sid) = load.initialize().await {
            load.delete(&sid).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens a stream, reads from it for a moment, drops it.
async fn stream_churn(load: Arc<Load>) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let mut n = 0u64;
    while load.running() {
        n += 1;
        let opened = match n % 3 {
            0 => load.http.get(format!("{}/sse", load.base)).header("authorization", &load.bearer).send().await,
            1 => {
                let Some(sid) = load.initialize().await else { continue };
                let res = load
                    .http
                    .get(format!("{}/mcp", load.base))
                    .header("authorization", &load.bearer)
                    .header("accept", "text/event-stream")
                    .header("mcp-session-id", &sid)
                    .send()
                    .await;
                load.delete(&sid).await;
                res
            }
            _ => {
                let listen = json!({"jsonrpc":"2.0","id":n,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":meta}});
                load.post(&listen, &[("mcp-protocol-version", MODERN), ("mcp-method", "subscriptions/listen")]).send().await
            }
        };
        load.counts.count(opened.as_ref().ok().map(|r| r.status().as_u16()));
        if let Ok(mut res) = opened {
            let _ = tokio::time::timeout(Duration::from_millis(200), res.chunk()).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn bad_tokens(load: Arc<Load>) {
    while load.running() {
        let res = load
            .http
            .post(format!("{}/mcp", load.base))
            .header("authorization", "Bearer not.a.valid-token")
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await;
        load.counts.count(res.ok().map(|r| r.status().as_u16()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Resident memory (kB) and open files of `pid`.
fn sample(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches(" kB").parse().ok()).unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    (rss, fds)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, base, token, pid, seconds, out] = args.as_slice() else {
        anyhow::bail!("usage: soak <base-url> <token> <server-pid> <seconds> <out.jsonl>");
    };
    let pid: u32 = pid.parse().context("server pid")?;
    let seconds: u64 = seconds.parse().context("seconds")?;
    let started = Instant::now();
    let load = Arc::new(Load {
        base: base.clone(),
        bearer: format!("Bearer {token}"),
        http: reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?,
        deadline: started + Duration::from_secs(seconds),
        counts: Counts::default(),
    });
    let mut tasks = Vec::new();
    for _ in 0..4 {
        tasks.push(tokio::spawn(session_calls(load.clone())));
        tasks.push(tokio::spawn(stateless_calls(load.clone())));
    }
    for _ in 0..2 {
        tasks.push(tokio::spawn(session_churn(load.clone())));
        tasks.push(tokio::spawn(stream_churn(load.clone())));
    }
    tasks.push(tokio::spawn(bad_tokens(load.clone())));
    let mut file = std::fs::File::create(out).context("output file")?;
    while load.running() {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (rss_kb, fds) = sample(pid);
        let c = &load.counts;
        let line = json!({
            "t": started.elapsed().as_secs(), "rss_kb": rss_kb, "fds": fds,
            "ok": c.ok.load(Ordering::Relaxed), "refused": c.refused.load(Ordering::Relaxed), "errors": c.errors.load(Ordering::Relaxed),
        });
        use std::io::Write as _;
        writeln!(file, "{line}")?;
        eprintln!("{line}");
    }
    for task in tasks {
        let _ = task.await;
    }
    Ok(())
}
