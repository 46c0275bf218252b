//! Who a rate limit is counted against: the authenticated principal, or the client IP when
//! there is none. Never the session: a client that re-initializes must not get a fresh quota.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use sha2::{Digest, Sha256};

use crate::principal::Principal;

/// A rate-limit key. Small and `Copy`: principals are reduced to a 128-bit digest so an entry
/// costs the same whatever the length of the claims, and no subject (possibly personal data)
/// sits in the limiter tables.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(Repr);

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Repr {
    Principal([u8; 16]),
    Ip(IpAddr),
}

impl ClientKey {
    /// The key of a verified caller: issuer + subject + client id. Scopes and expiry are left
    /// out on purpose, so a refreshed or down-scoped token keeps counting against the same quota.
    pub fn from_principal(principal: &Principal) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"toolgate/limits/v1");
        // Length prefixes make the encoding injective whatever bytes the claims contain.
        for part in [Some(principal.issuer.as_str()), Some(principal.subject.as_str()), principal.client_id.as_deref()] {
            match part {
                Some(s) => {
                    hasher.update([1]);
                    hasher.update((s.len() as u64).to_le_bytes());
                    hasher.update(s.as_bytes());
                }
                // Distinct from `Some("")`: a token without a client id is another client.
                None => hasher.update([0]),
            }
        }
        let digest = hasher.finalize();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        Self(Repr::Principal(key))
    }

    /// The key of an unauthenticated client. IPv4-mapped IPv6 addresses count as their IPv4
    /// address; other IPv6 addresses are keyed by their /64 prefix, because one host usually
    /// holds a whole /64 and could otherwise mint a new key (and quota) per request.
    pub fn from_ip(ip: IpAddr) -> Self {
        let ip = match ip.to_canonical() {
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & (u128::MAX << 64))),
            v4 => v4,
        };
        Self(Repr::Ip(ip))
    }
}

impl ClientKey {
    /// A stable, opaque name for the key in a store shared by replicas (Redis key names):
    /// 32 hex digits. The principal's digest as is; an address is digested too, so no client
    /// address is stored in clear outside the process.
    pub fn shared_id(&self) -> String {
        use std::fmt::Write as _;
        let digest: [u8; 16] = match &self.0 {
            Repr::Principal(d) => *d,
            Repr::Ip(ip) => {
                let mut hasher = Sha256::new();
                hasher.update(b"toolgate/limits/v1/ip");
                match ip {
                    IpAddr::V4(v4) => hasher.update(v4.octets()),
                    IpAddr::V6(v6) => hasher.update(v6.octets()),
                }
                let mut out = [0u8; 16];
                out.copy_from_slice(&hasher.finalize()[..16]);
                out
            }
        };
        digest.iter().fold(String::with_capacity(32), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }
}

impl fmt::Debug for ClientKey {
    /// Short and free of personal data: a digest prefix or the (prefix of the) address.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Principal(d) => write!(f, "principal:{:02x}{:02x}{:02x}{:02x}", d[0], d[1], d[2], d[3]),
            Repr::Ip(IpAddr::V6(v6)) => write!(f, "ip:{v6}/64"),
            Repr::Ip(v4) => write!(f, "ip:{v4}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(iss: &str, sub: &str, client: Option<&str>) -> Principal {
        Principal {
            issuer: iss.into(),
            subject: sub.into(),
            client_id: client.map(Into::into),
            scopes: Default::default(),
            expires_at: 0,
            default_audience: true,
            server_audiences: Vec::new(),
        }
    }

    #[test]
    fn principal_parts_cannot_be_shifted_into_each_other() {
        let a = ClientKey::from_principal(&principal("https://a", "bc", Some("d")));
        let b = ClientKey::from_principal(&principal("https://ab", "c", Some("d")));
        let c = ClientKey::from_principal(&principal("https://a", "bc", None));
        let d = ClientKey::from_principal(&principal("https://a", "bc", Some("")));
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(c, d);
    }

    #[test]
    fn ipv6_keys_on_the_64_prefix_and_mapped_v4_on_the_v4_address() {
        let one: IpAddr = "2001:db8:1:2::1".parse().expect("ip");
        let two: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("ip");
        let other: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_eq!(ClientKey::from_ip(one), ClientKey::from_ip(two));
        assert_ne!(ClientKey::from_ip(one), ClientKey::from_ip(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        let v4: IpAddr = "192.0.2.7".parse().expect("ip");
        assert_eq!(ClientKey::from_ip(mapped), ClientKey::from_ip(v4));
        assert_eq!(format!("{:?}", ClientKey::from_ip(two)), "ip:2001:db8:1:2::/64");
    }
}
