//! Opaque pagination cursors. A cursor names the last key of the previous page (keyset
//! pagination), so pages stay consistent when items are added or removed between calls. The
//! kind prefix stops a cursor from one list being replayed against another.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub fn encode(kind: &str, last_key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}:{last_key}"))
}

/// The key a cursor names, or `None` for anything this server did not issue for `kind`.
pub fn decode(kind: &str, cursor: &str) -> Option<String> {
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    text.strip_prefix(kind)?.strip_prefix(':').map(str::to_owned)
}

/// The message for an invalid cursor (-32602).
pub fn invalid(cursor: &str) -> String {
    format!("Invalid cursor {cursor:?}: pass back a nextCursor value exactly as received")
}

/// Where the page after `cursor` starts in a key-sorted slice (0 without a cursor).
pub fn start<T>(items: &[T], key: impl Fn(&T) -> &str, kind: &str, cursor: Option<&str>) -> Result<usize, String> {
    let Some(c) = cursor else { return Ok(0) };
    let after = decode(kind, c).ok_or_else(|| invalid(c))?;
    Ok(items.partition_point(|t| key(t) <= after.as_str()))
}

/// Pages a key-sorted slice.
pub fn page<'a, T>(
    items: &'a [T],
    key: impl Fn(&T) -> &str,
    kind: &str,
    cursor: Option<&str>,
    size: usize,
) -> Result<(&'a [T], Option<String>), String> {
    let start = start(items, &key, kind, cursor)?;
    let end = start.saturating_add(size.max(1)).min(items.len());
    let next = (end < items.len()).then(|| encode(kind, key(&items[end - 1])));
    Ok((&items[start..end], next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_kind_bound() {
        let c = encode("prompts", "b");
        assert_eq!(decode("prompts", &c).as_deref(), Some("b"));
        assert_eq!(decode("resources", &c), None);
        assert_eq!(decode("prompts", "%%%"), None);
    }

    #[test]
    fn pages_cover_everything_once() {
        let items = ["a", "b", "c"];
        let (p1, c1) = page(&items, |s| s, "k", None, 2).expect("first page");
        assert_eq!(p1, ["a", "b"]);
        let (p2, c2) = page(&items, |s| s, "k", c1.as_deref(), 2).expect("second page");
        assert_eq!(p2, ["c"]);
        assert!(c2.is_none());
    }
}
