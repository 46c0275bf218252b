//! Protocol revisions this server speaks, and which era each belongs to.

use std::fmt;
use std::str::FromStr;

/// A protocol revision, ordered oldest to newest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    /// Deprecated HTTP+SSE transport era.
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    /// The stateless modern era.
    V2026_07_28,
}

/// The two ways a request can be served: with an `initialize`d session, or stateless with the
/// version and capabilities carried in every request's `_meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    Legacy,
    Modern,
}

impl ProtocolVersion {
    /// Every revision, oldest first.
    pub const ALL: [Self; 5] = [Self::V2024_11_05, Self::V2025_03_26, Self::V2025_06_18, Self::V2025_11_25, Self::V2026_07_28];

    /// The newest revision negotiated through `initialize`.
    pub const LATEST_LEGACY: Self = Self::V2025_11_25;

    /// The newest stateless revision.
    pub const LATEST_MODERN: Self = Self::V2026_07_28;

    /// What a request without an `MCP-Protocol-Version` header and without a session is
    /// assumed to speak (V-03).
    pub const ASSUMED_WITHOUT_HEADER: Self = Self::V2025_03_26;

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2024_11_05 => "2024-11-05",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    pub const fn era(self) -> Era {
        match self {
            Self::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// 2025-11-25 added SSE event ids with a priming event and `retry`; older clients choke on
    /// an event with empty `data`, so they get neither.
    pub fn has_priming_events(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// JSON-RPC batches: required to be received in 2025-03-26 only.
    pub fn allows_batches(self) -> bool {
        self == Self::V2025_03_26
    }

    /// Audio content exists from 2025-03-26 on.
    pub fn supports_audio(self) -> bool {
        self >= Self::V2025_03_26
    }

    /// `resource_link` content and `structuredContent` exist from 2025-06-18 on.
    pub fn supports_resource_links(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// The legacy revisions, newest first.
    pub fn legacy_strings() -> Vec<&'static str> {
        Self::ALL.iter().rev().filter(|v| v.era() == Era::Legacy).map(|v| v.as_str()).collect()
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The version string is not one this server speaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported protocol version {0:?}")]
pub struct UnknownVersion(pub String);

impl FromStr for ProtocolVersion {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| UnknownVersion(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_orders() {
        for v in ProtocolVersion::ALL {
            assert_eq!(v.as_str().parse::<ProtocolVersion>(), Ok(v));
        }
        assert!(ProtocolVersion::V2025_03_26 < ProtocolVersion::V2025_11_25);
        assert!("1999-01-01".parse::<ProtocolVersion>().is_err());
    }

    #[test]
    fn feature_gates_follow_the_changelog() {
        assert!(ProtocolVersion::V2025_03_26.allows_batches());
        assert!(!ProtocolVersion::V2025_06_18.allows_batches());
        assert!(!ProtocolVersion::V2025_06_18.has_priming_events());
        assert!(ProtocolVersion::V2025_11_25.has_priming_events());
        assert!(!ProtocolVersion::V2024_11_05.supports_audio());
        assert_eq!(ProtocolVersion::V2026_07_28.era(), Era::Modern);
    }
}
