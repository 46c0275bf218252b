//! `command` tools end to end through the public build/run API: real programs, real process
//! groups. Arguments reach the program one element each and never through a shell; refused
//! values never start it; the environment is the allow-list only; output stays within its cap;
//! a dropped or cancelled call leaves no process behind; build errors name the exact field.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use toolgate::config::ToolSettings;
use toolgate::protocol::{CallToolResult, Content};
use toolgate::tool::ToolError;
use toolgate::tooldef::command::{CommandSpec, CommandTool};
use toolgate::tooldef::{BuildCtx, FieldError, ResponseFormat};

/// Prints its argument count, then each argument NUL-terminated: newlines inside an argument
/// stay visible as such.
const ARGV_SCRIPT: &str = "printf '%s\\n' \"$#\"\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\n";

struct Fixture {
    dir: TempDir,
    settings: ToolSettings,
}

impl Fixture {
    fn new() -> Self {
        let mut settings = ToolSettings::default();
        settings.command.kill_grace_ms = 0;
        Self { dir: tempfile::tempdir().expect("tempdir"), settings }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An executable `/bin/sh` script in the fixture directory.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn build(&self, spec: Value, schema: &Value) -> Result<CommandTool, Vec<FieldError>> {
        let spec: CommandSpec = serde_json::from_value(spec).expect("spec deserializes");
        let cx =
            BuildCtx { tool: "test_tool", input_schema: schema, idempotent: false, base_dir: self.dir.path(), settings: &self.settings };
        CommandTool::build(&spec, &cx)
    }

    fn tool(&self, spec: Value, schema: &Value) -> CommandTool {
        self.build(spec, schema).unwrap_or_else(|e| panic!("build failed: {e:?}"))
    }

    /// The errors of a build that must fail, as `(field, message)`.
    fn errors(&self, spec: Value, schema: &Value) -> Vec<(String, String)> {
        match self.build(spec, schema) {
            Ok(tool) => panic!("build should fail: {tool:?}"),
            Err(errors) => errors.into_iter().map(|e| (e.field, e.message)).collect(),
        }
    }
}

fn schema(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn object(args: Value) -> Map<String, Value> {
    match args {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn run(tool: &CommandTool, args: Value, format: ResponseFormat) -> Result<CallToolResult, ToolError> {
    tool.run(&object(args), &CancellationToken::new(), format).await
}

fn text(result: &CallToolResult) -> &str {
    match result.content.first() {
        Some(Content::Text { text, .. }) => text,
        other => panic!("a text block expected, got {other:?}"),
    }
}

fn structured(result: &CallToolResult) -> &Value {
    result.structured_content.as_ref().expect("structuredContent")
}

/// The argv the ARGV_SCRIPT received, from a Json-format result.
fn argv(result: &CallToolResult) -> Vec<String> {
    assert!(!result.is_error, "{}", text(result));
    let stdout = structured(result)["stdout"].as_str().expect("stdout");
    let (count, rest) = stdout.split_once('\n').expect("count line");
    let args: Vec<String> = rest.split_terminator('\0').map(str::to_owned).collect();
    assert_eq!(count.parse::<usize>().ok(), Some(args.len()), "argument count matches");
    args
}

/// Whether `pid` is a live process (a zombie counts as gone: it runs nothing).
fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    stat.rsplit_once(')').is_some_and(|(_, rest)| !matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
}

async fn wait_gone(pids: &[i32], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits until a script has written `"<its pid> <its child's pid>\n"` to `file`.
async fn read_pids(file: &Path) -> Vec<i32> {
    loop {
        if let Ok(s) = std::fs::read_to_string(file)
            && s.ends_with('\n')
        {
            return s.split_whitespace().map(|p| p.parse().expect("pid")).collect();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

type Call<'a> = std::pin::Pin<Box<dyn Future<Output = Result<CallToolResult, ToolError>> + 'a>>;

/// Starts `tool` (a script that writes its pids to `pidfile`) and returns its future once both
/// processes are running.
async fn start_group<'a>(tool: &'a CommandTool, cancel: CancellationToken, pidfile: &Path) -> (Call<'a>, Vec<i32>) {
    let mut call: Call<'a> = Box::pin(async move { tool.run(&Map::new(), &cancel, ResponseFormat::Markdown).await });
    let pids = tokio::select! {
        r = &mut call => panic!("the command ended early: {r:?}"),
        pids = read_pids(pidfile) => pids,
    };
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| alive(*p)), "both processes run");
    (call, pids)
}

// ===== argv =====

#[tokio::test]
async fn each_template_element_is_one_argument_and_absent_ones_are_dropped() {
    let f = Fixture::new();
    let prog = f.script("argv.sh", ARGV_SCRIPT);
    let schema = schema(json!({
        "limit": {"type": "integer"}, "path": {"type": "string"}, "author": {"type": "string"},
        "files": {"type": "array", "items": {"type": "string"}}, "verbose": {"type": "boolean"}
    }));
    let spec = json!({"program": prog, "args": [
        "log", "--oneline", "-n", "{limit}", "--author={author}", "{{literal}}", "--verbose={verbose}", "--", "{path}", "{files...}"
    ]});
    let tool = f.tool(spec, &schema);

    let all = json!({"limit": 5, "path": "src/a b.rs", "author": "Ann Lee", "files": ["x y", "z"], "verbose": true});
    let r = run(&tool, all, ResponseFormat::Json).await.expect("runs");
    assert_eq!(
        argv(&r),
        ["log", "--oneline", "-n", "5", "--author=Ann Lee", "{literal}", "--verbose=true", "--", "src/a b.rs", "x y", "z"]
    );
    assert_eq!(structured(&r)["exit_code"], 0);

    // Absent optional fields drop their elements, mixed ones included; null counts as absent.
    let r = run(&tool, json!({"limit": 1, "author": null}), ResponseFormat::Json).await.expect("runs");
    assert_eq!(argv(&r), ["log", "--oneline", "-n", "1", "{literal}", "--"]);
}

#[tokio::test]
async fn shell_syntax_in_values_reaches_the_program_verbatim() {
    let f = Fixture::new();
    let d = f.dir.path().display();
    let attempts = [
        format!("; touch {d}/pwned1"),
        format!("$(touch {d}/pwned2)"),
        format!("`touch {d}/pwned3`"),
        format!("x\ntouch {d}/pwned4\n"),
        format!("a && touch {d}/pwned5 | cat > {d}/pwned6 *"),
    ];
    let fields: Map<String, Value> = (0..attempts.len()).map(|i| (format!("v{i}"), json!({"type": "string"}))).collect();
    let schema = schema(Value::Object(fields));
    let templates: Vec<String> = (0..attempts.len()).map(|i| format!("{{v{i}}}")).collect();
    let args: Map<String, Value> = attempts.iter().enumerate().map(|(i, a)| (format!("v{i}"), json!(a))).collect();

    // A script counting its argv, and printf itself, with no shell in between.
    let counted = f.tool(json!({"program": f.script("argv.sh", ARGV_SCRIPT), "args": templates}), &schema);
    let r = run(&counted, Value::Object(args.clone()), ResponseFormat::Json).await.expect("runs");
    assert_eq!(argv(&r), attempts);

    let mut printf_args = vec!["<%s>\\n".to_owned()];
    printf_args.extend(templates);
    let printf = f.tool(json!({"program": "/usr/bin/printf", "args": printf_args, "output": "text"}), &schema);
    let r = run(&printf, Value::Object(args), ResponseFormat::Markdown).await.expect("runs");
    let expected: String = attempts.iter().map(|a| format!("<{a}>\n")).collect();
    assert_eq!(text(&r), expected);

    for i in 1..=6 {
        assert!(!f.path(&format!("pwned{i}")).exists(), "pwned{i} was created: a shell ran");
    }
}

#[tokio::test]
async fn values_that_would_be_options_are_refused_before_anything_runs() {
    let f = Fixture::new();
    let ran = f.path("ran");
    let prog = f.script("mark.sh", &format!("touch '{}'\n", ran.display()));
    let schema = schema(json!({"path": {"type": "string"}, "rev": {"type": "string"}, "n": {"type": "integer"}}));
    let tool = f.tool(json!({"program": prog, "args": ["{path}", "--n={n}", "{rev}"], "allow_leading_dash": ["rev"]}), &schema);

    for args in [json!({"path": "--output=/etc/x"}), json!({"path": "-rf"}), json!({"path": "a\u{0}b"})] {
        match run(&tool, args.clone(), ResponseFormat::Markdown).await {
            Err(ToolError::InvalidArguments(msg)) => assert!(msg.contains("`path`"), "{msg}"),
            other => panic!("{args} should be refused, got {other:?}"),
        }
    }
    assert!(!ran.exists(), "the program never started");

    // Inside a mixed element, or for a field marked allow_leading_dash, a dash is fine.
    let r = run(&tool, json!({"n": -3, "rev": "-1"}), ResponseFormat::Markdown).await.expect("runs");
    assert!(!r.is_error);
    assert!(ran.exists());
}

// ===== environment, working directory, stdin =====

#[tokio::test]
async fn the_child_sees_only_the_allow_listed_environment() {
    let f = Fixture::new();
    let server_vars: BTreeSet<String> = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).collect();
    assert!(server_vars.contains("PATH"), "precondition: the server has variables the child must not see");
    let home = std::env::var("HOME").ok();

    let spec = json!({"program": "/usr/bin/env", "env_passthrough": ["HOME", "NOT_SET_ANYWHERE_42"], "env": {"GIT_PAGER": "cat"}});
    let tool = f.tool(spec, &schema(json!({})));
    let r = run(&tool, json!({}), ResponseFormat::Json).await.expect("runs");
    let seen: BTreeSet<&str> = structured(&r)["stdout"].as_str().expect("stdout").lines().collect();

    let mut expected = BTreeSet::from(["GIT_PAGER=cat".to_owned()]);
    expected.extend(home.map(|h| format!("HOME={h}")));
    assert_eq!(seen, expected.iter().map(String::as_str).collect(), "exactly the allow-list: no PATH, no secrets");
}

#[tokio::test]
async fn the_program_runs_in_its_working_directory_resolved_against_the_base_dir() {
    let f = Fixture::new();
    std::fs::create_dir(f.path("sub")).expect("mkdir");
    let tool = f.tool(json!({"program": "/usr/bin/pwd", "working_dir": "sub"}), &schema(json!({})));
    assert_eq!(tool.working_dir(), f.path("sub"));
    let r = run(&tool, json!({}), ResponseFormat::Json).await.expect("runs");
    let expected = std::fs::canonicalize(f.path("sub")).expect("canonical");
    assert_eq!(structured(&r)["stdout"].as_str().map(str::trim_end), expected.to_str());
}

#[tokio::test]
async fn stdin_comes_from_its_template() {
    let f = Fixture::new();
    let tool =
        f.tool(json!({"program": "/usr/bin/cat", "stdin": "{body}", "output": "text"}), &schema(json!({"body": {"type": "string"}})));
    let body = "-not an option\n$(still inert)\n";
    let r = run(&tool, json!({"body": body}), ResponseFormat::Markdown).await.expect("runs");
    assert_eq!(text(&r), body);
    // Without the field, stdin is empty (and closed: cat ends).
    let r = run(&tool, json!({}), ResponseFormat::Markdown).await.expect("runs");
    assert_eq!(text(&r), "The command succeeded and printed nothing.");
}

// ===== output =====

#[tokio::test]
async fn output_is_capped_while_both_streams_are_drained() {
    let f = Fixture::new();
    // 10 MB to stderr first, then 10 MB to stdout: an unread pipe would block it forever.
    let prog = f.script("flood.sh", "head -c 10485760 /dev/zero | tr '\\0' e >&2\nhead -c 10485760 /dev/zero | tr '\\0' o\n");
    let tool = f.tool(json!({"program": prog, "max_output_bytes": 65536, "env_passthrough": ["PATH"]}), &schema(json!({})));

    let r = tokio::time::timeout(Duration::from_secs(60), run(&tool, json!({}), ResponseFormat::Json))
        .await
        .expect("no deadlock")
        .expect("runs");
    let s = structured(&r);
    assert!(!r.is_error);
    assert_eq!(s["truncated"], true);
    assert_eq!(s["stdout"].as_str().map(str::len), Some(65536));
    assert!(s["stdout"].as_str().is_some_and(|o| o.bytes().all(|b| b == b'o')));
    assert_eq!(s["stderr"].as_str().map(str::len), Some(65536));

    let r = run(&tool, json!({}), ResponseFormat::Markdown).await.expect("runs");
    assert!(
        text(&r).ends_with("[Output truncated: the first 65536 of 10485760 bytes are shown.]"),
        "{}",
        &text(&r)[text(&r).len() - 100..]
    );
}

#[tokio::test]
async fn success_output_is_fenced_and_invalid_utf8_is_replaced() {
    let f = Fixture::new();
    let tool = f.tool(json!({"program": "/usr/bin/printf", "args": ["ok ``` \\377\\n"]}), &schema(json!({})));
    let r = run(&tool, json!({}), ResponseFormat::Markdown).await.expect("runs");
    assert_eq!(text(&r), "````\nok ``` \u{fffd}\n````");
}

#[tokio::test]
async fn a_failing_command_is_an_error_with_its_exit_code_and_stderr_tail() {
    let f = Fixture::new();
    let prog = f.script(
        "fail.sh",
        "echo partial result\ni=0\nwhile [ $i -lt 300 ]; do echo \"noise line $i\" >&2; i=$((i+1)); done\necho 'fatal: the real reason' >&2\nexit 3\n",
    );
    let tool = f.tool(json!({"program": prog}), &schema(json!({})));

    let r = run(&tool, json!({}), ResponseFormat::Markdown).await.expect("runs");
    assert!(r.is_error);
    let t = text(&r);
    assert!(t.starts_with("The command failed with exit code 3."), "{t}");
    assert!(t.contains("fatal: the real reason") && t.contains("partial result"), "{t}");
    assert!(!t.contains("noise line 0\n") && t.contains("stderr (last 2048 of"), "only the tail: {t}");

    let r = run(&tool, json!({}), ResponseFormat::Json).await.expect("runs");
    assert!(r.is_error);
    assert_eq!(structured(&r)["exit_code"], 3);
    assert_eq!(structured(&r)["stdout"], "partial result\n");

    // Exit codes the definition calls success are results, not errors.
    let tool = f.tool(json!({"program": prog, "success_exit_codes": [0, 3]}), &schema(json!({})));
    assert!(!run(&tool, json!({}), ResponseFormat::Markdown).await.expect("runs").is_error);
}

#[tokio::test]
async fn a_command_killed_by_a_signal_says_which() {
    let f = Fixture::new();
    let prog = f.script("selfkill.sh", "echo dying >&2\nkill -SEGV $$\n");
    let tool = f.tool(json!({"program": prog}), &schema(json!({})));
    let r = run(&tool, json!({}), ResponseFormat::Markdown).await.expect("runs");
    assert!(r.is_error);
    assert!(text(&r).starts_with("The command was killed by signal SIGSEGV.") && text(&r).contains("dying"), "{}", text(&r));
}

// ===== stopping =====

const GROUP_SCRIPT: &str = "sleep 300 &\necho \"$$ $!\" > \"$1\"\nwait\n";

#[tokio::test]
async fn dropping_the_call_kills_the_whole_process_group() {
    let f = Fixture::new();
    let pidfile = f.path("pids");
    let tool = f.tool(json!({"program": f.script("group.sh", GROUP_SCRIPT), "args": [pidfile]}), &schema(json!({})));

    let (call, pids) = start_group(&tool, CancellationToken::new(), &pidfile).await;
    drop(call); // what the execution layer's timeout does
    assert!(wait_gone(&pids, Duration::from_secs(5)).await, "the script and its grandchild sleep are gone");
}

#[tokio::test]
async fn a_timeout_around_the_call_kills_grandchildren() {
    let f = Fixture::new();
    let pidfile = f.path("pids");
    let tool = f.tool(json!({"program": f.script("group.sh", GROUP_SCRIPT), "args": [pidfile]}), &schema(json!({})));

    let timed_out = tokio::time::timeout(Duration::from_millis(1500), run(&tool, json!({}), ResponseFormat::Markdown)).await;
    assert!(timed_out.is_err(), "the call outlives its timeout");
    let pids = read_pids(&pidfile).await;
    assert!(wait_gone(&pids, Duration::from_secs(5)).await, "nothing of the command survives the timeout");
}

#[tokio::test]
async fn cancellation_sends_sigterm_first_and_the_program_may_clean_up() {
    let mut f = Fixture::new();
    f.settings.command.kill_grace_ms = 5000;
    let (pidfile, marker) = (f.path("pids"), f.path("cleaned"));
    let prog = f.script("graceful.sh", &format!("trap 'echo bye > \"$2\"; exit 0' TERM\n{GROUP_SCRIPT}"));
    let tool = f.tool(json!({"program": prog, "args": [pidfile, marker]}), &schema(json!({})));

    let cancel = CancellationToken::new();
    let (call, pids) = start_group(&tool, cancel.clone(), &pidfile).await;
    let started = Instant::now();
    cancel.cancel();
    assert!(matches!(call.await, Err(ToolError::Cancelled)));
    assert!(started.elapsed() < Duration::from_secs(4), "no need to wait out the grace period once the program exited");
    assert_eq!(std::fs::read_to_string(&marker).ok().as_deref(), Some("bye\n"), "the TERM handler ran");
    assert!(wait_gone(&pids, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_group_ignoring_sigterm_is_killed_after_the_grace_period_even_when_dropped() {
    let mut f = Fixture::new();
    f.settings.command.kill_grace_ms = 400;
    let pidfile = f.path("pids");
    let prog = f.script("stubborn.sh", &format!("trap '' TERM\n{GROUP_SCRIPT}"));
    let tool = f.tool(json!({"program": prog, "args": [pidfile]}), &schema(json!({})));

    let (call, pids) = start_group(&tool, CancellationToken::new(), &pidfile).await;
    let dropped = Instant::now();
    drop(call);
    assert!(wait_gone(&pids, Duration::from_secs(5)).await, "SIGKILL follows the grace period");
    assert!(dropped.elapsed() >= Duration::from_millis(350), "SIGTERM was tried first: {:?}", dropped.elapsed());
}

// ===== build-time validation =====

#[test]
fn build_errors_name_the_exact_field() {
    let f = Fixture::new();
    let schema = schema(json!({"limit": {"type": "integer"}, "files": {"type": "array"}, "name": {"type": "string"}}));
    let errors = f.errors(
        json!({
            "program": "/nonexistent/bin/tool",
            "args": ["log", "-n", "{nope}", "{limit", "{files}", "{name...}", "--x={limit}"],
            "working_dir": "missing-dir",
            "env_passthrough": ["PATH", "BAD-NAME"],
            "env": {"LD_PRELOAD": "/tmp/x.so", "OK": "fine"},
            "allow_leading_dash": ["path"],
            "max_output_bytes": 1_000_000_000,
            "success_exit_codes": [],
        }),
        &schema,
    );
    let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "command.program",
            "command.args[2]",
            "command.args[3]",
            "command.args[4]",
            "command.args[5]",
            "command.allow_leading_dash[0]",
            "command.working_dir",
            "command.env_passthrough[1]",
            "command.env.LD_PRELOAD",
            "command.max_output_bytes",
            "command.success_exit_codes",
        ],
        "{errors:#?}"
    );
    let message = |field: &str| errors.iter().find(|(f, _)| f == field).map(|(_, m)| m.as_str()).unwrap_or_default();
    assert!(message("command.program").contains("`/nonexistent/bin/tool` does not exist"));
    assert!(message("command.args[2]").contains("`{nope}` is not a property of input_schema"));
    assert!(message("command.args[3]").contains("not closed"));
    assert!(message("command.args[4]").contains("{files...}"));
    assert!(message("command.args[5]").contains("not declared as one"));
    assert!(message("command.working_dir").contains("missing-dir` does not exist"));
    assert!(message("command.env_passthrough[1]").contains("not a valid environment variable name"));
}

#[test]
fn programs_are_resolved_on_path_and_checked_against_the_allow_list() {
    let mut f = Fixture::new();
    let empty = schema(json!({}));
    let tool = f.tool(json!({"program": "sh"}), &empty);
    assert!(tool.program().is_absolute() && tool.program().ends_with("sh"), "{:?}", tool.program());

    let errors = f.errors(json!({"program": "no-such-program-anywhere"}), &empty);
    assert_eq!(
        errors,
        [(
            "command.program".to_owned(),
            "`no-such-program-anywhere` was not found on the server's PATH; give its absolute path".to_owned()
        )]
    );

    let data = f.path("data.txt");
    std::fs::write(&data, "x").expect("write");
    let errors = f.errors(json!({"program": "./data.txt"}), &empty);
    assert_eq!(errors[0].0, "command.program");
    assert!(errors[0].1.contains("is not executable"), "{errors:?}");

    f.settings.command.allowed_programs = vec![PathBuf::from("/usr/bin/printf")];
    assert!(f.build(json!({"program": "/usr/bin/printf"}), &empty).is_ok());
    let errors = f.errors(json!({"program": "/usr/bin/env"}), &empty);
    assert_eq!(errors[0].0, "command.program");
    assert!(errors[0].1.contains("not in the server's `tools.command.allowed_programs`"), "{errors:?}");
}

#[test]
fn unknown_spec_fields_are_refused() {
    let err = serde_json::from_value::<CommandSpec>(json!({"program": "/bin/true", "shell": true})).err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("unknown field `shell`")));
}

// ===== a realistic tool =====

fn git(repo: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-C", repo.to_str().expect("utf-8 path"), "-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn on_path(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file()).expect("on PATH")
}

/// A repository with three commits: a.txt, b.txt, then a.txt again.
fn make_repo(f: &Fixture) -> PathBuf {
    let repo = f.path("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git(&repo, &["init", "-q"]);
    for (file, message) in [("a.txt", "first: add a"), ("b.txt", "second: add b"), ("a.txt", "third: change a")] {
        std::fs::write(repo.join(file), message).expect("write");
        git(&repo, &["add", file]);
        git(&repo, &["commit", "-q", "-m", message]);
    }
    repo
}

#[tokio::test]
async fn git_log_on_an_allow_listed_repository() {
    let mut f = Fixture::new();
    let repo = make_repo(&f);
    f.settings.command.allowed_programs = vec![on_path("git")];

    let schema = json!({
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100}, "path": {"type": "string"}},
        "required": ["limit"],
        "additionalProperties": false
    });
    let spec = json!({
        "program": "git",
        "args": ["-C", repo, "--no-pager", "log", "--format=%s", "-n", "{limit}", "--", "{path}"],
        "env_passthrough": ["PATH", "HOME", "LANG"],
        "env": {"GIT_PAGER": "cat", "GIT_CONFIG_NOSYSTEM": "1"},
    });
    let tool = f.tool(spec, &schema);

    let r = run(&tool, json!({"limit": 2}), ResponseFormat::Markdown).await.expect("runs");
    assert!(!r.is_error, "{}", text(&r));
    assert_eq!(text(&r), "```\nthird: change a\nsecond: add b\n```");

    let r = run(&tool, json!({"limit": 10, "path": "b.txt"}), ResponseFormat::Json).await.expect("runs");
    assert_eq!(structured(&r)["stdout"], "second: add b\n");

    // An option smuggled in as the path never reaches git.
    let refused = run(&tool, json!({"limit": 1, "path": "--output=/tmp/x"}), ResponseFormat::Markdown).await;
    assert!(matches!(refused, Err(ToolError::InvalidArguments(_))));

    let r = run(&tool, json!({"limit": 1, "path": "no/such/file"}), ResponseFormat::Markdown).await.expect("runs");
    assert_eq!(text(&r), "The command succeeded and printed nothing.");
}

#[tokio::test]
async fn a_git_log_definition_in_a_tools_file_compiles_and_runs_through_its_context() {
    let f = Fixture::new();
    let repo = make_repo(&f);
    let toml = format!(
        r#"
[[tools]]
name = "git_log"
description = "Recent commits of the repository, newest first, one subject per line. Example: {{\"limit\": 5}}"
input_schema = {{ type = "object", properties = {{ limit = {{ type = "integer", minimum = 1, maximum = 200 }}, path = {{ type = "string", description = "only commits touching this path" }} }}, required = ["limit"], additionalProperties = false }}
annotations = {{ read_only_hint = true, idempotent_hint = true }}
timeout_secs = 10
response_format_argument = true

[tools.command]
program = "git"
args = ["-C", "{repo}", "--no-pager", "log", "--format=%s", "-n", "{{limit}}", "--", "{{path}}"]
env_passthrough = ["PATH", "HOME", "LANG"]
env = {{ GIT_PAGER = "cat", GIT_CONFIG_NOSYSTEM = "1" }}
"#,
        repo = repo.display()
    );
    let mut settings = toolgate::config::Settings::default();
    settings.tools.command.allowed_programs = vec![on_path("git")];
    let raws = toolgate::tooldef::parse_text(&toml, false, "tools.toml", f.dir.path()).expect("parses");
    let compiled = toolgate::tooldef::compile_all(&raws, &settings, toolgate::tool::Origin::File, "tools.toml").expect("compiles");
    let tool = compiled[0].tool.as_ref().expect("enabled");

    let ctx = toolgate::tool::ToolContext::detached("git_log", object(json!({"limit": 1})), CancellationToken::new());
    let r = tool.invoke(ctx).await.expect("runs");
    assert_eq!(text(&r), "```\nthird: change a\n```");

    let args = object(json!({"limit": 5, "path": "a.txt", "response_format": "json"}));
    let r = tool.invoke(toolgate::tool::ToolContext::detached("git_log", args, CancellationToken::new())).await.expect("runs");
    assert_eq!(structured(&r)["stdout"], "third: change a\nfirst: add a\n");

    // A cancelled context stops the command instead of running it to the end.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let r = tool.invoke(toolgate::tool::ToolContext::detached("git_log", object(json!({"limit": 1})), cancel)).await;
    assert!(matches!(r, Err(ToolError::Cancelled)), "{r:?}");
}
