//! Behind a load balancer: with `server.trusted_proxies` the client named in
//! `X-Forwarded-For` gets its own rate-limit budget; without it the header is ignored, so a
//! client cannot choose whose budget it spends.

use crate::common;

use common::TestServer;
use serde_json::json;

async fn server(trusted: &[&str]) -> TestServer {
    let trusted: Vec<String> = trusted.iter().map(|s| (*s).to_owned()).collect();
    TestServer::with(move |s| {
        s.server.trusted_proxies = trusted;
        s.limits.enabled = true;
        // Auth is off in tests, so clients are keyed by address: a burst of 3 per client.
        s.limits.requests_per_minute = 3;
        s.limits.request_burst = 3;
    })
    .await
}

/// Sends `n` stateless requests as `client` (an X-Forwarded-For value); returns how many passed.
async fn admitted(s: &TestServer, client: &str, n: usize) -> usize {
    let mut ok = 0;
    for i in 0..n {
        let body = json!({"jsonrpc":"2.0","id":i,"method":"ping"}).to_string();
        let res = s.post(&body, &[("x-forwarded-for", client), ("mcp-protocol-version", "2025-06-18")]).await;
        if res.status() != 429 {
            ok += 1;
        }
    }
    ok
}

#[tokio::test]
async fn forwarded_clients_get_their_own_budget_only_behind_a_trusted_proxy() {
    let behind_lb = server(&["127.0.0.1"]).await;
    assert_eq!(admitted(&behind_lb, "203.0.113.1", 5).await, 3);
    assert_eq!(admitted(&behind_lb, "203.0.113.2", 5).await, 3, "another client behind the same proxy has its own budget");
    // Spoofed hops left of the proxy's entry change nothing.
    assert_eq!(admitted(&behind_lb, "198.51.100.1, 203.0.113.1", 2).await, 0);

    let direct = server(&[]).await;
    assert_eq!(admitted(&direct, "203.0.113.1", 5).await, 3);
    assert_eq!(admitted(&direct, "203.0.113.2", 5).await, 0, "untrusted: the header is ignored, one budget for the peer");
}
