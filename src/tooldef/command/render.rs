//! A finished command as a tool result: stdout on success, exit status and stderr tail on
//! failure; Markdown for people and models, `structuredContent` for programs.

use std::os::unix::process::ExitStatusExt;

use serde_json::json;

use super::OutputStyle;
use super::process::{Finished, TAIL_BYTES};
use crate::protocol::CallToolResult;
use crate::tooldef::ResponseFormat;

/// Stdout up to this size is shown beside stderr in a failure.
const SMALL_STDOUT: usize = 2048;

/// The result of a command that ran to its end. `ok` says whether its exit status counts as
/// success.
pub(super) fn result(finished: &Finished, ok: bool, format: ResponseFormat, style: OutputStyle) -> CallToolResult {
    match (format, ok) {
        (ResponseFormat::Json, _) => {
            let mut result = CallToolResult::structured(json!({
                "exit_code": finished.status.code(),
                "signal": finished.status.signal().map(signal_name),
                "stdout": finished.stdout.head_text(),
                "stderr": finished.stderr.head_text(),
                "truncated": finished.stdout.truncated() || finished.stderr.truncated(),
            }));
            result.is_error = !ok;
            result
        }
        (ResponseFormat::Markdown, true) => CallToolResult::text(success_text(finished, style)),
        (ResponseFormat::Markdown, false) => CallToolResult::error(failure_text(finished)),
    }
}

fn success_text(finished: &Finished, style: OutputStyle) -> String {
    let out = &finished.stdout;
    if out.is_empty() {
        return "The command succeeded and printed nothing.".into();
    }
    let text = out.head_text();
    let mut body = match style {
        OutputStyle::Code => fenced(&text),
        OutputStyle::Text => text,
    };
    if out.truncated() {
        body.push_str(&format!("\n\n[Output truncated: the first {} of {} bytes are shown.]", out.kept(), out.total()));
    }
    body
}

fn failure_text(finished: &Finished) -> String {
    let status = &finished.status;
    let mut text = match (status.code(), status.signal()) {
        (Some(code), _) => format!("The command failed with exit code {code}."),
        (None, Some(signal)) => format!("The command was killed by signal {}.", signal_name(signal)),
        (None, None) => "The command ended abnormally.".to_owned(),
    };
    let err = &finished.stderr;
    if err.is_empty() {
        text.push_str(" It wrote nothing to stderr.");
    } else {
        let (tail, partial) = err.last_text(TAIL_BYTES);
        let label = if partial { format!("stderr (last {} of {} bytes)", tail.len(), err.total()) } else { "stderr".to_owned() };
        text.push_str(&format!("\n\n{label}:\n{}", fenced(&tail)));
    }
    let out = &finished.stdout;
    if !out.is_empty() && out.total() <= SMALL_STDOUT as u64 {
        text.push_str(&format!("\n\nstdout:\n{}", fenced(&out.head_text())));
    } else if !out.is_empty() {
        text.push_str(&format!("\n\n(stdout, {} bytes, is not shown.)", out.total()));
    }
    text
}

/// `text` in a Markdown code fence longer than any backtick run inside it.
fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    format!("{fence}\n{text}{newline}{fence}")
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return format!("{signal}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use std::process::ExitStatus;
    use std::time::Duration;

    use super::*;
    use crate::protocol::Content;
    use crate::tooldef::command::process::Capture;

    fn finished(raw_status: i32, stdout: &[u8], stderr: &[u8], cap: usize) -> Finished {
        let (mut out, mut err) = (Capture::new(cap), Capture::new(cap));
        out.push(stdout);
        err.push(stderr);
        Finished { status: ExitStatus::from_raw(raw_status), stdout: out, stderr: err, elapsed: Duration::ZERO }
    }

    fn text(result: &CallToolResult) -> &str {
        match result.content.first() {
            Some(Content::Text { text, .. }) => text,
            other => panic!("text expected, got {other:?}"),
        }
    }

    #[test]
    fn success_is_stdout_fenced_or_plain() {
        let f = finished(0, b"a ``` b\n", b"warn", 1024);
        let r = result(&f, true, ResponseFormat::Markdown, OutputStyle::Code);
        assert!(!r.is_error);
        assert_eq!(text(&r), "````\na ``` b\n````");
        let r = result(&f, true, ResponseFormat::Markdown, OutputStyle::Text);
        assert_eq!(text(&r), "a ``` b\n");
    }

    #[test]
    fn truncation_is_said() {
        let f = finished(0, &[b'x'; 100], b"", 10);
        let r = result(&f, true, ResponseFormat::Markdown, OutputStyle::Text);
        assert!(text(&r).starts_with("xxxxxxxxxx\n\n[Output truncated"), "{}", text(&r));
        assert!(text(&r).contains("of 100 bytes"), "{}", text(&r));
    }

    #[test]
    fn failure_names_code_and_stderr_tail() {
        let mut stderr = vec![b'e'; 5000];
        stderr.extend_from_slice(b"fatal: bad revision");
        let f = finished(3 << 8, b"partial", &stderr, 1 << 20);
        let r = result(&f, false, ResponseFormat::Markdown, OutputStyle::Code);
        assert!(r.is_error);
        let t = text(&r);
        assert!(t.starts_with("The command failed with exit code 3."), "{t}");
        assert!(t.contains("fatal: bad revision") && t.contains("last 2048 of 5019 bytes") && t.contains("partial"), "{t}");
        assert!(t.len() < 3000, "only the tail is shown");
    }

    #[test]
    fn signals_are_named_and_json_is_structured() {
        let f = finished(9, b"", b"", 16);
        let r = result(&f, false, ResponseFormat::Markdown, OutputStyle::Code);
        assert!(text(&r).contains("killed by signal SIGKILL"));
        let r = result(&f, false, ResponseFormat::Json, OutputStyle::Code);
        assert!(r.is_error);
        assert_eq!(
            r.structured_content,
            Some(json!({"exit_code": null, "signal": "SIGKILL", "stdout": "", "stderr": "", "truncated": false}))
        );
    }
}
