//! What a virtual server costs, measured (not tested): `tools/list` through the request path
//! (`transport::exchange::start`, the server's methods, the JSON answer) on a server selecting
//! 2,000 tools from 10 upstream sources (200 of them renamed), beside the same list at the
//! default endpoint; and the view's build after a registry change (the first request pays it).
//!
//!     cargo bench --bench virtual_servers

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate::bus::LocalBus;
use toolgate::caller::Caller;
use toolgate::config::Settings;
use toolgate::config::servers::{ServedAs, VirtualServerSettings};
use toolgate::protocol::jsonrpc::{Request, RequestId};
use toolgate::protocol::{CallToolResult, ProtocolVersion};
use toolgate::server::McpServer;
use toolgate::tool::{ClientCaps, Origin, Tool, ToolError};
use toolgate::transport::exchange::{self, Frame, Spec};

const SOURCES: usize = 10;
const PER_SOURCE: usize = 200;
const ROUNDS: usize = 3000;

fn settings(page_size: usize) -> Settings {
    let mut s = Settings::default();
    s.tools.page_size = page_size;
    let mut team = VirtualServerSettings { path: "/team/mcp".into(), ..Default::default() };
    team.tools = (0..SOURCES).map(|u| format!("upstream:u{u}")).collect();
    team.overrides = (0..PER_SOURCE)
        .map(|t| (format!("u0_tool_{t}"), ServedAs { name: Some(format!("team_{t}")), ..Default::default() }))
        .collect::<BTreeMap<_, _>>();
    s.servers.insert("team".into(), team);
    s
}

fn tools() -> Vec<Tool> {
    let schema = json!({"type": "object", "properties": {"q": {"type": "string", "description": "What to look for"}}, "required": ["q"]});
    (0..SOURCES)
        .flat_map(|u| (0..PER_SOURCE).map(move |t| (u, t)))
        .map(|(u, t)| {
            Tool::builder(format!("u{u}_tool_{t}"), format!("Tool {t} of upstream u{u}: looks things up"))
                .input_schema(schema.clone())
                .provenance(format!("upstream=u{u} tool=tool_{t}"))
                .handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("ok")) })
        })
        .collect()
}

async fn list(server: &Arc<McpServer>, caller: &Caller) -> usize {
    let request = Request { id: RequestId::Number(1), method: "tools/list".into(), params: serde_json::Map::new() };
    let spec = Spec {
        version: ProtocolVersion::LATEST_LEGACY,
        session: None,
        caller: caller.clone(),
        caps: ClientCaps::default(),
        log_level: None,
        cancel: CancellationToken::new(),
        buffer: 4,
        client_timeout: Duration::from_secs(5),
        status_of: exchange::legacy_status,
        audit: None,
    };
    let mut rx = exchange::start(server.clone(), request, spec);
    match rx.recv().await {
        Some(Frame::Final { json, .. }) => json.len(),
        _ => panic!("no answer"),
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure(label: &str, server: &Arc<McpServer>, caller: &Caller) {
    let mut samples = Vec::with_capacity(ROUNDS);
    let mut bytes = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        bytes = list(server, caller).await;
        samples.push(started.elapsed());
    }
    let p50 = percentile(&mut samples, 0.50);
    let p99 = percentile(&mut samples, 0.99);
    println!("{label:<46} p50 {:>8.3} ms   p99 {:>8.3} ms   ({bytes} bytes)", p50.as_secs_f64() * 1e3, p99.as_secs_f64() * 1e3);
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    for page_size in [50, SOURCES * PER_SOURCE] {
        let server = McpServer::new(Arc::new(settings(page_size)), Arc::new(LocalBus::default()));
        server.tools.sync_origin(Origin::Upstream, tools()).expect("tools");
        let team = Caller { server: server.servers.get("team"), ..Caller::default() };
        let started = Instant::now();
        let view = server.servers.get("team").expect("team").view(&server.tools.snapshot());
        println!("view of {} tools built in {:.2} ms (after a registry change)", view.tools.len(), started.elapsed().as_secs_f64() * 1e3);
        measure(&format!("tools/list at /mcp, page of {page_size}"), &server, &Caller::default()).await;
        measure(&format!("tools/list at a virtual server, page of {page_size}"), &server, &team).await;
    }
}
