//! A secret setting (passwords, signing keys, URLs that may carry credentials): deserializes
//! from a string and never prints, so no `Debug` of the settings and no serialized copy of them
//! (`toolgate check-config`) can leak one.

use serde::Deserialize;

/// What a secret serializes as, whatever its value.
pub const REDACTED: &str = "<redacted>";

/// A secret setting: deserializes from a string, never prints.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}
