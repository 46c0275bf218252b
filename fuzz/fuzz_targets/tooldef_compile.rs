//! A tools file (or an admin API body) from an operator who made a mistake: arbitrary text
//! through `parse_text` in both TOML and JSON modes, then `compile` on every definition with
//! the default settings. Compiling only checks and builds (schemas, templates, an HTTP client,
//! `stat` of a command's program); it never connects or runs anything, so no sandbox is needed.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use toolgate::config::Settings;
use toolgate::tool::Origin;
use toolgate::tooldef::{compile, parse_text};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let settings = Settings::default();
    for json in [false, true] {
        let Ok(raws) = parse_text(text, json, "fuzz", Path::new(".")) else { continue };
        for raw in &raws {
            let _ = compile(raw, &settings, Origin::File);
        }
    }
});
