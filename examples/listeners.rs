//! Stream memory and `list_changed` fan-out for `benches/run.sh` (not a test): opens N long-lived
//! streams on a running toolgate, reads its resident memory before and after, then changes the
//! tool list K times and times each stream's `notifications/tools/list_changed`.
//!
//! ```text
//! cargo run --release --example listeners -- --url http://127.0.0.1:PORT/mcp --mode listen \
//!     --n 10000 [--rounds 5] [--pid PID] [--token T] [--sources 64] [--label L] [--out FILE]
//! ```
//!
//! `--mode get`: a 2025-11-25 session per stream (`initialize`, `initialized`), then its GET
//! stream. `--mode listen`: a 2026-07-28 `subscriptions/listen` stream (no session). Over
//! HTTP/1.1 (the default) each stream has its own connection, from one of `--sources` loopback
//! addresses (127.0.0.2, 127.0.0.3, ...) so that many connections do not run out of ephemeral
//! ports on one address pair. `--h2 K` opens the streams over K HTTP/2 connections (prior
//! knowledge, as a proxy in front speaks it) instead, up to the server's 200 streams each: how
//! one process holds more streams than its open-file limit allows connections. The change is the bench pack's `fanout_notify` (`[tools.packs] bench =
//! true`), sent stateless on a connection of its own; latency runs from writing that request
//! to reading the notification on each stream. One JSON line goes to `--out` in the shape of
//! `mcpload streams`, so `benches/summarize.py` tabulates both. One thread, like `mcpload`, so
//! the client can be pinned to one core.

use std::cell::{Cell, RefCell};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

struct Cfg {
    url: String,
    addr: SocketAddr,
    authority: String,
    path: String,
    token: Option<String>,
    sources: u32,
    listen: bool,
}

impl Cfg {
    /// A request head (without the closing blank line's body) with the common headers.
    fn head(&self, method: &str, accept: &str, extra: &[(&str, &str)]) -> String {
        let mut h = format!("{method} {} HTTP/1.1\r\nHost: {}\r\nAccept: {accept}\r\n", self.path, self.authority);
        if let Some(t) = &self.token {
            h.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in extra {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h
    }

    fn post(&self, body: &Value, extra: &[(&str, &str)]) -> Vec<u8> {
        let body = body.to_string();
        let mut h = self.head("POST", "application/json, text/event-stream", extra);
        h.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()));
        h.into_bytes()
    }

    /// A new connection from the `i`-th source address.
    async fn connect(&self, i: usize) -> anyhow::Result<TcpStream> {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i as u32 % self.sources.max(1)) as u8);
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
        let stream = socket.connect(self.addr).await.with_context(|| format!("connect from {source}"))?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "listeners", "version": "1"}})
}

/// The head of an answer: status and the value of one header, and what followed it.
async fn read_head(s: &mut TcpStream, header: &str) -> anyhow::Result<(u16, Option<String>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let end = loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            bail!("connection closed before the answer's head");
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let value = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(header).then(|| v.trim().to_owned())
    });
    Ok((status, value, buf[end + 4..].to_vec()))
}

/// One request on a connection of its own (`Connection: close`): status, a header, the body.
async fn exchange(cfg: &Cfg, i: usize, request: Vec<u8>, header: &str) -> anyhow::Result<(u16, Option<String>, String)> {
    let mut s = cfg.connect(i).await?;
    s.write_all(&request).await?;
    let (status, value, mut rest) = read_head(&mut s, header).await?;
    s.read_to_end(&mut rest).await?;
    Ok((status, value, String::from_utf8_lossy(&rest).into_owned()))
}

fn close(mut request: Vec<u8>) -> Vec<u8> {
    let at = request.windows(2).position(|w| w == b"\r\n").map_or(0, |i| i + 2);
    request.splice(at..at, b"Connection: close\r\n".iter().copied());
    request
}

/// Opens stream `i`: a listen POST, or a session and its GET.
async fn open(cfg: &Cfg, i: usize) -> anyhow::Result<TcpStream> {
    let request = if cfg.listen {
        let listen = json!({"jsonrpc":"2.0","id":1,"method":"subscriptions/listen",
                            "params":{"notifications":{"toolsListChanged":true},"_meta":meta()}});
        cfg.post(&listen, &[("MCP-Protocol-Version", MODERN), ("Mcp-Method", "subscriptions/listen")])
    } else {
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":LEGACY,
                          "capabilities":{},"clientInfo":{"name":"listeners","version":"1"}}});
        let (status, session, body) = exchange(cfg, i, close(cfg.post(&init, &[])), "mcp-session-id").await?;
        let Some(session) = session.filter(|_| status == 200) else { bail!("initialize: HTTP {status}: {body:.200}") };
        let headers = [("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", LEGACY)];
        let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        let (status, _, body) = exchange(cfg, i, close(cfg.post(&initialized, &headers)), "").await?;
        if !(200..300).contains(&status) {
            bail!("initialized: HTTP {status}: {body:.200}");
        }
        let mut get = cfg.head("GET", "text/event-stream", &headers);
        get.push_str("\r\n");
        get.into_bytes()
    };
    let mut s = cfg.connect(i).await?;
    s.write_all(&request).await?;
    let (status, kind, rest) = read_head(&mut s, "content-type").await?;
    if status != 200 || !kind.as_deref().unwrap_or("").starts_with("text/event-stream") {
        bail!("stream: HTTP {status} {kind:?}: {:.200}", String::from_utf8_lossy(&rest));
    }
    Ok(s)
}

/// Opens stream `i` over HTTP/2 on `client` (one connection): a listen POST, or a session and
/// its GET.
async fn open_h2(cfg: &Cfg, client: &reqwest::Client, i: usize) -> anyhow::Result<reqwest::Response> {
    let with = |request: reqwest::RequestBuilder, headers: &[(&str, &str)]| {
        let request = headers.iter().fold(request, |r, (k, v)| r.header(*k, *v));
        match &cfg.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        }
    };
    let post = |body: &Value, headers: &[(&str, &str)]| {
        with(
            client.post(&cfg.url).header("content-type", "application/json").header("accept", "application/json, text/event-stream"),
            headers,
        )
        .body(body.to_string())
    };
    let response = if cfg.listen {
        let listen = json!({"jsonrpc":"2.0","id":i,"method":"subscriptions/listen",
                            "params":{"notifications":{"toolsListChanged":true},"_meta":meta()}});
        post(&listen, &[("mcp-protocol-version", MODERN), ("mcp-method", "subscriptions/listen")]).send().await?
    } else {
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":LEGACY,
                          "capabilities":{},"clientInfo":{"name":"listeners","version":"1"}}});
        let answer = post(&init, &[]).send().await?;
        let session = answer.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let Some(session) = session else { bail!("initialize: HTTP {}", answer.status()) };
        drop(answer.bytes().await);
        let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", LEGACY)];
        let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        let answer = post(&initialized, &headers).send().await?;
        if !answer.status().is_success() {
            bail!("initialized: HTTP {}", answer.status());
        }
        with(client.get(&cfg.url).header("accept", "text/event-stream"), &headers).send().await?
    };
    let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    if response.status() != 200 || !kind.starts_with("text/event-stream") {
        bail!("stream: HTTP {} {kind:?}", response.status());
    }
    Ok(response)
}

/// Reads an HTTP/2 stream until it ends, noting when each `list_changed` arrives.
async fn read_h2(mut response: reqwest::Response, arrived: Rc<Cell<Option<Instant>>>, open: Rc<Cell<usize>>) {
    while let Ok(Some(chunk)) = response.chunk().await {
        if chunk.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            arrived.set(Some(Instant::now()));
        }
    }
    open.set(open.get() - 1);
}

const NEEDLE: &[u8] = b"notifications/tools/list_changed";

/// Reads a stream until it ends, noting when each `list_changed` arrives.
async fn read_stream(mut s: TcpStream, arrived: Rc<Cell<Option<Instant>>>, open: Rc<Cell<usize>>) {
    let mut buf = [0u8; 512];
    let mut carry = 0; // bytes kept from the last read, in case the needle straddles two reads
    loop {
        let n = match s.read(&mut buf[carry..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let seen = carry + n;
        if buf[..seen].windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            arrived.set(Some(Instant::now()));
            carry = 0;
        } else {
            let keep = (NEEDLE.len() - 1).min(seen);
            buf.copy_within(seen - keep..seen, 0);
            carry = keep;
        }
    }
    open.set(open.get() - 1);
}

/// `/proc/PID/status` VmRSS in kB.
fn rss_kb(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.split_whitespace().next()?.parse().ok())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

enum Opened {
    H1(TcpStream),
    H2(reqwest::Response),
}

struct Args(Vec<String>);

impl Args {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().position(|a| a == key).and_then(|i| self.0.get(i + 1)).map(String::as_str)
    }
    fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> anyhow::Result<T> {
        self.get(key).map_or(Ok(default), |v| v.parse().map_err(|_| anyhow::anyhow!("{key}: not a number: {v}")))
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args(std::env::args().skip(1).collect());
    let url = args.get("--url").context("--url http://127.0.0.1:PORT/mcp is required")?;
    let rest = url.strip_prefix("http://").context("--url must be http://")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/"), |(a, _)| (a, &rest[a.len()..]));
    let cfg = Cfg {
        url: url.to_owned(),
        addr: authority.parse().context("--url needs an IP address and port")?,
        authority: authority.to_owned(),
        path: path.to_owned(),
        token: args.get("--token").map(str::to_owned).or_else(|| std::env::var("MCPLOAD_TOKEN").ok()),
        sources: args.num("--sources", 64)?,
        listen: match args.get("--mode").unwrap_or("listen") {
            "listen" => true,
            "get" => false,
            other => bail!("--mode: {other} is not one of listen, get"),
        },
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let out = local.block_on(&runtime, run(&cfg, &args))?;
    println!("{out}");
    if let Some(path) = args.get("--out") {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(file, "{out}")?;
    }
    Ok(())
}

async fn run(cfg: &Cfg, args: &Args) -> anyhow::Result<Value> {
    let n: usize = args.num("--n", 1000)?;
    let rounds: usize = args.num("--rounds", 3)?;
    let concurrency: usize = args.num("--open-concurrency", 32)?;
    let pid = args.get("--pid").and_then(|p| p.parse().ok());
    let h2: usize = args.num("--h2", 0)?;
    // Over HTTP/2: one client (one connection) per `h2`, each from its own source address.
    let clients = (0..h2)
        .map(|k| {
            let source = Ipv4Addr::new(127, 0, 0, 2 + (k as u32 % cfg.sources.max(1)) as u8);
            reqwest::Client::builder().http2_prior_knowledge().local_address(IpAddr::V4(source)).build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rss_base = rss_kb(pid);

    // Open every stream, `concurrency` at a time.
    let started = Instant::now();
    let (open_count, errors) = (Rc::new(Cell::new(0usize)), Rc::new(RefCell::new(Vec::<String>::new())));
    let mut arrivals = Vec::with_capacity(n);
    let mut pending = futures_util::stream::FuturesUnordered::new();
    let mut next = 0;
    use futures_util::StreamExt as _;
    while next < n || !pending.is_empty() {
        while next < n && pending.len() < concurrency {
            let i = next;
            let client = clients.get(i % h2.max(1));
            pending.push(async move {
                let opened = match client {
                    Some(client) => open_h2(cfg, client, i).await.map(Opened::H2),
                    None => open(cfg, i).await.map(Opened::H1),
                };
                (i, opened)
            });
            next += 1;
        }
        let Some((i, opened)) = pending.next().await else { break };
        match opened {
            Ok(stream) => {
                let arrived = Rc::new(Cell::new(None));
                arrivals.push(arrived.clone());
                open_count.set(open_count.get() + 1);
                match stream {
                    Opened::H1(s) => tokio::task::spawn_local(read_stream(s, arrived, open_count.clone())),
                    Opened::H2(r) => tokio::task::spawn_local(read_h2(r, arrived, open_count.clone())),
                };
            }
            Err(e) if errors.borrow().len() < 5 => errors.borrow_mut().push(format!("stream {i}: {e:#}")),
            Err(_) => {}
        }
    }
    drop(pending);
    let opened = arrivals.len();
    let open_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await; // settle, as mcpload does
    let rss_streams = rss_kb(pid);

    let mut fanout = Vec::new();
    for round in 0..rounds {
        arrivals.iter().for_each(|a| a.set(None));
        let call = json!({"jsonrpc":"2.0","id":round + 2,"method":"tools/call",
                          "params":{"name":"fanout_notify","arguments":{},"_meta":meta()}});
        let request =
            close(cfg.post(&call, &[("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"), ("Mcp-Name", "fanout_notify")]));
        let t0 = Instant::now();
        let reply = exchange(cfg, round, request, "").await;
        let reply_ms = t0.elapsed().as_secs_f64() * 1e3;
        match reply {
            Ok((200, _, body)) if body.contains("\"result\"") => {}
            Ok((status, _, body)) => errors.borrow_mut().push(format!("fanout_notify: HTTP {status}: {body:.200}")),
            Err(e) => errors.borrow_mut().push(format!("fanout_notify: {e:#}")),
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && arrivals.iter().filter(|a| a.get().is_some()).count() < open_count.get() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut ms: Vec<f64> = arrivals.iter().filter_map(|a| a.get()).map(|t| (t - t0).as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
        eprintln!(
            "round {round}: {}/{} received, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            ms.len(),
            open_count.get(),
            percentile(&ms, 0.5),
            percentile(&ms, 0.99),
            ms.last().copied().unwrap_or(0.0)
        );
        fanout.push(json!({"round": round, "streams_open": open_count.get(), "received": ms.len(),
            "p50_ms": r3(percentile(&ms, 0.5)), "p99_ms": r3(percentile(&ms, 0.99)),
            "max_ms": r3(ms.last().copied().unwrap_or(0.0)), "trigger_reply_ms": r3(reply_ms)}));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let per = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if opened > 0 => Some(((b as f64 - a as f64) / opened as f64 * 100.0).round() / 100.0),
        _ => None,
    };
    let errors = errors.borrow().clone();
    Ok(json!({
        "kind": "streams", "stream_kind": if cfg.listen { "listen" } else { "get" }, "http2_connections": h2,
        "label": args.get("--label").unwrap_or(""), "url": args.get("--url"), "requested": n,
        "sessions_ok": opened, "streams_ok": opened, "streams_still_open": open_count.get(),
        "streams_open_s": (open_secs * 1000.0).round() / 1000.0,
        "rss_base_kb": rss_base, "rss_sessions_kb": rss_base, "rss_streams_kb": rss_streams,
        "kb_per_session": None::<f64>, "kb_per_stream": per(rss_base, rss_streams),
        "kb_per_session_and_stream": per(rss_base, rss_streams),
        "fanout": fanout, "error_samples": errors,
    }))
}
