//! Definitions that are valid but probably not what the operator wants: reported by
//! `toolgate tools validate` and logged when the file is loaded, never refused.

use serde_json::Value;

use super::RawDef;

/// Programs that run their argument as code when given `-c`.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"];

/// Every warning for `raws`, each naming the source, the tool and the field.
pub fn warnings(raws: &[RawDef]) -> Vec<String> {
    raws.iter().enumerate().flat_map(|(i, raw)| definition_warnings(&raw.value, &raw.source, &raw.label(i))).collect()
}

/// The warnings for one definition `value` from `source`, named `label`.
pub fn definition_warnings(value: &Value, source: &str, label: &str) -> Vec<String> {
    shell_wrapper(value).map(|w| format!("{source}: tool {label:?}: {w}")).into_iter().collect()
}

/// A `command` tool that hands a script to a shell (`sh -c '…'`): the command kind keeps each
/// argument one argv element, which is exactly what a shell undoes, so a template value inside
/// the script can run commands of its own.
fn shell_wrapper(value: &Value) -> Option<String> {
    let command = value.get("command")?;
    let program = command.get("program").and_then(Value::as_str)?;
    let args: Vec<&str> = command.get("args").and_then(Value::as_array)?.iter().filter_map(Value::as_str).collect();
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    // `env [NAME=value ...] sh -c ...` runs the same shell.
    let (name, args) = if base(program) == "env" {
        let at = args.iter().position(|a| !a.contains('=') && !a.starts_with('-'))?;
        (base(args[at]), &args[at + 1..])
    } else {
        (base(program), &args[..])
    };
    if !SHELLS.contains(&name.as_str()) {
        return None;
    }
    let runs_code = args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'));
    runs_code.then(|| {
        format!(
            "command.program runs a shell with -c ({program}): the shell parses its script again, so an argument value placed in it can run commands of its own; run the program itself, with one template element per argument"
        )
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    fn raw(value: Value) -> RawDef {
        RawDef { value, source: "tools.toml".into(), base_dir: PathBuf::from(".") }
    }

    #[test]
    fn a_shell_given_a_script_is_warned_about() {
        let found = warnings(&[raw(json!({"name": "t", "command": {"program": "/bin/sh", "args": ["-c", "grep {q} log"]}}))]);
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("tools.toml: tool \"t\": command.program runs a shell"), "{found:?}");
    }

    #[test]
    fn combined_flags_with_c_count_too() {
        assert_eq!(warnings(&[raw(json!({"name": "t", "command": {"program": "bash", "args": ["-ec", "x"]}}))]).len(), 1);
    }

    #[test]
    fn a_shell_started_through_env_is_warned_about_too() {
        let env = json!({"name": "t", "command": {"program": "/usr/bin/env", "args": ["LC_ALL=C", "sh", "-c", "grep {q} log"]}});
        assert_eq!(warnings(&[raw(env)]).len(), 1);
        let plain = json!({"name": "t", "command": {"program": "/usr/bin/env", "args": ["LC_ALL=C", "git", "-c", "x=y", "log"]}});
        assert!(warnings(&[raw(plain)]).is_empty());
    }

    #[test]
    fn a_shell_running_a_script_file_or_another_program_is_not_warned_about() {
        assert!(warnings(&[raw(json!({"name": "t", "command": {"program": "bash", "args": ["./run.sh"]}}))]).is_empty());
        assert!(warnings(&[raw(json!({"name": "t", "command": {"program": "/usr/bin/git", "args": ["-c", "x=y", "log"]}}))]).is_empty());
    }
}
