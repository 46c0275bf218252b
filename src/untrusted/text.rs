//! Escaping and capping text for logs and status lines: one function, [`escaped`], that every
//! log field goes through.
//!
//! Escaped: the C0 and C1 control characters (newline, carriage return, escape, tab, ...), DEL,
//! the Unicode line and paragraph separators, and the bidirectional overrides and isolates
//! (which reorder what a reader sees). Each becomes `\n`, `\r`, `\t` or `\u{..}`, so the text
//! stays readable and nothing is lost but layout. Text longer than the cap is cut on a
//! character boundary and says how much was cut.

use std::fmt::{self, Write as _};

/// A log field's longest text (bytes) before it is cut: longer than any name or message
/// toolgate writes itself, far shorter than what an upstream can send.
pub const LOG_FIELD_MAX: usize = 4096;

/// `text` escaped and capped at `max` bytes of the original, for `Display`.
#[derive(Clone, Copy, Debug)]
pub struct Escaped<'a> {
    text: &'a str,
    max: usize,
}

/// `text` escaped and capped at `max` bytes (see the module docs).
pub fn escaped(text: &str, max: usize) -> Escaped<'_> {
    Escaped { text, max }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (shown, cut) = clip(self.text, self.max);
        write_escaped(f, shown)?;
        if cut > 0 {
            write!(f, "…(+{cut} bytes)")?;
        }
        Ok(())
    }
}

/// The first `max` bytes of `text` (on a character boundary) and how many bytes were left off.
pub fn clip(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let end = text.floor_char_boundary(max);
    (&text[..end], text.len() - end)
}

/// Writes `text` with every character that could change a line's layout escaped.
pub fn write_escaped(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(needs_escape) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        match c {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            _ => write!(out, "\\u{{{:x}}}", u32::from(c))?,
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}

/// Whether `c` is escaped: controls, the line and paragraph separators, bidirectional
/// formatting characters.
pub fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A `fmt::Write` that keeps the first `max` bytes written to it and counts the rest, so a
/// value of unknown size (a `Debug` of an upstream's error) is formatted without holding it
/// whole.
#[derive(Debug, Default)]
pub struct Capped {
    kept: String,
    max: usize,
    dropped: usize,
}

impl Capped {
    pub fn new(max: usize) -> Self {
        Self { kept: String::new(), max, dropped: 0 }
    }

    /// What was kept, and how many bytes were not.
    pub fn finish(self) -> (String, usize) {
        (self.kept, self.dropped)
    }
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Once cut, nothing more is kept: a later short write would splice text from after
        // the cut onto what was kept.
        if self.dropped > 0 {
            self.dropped += s.len();
            return Ok(());
        }
        let room = self.max.saturating_sub(self.kept.len());
        if s.len() <= room {
            self.kept.push_str(s);
        } else {
            let end = s.floor_char_boundary(room);
            self.kept.push_str(&s[..end]);
            self.dropped += s.len() - end;
        }
        Ok(())
    }
}

/// `text` for a terminal, whose lines are its own (a command's report of several problems):
/// every character [`needs_escape`] but the newline is escaped, so text quoted from a document
/// or an upstream cannot move the cursor, recolour or rewrite what the operator reads.
pub fn terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write_escaped(&mut out, line);
    }
    out
}

/// A spreadsheet cell that holds `text` as text: one that starts with `=`, `+`, `-`, `@`, a tab
/// or a carriage return is a formula to Excel, LibreOffice and Sheets (a client's tool
/// arguments or an upstream's error could read `=HYPERLINK(...)`), so it gets a leading `'`,
/// as OWASP's advice on CSV injection has it.
pub fn spreadsheet_cell(text: String) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}") } else { text }
}

/// `value`'s `Debug` (or, through `format_args!`, `Display`) text, escaped and capped.
pub fn escaped_debug(value: &dyn fmt::Debug, max: usize) -> String {
    let mut capped = Capped::new(max);
    let _ = write!(capped, "{value:?}");
    let (kept, dropped) = capped.finish();
    let mut out = String::with_capacity(kept.len() + 16);
    let _ = write_escaped(&mut out, &kept);
    if dropped > 0 {
        let _ = write!(out, "…(+{dropped} bytes)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newline_cannot_start_another_line() {
        let forged = "ok\n2026-11-27T00:00:00Z ERROR forged";
        assert_eq!(escaped(forged, 100).to_string(), "ok\\n2026-11-27T00:00:00Z ERROR forged");
    }

    #[test]
    fn terminal_escapes_and_bidi_overrides_are_escaped() {
        assert_eq!(escaped("a\u{1b}[2Jb\u{202e}c\u{85}", 100).to_string(), "a\\u{1b}[2Jb\\u{202e}c\\u{85}");
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_says_so() {
        assert_eq!(escaped("ééé", 3).to_string(), "é…(+4 bytes)");
    }

    #[test]
    fn a_terminal_keeps_the_lines_and_loses_the_escapes() {
        assert_eq!(terminal("two\nlines \u{1b}[31mred\r"), "two\nlines \\u{1b}[31mred\\r");
    }

    #[test]
    fn a_cell_that_a_spreadsheet_would_run_is_kept_as_text() {
        assert_eq!(spreadsheet_cell("=HYPERLINK(\"http://x\")".into()), "'=HYPERLINK(\"http://x\")");
        assert_eq!(spreadsheet_cell("@SUM(A1)".into()), "'@SUM(A1)");
        assert_eq!(spreadsheet_cell("echo".into()), "echo");
    }

    #[test]
    fn nothing_written_after_a_cut_is_kept() {
        let mut capped = Capped::new(3);
        let _ = write!(capped, "aé");
        let _ = write!(capped, "éb");
        assert_eq!(capped.finish(), ("aé".to_owned(), 3));
    }

    #[test]
    fn a_huge_debug_value_is_never_held_whole() {
        let huge = "x".repeat(1 << 20);
        let mut capped = Capped::new(10);
        let _ = write!(capped, "{huge}");
        let (kept, dropped) = capped.finish();
        assert_eq!((kept.len(), dropped), (10, (1 << 20) - 10));
    }
}
