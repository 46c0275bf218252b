//! Load errors reworded to say what to change. The `config` crate reports a bad enum value as
//! "enum AuthMode does not have variant constructor jwks" and a bad address as "invalid socket
//! address syntax": true, but neither names the values that would work. Here each such error
//! names its key, the value given and the values or form that are accepted.

use serde::de::{self, Deserializer, Visitor};

use super::ConfigError;

/// The settings' enums, by the type name the `config` crate reports, with the values each
/// accepts (read from the types' own `Deserialize`, so renames are always right).
fn accepted_values(type_name: &str) -> Option<&'static [&'static str]> {
    use super::{LogFormat, audit, auth, limits, upstreams};
    Some(match type_name {
        "AuthMode" => variants::<auth::AuthMode>(),
        "ClientAuth" => variants::<auth::ClientAuth>(),
        "Durability" => variants::<audit::Durability>(),
        "Backend" => variants::<limits::Backend>(),
        "OnError" => variants::<limits::OnError>(),
        "LogFormat" => variants::<LogFormat>(),
        "Grant" => variants::<upstreams::Grant>(),
        "Discovery" => variants::<upstreams::Discovery>(),
        "HttpTransport" => variants::<upstreams::HttpTransport>(),
        "UpstreamProtocol" => variants::<upstreams::UpstreamProtocol>(),
        _ => return None,
    })
}

/// The error `config` gave, or a clearer one when it is one of the kinds above.
pub(super) fn explain(error: config::ConfigError) -> ConfigError {
    let text = error.to_string();
    let Some((what, key)) = text.strip_suffix('`').and_then(|t| t.rsplit_once(" for key `")) else {
        return ConfigError::Load(error);
    };
    match reason_for(what) {
        Some(reason) => ConfigError::InvalidAt { key: key.to_owned(), reason },
        None => ConfigError::Load(error),
    }
}

/// What `config` said of a value (without its key), reworded when it is one of the kinds above.
pub(super) fn reason_for(what: &str) -> Option<String> {
    if let Some((type_name, value)) = what.strip_prefix("enum ").and_then(|r| r.split_once(" does not have variant constructor ")) {
        let quoted: Vec<String> = accepted_values(type_name)?.iter().map(|v| format!("\"{v}\"")).collect();
        return Some(format!("\"{value}\" is not one of the accepted values: {}", quoted.join(", ")));
    }
    (what == "invalid socket address syntax").then(|| {
        "give an IP address and a port, such as \"127.0.0.1:8080\" (this host only) or \"0.0.0.0:8080\" (every interface); a host name such as \"localhost\" is not accepted".to_owned()
    })
}

/// The variant names `T` deserializes from, as its derived `Deserialize` lists them.
fn variants<T: de::DeserializeOwned>() -> &'static [&'static str] {
    let mut seen = VariantNames(&[]);
    let _ = T::deserialize(&mut seen);
    seen.0
}

/// A deserializer that only records the variant names asked of it.
struct VariantNames(&'static [&'static str]);

#[derive(Debug)]
struct Captured;

impl std::fmt::Display for Captured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("variant names captured")
    }
}

impl std::error::Error for Captured {}

impl de::Error for Captured {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Captured
    }
}

impl<'de> Deserializer<'de> for &mut VariantNames {
    type Error = Captured;

    fn deserialize_enum<V: Visitor<'de>>(self, _: &'static str, variants: &'static [&'static str], _: V) -> Result<V::Value, Captured> {
        self.0 = variants;
        Err(Captured)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Captured> {
        Err(Captured)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_follow_the_types_renames() {
        assert_eq!(variants::<super::super::auth::AuthMode>(), &["off", "jwt", "dev"]);
        assert_eq!(variants::<super::super::upstreams::UpstreamProtocol>(), &["auto", "legacy", "2026-07-28"]);
    }
}
