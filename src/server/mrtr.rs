//! Integrity-protected `requestState` for MRTR (2026-07-28): the client echoes it verbatim in
//! its retry, so it is attacker-controlled. It is signed with HMAC-SHA256, bound to the
//! method and tool/prompt name, and expires; anything else is refused with -32602.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::protocol::jsonrpc::RpcError;

/// How long a client may take to answer an `InputRequiredResult`.
const STATE_TTL_SECS: u64 = 15 * 60;

/// Signs and verifies request state with one server secret.
#[derive(Clone)]
pub struct StateSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for StateSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSigner(..)")
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl StateSigner {
    /// A signer with the configured secret, or a random per-process one (then state does
    /// not survive a restart or move between replicas).
    pub fn new(secret: Option<&str>) -> Self {
        let key = match secret {
            Some(s) => s.as_bytes().to_vec(),
            None => {
                let mut k = vec![0u8; 32];
                rand::RngCore::fill_bytes(&mut rand::rng(), &mut k);
                k
            }
        };
        Self { key }
    }

    fn mac(&self, payload: &str) -> Hmac<Sha256> {
        // HMAC accepts keys of any length; this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        mac.update(payload.as_bytes());
        mac
    }

    /// `base64url(payload) "." base64url(mac)`, binding the state to `scope` (method + name).
    pub fn sign(&self, scope: &str, state: &Value) -> String {
        let payload = URL_SAFE_NO_PAD.encode(json!({ "scope": scope, "exp": now() + STATE_TTL_SECS, "state": state }).to_string());
        let tag = URL_SAFE_NO_PAD.encode(self.mac(&payload).finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// The state inside a token this server signed for `scope`, if intact and unexpired.
    pub fn verify(&self, scope: &str, token: &str) -> Result<Value, RpcError> {
        let refuse = || RpcError::invalid_params("requestState integrity check failed");
        let (payload, tag) = token.split_once('.').ok_or_else(refuse)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| refuse())?;
        self.mac(payload).verify_slice(&tag).map_err(|_| refuse())?;
        let body: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).map_err(|_| refuse())?).map_err(|_| refuse())?;
        if body.get("scope").and_then(Value::as_str) != Some(scope) {
            return Err(refuse());
        }
        if body.get("exp").and_then(Value::as_u64).is_none_or(|exp| exp < now()) {
            return Err(RpcError::invalid_params("requestState expired; start the request again without it"));
        }
        Ok(body.get("state").cloned().unwrap_or(Value::Null))
    }
}

impl StateSigner {
    /// Reads the MRTR parts of a modern `tools/call` or `prompts/get`: `inputResponses` must
    /// be an object of objects, and `requestState` must verify for `scope`.
    pub(crate) fn prepare(&self, params: &serde_json::Map<String, Value>, scope: &str) -> Result<crate::tool::Mrtr, RpcError> {
        let responses = match params.get("inputResponses") {
            None => serde_json::Map::new(),
            Some(Value::Object(map)) => {
                if let Some((key, _)) = map.iter().find(|(_, v)| !v.is_object()) {
                    return Err(RpcError::invalid_params(format!(
                        "inputResponses.{key} must be an object (an ElicitResult, CreateMessageResult or ListRootsResult)"
                    )));
                }
                map.clone()
            }
            Some(_) => return Err(RpcError::invalid_params("inputResponses must be an object keyed by the inputRequests keys")),
        };
        let state = match params.get("requestState") {
            None => None,
            Some(Value::String(token)) => Some(self.verify(scope, token)?),
            Some(_) => return Err(RpcError::invalid_params("requestState must be the string the server returned")),
        };
        Ok(crate::tool::Mrtr { scope: scope.to_owned(), responses, state, ..Default::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper_detection() {
        let s = StateSigner::new(Some("secret"));
        let token = s.sign("tools/call:x", &json!({"round": 1}));
        assert_eq!(s.verify("tools/call:x", &token).ok(), Some(json!({"round": 1})));
        assert!(s.verify("tools/call:y", &token).is_err(), "bound to its tool");
        assert!(s.verify("tools/call:x", &format!("{token}-TAMPERED")).is_err());
        assert!(StateSigner::new(Some("other")).verify("tools/call:x", &token).is_err());
        assert!(s.verify("tools/call:x", "garbage").is_err());
    }
}
