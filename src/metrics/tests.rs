//! The names declared here against their buckets and the metrics reference, read from this
//! directory's `mod.rs` and `deploy/prometheus/metrics.md`.

use super::*;

const SOURCE: &str = include_str!("mod.rs");
const REFERENCE: &str = include_str!("../../deploy/prometheus/metrics.md");

/// The metric names `describe()` registers, read from `mod.rs`: `describe_*!(CONST, ...)`
/// with each constant's value.
fn described(kind: &str) -> Vec<&'static str> {
    let marker = format!("describe_{kind}!(");
    SOURCE
        .split(marker.as_str())
        .skip(1)
        .filter_map(|rest| rest.split([',', ')']).next())
        .map(str::trim)
        .filter(|ident| !ident.is_empty() && ident.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .map(|ident| {
            let decl = format!("pub const {ident}: &str = \"");
            let value = SOURCE.split(decl.as_str()).nth(1).unwrap_or_else(|| panic!("no constant {ident}"));
            value.split('"').next().unwrap_or_default()
        })
        .collect()
}

#[test]
fn every_described_histogram_has_buckets() {
    let histograms = described("histogram");
    assert!(histograms.len() >= 6, "{histograms:?}");
    for name in histograms {
        assert!(HISTOGRAMS.iter().any(|(h, _)| *h == name), "{name} has no buckets: it would be rendered as a summary");
    }
}

#[test]
fn every_described_metric_is_in_the_reference() {
    let names: Vec<_> = ["counter", "gauge", "histogram"].iter().flat_map(|k| described(k)).collect();
    assert!(names.len() >= 50, "the parse found only {}", names.len());
    for name in names {
        assert!(REFERENCE.contains(&format!("| `{name}` |")), "{name} is not in deploy/prometheus/metrics.md");
    }
}

#[test]
fn bucket_lists_rise() {
    for (name, buckets) in HISTOGRAMS {
        assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{name}");
    }
}
