//! When and how long to wait before trying an idempotent request again.
//!
//! A small hand-written policy rather than a crate such as `backon`: the loop must honour
//! `Retry-After` from the response it just got, give up when the server asks for more than
//! a cap, and sleep through `ToolContext::sleep` so cancellation ends the wait. Those three
//! needs are a dozen lines here and would be adapters around a generic retry crate.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

/// Retry settings of one tool.
#[derive(Clone, Debug)]
pub(crate) struct RetryPolicy {
    /// Further attempts after the first.
    pub retries: u32,
    /// Delay before the first retry; doubles each time.
    pub base: Duration,
    /// Longest computed back-off.
    pub max_backoff: Duration,
    /// Longest `Retry-After` honoured; a longer one ends the retries.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// Exponential back-off with "equal jitter": half the delay fixed, half random, so
    /// concurrent callers spread out but never retry at once.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self.base.saturating_mul(1u32.checked_shl(retry).unwrap_or(u32::MAX)).min(self.max_backoff);
        let half = exp / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    /// How long to wait before the next attempt, when `Retry-After` allows one at all.
    pub fn wait_for(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        match retry_after {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff(retry)),
        }
    }
}

/// Statuses worth another attempt: rate limited, and gateway/availability failures.
pub(crate) fn is_retryable_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 502 | 503 | 504)
}

/// `Retry-After` as a delay: delta-seconds or an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            retries: 3,
            base: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(5),
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let p = policy();
        for _ in 0..50 {
            let first = p.backoff(0);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
            let third = p.backoff(2);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400), "{third:?}");
            assert!(p.backoff(40) <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = policy();
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, "2".parse().expect("value"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        assert_eq!(p.wait_for(0, retry_after(&h)), Some(Duration::from_secs(2)));
        assert_eq!(p.wait_for(0, Some(Duration::from_secs(60))), None);
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
        h.insert(http::header::RETRY_AFTER, later.parse().expect("value"));
        assert!(retry_after(&h).is_some_and(|d| d <= Duration::from_secs(3)));
        h.insert(http::header::RETRY_AFTER, "soon".parse().expect("value"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn only_rate_limits_and_gateway_failures_are_retried() {
        for s in [429, 502, 503, 504] {
            assert!(is_retryable_status(StatusCode::from_u16(s).expect("status")));
        }
        for s in [200, 400, 404, 500, 501] {
            assert!(!is_retryable_status(StatusCode::from_u16(s).expect("status")));
        }
    }
}
