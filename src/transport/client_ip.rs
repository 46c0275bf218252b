//! Who the client is, network-wise, behind a load balancer: the TCP peer, unless the peer is
//! a trusted proxy (`server.trusted_proxies`), in which case `X-Forwarded-For` is read from
//! the right, skipping trusted proxies, and the first address not trusted is the client.
//!
//! Reading from the right matters: everything left of the last trusted hop was written by the
//! client and proves nothing. Without trusted proxies the header is ignored entirely, so a
//! client cannot pick the address its rate limits are counted against.

use std::net::IpAddr;

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};
use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses `10.0.0.0/8`-style networks and bare addresses; names the bad entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        entries
            .iter()
            .map(|e| {
                let e = e.trim();
                e.parse::<IpNet>()
                    .or_else(|_| e.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{e:?} is not an IP address or network (use e.g. 10.0.0.0/8, 192.168.1.10 or fd00::/8)"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        // An IPv4 peer may arrive as an IPv4-mapped IPv6 address on a dual-stack socket.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a request from `peer` with `headers`.
    /// The client of a request: its connection's peer (`ConnectInfo`), or whom a trusted
    /// proxy says it forwarded for. `None` without connection info (in-process tests).
    pub fn client_of(&self, extensions: &Extensions, headers: &HeaderMap) -> Option<IpAddr> {
        extensions.get::<ConnectInfo<std::net::SocketAddr>>().map(|c| self.client(c.0.ip(), headers))
    }

    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.0.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let hops = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).collect::<Vec<_>>();
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                // A garbled entry: the last good address is the most that can be said.
                break;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().expect("header"));
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn forwarded_addresses_are_believed_only_from_trusted_proxies() {
        let none = TrustedProxies::default();
        assert_eq!(none.client(ip("10.0.0.5"), &headers(&["203.0.113.7"])), ip("10.0.0.5"), "no trusted proxies: header ignored");
        let lb = TrustedProxies::parse(&["10.0.0.0/8".into(), "192.168.1.10".into()]).expect("valid");
        assert_eq!(lb.client(ip("10.0.0.5"), &headers(&["203.0.113.7"])), ip("203.0.113.7"));
        // The client's own claims (left of the last untrusted hop) prove nothing.
        assert_eq!(lb.client(ip("10.0.0.5"), &headers(&["1.2.3.4, 203.0.113.7"])), ip("203.0.113.7"));
        // Several trusted hops are skipped, across repeated headers too.
        assert_eq!(lb.client(ip("10.0.0.5"), &headers(&["198.51.100.9, 10.1.1.1", "192.168.1.10"])), ip("198.51.100.9"));
        // A peer that is not a trusted proxy cannot set the header.
        assert_eq!(lb.client(ip("203.0.113.99"), &headers(&["1.1.1.1"])), ip("203.0.113.99"));
        // Garbage stops the walk at the last good address.
        assert_eq!(lb.client(ip("10.0.0.5"), &headers(&["junk, 10.2.2.2"])), ip("10.2.2.2"));
        // IPv4-mapped peers on dual-stack sockets count as their IPv4 address.
        assert_eq!(lb.client(ip("::ffff:10.0.0.5"), &headers(&["203.0.113.7"])), ip("203.0.113.7"));
        assert!(TrustedProxies::parse(&["not-an-ip".into()]).is_err());
    }
}
