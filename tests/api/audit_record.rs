//! Audit record helpers: redaction and the canonical argument digest.

use serde_json::json;
use toolgate::audit::{AuditRecord, EventKind, Outcome, REDACTED, args_digest, canonical_json, redact};

#[test]
fn redaction_hides_named_fields_at_any_depth_and_case() {
    let args = json!({
        "user": "ann",
        "Password": "hunter2",
        "nested": {"api_key": "k", "list": [{"token": "t", "ok": 1}]},
        "tokens": "not a listed name",
    });
    let out = redact(&args, &["password", "API_KEY", "token"]);
    assert_eq!(
        out,
        json!({
            "user": "ann",
            "Password": REDACTED,
            "nested": {"api_key": REDACTED, "list": [{"token": REDACTED, "ok": 1}]},
            "tokens": "not a listed name",
        })
    );
    // A scalar or an object with nothing sensitive is unchanged.
    assert_eq!(redact(&json!(5), &["password"]), json!(5));
}

#[test]
fn canonical_json_sorts_keys_and_drops_whitespace() {
    let a: serde_json::Value = serde_json::from_str(r#"{ "b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "c": null} }"#).expect("json");
    assert_eq!(canonical_json(&a), r#"{"a":{"c":null,"z":[3,{"x":2,"y":1}]},"b":1}"#);
}

#[test]
fn digest_ignores_key_order_and_matches_sha256_of_the_canonical_text() {
    let a = json!({"b": 1, "a": "é\"\n"});
    let b: serde_json::Value = serde_json::from_str(r#"{"a":"é\"\n","b":1}"#).expect("json");
    assert_eq!(args_digest(&a), args_digest(&b));
    assert_ne!(args_digest(&a), args_digest(&json!({"b": 2, "a": "é\"\n"})));
    // sha256(`{}`), a fixed vector.
    assert_eq!(args_digest(&json!({})), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
}

#[test]
fn record_keeps_the_digest_of_the_unredacted_arguments() {
    let args = json!({"q": "x", "password": "p"});
    let r = AuditRecord::new(EventKind::ToolCall, Outcome::Ok).with_tool("search", &args).with_arguments(&args, &["password"]);
    assert_eq!(r.args_sha256.as_deref(), Some(args_digest(&args).as_str()));
    assert_eq!(r.arguments, Some(json!({"q": "x", "password": REDACTED})));
    // Without with_arguments the arguments are not kept at all.
    let r = AuditRecord::new(EventKind::ToolCall, Outcome::Ok).with_tool("search", &args);
    assert!(r.arguments.is_none());
}

#[test]
fn records_round_trip_through_json_and_names_parse() {
    let r = AuditRecord::new(EventKind::AuthzDenied, Outcome::Denied).with_detail("missing scope");
    let back: AuditRecord = serde_json::from_str(&serde_json::to_string(&r).expect("ser")).expect("de");
    assert_eq!(back, r);
    assert_eq!("rate_limited".parse::<Outcome>(), Ok(Outcome::RateLimited));
    assert_eq!("registry_change".parse::<EventKind>(), Ok(EventKind::RegistryChange));
    assert!("nope".parse::<Outcome>().is_err());
    // UUIDv7: time-ordered ids.
    let later = AuditRecord::new(EventKind::ToolCall, Outcome::Ok);
    assert!(later.id > r.id);
}
