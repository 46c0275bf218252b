//! `toolgate check-config`'s report: the effective settings as TOML (secrets redacted), each
//! value followed by where it came from: the built-in default, the settings file, or the
//! `TOOLGATE__…` environment variable that set it. The report is itself a valid settings file.

use std::fmt::Write as _;
use std::path::Path;

use super::{ConfigError, Settings, env_source, explain};

/// Where one setting's value came from.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    /// The variable's name.
    Env(String),
}

/// The sources besides the defaults, each read alone, to ask which of them sets a key.
pub struct Layers {
    file: Option<(config::Config, String)>,
    env: config::Config,
}

impl Layers {
    /// Reads `file` (when given) and the environment as `Settings::load` does.
    pub fn read(file: Option<&Path>) -> Result<Self, ConfigError> {
        let file = match file {
            Some(path) => {
                let layer = config::Config::builder().add_source(super::file_source(path)).build().map_err(explain::explain)?;
                Some((layer, path.display().to_string()))
            }
            None => None,
        };
        let env = config::Config::builder().add_source(env_source()).build().map_err(explain::explain)?;
        Ok(Self { file, env })
    }

    /// Which layer set `key` (`server.bind`); the environment wins over the file, as in `load`.
    pub fn source(&self, key: &str) -> Source {
        if self.env.get::<config::Value>(key).is_ok() {
            return Source::Env(format!("TOOLGATE__{}", key.replace('.', "__").to_uppercase()));
        }
        match &self.file {
            Some((file, _)) if file.get::<config::Value>(key).is_ok() => Source::File,
            _ => Source::Default,
        }
    }

    fn describe(&self, key: &str) -> String {
        match self.source(key) {
            Source::Default => "default".into(),
            Source::File => format!("file {}", self.file.as_ref().map_or("", |(_, path)| path.as_str())),
            Source::Env(var) => format!("env {var}"),
        }
    }
}

/// The report: a header, then every section as TOML with a source comment on each value.
/// Optional settings that are unset do not appear.
pub fn report(settings: &Settings, layers: &Layers) -> Result<String, ConfigError> {
    let value = toml::Value::try_from(settings)
        .map_err(|e| ConfigError::Invalid { key: "settings", reason: format!("cannot be shown as TOML: {e}") })?;
    let mut value = value;
    redact_upstreams(&mut value);
    let mut out = String::from(
        "# toolgate's effective settings. After each value, where it came from: the built-in default,\n\
         # the settings file, or an environment variable. Secrets show as \"<redacted>\"; unset optional\n\
         # settings are not listed.\n",
    );
    if let Some(table) = value.as_table() {
        write_table(&mut out, "", table, layers);
    }
    Ok(out)
}

/// Each upstream's table through the admin API's redactor (a program's env values, secret
/// arguments, URL credentials and queries): the report is printed, often into a CI log. A
/// table that cannot be converted is shown as redacted whole, never as it is.
fn redact_upstreams(value: &mut toml::Value) {
    let Some(upstreams) = value.get_mut("upstreams").and_then(toml::Value::as_table_mut) else { return };
    for (_, upstream) in upstreams.iter_mut() {
        let redacted = serde_json::to_value(&*upstream).ok().map(crate::redact::upstream).and_then(|v| toml::Value::try_from(v).ok());
        *upstream = redacted.unwrap_or_else(|| toml::Value::String(crate::redact::REDACTED.into()));
    }
}

fn write_table(out: &mut String, path: &str, table: &toml::map::Map<String, toml::Value>, layers: &Layers) {
    let key_of = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
    let is_table_array = |v: &toml::Value| v.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(toml::Value::is_table));
    let plain: Vec<_> = table.iter().filter(|(_, v)| !v.is_table() && !is_table_array(v)).collect();
    if !plain.is_empty() && !path.is_empty() {
        let _ = writeln!(out, "\n[{path}]");
    }
    for (name, value) in plain {
        let _ = writeln!(out, "{} = {value} # {}", bare_or_quoted(name), layers.describe(&key_of(name)));
    }
    for (name, value) in table.iter().filter(|(_, v)| v.is_table()) {
        let sub = if path.is_empty() { bare_or_quoted(name) } else { format!("{path}.{}", bare_or_quoted(name)) };
        write_table(out, &sub, value.as_table().expect("checked"), layers);
    }
    for (name, value) in table.iter().filter(|(_, v)| is_table_array(v)) {
        let key = key_of(name);
        for item in value.as_array().into_iter().flatten() {
            let _ = writeln!(out, "\n[[{key}]] # {}", layers.describe(&key));
            for (k, v) in item.as_table().into_iter().flatten() {
                let _ = writeln!(out, "{} = {v}", bare_or_quoted(k));
            }
        }
    }
}

/// A TOML key: bare when it can be, else quoted (an upstream's name may hold any character).
fn bare_or_quoted(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}
