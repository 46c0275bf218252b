//! OpenTelemetry export (`--features otel`): spans reach an OTLP/HTTP collector, in the trace
//! the caller named in the `traceparent` header or in `_meta.traceparent`. The collector is a
//! stub on loopback that keeps every POST to `/v1/traces`; the trace ids are looked up as raw
//! bytes in the protobuf bodies (a protobuf `bytes` field is stored verbatim).

use crate::common;

use std::sync::{Arc, Mutex};

use axum::routing::post;
use common::TestServer;
use serde_json::json;
use toolgate::config::{LogFormat, LogSettings};

const HEADER_TRACE: u128 = 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736;
const META_TRACE: u128 = 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c;

/// Starts the stub collector; returns its base URL and the bodies it received.
async fn collector() -> (String, Arc<Mutex<Vec<bytes::Bytes>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let store = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: bytes::Bytes| {
            let store = store.clone();
            async move {
                store.lock().expect("lock").push(body);
                ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), received)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_the_collector_in_the_callers_trace() {
    let (endpoint, received) = collector().await;
    let mut log = LogSettings { format: LogFormat::Json, filter: "warn".into(), ..LogSettings::default() };
    log.otlp.endpoint = Some(endpoint);
    let telemetry = toolgate::telemetry::init_with_writer(&log, std::io::sink);

    let s = TestServer::start().await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": common::MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let body = |id: i64, meta: serde_json::Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"calculate_sum","arguments":{"a":1,"b":2},"_meta":meta}})
            .to_string()
    };
    let headers = [("mcp-protocol-version", common::MODERN), ("mcp-method", "tools/call"), ("mcp-name", "calculate_sum")];
    let traceparent = format!("00-{HEADER_TRACE:032x}-00f067aa0ba902b7-01");
    let mut with_header = headers.to_vec();
    with_header.push(("traceparent", &traceparent));
    let v = common::response_json(s.post(&body(1, meta.clone()), &with_header).await).await;
    assert_eq!(v["result"]["content"][0]["text"], "3", "{v}");
    let mut in_meta = meta;
    in_meta["traceparent"] = json!(format!("00-{META_TRACE:032x}-b7ad6b7169203331-01"));
    let v = common::response_json(s.post(&body(2, in_meta), &headers).await).await;
    assert_eq!(v["result"]["content"][0]["text"], "3", "{v}");
    s.running.stop().await.expect("clean stop");

    // Flushes the batch exporter.
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await.expect("join");
    let bodies = received.lock().expect("lock").clone();
    assert!(!bodies.is_empty(), "the collector received spans");
    let all: Vec<u8> = bodies.iter().flat_map(|b| b.iter().copied()).collect();
    assert!(contains(&all, &HEADER_TRACE.to_be_bytes()), "spans in the header's trace");
    assert!(contains(&all, &META_TRACE.to_be_bytes()), "spans in the _meta trace");
    // `mcp` is the span of the request whose `_meta` named its trace.
    for name in ["request", "mcp", "tool", "audit.write"] {
        assert!(contains(&all, name.as_bytes()), "a {name:?} span was exported");
    }
    assert!(contains(&all, b"toolgate"), "service.name");
}
