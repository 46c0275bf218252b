//! `GET /admin/series?scope=all|tool|upstream&name=<name>&window=hour|start`: this replica's
//! tool calls over time for the console's charts, from its own bounded store
//! ([`crate::metrics::series`]): calls, errors, the rate and latency percentiles per interval,
//! the open interval last (`"partial": true`, the figures so far). Percentiles never exceed
//! the interval's slowest call, which is `max`.
//!
//! A name never called (or not tracked: past the store's cap its calls count under `(other)`,
//! a name no tool or upstream can have) has no points; a known name has a point for every
//! interval, zero when it had no calls. Times are the store's series time (the wall clock at
//! start plus monotonic time since), `now` included, so they stay in order whatever the wall
//! clock does. Whatever the query string holds is echoed in a refusal only escaped and cut to
//! [`ECHO_MAX`] bytes.

use axum::Json;
use axum::extract::RawQuery;
use serde_json::{Value, json};

use super::problem::Problem;
use crate::metrics::series::{self, ChartPoint, Query, Window};
use crate::untrusted::escaped;

/// The most of a query parameter's name or value a refusal repeats, in bytes.
const ECHO_MAX: usize = 64;
const SCOPES: &str = "all, tool, upstream";
const WINDOWS: &str = "hour, start";

/// What the query string asks for.
#[derive(Debug, PartialEq)]
struct Ask {
    scope: String,
    name: Option<String>,
    window: Window,
}

/// `GET /admin/series`.
pub async fn series(RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let ask = parse(query.as_deref().unwrap_or_default())?;
    let query = match (ask.scope.as_str(), ask.name.as_deref()) {
        ("tool", Some(name)) => Query::Tool(name),
        ("upstream", Some(name)) => Query::Upstream(name),
        _ => Query::All,
    };
    let chart = series::global().chart(query, ask.window);
    Ok(Json(json!({
        "scope": ask.scope,
        "name": ask.name,
        "window": match ask.window { Window::Hour => "hour", Window::Start => "start" },
        "interval_secs": chart.interval_secs,
        "now": rfc3339(chart.now as i64),
        "points": chart.points.iter().map(point).collect::<Vec<_>>(),
    })))
}

fn point(p: &ChartPoint) -> Value {
    let mut v = json!({
        "t": rfc3339(i64::try_from(p.start).unwrap_or(i64::MAX)),
        "calls": p.calls,
        "errors": p.errors,
        "rate": p.rate,
        "p50": p.p50,
        "p95": p.p95,
        "p99": p.p99,
        "max": p.max,
    });
    if p.partial {
        v["partial"] = json!(true);
    }
    v
}

fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix).map(super::tools::rfc3339).unwrap_or_default()
}

/// `scope` (default `all`), `name` (required with `tool` and `upstream`, refused with `all`),
/// `window` (default `hour`); any other parameter is refused.
fn parse(query: &str) -> Result<Ask, Problem> {
    let mut ask = Ask { scope: "all".to_owned(), name: None, window: Window::Hour };
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "scope" if ["all", "tool", "upstream"].contains(&value.as_ref()) => ask.scope = value.into_owned(),
            "scope" => {
                return Err(Problem::bad_field("scope", format!("scope must be one of {SCOPES}, not \"{}\"", escaped(&value, ECHO_MAX))));
            }
            "window" if value == "hour" => ask.window = Window::Hour,
            "window" if value == "start" => ask.window = Window::Start,
            "window" => {
                return Err(Problem::bad_field(
                    "window",
                    format!("window must be one of {WINDOWS}, not \"{}\"", escaped(&value, ECHO_MAX)),
                ));
            }
            "name" => ask.name = Some(value.into_owned()),
            other => {
                let other = escaped(other, ECHO_MAX).to_string();
                return Err(Problem::bad_field(
                    &other,
                    format!("unknown query parameter \"{other}\"; the parameters are scope, name and window"),
                ));
            }
        }
    }
    match (ask.scope.as_str(), &ask.name) {
        ("all", Some(_)) => Err(Problem::bad_field("name", "name is read only with scope=tool or scope=upstream".to_owned())),
        ("tool" | "upstream", None) => Err(Problem::bad_field("name", format!("scope={} needs the name of a tool or upstream", ask.scope))),
        _ => Ok(ask),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_all_calls_over_the_hour() {
        assert_eq!(parse("").ok(), Some(Ask { scope: "all".into(), name: None, window: Window::Hour }));
    }

    #[test]
    fn a_tool_is_named_and_its_window_chosen() {
        let ask = parse("scope=tool&name=get%20it&window=start").ok();
        assert_eq!(ask, Some(Ask { scope: "tool".into(), name: Some("get it".into()), window: Window::Start }));
    }

    #[test]
    fn an_unknown_scope_or_window_is_refused_naming_the_allowed_values() {
        for (query, allowed) in [("scope=tools", SCOPES), ("window=day", WINDOWS)] {
            let problem = format!("{:?}", parse(query).err());
            assert!(problem.contains(allowed), "{query}: {problem}");
        }
    }

    #[test]
    fn a_tool_or_upstream_needs_a_name_and_all_takes_none() {
        assert!(parse("scope=upstream").is_err());
        assert!(parse("scope=all&name=x").is_err());
        assert!(parse("scope=all&limit=3").is_err(), "unknown parameters are refused");
    }

    /// A parameter's name or value is the client's: a refusal repeats it escaped and cut short.
    #[test]
    fn a_refusal_repeats_a_long_or_odd_parameter_cut_and_escaped() {
        let long = "x".repeat(10_000);
        for query in [format!("{long}=1"), format!("scope={long}"), format!("window={long}")] {
            let problem = format!("{:?}", parse(&query).err());
            assert!(problem.len() < 1_000, "{} bytes", problem.len());
            assert!(!problem.contains(&"x".repeat(ECHO_MAX + 1)), "{problem}");
        }
        // Debug shows an escaped newline as `\\n`, a raw one as `\n`.
        assert!(format!("{:?}", parse("a%0Ab=1").err()).contains(r"a\\nb"), "the newline escaped");
        let problem = format!("{:?}", parse(&format!("{long}=1")).err());
        assert!(problem.contains("(+9936 bytes)"), "says how much was cut: {problem}");
    }
}
