//! What a hostile upstream MCP server can answer: the bytes of one message, decoded under the
//! upstream's budget as `Peer::receive` decodes it, then used as a `tools/list` page (the
//! listing turned into served tools) or as a `tools/call` result (relayed block for block and
//! shaped for every protocol version). The first byte chooses which. Properties: a decoded
//! message never holds more values or depth than the budget allows; every tool served has a
//! valid name under the upstream's prefix; a relayed result serializes for every version; and
//! every name, as logged, has no character that could end or reorder a log line.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate::protocol::ProtocolVersion;
use toolgate::untrusted::json::Budget;
use toolgate::untrusted::text::{escaped, needs_escape};
use toolgate::upstream::{Link, catalog, decode, relay};

const BUDGET: Budget = Budget { values: 5_000, depth: 64 };

fuzz_target!(|data: &[u8]| {
    let Some((&mode, message)) = data.split_first() else { return };
    let Ok(value) = decode(message, BUDGET) else { return };
    let (values, depth) = measure(&value);
    assert!(values <= BUDGET.values && depth <= BUDGET.depth, "{values} values, depth {depth}, over {BUDGET:?}");
    if mode % 2 == 0 {
        listing(value);
    } else {
        call_result(value);
    }
});

fn listing(page: Value) {
    let Some(listed) = page.get("tools").and_then(Value::as_array) else { return };
    let settings = serde_json::from_value(serde_json::json!({"url": "http://127.0.0.1:9/mcp", "prefix": "up_"})).expect("settings");
    let tools = toolgate::config::ToolSettings::default();
    let link = Link::build("up", &settings, &tools, 30, tokio_util::sync::CancellationToken::new(), None).expect("link");
    let (served, skipped) = catalog::build(&Arc::new(link), listed);
    for tool in &served {
        let name = tool.name();
        assert!(name.starts_with("up_"), "{name:?} is not under the prefix");
        assert!(toolgate::tool::validate_name(name).is_ok(), "{name:?} was served with an invalid name");
        logged_safely(name);
        let _ = serde_json::to_string(tool.descriptor()).expect("a served tool's descriptor serializes");
    }
    for skip in &skipped {
        logged_safely(&skip.tool);
        logged_safely(&skip.detail);
    }
}

fn call_result(result: Value) {
    let Ok(relayed) = relay(result) else { return };
    for version in ProtocolVersion::ALL {
        let shaped = relayed.clone().for_version(version);
        let text = serde_json::to_string(&shaped).expect("a relayed result serializes");
        let _: Value = serde_json::from_str(&text).expect("and parses back");
    }
}

fn logged_safely(text: &str) {
    let shown = escaped(text, 4096).to_string();
    assert!(!shown.chars().any(needs_escape), "{shown:?} still holds a character that escapes a log line");
}

/// Values and nesting depth of `value`, counted as the budget counts them (a key counts one).
fn measure(value: &Value) -> (usize, usize) {
    match value {
        Value::Array(items) => items.iter().map(measure).fold((1, 0), |(n, d), (m, e)| (n + m, d.max(e + 1))),
        Value::Object(map) => map.values().map(measure).fold((1, 0), |(n, d), (m, e)| (n + m + 1, d.max(e + 1))),
        _ => (1, 0),
    }
}
