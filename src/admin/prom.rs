//! Reading numbers back out of the Prometheus text this process renders, for
//! `GET /admin/overview`: the recorder keeps no other readable copy of its counters and
//! histograms. Only what the exporter writes is understood (one sample per line, `name{labels}
//! value`, no timestamps); anything else on a line makes it skipped, never an error.

/// One sample line.
#[derive(Debug, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, String)>,
    pub value: f64,
}

impl Sample<'_> {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

/// Every sample of `text`, in order; comments and lines that do not parse are left out.
pub fn parse(text: &str) -> Vec<Sample<'_>> {
    text.lines().filter(|l| !l.starts_with('#')).filter_map(line).collect()
}

fn line(line: &str) -> Option<Sample<'_>> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let (labels, rest) = match line[name_end..].strip_prefix('{') {
        Some(after) => labels(after)?,
        None => (Vec::new(), &line[name_end..]),
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample { name, labels, value })
}

/// `k="v",k2="v2"}` and what follows the closing brace. Values unescape `\\`, `\"` and `\n`.
fn labels(mut s: &str) -> Option<(Vec<(&str, String)>, &str)> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches(',');
        if let Some(rest) = s.strip_prefix('}') {
            return Some((out, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        let mut chars = s[eq + 1..].strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        out.push((key, value));
        s = &s[eq + 2 + end + 1..];
    }
}

/// The sum of every sample called `name` whose labels pass `keep`.
pub fn sum(samples: &[Sample<'_>], name: &str, keep: impl Fn(&Sample<'_>) -> bool) -> f64 {
    samples.iter().filter(|s| s.name == name && keep(s)).map(|s| s.value).sum()
}

/// A histogram's figures over all its label sets: observation count, mean and the 50th, 95th
/// and 99th percentiles (estimated from the buckets as PromQL's `histogram_quantile` does:
/// linear within the bucket; the highest finite bound when it falls in `+Inf`). Interpolating
/// can land above every observation (one call of 10.0 s in the 10–30 s bucket reads as a p99
/// of 29.8 s): [`Latency::at_most`] clamps to the largest one where it is known.
#[derive(Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

impl Latency {
    /// The percentiles clamped to `max`, the largest observation (when known).
    pub fn at_most(self, max: Option<f64>) -> Self {
        let Some(max) = max else { return self };
        let clamp = |p: Option<f64>| p.map(|p| p.min(max));
        Self { p50: clamp(self.p50), p95: clamp(self.p95), p99: clamp(self.p99), ..self }
    }
}

pub fn latency(samples: &[Sample<'_>], name: &str) -> Latency {
    let count = sum(samples, &format!("{name}_count"), |_| true);
    let total = sum(samples, &format!("{name}_sum"), |_| true);
    // Cumulative counts per upper bound, summed over every label set.
    let bucket = format!("{name}_bucket");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for s in samples.iter().filter(|s| s.name == bucket) {
        let Some(le) = s.label("le").and_then(|v| if v == "+Inf" { Some(f64::INFINITY) } else { v.parse().ok() }) else { continue };
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, n)) => *n += s.value,
            None => buckets.push((le, s.value)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let quantile = |q: f64| quantile(&buckets, q);
    Latency {
        count: count as u64,
        mean: (count > 0.0).then(|| total / count),
        p50: quantile(0.5),
        p95: quantile(0.95),
        p99: quantile(0.99),
    }
}

fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(bound, cumulative) in buckets {
        if cumulative >= rank {
            if bound.is_infinite() {
                return Some(lower);
            }
            let inside = cumulative - below;
            let share = if inside > 0.0 { (rank - below) / inside } else { 1.0 };
            return Some(lower + (bound - lower) * share);
        }
        (lower, below) = (bound, cumulative);
    }
    Some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP toolgate_tool_calls_total tools/call requests
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{tool="echo",outcome="ok"} 3
toolgate_tool_calls_total{tool="a \"quoted\" one",outcome="tool_error"} 2
toolgate_sessions_open 4
toolgate_d_bucket{tool="echo",le="0.1"} 2
toolgate_d_bucket{tool="echo",le="1"} 4
toolgate_d_bucket{tool="echo",le="+Inf"} 4
toolgate_d_bucket{tool="x",le="0.1"} 0
toolgate_d_bucket{tool="x",le="1"} 0
toolgate_d_bucket{tool="x",le="+Inf"} 1
toolgate_d_sum{tool="echo"} 1.2
toolgate_d_sum{tool="x"} 30
toolgate_d_count{tool="echo"} 4
toolgate_d_count{tool="x"} 1
"#;

    #[test]
    fn samples_keep_their_labels_with_escapes_undone() {
        let samples = parse(TEXT);
        assert_eq!(samples.len(), 13);
        assert_eq!(samples[1].label("tool"), Some("a \"quoted\" one"));
        assert_eq!(samples[1].label("outcome"), Some("tool_error"));
        assert_eq!(sum(&samples, "toolgate_tool_calls_total", |_| true), 5.0);
        assert_eq!(sum(&samples, "toolgate_tool_calls_total", |s| s.label("outcome") != Some("ok")), 2.0);
        assert_eq!(sum(&samples, "toolgate_sessions_open", |_| true), 4.0);
    }

    #[test]
    fn percentiles_interpolate_within_buckets_over_every_label_set() {
        let l = latency(&parse(TEXT), "toolgate_d");
        assert_eq!(l.count, 5);
        assert!(l.mean.is_some_and(|m| (m - 31.2 / 5.0).abs() < 1e-9), "{l:?}");
        // 5 observations: 2 ≤ 0.1, 2 in (0.1, 1], 1 above 1.
        assert!(l.p50.is_some_and(|p| (p - 0.325).abs() < 1e-9), "{l:?}");
        assert_eq!(l.p99, Some(1.0), "in +Inf: the highest finite bound");
    }

    #[test]
    fn clamped_percentiles_never_exceed_the_largest_observation() {
        let l = latency(&parse(TEXT), "toolgate_d").at_most(Some(0.9));
        assert!([l.p50, l.p95, l.p99].iter().all(|p| p.is_some_and(|p| p <= 0.9)), "{l:?}");
        assert_eq!(l.p50, latency(&parse(TEXT), "toolgate_d").p50, "lower ones stay as they were");
    }

    #[test]
    fn an_empty_histogram_has_no_figures() {
        assert_eq!(latency(&[], "toolgate_d"), Latency::default());
    }
}
