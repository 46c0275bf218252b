//! The `[limits]` settings: defaults, the TOML form, the `TOOLGATE__LIMITS__*` environment
//! form, and the refusals of settings that could never admit a request.

use std::collections::HashMap;

use toolgate::config::Settings;
use toolgate::limits::{LimitSettings, ToolLimit};

use crate::common::load_toml;

#[test]
fn defaults_are_valid_and_on() {
    let s = Settings::default();
    assert!(s.validate().is_ok());
    let l = &s.limits;
    assert!(l.enabled);
    assert_eq!((l.requests_per_minute, l.request_burst), (600, 100));
    assert_eq!((l.tool_units_per_minute, l.tool_burst), (120, 20));
    assert_eq!((l.global_per_second, l.global_burst), (20_000, 40_000));
    assert_eq!((l.auth_failures_per_minute, l.auth_failure_burst), (10, 5));
    assert_eq!((l.max_keys, l.housekeeping_secs), (100_000, 60));
    assert!(l.tools.is_empty());
}

#[test]
fn the_toml_form_with_per_tool_rules() {
    let s = load_toml(
        "[limits]\nrequests_per_minute = 30\nauth_failures_per_minute = 3\n\
         [limits.tools.report]\ncost = 5\n\
         [limits.tools.search]\nper_minute = 6\nburst = 2\n",
    )
    .expect("loads");
    assert_eq!(s.limits.requests_per_minute, 30);
    assert_eq!(s.limits.request_burst, 100, "unset keys keep their defaults");
    assert_eq!(s.limits.auth_failures_per_minute, 3);
    assert_eq!(s.limits.tools["report"], ToolLimit { per_minute: None, burst: None, cost: 5 });
    assert_eq!(s.limits.tools["search"], ToolLimit { per_minute: Some(6), burst: Some(2), cost: 1 });
}

#[test]
fn typos_and_impossible_limits_are_refused_with_the_key() {
    let err = load_toml("[limits]\nrequests_per_minit = 30\n").expect_err("unknown key");
    assert!(err.contains("requests_per_minit"), "{err}");
    let err = load_toml("[limits.tools.x]\ncots = 5\n").expect_err("unknown tool key");
    assert!(err.contains("cots"), "{err}");
    let err = load_toml("[limits]\nrequests_per_minute = 0\n").expect_err("zero rate");
    assert!(err.contains("limits.requests_per_minute") && err.contains("enabled = false"), "{err}");
    let err = load_toml("[limits.tools.x]\nper_minute = 5\n").expect_err("rate without burst");
    assert!(err.contains("limits.tools.x") && err.contains("both"), "{err}");
    let err = load_toml("[limits.tools.x]\ncost = 21\n").expect_err("cost above the shared burst");
    assert!(err.contains("limits.tools.x.cost") && err.contains("(20)"), "{err}");
    let err = load_toml("[limits.tools.x]\nper_minute = 5\nburst = 2\ncost = 3\n").expect_err("cost above own burst");
    assert!(err.contains("limits.tools.x.cost"), "{err}");
    assert!(load_toml("[limits]\nmax_keys = 0\n").is_err());
}

#[test]
fn the_environment_form() {
    // The same environment source `Settings::load` builds, fed a map instead of the process
    // environment (which tests must not mutate).
    let vars: HashMap<String, String> = [
        ("TOOLGATE__LIMITS__REQUESTS_PER_MINUTE", "42"),
        ("TOOLGATE__LIMITS__ENABLED", "false"),
        ("TOOLGATE__LIMITS__MAX_KEYS", "5000"),
        ("TOOLGATE__LIMITS__TOOLS__REPORT__COST", "4"),
        ("TOOLGATE__LIMITS__TOOLS__SEARCH__PER_MINUTE", "6"),
        ("TOOLGATE__LIMITS__TOOLS__SEARCH__BURST", "2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let env = config::Environment::with_prefix("TOOLGATE").prefix_separator("__").separator("__").try_parsing(true).source(Some(vars));
    let s: Settings = config::Config::builder().add_source(env).build().expect("builds").try_deserialize().expect("deserializes");
    assert!(s.validate().is_ok());
    let l: &LimitSettings = &s.limits;
    assert_eq!((l.requests_per_minute, l.enabled, l.max_keys), (42, false, 5000));
    assert_eq!(l.tools["report"].cost, 4);
    assert_eq!((l.tools["search"].per_minute, l.tools["search"].burst), (Some(6), Some(2)));
}
