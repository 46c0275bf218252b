//! A `command` tool's argv templates rendered with a call's arguments. Input: one `args`
//! template per line, an empty line, then `name=value` argument lines (`@dash=["f"]` lists the
//! fields allowed to begin with `-`, like `allow_leading_dash`). The arguments are the model's:
//! rendering must not let a value smuggle in an option or a NUL, which the OS would reject or
//! the program would misread.

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate::tooldef::command::template::Template;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (templates, arguments) = text.split_once("\n\n").unwrap_or((text, ""));
    let args = common::argument_lines(arguments);
    let dash_fields: Vec<&str> = match args.get("@dash") {
        Some(Value::Array(fields)) => fields.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let dash_ok = |field: &str| dash_fields.contains(&field);

    for line in templates.lines() {
        let Ok(template) = Template::parse(line) else { continue };
        // The same template as a `stdin` template.
        let _ = template.render_text(&args);
        let mut argv = Vec::new();
        if template.render_args(&args, &dash_ok, &mut argv).is_err() {
            continue;
        }
        assert!(argv.iter().all(|a| !a.contains('\0')), "a NUL reached argv: {argv:?}");
        if let Template::Whole(field) | Template::Spread(field) = &template {
            let dashed = argv.iter().any(|a| a.starts_with('-'));
            assert!(!dashed || dash_ok(field), "`{field}` began an element with '-' without allow_leading_dash: {argv:?}");
        }
    }
});
