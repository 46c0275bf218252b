//! Input formats shared by the targets. They are plain text on purpose: the seed corpus is
//! written (and reviewed) by hand, and libFuzzer's byte mutations still reach every shape.
//! (`arbitrary`'s encoding reads lengths from the end of the input, which makes realistic
//! hand-written seeds impractical.)

#![allow(dead_code)] // each target uses only some of these

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// `Name: value` lines up to the first empty line (an HTTP header block), and what follows it
/// (the body). Lines no HTTP parser would accept as a header are skipped: the server never
/// sees them.
pub fn header_block(data: &[u8]) -> (HeaderMap, &[u8]) {
    let mut headers = HeaderMap::new();
    let mut rest = data;
    while !rest.is_empty() {
        let (line, after) = split_line(rest);
        rest = after;
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
    }
    (headers, rest)
}

/// One line without its `\n` or `\r\n`, and the rest.
pub fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    let (line, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    (line.strip_suffix(b"\r").unwrap_or(line), rest)
}

/// `name=value` lines as a tool's (already validated) arguments object. The value is JSON when
/// it parses (`20`, `"-x"`, `["a","b"]`, `{"k":1}`, `null`), else the raw text as a string,
/// so seeds stay readable and the fuzzer can still produce every JSON shape.
pub fn argument_lines(text: &str) -> Map<String, Value> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()))))
        .collect()
}
