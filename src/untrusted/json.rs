//! JSON decoded under a budget: a count of values and a depth, charged while the value is
//! built, so a message is refused as soon as it would cost more, never after.
//!
//! Why: a message's bytes are capped where it is read, but its decoded cost is not the same
//! thing. `[{},{},...]` spends 3 bytes of input per value and each decoded value costs tens of
//! bytes in memory, and more again once turned into typed content; 1.3 million of them in a
//! 3.8 MB upstream answer cost ~670 MiB before this. One pass, no second parse: the values are
//! built by the same visitor that counts them.

use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What one decoded message may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Values of any kind (every object, array, string, number, boolean and null counts one).
    pub values: usize,
    /// Objects and arrays nested in each other.
    pub depth: usize,
}

/// Why a message was not decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("it holds more than {0} JSON values")]
    TooManyValues(usize),
    #[error("it nests deeper than {0} levels")]
    TooDeep(usize),
    #[error("it is not valid JSON: {0}")]
    Invalid(String),
}

/// Decodes `bytes` as one JSON value within `budget`.
pub fn from_slice(bytes: &[u8], budget: Budget) -> Result<Value, DecodeError> {
    let mut state = State { left: budget.values, budget, over: None };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let decoded = Seed { state: &mut state, depth: 0 }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    match (decoded, state.over) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(over)) => Err(over),
        (Err(e), None) => Err(DecodeError::Invalid(e.to_string())),
    }
}

/// How many values `value` holds, counted as [`from_slice`] charges them (a key counts one),
/// stopping once past `stop`.
pub fn count(value: &Value, stop: usize) -> usize {
    let (mut counted, mut stack) = (0, vec![value]);
    while let Some(value) = stack.pop() {
        counted += 1;
        if counted > stop {
            break;
        }
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                counted += map.len();
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    counted
}

struct State {
    left: usize,
    budget: Budget,
    /// The budget that stopped decoding (serde's own error cannot carry it).
    over: Option<DecodeError>,
}

impl State {
    fn charge<E: serde::de::Error>(&mut self) -> Result<(), E> {
        if self.left == 0 {
            self.over = Some(DecodeError::TooManyValues(self.budget.values));
            return Err(E::custom("over budget"));
        }
        self.left -= 1;
        Ok(())
    }
}

struct Seed<'s> {
    state: &'s mut State,
    depth: usize,
}

impl Seed<'_> {
    fn nested<E: serde::de::Error>(&mut self) -> Result<Seed<'_>, E> {
        if self.depth >= self.state.budget.depth {
            self.state.over = Some(DecodeError::TooDeep(self.state.budget.depth));
            return Err(E::custom("too deep"));
        }
        Ok(Seed { state: self.state, depth: self.depth + 1 })
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.state.charge()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.state.charge()?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.state.charge()?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.state.charge()?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.state.charge()?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.state.charge()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.state.charge()?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.state.charge()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.nested()?)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        self.state.charge()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // A key is text held in memory like any string value.
            self.state.charge()?;
            let value = map.next_value_seed(self.nested()?)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: Budget = Budget { values: 1_000, depth: 16 };

    #[test]
    fn a_message_within_budget_decodes_as_serde_json_would() {
        let text = r#"{"a":[1,-2,3.5,"x\n",null,true,{"b":{}}],"c":"é"}"#;
        assert_eq!(from_slice(text.as_bytes(), ROOMY), Ok(serde_json::from_str::<Value>(text).unwrap_or_default()));
    }

    #[test]
    fn many_empty_values_are_refused_by_count_whatever_their_bytes() {
        let text = format!("[{}{{}}]", "{},".repeat(2_000));
        assert_eq!(from_slice(text.as_bytes(), ROOMY), Err(DecodeError::TooManyValues(1_000)));
    }

    #[test]
    fn deep_nesting_is_refused_at_the_budgets_depth() {
        let text = format!("{}{}", "[".repeat(17), "]".repeat(17));
        assert_eq!(from_slice(text.as_bytes(), ROOMY), Err(DecodeError::TooDeep(16)));
    }

    #[test]
    fn object_keys_count_against_the_budget() {
        let keys: Vec<String> = (0..600).map(|i| format!("\"k{i}\":0")).collect();
        let text = format!("{{{}}}", keys.join(","));
        assert_eq!(from_slice(text.as_bytes(), ROOMY), Err(DecodeError::TooManyValues(1_000)));
    }

    #[test]
    fn a_decoded_value_counts_what_decoding_it_charged() {
        let text = r#"{"a":[1,{"b":null}],"c":"x"}"#;
        let budget = Budget { values: 9, depth: 16 };
        assert!(from_slice(text.as_bytes(), budget).is_ok());
        assert!(from_slice(text.as_bytes(), Budget { values: 8, ..budget }).is_err());
        assert_eq!(count(&serde_json::from_str(text).unwrap_or_default(), 100), 9);
    }

    #[test]
    fn invalid_json_and_trailing_bytes_are_invalid() {
        assert!(matches!(from_slice(b"{\"a\":", ROOMY), Err(DecodeError::Invalid(_))));
        assert!(matches!(from_slice(b"{} {}", ROOMY), Err(DecodeError::Invalid(_))));
    }
}
