//! `command` tools: a fixed program run without a shell, with arguments built from the call's
//! validated input.
//!
//! ```toml
//! [[tools]]
//! name = "git_log"
//! description = "Recent commits of the app repository, one per line. Example: {\"limit\": 5}"
//! input_schema = { type = "object", properties = { limit = { type = "integer", minimum = 1, maximum = 200 }, path = { type = "string" } }, required = ["limit"], additionalProperties = false }
//! annotations = { read_only_hint = true }
//! timeout_secs = 10
//!
//! [tools.command]
//! program = "git"                        # bare names are looked up on PATH when the tool is built
//! args = ["-C", "/srv/repos/app", "--no-pager", "log", "--oneline", "-n", "{limit}", "--", "{path}"]
//! env_passthrough = ["PATH", "HOME", "LANG"]
//! env = { GIT_PAGER = "cat", GIT_CONFIG_NOSYSTEM = "1" }
//! ```
//!
//! Safety rules, all enforced here:
//! - No shell: each `args` element yields exactly one argv element (or none when its field is
//!   absent), except the explicit spread `"{files...}"`; `command/template.rs` documents the syntax. Shell
//!   syntax in a value (`;`, `$(…)`, backticks, newlines) reaches the program verbatim.
//! - A value that would begin an argv element with `-` is refused unless the field is listed in
//!   `allow_leading_dash`, so input cannot smuggle options (`--output=/etc/x`). Putting `--`
//!   before positional arguments in `args` protects programs even from listed fields.
//! - The child's environment is empty but for `env_passthrough` (copied from the server's) and
//!   `env`: the server's own environment holds secrets.
//! - The program is resolved, checked and matched against `tools.command.allowed_programs` when
//!   the tool is built; templates may only name properties the input schema declares.
//! - Output is captured with a byte cap per stream; a timeout, a cancellation or a dropped call
//!   stops the whole process group (`command/process.rs` says how).
//!
//! A program reports progress with lines `toolgate:progress 3/10 copying` on its stderr
//! (`command/progress.rs`): they reach a caller that asked for progress and leave the stderr the
//! result shows.

mod process;
mod program;
mod progress;

// The same process rules for upstream MCP servers over stdio (`src/upstream/stdio.rs`).
pub(crate) use process::ProcessGroup;
pub(crate) use program::resolve as resolve_program;
mod render;
// Public only so `fuzz/` can drive the argv templates directly.
pub mod template;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use self::process::{Launch, RunError};
use self::template::Template;
use super::{BuildCtx, FieldError, ResponseFormat};
use crate::protocol::CallToolResult;
use crate::tool::{ToolContext, ToolError};

/// `[tools.command]` of a definition.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The program: an absolute path, a path relative to the tools file, or a bare name looked
    /// up on the server's `PATH` when the tool is built.
    pub program: String,
    /// Argument templates, one argv element each: `"log"`, `"{limit}"`, `"--author={who}"`,
    /// `"{paths...}"` (one element per array item). `{{`/`}}` are literal braces.
    #[serde(default)]
    pub args: Vec<String>,
    /// A template written to the program's stdin (`"{text}"`); unset or with an absent field,
    /// stdin is empty.
    pub stdin: Option<String>,
    /// Where the program runs; relative to the tools file. Unset: the tools file's directory
    /// (the server's working directory for definitions from the admin API).
    pub working_dir: Option<PathBuf>,
    /// Server environment variables the program sees (`["PATH", "HOME", "LANG"]`).
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Fixed environment variables (`{ GIT_PAGER = "cat" }`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Input fields whose values may begin an argument with `-` (negative numbers, revisions
    /// like `-1`). Every other value that would is refused.
    #[serde(default)]
    pub allow_leading_dash: Vec<String>,
    /// How a successful run's stdout is shown in Markdown: `code` (a fenced block, the
    /// default) or `text` (as it is, for programs that print Markdown).
    #[serde(default)]
    pub output: OutputStyle,
    /// Bytes of stdout and of stderr kept (each); at most the server's
    /// `tools.command.max_output_bytes`, which is also the default.
    pub max_output_bytes: Option<usize>,
    /// Exit codes that mean success (`[0, 1]` for `grep`, where 1 is "no match"). Default `[0]`.
    pub success_exit_codes: Option<Vec<i32>>,
}

/// How stdout is rendered in Markdown.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OutputStyle {
    #[default]
    Code,
    Text,
}

pub use crate::config::command_tools::CommandToolSettings;

/// A compiled `command` tool.
pub struct CommandTool {
    tool: String,
    program: PathBuf,
    args: Vec<Template>,
    stdin: Option<Template>,
    working_dir: PathBuf,
    env_passthrough: Vec<String>,
    env: Vec<(String, String)>,
    allow_leading_dash: BTreeSet<String>,
    output: OutputStyle,
    max_output_bytes: usize,
    success_exit_codes: Vec<i32>,
    kill_grace: Duration,
}

impl std::fmt::Debug for CommandTool {
    /// Without the fixed environment's values, which may be credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandTool")
            .field("tool", &self.tool)
            .field("program", &self.program)
            .field("args", &self.args.len())
            .field("working_dir", &self.working_dir)
            .field("env", &self.env.iter().map(|(k, _)| k).chain(&self.env_passthrough).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

// ===== impl CommandTool =====

impl CommandTool {
    /// Validates `spec` completely; every problem is reported, each with its field
    /// (`command.args[2]`).
    pub fn build(spec: &CommandSpec, cx: &BuildCtx<'_>) -> Result<Self, Vec<FieldError>> {
        let settings = &cx.settings.command;
        let mut errors = Vec::new();
        let program = program::resolve(&spec.program, cx).map_err(|e| errors.push(FieldError::new("command.program", e))).ok();
        let (args, stdin) = parse_templates(spec, cx, &mut errors);
        let working_dir = std::path::absolute(cx.resolve(spec.working_dir.as_deref().unwrap_or(Path::new("."))))
            .map_err(|e| e.to_string())
            .and_then(|dir| check_dir(&dir).map(|()| dir))
            .map_err(|e| errors.push(FieldError::new("command.working_dir", e)))
            .ok();
        check_env(spec, &mut errors);

        let max_output_bytes = spec.max_output_bytes.unwrap_or(settings.max_output_bytes);
        if spec.max_output_bytes.is_some_and(|n| n == 0 || n > settings.max_output_bytes) {
            let message = format!("must be between 1 and the server's tools.command.max_output_bytes ({})", settings.max_output_bytes);
            errors.push(FieldError::new("command.max_output_bytes", message));
        }
        let success_exit_codes = spec.success_exit_codes.clone().unwrap_or_else(|| vec![0]);
        if success_exit_codes.is_empty() || success_exit_codes.iter().any(|c| !(0..=255).contains(c)) {
            errors.push(FieldError::new("command.success_exit_codes", "give one or more exit codes between 0 and 255"));
        }

        match (program, working_dir) {
            (Some(program), Some(working_dir)) if errors.is_empty() => Ok(Self {
                tool: cx.tool.to_owned(),
                program,
                args,
                stdin,
                working_dir,
                env_passthrough: spec.env_passthrough.clone(),
                env: spec.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                allow_leading_dash: spec.allow_leading_dash.iter().cloned().collect(),
                output: spec.output,
                max_output_bytes,
                success_exit_codes,
                kill_grace: Duration::from_millis(settings.kill_grace_ms),
            }),
            _ => Err(errors),
        }
    }

    /// The absolute path of the program this tool runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The directory the program runs in.
    pub fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    /// Runs the command for one call.
    pub async fn call(&self, ctx: &ToolContext, format: ResponseFormat) -> Result<CallToolResult, ToolError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<progress::Progress>(progress::QUEUE);
        // The forwarder ends when the run does (it drops the sender).
        let forward = async {
            while let Some(p) = rx.recv().await {
                ctx.progress(p.progress, p.total, p.message.as_deref()).await;
            }
        };
        let (result, ()) = tokio::join!(self.run_reporting(ctx.arguments(), ctx.cancellation(), format, tx), forward);
        result
    }

    /// Runs the command with validated `arguments` until it ends or `cancel` fires. Dropping
    /// the future stops the command's whole process group.
    pub async fn run(
        &self,
        arguments: &Map<String, Value>,
        cancel: &CancellationToken,
        format: ResponseFormat,
    ) -> Result<CallToolResult, ToolError> {
        // Nobody listens: progress lines are still taken out of stderr.
        self.run_reporting(arguments, cancel, format, tokio::sync::mpsc::channel(1).0).await
    }

    async fn run_reporting(
        &self,
        arguments: &Map<String, Value>,
        cancel: &CancellationToken,
        format: ResponseFormat,
        progress: tokio::sync::mpsc::Sender<progress::Progress>,
    ) -> Result<CallToolResult, ToolError> {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let invalid = |e: template::RenderError| ToolError::InvalidArguments(e.to_string());
        let mut argv = Vec::new();
        let dash_ok = |field: &str| self.allow_leading_dash.contains(field);
        for t in &self.args {
            t.render_args(arguments, &dash_ok, &mut argv).map_err(invalid)?;
        }
        let stdin = match &self.stdin {
            Some(t) => Some(t.render_text(arguments).map_err(invalid)?.unwrap_or_default().into_bytes()),
            None => None,
        };
        let launch = Launch {
            program: &self.program,
            args: argv,
            env: self.environment(),
            working_dir: &self.working_dir,
            stdin,
            max_output_bytes: self.max_output_bytes,
            kill_grace: self.kill_grace,
            progress,
        };
        let finished = match process::run(launch, cancel).await {
            Ok(finished) => finished,
            Err(RunError::Cancelled) => return Err(ToolError::Cancelled),
            Err(e) => return Err(self.start_failure(&e)),
        };
        let code = finished.status.code();
        let ok = code.is_some_and(|c| self.success_exit_codes.contains(&c));
        tracing::debug!(
            tool = %self.tool,
            program = %self.program.display(),
            exit_code = code,
            elapsed_ms = finished.elapsed.as_millis() as u64,
            stdout_bytes = finished.stdout.total(),
            stderr_bytes = finished.stderr.total(),
            "command finished"
        );
        Ok(render::result(&finished, ok, format, self.output))
    }

    /// The child's whole environment: the passed-through variables the server has, then the
    /// fixed ones.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let passed = self.env_passthrough.iter().filter_map(|name| std::env::var_os(name).map(|v| (OsString::from(name), v)));
        passed.chain(self.env.iter().map(|(k, v)| (k.into(), v.into()))).collect()
    }

    /// A message for the model; the details go to the log.
    fn start_failure(&self, e: &RunError) -> ToolError {
        tracing::warn!(tool = %self.tool, program = %self.program.display(), error = %e, "command could not run");
        let io = match e {
            RunError::Spawn(io) | RunError::Wait(io) => Some(io.kind()),
            RunError::Cancelled => None,
        };
        ToolError::Failed(match io {
            Some(std::io::ErrorKind::ArgumentListTooLong) => "The arguments are too long for the operating system; pass less data".into(),
            Some(std::io::ErrorKind::NotFound) => {
                "The command's program or working directory is missing on the server; an operator must fix the tool".into()
            }
            _ => "The command could not be run; the server logged the details".into(),
        })
    }
}

/// Parses `args` and `stdin`, checks the fields they name, and checks that every
/// `allow_leading_dash` field is one `args` uses.
fn parse_templates(spec: &CommandSpec, cx: &BuildCtx<'_>, errors: &mut Vec<FieldError>) -> (Vec<Template>, Option<Template>) {
    let mut args = Vec::with_capacity(spec.args.len());
    let mut used = BTreeSet::new();
    for (i, text) in spec.args.iter().enumerate() {
        match Template::parse(text).and_then(|t| check_fields(&t, cx).map(|()| t)) {
            Ok(t) => {
                used.extend(t.fields().into_iter().map(str::to_owned));
                args.push(t);
            }
            Err(e) => errors.push(FieldError::new(format!("command.args[{i}]"), e)),
        }
    }
    let stdin = spec.stdin.as_deref().and_then(|text| {
        let parsed = Template::parse(text).and_then(|t| match t {
            Template::Spread(_) => Err("a spread `{name...}` is only possible in `args`".into()),
            t => check_fields(&t, cx).map(|()| t),
        });
        parsed.map_err(|e| errors.push(FieldError::new("command.stdin", e))).ok()
    });
    for (i, name) in spec.allow_leading_dash.iter().enumerate() {
        if !used.contains(name) {
            errors.push(FieldError::new(format!("command.allow_leading_dash[{i}]"), format!("`{name}` is not used in `command.args`")));
        }
    }
    (args, stdin)
}

fn check_env(spec: &CommandSpec, errors: &mut Vec<FieldError>) {
    for (i, name) in spec.env_passthrough.iter().enumerate() {
        let field = || format!("command.env_passthrough[{i}]");
        if let Err(e) = check_env_name(name, false) {
            errors.push(FieldError::new(field(), e));
        } else if spec.env.contains_key(name) {
            errors.push(FieldError::new(field(), format!("`{name}` is also set in `command.env`; keep one")));
        }
    }
    for (name, value) in &spec.env {
        let field = format!("command.env.{name}");
        if let Err(e) = check_env_name(name, true) {
            errors.push(FieldError::new(field, e));
        } else if value.contains('\0') {
            errors.push(FieldError::new(field, "the value contains a NUL character"));
        }
    }
}

/// Templates may only name properties the input schema declares, in a form that suits their
/// declared type.
fn check_fields(t: &Template, cx: &BuildCtx<'_>) -> Result<(), String> {
    for name in t.fields() {
        if !cx.has_property(name) {
            return Err(format!("`{{{name}}}` is not a property of input_schema; declare it there or remove it"));
        }
        let types = declared_types(cx.input_schema, name);
        let structured = !types.is_empty() && types.iter().all(|t| *t == "array" || *t == "object");
        match t {
            Template::Spread(_) if !types.is_empty() && !types.contains(&"array") => {
                return Err(format!("`{{{name}...}}` spreads an array, but `{name}` is not declared as one"));
            }
            Template::Whole(_) | Template::Mixed(_) if structured => {
                return Err(format!("`{name}` is an array or object; write `{{{name}...}}` as a whole element to pass array items"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The `type` keyword of property `name`, as a list; empty when unconstrained.
fn declared_types<'a>(schema: &'a Value, name: &str) -> Vec<&'a str> {
    match schema.get("properties").and_then(|p| p.get(name)).and_then(|p| p.get("type")) {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn check_dir(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!("`{}` is not a directory", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!("`{}` does not exist", dir.display())),
        Err(e) => Err(format!("`{}` cannot be read: {e}", dir.display())),
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`; fixed values may not set the dynamic loader's variables, which
/// would run code the allow-list never approved.
fn check_env_name(name: &str, fixed: bool) -> Result<(), String> {
    let mut bytes = name.bytes();
    let valid = bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(format!("`{name}` is not a valid environment variable name (letters, digits and `_`, not starting with a digit)"));
    }
    if fixed && (name.starts_with("LD_") || name.starts_with("DYLD_")) {
        return Err(format!("`{name}` changes how programs are loaded and cannot be set by a tool definition"));
    }
    Ok(())
}
