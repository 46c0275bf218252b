//! Every message an upstream sends, whatever its wire, enters here: decoded under the
//! upstream's budget ([`crate::untrusted::json`]: `max_message_values`, and a fixed depth),
//! then dispatched. The wires only cut messages out of their byte streams (each under
//! `max_message_bytes`); what a message may cost once decoded is decided in this one place.

use serde::Deserialize;
use serde_json::Value;

use super::error::UpstreamError;
use super::peer::Peer;
use crate::config::upstreams::UpstreamSettings;
use crate::untrusted::json::{self, Budget, DecodeError};

/// Objects and arrays nested in an upstream's message at most: far more than any schema or
/// result needs, far less than what would exhaust a stack.
pub const MAX_DEPTH: usize = 64;

/// The decoding budget of `settings`' upstream.
pub fn budget(settings: &UpstreamSettings) -> Budget {
    Budget { values: settings.max_message_values, depth: MAX_DEPTH }
}

/// Decodes one message as [`Peer::receive`] does, without dispatching it (the fuzz target
/// `upstream_answers` and tests).
pub fn decode(bytes: &[u8], budget: Budget) -> Result<Value, UpstreamError> {
    json::from_slice(bytes, budget).map_err(|e| match e {
        DecodeError::Invalid(e) => UpstreamError::Protocol(format!("a message that is not JSON: {e}")),
        over => UpstreamError::TooComplex(over.to_string()),
    })
}

impl Peer {
    /// Decodes one message (or batch) the upstream sent and dispatches it. `related` is the
    /// request whose HTTP response carried it. `Err` only for bytes that are not JSON, which
    /// the wire reports its own way; a message over budget fails the request it answered (or,
    /// when that cannot be told, every waiting one) and the connection goes on.
    pub(super) fn receive(&self, bytes: &[u8], related: Option<i64>) -> Result<(), UpstreamError> {
        match decode(bytes, self.budget()) {
            Ok(Value::Array(batch)) => batch.into_iter().for_each(|m| self.dispatch(m, related)),
            Ok(message) => self.dispatch(message, related),
            Err(error @ UpstreamError::TooComplex(_)) => {
                tracing::warn!(upstream = ?self, error = %error, "refused a message from the upstream");
                match answered_id(bytes).or(related) {
                    Some(id) => self.fail(id, error),
                    None => self.fail_all(&error),
                }
            }
            Err(not_json) => return Err(not_json),
        }
        Ok(())
    }
}

/// The id a refused message answered, read without building the rest of it (serde skips
/// unknown members without holding them).
fn answered_id(bytes: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct Envelope {
        id: Option<i64>,
        method: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Envelope>(bytes).ok().filter(|e| e.method.is_none()).and_then(|e| e.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_refused_answer_is_found_without_decoding_its_result() {
        let answer = format!(r#"{{"jsonrpc":"2.0","result":{{"content":[{}{{}}]}},"id":7}}"#, "{},".repeat(10_000));
        assert_eq!(answered_id(answer.as_bytes()), Some(7));
    }

    #[test]
    fn a_refused_request_of_the_upstreams_answers_no_call() {
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","id":7,"method":"roots/list"}"#), None);
    }
}
