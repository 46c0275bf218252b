//! Environment variables that look like settings but are never read: settings come from
//! `TOOLGATE__SECTION__KEY` (double underscores), and `TOOLGATE_SERVER_BIND` is silently
//! something else. Each such variable is named in a warning at start, with the variable it
//! probably meant when its words spell a real key.
//!
//! Whether a key is real is asked of the settings' own `Deserialize` (a value at that key alone
//! is read, and serde says whether the key is unknown), so the answer follows every setting,
//! optional ones and those under names the operator chose (`upstreams.<name>.url`) included.

use config::{Map, Value, ValueKind};

use super::Settings;

/// `TOOLGATE_` variables toolgate reads for itself, not as settings: the settings file
/// (`--config`), and the commit the binary was built from.
const OWN: [&str; 2] = ["TOOLGATE_CONFIG", "TOOLGATE_GIT_SHA"];

/// Words in a name tried as keys at most (a name splits into 2^(words-1) keys).
const MAX_WORDS: usize = 10;

/// A warning for each variable of this process's environment that looks like a setting but
/// is not read.
pub fn warnings(settings: &Settings) -> Vec<String> {
    let names = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok());
    misnamed(names, settings)
}

/// A warning for each of `names` that looks like a setting but is not one (see the module
/// docs). A name the settings themselves mention (a vault key's `env`, a secret allowed by
/// `tools.http.secret_env`) is the operator's own variable and passes.
pub fn misnamed(names: impl IntoIterator<Item = String>, settings: &Settings) -> Vec<String> {
    let mentioned = mentioned_strings(settings);
    let mut warnings = Vec::new();
    for name in names {
        let Some(rest) = name.strip_prefix("TOOLGATE_").filter(|r| !r.starts_with('_')) else { continue };
        if OWN.contains(&name.as_str()) || mentioned.iter().any(|m| mentions(m, &name)) {
            continue;
        }
        let words: Vec<String> = rest.split('_').filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
        if let Some(key) = spelled_key(&words) {
            let meant = format!("TOOLGATE__{}", key.join("__").to_uppercase());
            warnings.push(format!(
                "the environment variable {name} is not read: settings come from TOOLGATE__SECTION__KEY with double underscores; did you mean {meant} ({})?",
                key.join(".")
            ));
        } else if words.first().is_some_and(|w| is_key(std::slice::from_ref(w))) {
            warnings.push(format!(
                "the environment variable {name} looks like a setting but is not read: settings come from TOOLGATE__SECTION__KEY with double underscores (TOOLGATE__SERVER__BIND sets server.bind)"
            ));
        }
    }
    warnings
}

/// The key the words spell with some of their underscores read as dots (`server max body
/// bytes` → `server.max_body_bytes`), if one is a setting with a value of its own.
fn spelled_key(words: &[String]) -> Option<Vec<String>> {
    if words.len() < 2 || words.len() > MAX_WORDS {
        return None;
    }
    // Bit i set: a dot after word i, else an underscore. At least one dot (a section's key).
    (1u32..1 << (words.len() - 1)).map(|dots| join(words, dots)).find(|key| is_leaf(key))
}

fn join(words: &[String], dots: u32) -> Vec<String> {
    let mut key = vec![words[0].clone()];
    for (i, word) in words.iter().enumerate().skip(1) {
        if dots & (1 << (i - 1)) != 0 {
            key.push(word.clone());
        } else if let Some(last) = key.last_mut() {
            last.push('_');
            last.push_str(word);
        }
    }
    key
}

/// Whether `key` names a setting (a table or a value).
fn is_key(key: &[String]) -> bool {
    read_alone(key).is_none_or(|e| !e.contains("unknown field"))
}

/// Whether `key` names a setting with a value of its own, not a table of them.
fn is_leaf(key: &[String]) -> bool {
    read_alone(key).is_none_or(|e| !e.contains("unknown field") && !e.contains("expected struct") && !e.contains("expected a map"))
}

/// The error of reading settings that set only `key` (to a string), if any.
fn read_alone(key: &[String]) -> Option<String> {
    let (last, parents) = key.split_last()?;
    let mut value = Value::new(None, ValueKind::String("1".into()));
    let mut name = last.clone();
    for parent in parents.iter().rev() {
        let mut table = Map::new();
        table.insert(std::mem::replace(&mut name, parent.clone()), value);
        value = Value::new(None, ValueKind::Table(table));
    }
    let mut root = Map::new();
    root.insert(name, value);
    Value::new(None, ValueKind::Table(root)).try_deserialize::<Settings>().err().map(|e| e.to_string())
}

/// Every string value of the settings (secrets show redacted, and are no variable names).
fn mentioned_strings(settings: &Settings) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) if s.starts_with("TOOLGATE_") => out.push(s.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(value) = serde_json::to_value(settings) {
        walk(&value, &mut out);
    }
    out
}

/// Whether a setting's string names the variable: exactly, or as a `PREFIX_*` pattern.
fn mentions(setting: &str, name: &str) -> bool {
    match setting.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => setting == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warned(name: &str, settings: &Settings) -> Vec<String> {
        misnamed([name.to_owned()], settings)
    }

    #[test]
    fn single_underscores_are_named_with_the_variable_meant() {
        let warning = warned("TOOLGATE_SERVER_MAX_BODY_BYTES", &Settings::default());
        assert_eq!(warning.len(), 1);
        assert!(warning[0].contains("TOOLGATE__SERVER__MAX_BODY_BYTES (server.max_body_bytes)"), "{warning:?}");
        let optional = warned("TOOLGATE_STORAGE_URL", &Settings::default());
        assert!(optional[0].contains("TOOLGATE__STORAGE__URL"), "an optional setting is a setting too: {optional:?}");
    }

    #[test]
    fn a_section_without_a_key_is_still_warned_about_without_a_guess() {
        let warning = warned("TOOLGATE_SERVER_BINDD", &Settings::default());
        assert!(warning[0].contains("looks like a setting") && !warning[0].contains("did you mean"), "{warning:?}");
    }

    #[test]
    fn toolgates_own_and_the_operators_variables_pass() {
        let mut settings = Settings::default();
        settings.tools.http.secret_env = vec!["TOOLGATE_VAULT_*".into()];
        for name in ["TOOLGATE_CONFIG", "TOOLGATE_GIT_SHA", "TOOLGATE_TOKEN", "TOOLGATE__SERVER__BIND", "TOOLGATE_VAULT_2026_06"] {
            assert_eq!(warned(name, &settings), Vec::<String>::new(), "{name}");
        }
    }
}
