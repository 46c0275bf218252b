//! SSRF protection: which addresses an `http` tool may reach, enforced where it cannot be
//! bypassed.
//!
//! * Host names are resolved once, by [`GuardedResolver`], which reqwest uses for every
//!   connection (the first request and every redirect hop): denied addresses are dropped before
//!   hyper sees them, so the connection goes to exactly the address that was checked (no
//!   time-of-check/time-of-use gap, no DNS rebinding).
//! * IP-literal hosts never reach a resolver, so [`AddressPolicy::check_url`] checks them
//!   before a request is sent and in the redirect policy ([`redirect_policy`]) for each hop.
//! * The client has no proxy (`no_proxy()`), so `HTTP(S)_PROXY` cannot route around this.
//!
//! Hosts named in `tools.http.allow_hosts` (exact, case-insensitive) are exempt; an entry with
//! a port (`host:port`) exempts that port only, and a URL to the host on any other port (a
//! redirect hop included) is refused.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use url::{Host, Url};

/// Why a request was stopped before it left. The text is shown to the model as is: it names
/// the host (which the definition already shows) but never an address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("refused: {host} is a private or local network address")]
    Literal { host: String },
    #[error("refused: the address of {host} resolves to a private or local network address")]
    Resolved { host: String },
    #[error("refused: a redirect to a {scheme}: URL (only http and https are followed)")]
    Scheme { scheme: String },
    #[error("refused: the upstream redirected more than {max} times")]
    TooManyRedirects { max: usize },
    #[error("refused: a redirect to another site ({host}) while the request carries credentials")]
    CrossOrigin { host: String },
    #[error("refused: tools.http.allow_hosts lists {host} only with other ports than {port}")]
    Port { host: String, port: u16 },
}

/// A host name that did not resolve (kept apart from [`Refusal`]: it is worth a retry).
#[derive(Clone, Debug, thiserror::Error)]
#[error("the host name {host} could not be resolved")]
pub(crate) struct Unresolvable {
    pub host: String,
}

/// IPv4 ranges no tool may reach: (network, prefix length).
const DENIED_V4: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network", incl. the unspecified address
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // carrier-grade NAT
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local, incl. cloud metadata 169.254.169.254
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments (incl. NAT64 discovery)
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation (TEST-NET-1)
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation (TEST-NET-2)
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation (TEST-NET-3)
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, incl. broadcast 255.255.255.255
];

/// IPv6 ranges no tool may reach. Forms that embed an IPv4 address are handled by
/// [`embedded_v4`] instead.
const DENIED_V6: &[(Ipv6Addr, u8)] = &[
    (Ipv6Addr::UNSPECIFIED, 128),
    (Ipv6Addr::LOCALHOST, 128),
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48),  // local-use NAT64 (RFC 8215)
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64),      // discard-only
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32),     // Teredo (tunnels to any IPv4)
    (Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48),     // benchmarking
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),     // documentation (RFC 9637)
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),      // unique local, incl. AWS metadata fd00:ec2::254
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),     // link-local
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10),     // site-local (deprecated)
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),      // multicast
];

/// Whether `ip` is loopback, private, link-local, unspecified, CGNAT, multicast, broadcast,
/// documentation/benchmarking, or an IPv6 form that embeds such an IPv4 address.
pub(crate) fn is_denied(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_denied(v4),
        IpAddr::V6(v6) => v6_denied(v6),
    }
}

fn v4_denied(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    DENIED_V4.iter().any(|&(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        bits & mask == u32::from(net) & mask
    })
}

fn v6_denied(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let listed = DENIED_V6.iter().any(|&(net, len)| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        bits & mask == u128::from(net) & mask
    });
    listed || embedded_v4(bits).is_some_and(v4_denied)
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated
/// (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4
/// (`2002:AABB:CCDD::`) address: the host behind it is what a connection would reach.
fn embedded_v4(bits: u128) -> Option<Ipv4Addr> {
    let low = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    let high96 = bits >> 32;
    match high96 {
        0xffff | 0xffff_0000 | 0 => Some(low),
        _ if high96 == 0x0064_ff9b_0000_0000_0000_0000 => Some(low),
        _ if bits >> 112 == 0x2002 => Some(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32)),
        _ => None,
    }
}

/// The deny list plus the operator's exemptions and static name overrides.
#[derive(Clone, Debug, Default)]
pub(crate) struct AddressPolicy {
    /// Exempt hosts, each with the ports it is exempt on (`None`: every port).
    allow: Arc<HashMap<String, Option<HashSet<u16>>>>,
    overrides: Arc<BTreeMap<String, IpAddr>>,
}

/// An `allow_hosts` entry: `host`, `host:port`, an IP literal, or `[v6]:port`.
fn split_entry(entry: &str) -> (String, Option<u16>) {
    let entry = entry.trim();
    if entry.parse::<IpAddr>().is_ok() {
        return (normalize_host(entry), None);
    }
    let (host, port) = match entry.strip_prefix('[').and_then(|rest| rest.split_once(']')) {
        Some((v6, rest)) => (v6, rest.strip_prefix(':')),
        None => match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        },
    };
    match port.map(str::parse::<u16>) {
        Some(Ok(port)) => (normalize_host(host), Some(port)),
        _ => (normalize_host(entry), None),
    }
}

impl AddressPolicy {
    pub fn new(allow_hosts: &[String], overrides: &BTreeMap<String, IpAddr>) -> Self {
        let mut allow: HashMap<String, Option<HashSet<u16>>> = HashMap::new();
        for entry in allow_hosts {
            let (host, port) = split_entry(entry);
            match (allow.entry(host).or_insert_with(|| Some(HashSet::new())), port) {
                (Some(ports), Some(port)) => {
                    ports.insert(port);
                }
                (ports, None) => *ports = None,
                (None, Some(_)) => {}
            }
        }
        Self { allow: Arc::new(allow), overrides: Arc::new(overrides.iter().map(|(k, v)| (normalize_host(k), *v)).collect()) }
    }

    /// Whether `host` (a name or an IP literal, brackets optional) is exempt on some port.
    pub fn is_allowed(&self, host: &str) -> bool {
        self.allow.contains_key(&normalize_host(host))
    }

    /// Checks a URL before a request or a redirect hop: an exempt host only on its listed
    /// ports, and an IP-literal host against the deny list (names are checked by the resolver).
    pub fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        let host = url.host_str().unwrap_or_default();
        if let (Some(Some(ports)), Some(port)) = (self.allow.get(&normalize_host(host)), url.port_or_known_default())
            && !ports.contains(&port)
        {
            return Err(Refusal::Port { host: host.to_owned(), port });
        }
        let ip = match url.host() {
            Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
            Some(Host::Domain(_)) | None => return Ok(()),
        };
        if is_denied(ip) && !self.is_allowed(host) { Err(Refusal::Literal { host: host.to_owned() }) } else { Ok(()) }
    }

    /// Resolves `host` and keeps only the addresses it may reach.
    async fn resolve(&self, host: &str) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let key = normalize_host(host);
        let found: Vec<SocketAddr> = match self.overrides.get(&key) {
            Some(ip) => vec![SocketAddr::new(*ip, 0)],
            None => match tokio::net::lookup_host((host, 0)).await {
                Ok(addrs) => addrs.collect(),
                Err(error) => {
                    tracing::debug!(host, %error, "http tool: name resolution failed");
                    Vec::new()
                }
            },
        };
        if found.is_empty() {
            return Err(Box::new(Unresolvable { host: host.to_owned() }));
        }
        if self.allow.contains_key(&key) {
            return Ok(found);
        }
        let total = found.len();
        let kept: Vec<SocketAddr> = found.into_iter().filter(|a| !is_denied(a.ip())).collect();
        if kept.is_empty() {
            tracing::warn!(host, addresses = total, "http tool: refused a host that resolves only to private or local addresses");
            return Err(Box::new(Refusal::Resolved { host: host.to_owned() }));
        }
        if kept.len() < total {
            tracing::warn!(host, dropped = total - kept.len(), "http tool: dropped private or local addresses of a host");
        }
        Ok(kept)
    }
}

/// Lower case, without IPv6 brackets or a trailing dot; IP literals in canonical form.
fn normalize_host(host: &str) -> String {
    let trimmed = host.trim().trim_start_matches('[').trim_end_matches(']').trim_end_matches('.');
    match trimmed.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => trimmed.to_ascii_lowercase(),
    }
}

/// The only resolver an `http` tool's client uses.
#[derive(Clone, Debug)]
pub(crate) struct GuardedResolver {
    policy: AddressPolicy,
}

impl GuardedResolver {
    pub fn new(policy: AddressPolicy) -> Self {
        Self { policy }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let addrs = policy.resolve(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Follows at most `max` redirects, only to http(s), never to a denied IP literal, and, when
/// the request carries credentials in headers reqwest does not strip itself, never to another
/// origin. Redirects to host names are checked by the resolver when they connect.
pub(crate) fn redirect_policy(policy: AddressPolicy, max: usize, same_origin_only: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max {
            return attempt.error(Refusal::TooManyRedirects { max });
        }
        let url = attempt.url();
        if !matches!(url.scheme(), "http" | "https") {
            let scheme = url.scheme().to_owned();
            return attempt.error(Refusal::Scheme { scheme });
        }
        if let Err(refusal) = policy.check_url(url) {
            return attempt.error(refusal);
        }
        let first = attempt.previous().first();
        if same_origin_only && first.is_some_and(|f| f.origin() != url.origin()) {
            let host = url.host_str().unwrap_or_default().to_owned();
            return attempt.error(Refusal::CrossOrigin { host });
        }
        attempt.follow()
    })
}

/// The first [`Refusal`] or [`Unresolvable`] in an error's source chain.
pub(crate) fn find_cause<'a, T: std::error::Error + 'static>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a T> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(s: &str) -> bool {
        is_denied(s.parse().expect("an IP address"))
    }

    #[test]
    fn private_and_local_ipv4_ranges_are_denied() {
        for ip in [
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.10",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "192.0.0.170",
        ] {
            assert!(denied(ip), "{ip} should be denied");
        }
    }

    #[test]
    fn public_ipv4_addresses_pass() {
        for ip in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "192.169.0.1", "11.0.0.1", "223.255.255.255"] {
            assert!(!denied(ip), "{ip} should pass");
        }
    }

    #[test]
    fn private_and_local_ipv6_ranges_are_denied() {
        for ip in ["::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "fd00:ec2::254", "ff02::1", "2001:db8::1", "fec0::1", "100::1"] {
            assert!(denied(ip), "{ip} should be denied");
        }
    }

    #[test]
    fn ipv6_forms_embedding_a_denied_ipv4_are_denied() {
        for ip in [
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::10.1.2.3",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:c0a8:0101::1",
        ] {
            assert!(denied(ip), "{ip} should be denied");
        }
    }

    #[test]
    fn public_ipv6_and_embedded_public_ipv4_pass() {
        for ip in ["2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(!denied(ip), "{ip} should pass");
        }
    }

    #[test]
    fn allow_list_matches_hosts_exactly_and_case_insensitively() {
        let policy = AddressPolicy::new(&["Internal.Example.".into(), "[::1]".into(), "127.0.0.1".into()], &BTreeMap::new());
        assert!(policy.is_allowed("internal.example"));
        assert!(policy.is_allowed("INTERNAL.example."));
        assert!(!policy.is_allowed("api.internal.example"));
        assert!(policy.is_allowed("[0:0::1]"));
        let url = |s: &str| Url::parse(s).expect("url");
        assert_eq!(policy.check_url(&url("http://127.0.0.1:8080/")), Ok(()));
        assert_eq!(policy.check_url(&url("http://[::1]/")), Ok(()));
        assert!(policy.check_url(&url("http://127.0.0.2/")).is_err());
    }

    #[test]
    fn numeric_ipv4_spellings_are_normalized_then_denied() {
        let policy = AddressPolicy::default();
        for u in ["http://2130706433/", "http://0177.0.0.1/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/"] {
            let url = Url::parse(u).expect("url");
            assert!(matches!(policy.check_url(&url), Err(Refusal::Literal { .. })), "{u} should be refused");
        }
        assert_eq!(policy.check_url(&Url::parse("http://example.com/").expect("url")), Ok(()));
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_private_addresses_and_honours_overrides() {
        let overrides = BTreeMap::from([("db.internal".to_owned(), "10.1.2.3".parse().expect("ip"))]);
        let policy = AddressPolicy::new(&["allowed.internal".into()], &overrides);
        let err = policy.resolve("db.internal").await.expect_err("refused");
        assert!(err.downcast_ref::<Refusal>().is_some_and(|r| matches!(r, Refusal::Resolved { .. })), "{err}");
        let err = policy.resolve("localhost").await.expect_err("refused");
        assert!(err.downcast_ref::<Refusal>().is_some(), "{err}");

        let overrides = BTreeMap::from([("allowed.internal".to_owned(), "10.1.2.3".parse().expect("ip"))]);
        let policy = AddressPolicy::new(&["allowed.internal".into()], &overrides);
        let addrs = policy.resolve("allowed.internal").await.expect("allowed");
        assert_eq!(addrs, vec![SocketAddr::new("10.1.2.3".parse().expect("ip"), 0)]);
    }

    fn url(s: &str) -> Url {
        Url::parse(s).expect("a URL")
    }

    #[test]
    fn an_allow_hosts_entry_with_a_port_exempts_that_port_only() {
        let policy = AddressPolicy::new(&["127.0.0.1:8080".into()], &BTreeMap::new());
        assert!(policy.check_url(&url("http://127.0.0.1:8080/x")).is_ok());
        assert_eq!(policy.check_url(&url("http://127.0.0.1:9090/x")), Err(Refusal::Port { host: "127.0.0.1".into(), port: 9090 }));
    }

    #[test]
    fn an_allow_hosts_entry_with_a_port_counts_the_scheme_default() {
        let policy = AddressPolicy::new(&["internal.example:443".into(), "[::1]:8443".into()], &BTreeMap::new());
        assert!(policy.check_url(&url("https://internal.example/x")).is_ok());
        assert!(policy.check_url(&url("http://internal.example/x")).is_err(), "port 80");
        assert!(policy.check_url(&url("https://[::1]:8443/")).is_ok());
        assert!(policy.check_url(&url("https://[::1]:8444/")).is_err());
    }

    #[test]
    fn an_allow_hosts_entry_without_a_port_exempts_every_port() {
        let policy = AddressPolicy::new(&["127.0.0.1".into(), "::1".into()], &BTreeMap::new());
        assert!(policy.check_url(&url("http://127.0.0.1:1/")).is_ok());
        assert!(policy.check_url(&url("http://[::1]:2/")).is_ok());
    }
}
