//! An `http` tool's URL template (RFC 6570 via iri-string) and its expansion with a call's
//! arguments. Input: the template on the first line, then `name=value` argument lines. The
//! template is the operator's, the arguments are the model's: expansion must never move the
//! request to another host or above the template's fixed path (SSRF, path traversal).

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use toolgate::tooldef::http::template::UrlTemplate;

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys aborts in its panic hook, before any unwinding: that would turn the panics
    // `UrlTemplate` isolates from iri-string (caught and refused) into crashes. With the
    // default hook they are caught where they are meant to be, and a panic that escapes
    // `UrlTemplate` still aborts (libfuzzer-sys catches it around this closure).
    static DEFAULT_HOOK: std::sync::Once = std::sync::Once::new();
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (template, arguments) = text.split_once('\n').unwrap_or((text, ""));
    let Ok(template) = UrlTemplate::parse(template) else { return };
    let _ = template.variables();
    let Ok(url) = template.expand(&common::argument_lines(arguments)) else { return };
    assert_eq!(url.origin(), template.base().origin(), "arguments changed the origin");
    if let Some(fixed) = fixed_directory(&text[..text.find('\n').unwrap_or(text.len())]) {
        assert!(url.path().starts_with(&fixed), "{:?} escaped the template's fixed path {fixed:?}", url.as_str());
    }
});

/// The path the template writes out before its first expression, up to its last `/`: every
/// expansion stays below it.
fn fixed_directory(template: &str) -> Option<String> {
    let literal = &template[..template.find('{')?];
    let path = url::Url::parse(literal).ok()?.path().to_owned();
    Some(path[..=path.rfind('/')?].to_owned())
}
