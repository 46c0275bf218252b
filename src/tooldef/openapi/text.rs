//! Document text where no serializer writes it: the comments of a TOML or YAML tools file, and
//! the import's report on standard error. A comment ends at the end of its line, so a title
//! holding a newline could otherwise end it and write definitions of its own (issue 26: a
//! `command` tool that `serve` then ran). Everything the document says reaches a comment only
//! quoted by [`quote`], and every comment line passes [`one_line`] when it is written, so a
//! line that escaped quoting still cannot break.
//!
//! Escaped: every control character (TOML refuses them in comments, a newline or carriage
//! return ends the line), the Unicode line and paragraph separators and NEL (line breaks to
//! some YAML readers and editors), the byte-order mark and noncharacters YAML refuses, and the
//! bidirectional overrides and isolates (which make a line read differently than it is).

/// Longest document text quoted into a comment, in characters; longer text is cut with `…`.
const MAX_QUOTED: usize = 200;

/// `text` as a double-quoted string, escaped as JSON escapes it (plus the characters above)
/// and cut at [`MAX_QUOTED`] characters.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_QUOTED) + 2);
    out.push('"');
    for (i, c) in text.chars().enumerate() {
        if i == MAX_QUOTED {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => push_escaped(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// `text` with every character that could end or disguise a line escaped (`\n`, `\u2028`).
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
        c => out.push(c),
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_text_keeps_to_one_line_and_its_quotes() {
        assert_eq!(quote("a\"b\\c\nd\r\u{85}\u{2028}\u{202e}"), r#""a\"b\\c\nd\r\u0085\u2028\u202e""#);
        assert_eq!(quote("Pets API"), "\"Pets API\"");
    }

    #[test]
    fn quoted_text_is_cut_at_its_bound() {
        let q = quote(&"é".repeat(1000));
        assert_eq!(q.chars().count(), MAX_QUOTED + 3, "the quotes and the ellipsis");
        assert!(q.ends_with("…\""));
    }

    #[test]
    fn one_line_escapes_only_what_could_break_a_line() {
        assert_eq!(one_line("GET /a (x\n[[tools]])"), "GET /a (x\\n[[tools]])");
        assert_eq!(one_line("plain \"text\" é"), "plain \"text\" é");
    }
}
