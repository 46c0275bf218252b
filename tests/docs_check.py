#!/usr/bin/env python3
"""Runs every command and snippet of README.md and of the Markdown guides under deploy/, as
written, and fails if one fails. Called by tests/docs_check.sh (which bounds the run in time and
cleans up after it); see there for the environment it reads.

What it runs is read from the Markdown at run time, never copied:
  * every fenced code block: ```sh blocks command by command (a here-document is part of its
    command) in one shell session per file (a block's exports and `cd` carry over to the next
    block of the same file, as in a reader's terminal); a command ending in `serve` is started in the background (the reader's other
    terminal) once the server it replaces is stopped, and the session waits until that server
    answers /healthz; ```python and ```js blocks are saved as client.py / client.mjs and run with
    the SDK version the preceding install line pins; ```toml blocks are checked with
    `toolgate check-config` (or named as covered by the Rust test that loads them);
  * in README.md, every inline `command` too (`toolgate ...`, `npx ...`, `pip install ...`,
    scripts): run in the same session at its place in the text, or skipped with a reason.
Anything that cannot run here is printed as SKIP with its reason; a block of a kind this script
has no rule for FAILs, so nothing new is silently left unchecked.

State is fresh: the storage directory, the dev-mode signing key and the CSV directory are in a new
temporary directory (TOOLGATE__STORAGE__DATA_DIR, TOOLGATE__AUTH__DEV_KEY_FILE,
TOOLGATE__TOOLS__CSV_DIR), the only settings the runner adds; the environment is otherwise reduced
to what a fresh shell has (PATH, HOME, locale, proxies, cargo/npm/pip settings). Servers listen on
loopback only, on the addresses the docs give (127.0.0.1:8080, :8081, :9000).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ["DC_WORK"]) if os.environ.get("DC_WORK") else None
HARNESS_DIR = Path(os.environ.get("HARNESS_DIR") or Path.home() / ".cache/toolgate-e2e")
BLOCK_TIMEOUT = int(os.environ.get("DOCS_CHECK_BLOCK_TIMEOUT", "300"))
SERVE_TIMEOUT = int(os.environ.get("DOCS_CHECK_SERVE_TIMEOUT", "1500"))
ALREADY_RUN = os.environ.get("DOCS_CHECK_ALREADY_RUN", "").split(",")
ALREADY_RUN = [c.strip() for c in ALREADY_RUN if c.strip()]

FILES = ["README.md"] + sorted(str(Path(p).relative_to(ROOT)) for p in glob.glob(str(ROOT / "deploy/**/*.md"), recursive=True))

# ---- what cannot run here, and why ------------------------------------------------------------
# A sh block is skipped whole when one of its commands matches one of these.
SKIP_COMMANDS = [
    (r"^docker\b", "needs a Docker engine (there is none here); tests/deploy_check.sh checks the Dockerfile and compose file without one"),
    (r"^kubectl\b", "needs a Kubernetes cluster; tests/deploy_check.sh validates the manifests and tests/helm_check.sh the chart's renders against the Kubernetes schemas"),
    (r"\bcurl\b.*https://(?!localhost[:/]|127\.0\.0\.1[:/])", "talks to an identity provider or a public deployment over the internet (placeholder tenants and hosts; this check is loopback only)"),
    (r"^sqlite3 /var/lib/toolgate/", "the container volume's paths (/var/lib/toolgate, /backup), which exist only in the image's deployment"),
]
# Single commands skipped inside an otherwise runnable block, or as inline commands.
SKIP_ONE = [
    (r"^\.?/?tests/run\.sh\b", "the test suite itself: it runs this check, and the rest of it is its own steps"),
    (r"^\.?/?tests/docs_check\.sh\b", "this check itself"),
    (r"^cargo install\b", "a second full release build, into ~/.cargo/bin; the PATH line is the checked way to the same binary"),
    (r"^\.?/?benches/run\.sh\b", "the full benchmark (tens of minutes, needs ../shared/bench); tests/run.sh runs its --short smoke test"),
    (r"^\.ci/run\b", "the CI entry point: installs system packages, then runs tests/run.sh"),
    (r"^npx @modelcontextprotocol/inspector(@\S+)?$", "interactive: opens the Inspector's web UI in a browser (the headless --cli form is run)"),
]
LANG_SKIPS = {
    "nginx": "an nginx configuration excerpt, not runnable alone; the tested forms are deploy/nginx/nginx.conf (nginx -t in tests/deploy_check.sh) and tests/cluster/nginx.conf.tmpl (tests/cluster/topology.sh)",
    "haproxy": "an HAProxy configuration excerpt; HAProxy is part of no tested deployment here",
    "text": "a diagram, not code",
}
SH_LANGS = {"sh", "bash", "shell", "console"}
JS_LANGS = {"js", "javascript", "mjs"}
INLINE_COMMAND = re.compile(r"^(toolgate|cargo|npx|npm|pip3?|python3?|node|docker|kubectl|curl|sqlite3)\s|^\.?/?[\w.-]+(/[\w.-]+)*\.sh(\s|$)|^\.ci/run$")
PIP_PIN = re.compile(r'^pip3? install "?mcp==([0-9][\w.]*)"?$')
NPM_PIN = re.compile(r"^npm install @modelcontextprotocol/sdk@([0-9][\w.-]*)$")
# "save as `client.py` and run `python client.py`": the command the next snippet is run with
RUN_SNIPPET = {"python": re.compile(r"^python3? (client\.py)$"), "js": re.compile(r"^node (client\.mjs)$")}
SERVE = re.compile(r"(^|[\s;&|(/])(toolgate|cargo run\b.*--)\s+serve\s*(#.*)?$", re.S)


# ---- Markdown ---------------------------------------------------------------------------------
@dataclass
class Unit:
    file: str
    line: int
    kind: str  # "block" or "inline"
    lang: str
    text: str
    heading: str
    run: str = ""  # for a snippet: the inline command the text says to run it with

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def parse(file: str) -> list[Unit]:
    lines = (ROOT / file).read_text().split("\n")
    units: list[Unit] = []
    prose = list(lines)  # the text with fenced blocks blanked, for inline code spans
    headings: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)", lines[i])
        if re.match(r"^#{1,6} ", lines[i]):
            headings.append((i + 1, lines[i].strip()))
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]):
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            i += 1
        for j in range(start, min(i + 1, len(lines))):
            prose[j] = ""
        heading = next((h for n, h in reversed(headings) if n <= start + 1), "")
        units.append(Unit(file, start + 1, "block", lang or "text", "\n".join(body) + "\n", heading))
        i += 1
    if file == "README.md":  # inline commands: the README's only
        text = "\n".join(prose)
        for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, re.S):
            span = " ".join(m.group(2).split())
            if INLINE_COMMAND.match(span):
                line = text.count("\n", 0, m.start()) + 1
                heading = next((h for n, h in reversed(headings) if n <= line), "")
                units.append(Unit(file, line, "inline", "inline", span, heading))
    units.sort(key=lambda u: u.line)
    # an inline run command belongs to the snippet right after it
    for n, u in enumerate(units):
        nxt = units[n + 1] if n + 1 < len(units) else None
        lang = "js" if nxt and nxt.lang in JS_LANGS else nxt.lang if nxt else ""
        if u.kind == "inline" and lang in RUN_SNIPPET and RUN_SNIPPET[lang].match(u.text):
            nxt.run, u.kind = u.text, "merged"
    return [u for u in units if u.kind != "merged"]


def commands(text: str) -> list[tuple[int, str]]:
    """The complete shell commands of a block (continuation lines and multi-line constructs
    joined, as bash -n sees them), each with its line offset in the block."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    first = 0
    for n, line in enumerate(text.rstrip("\n").split("\n")):
        if not pending:
            first = n
            if not line.strip() or line.strip().startswith("#"):
                continue
        pending.append(line)
        chunk = "\n".join(pending)
        if line.endswith("\\"):
            continue
        syntax = subprocess.run(["bash", "-n"], input=chunk, text=True, capture_output=True)
        # An unterminated here-document is only a warning to bash -n: the command goes on.
        if syntax.returncode == 0 and "here-document" not in syntax.stderr:
            out.append((first, chunk))
            pending = []
    if pending:
        out.append((first, "\n".join(pending)))
    return out


def strip_comment(cmd: str) -> str:
    """The command without its trailing comment, for matching (a `#` inside quotes is kept)."""
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=False)
        lex.whitespace_split = True
        lex.commenters = "#"
        return " ".join(lex)
    except ValueError:
        return cmd


def skip_reason(cmd: str, rules) -> str | None:
    plain = strip_comment(cmd)
    for pattern, reason in rules:
        if re.search(pattern, plain, re.M):
            return reason
    return None


# ---- running ----------------------------------------------------------------------------------
LIB = r"""
# helpers for the generated block scripts (docs_check.py); every name starts with __dc
__dc_now() { date +%s.%N; }
__dc_healthy() { # host:port
  local addr="$1" host port
  host="${addr%:*}" port="${addr##*:}"
  host="${host#[}" host="${host%]}"
  (
    exec 3<>"/dev/tcp/$host/$port" || exit 1
    printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$addr" >&3
    IFS= read -r -t 5 status <&3 || exit 1
    [[ "$status" == "HTTP/1."?" 200 "* ]]
  ) 2>/dev/null
}
__dc_healthy_tls() { # host:port: the same request over TLS (deploy/tls.md); any certificate will do
  local status
  status="$(printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" \
    | timeout 5 openssl s_client -quiet -connect "$1" 2>/dev/null | head -n 1)"
  [[ "$status" == "HTTP/1."?" 200 "* ]]
}
__dc_stop_group() { # pgid: SIGTERM to the whole group (cargo and the server), SIGKILL after 30 s
  kill -TERM -- "-$1" 2>/dev/null || return 0
  local i
  for ((i = 0; i < 300; i++)); do
    kill -0 -- "-$1" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "[docs] process group $1 still there 30 s after SIGTERM: SIGKILL" >&2
  kill -KILL -- "-$1" 2>/dev/null || true
}
__dc_stop_servers() {
  [ -s "$DC_WORK/servers" ] || return 0
  local pgid log where
  while read -r pgid log where; do
    echo "[docs] stopping the server of $where" >&2
    __dc_stop_group "$pgid"
  done <"$DC_WORK/servers"
  : >"$DC_WORK/servers"
}
__dc_launch() { # where: before a server is started, stop the one it replaces (same ports)
  __dc_stop_servers
  printf 'launch %s %s\n' "$1" "$(__dc_now)" >>"$DC_WORK/timing"
}
__dc_served() { # where pid log: wait until the server listens and answers /healthz
  local where="$1" pid="$2" log="$3" deadline=$((SECONDS + DC_SERVE_TIMEOUT)) running="" addr="" healthy
  printf '%s %s %s\n' "$pid" "$log" "$where" >>"$DC_WORK/servers"
  while :; do
    if [ -z "$running" ] && grep -q 'Running `' "$log" 2>/dev/null; then
      running=1
      printf 'running %s %s\n' "$where" "$(__dc_now)" >>"$DC_WORK/timing"
    fi
    addr="$(sed -n 's/.*toolgate listening addr=\([^ ]*\).*/\1/p' "$log" 2>/dev/null | head -n 1)"
    healthy=__dc_healthy
    grep -q 'toolgate listening .*scheme="https"' "$log" 2>/dev/null && healthy=__dc_healthy_tls
    if [ -n "$addr" ] && "$healthy" "$addr"; then
      printf 'listening %s %s\n' "$where" "$(__dc_now)" >>"$DC_WORK/timing"
      echo "[docs] $where: the server answers /healthz at $addr (its output: $log)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "[docs] $where: the server exited before it listened; its output:"
      tail -n 30 "$log"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "[docs] $where: the server did not listen within ${DC_SERVE_TIMEOUT}s; its output:"
      tail -n 30 "$log"
      return 1
    fi
    sleep 0.05
  done
}
__dc_save_state() { # exported and shell variables, and the directory, for the next block
  local v
  {
    export -p
    for v in $(compgen -v); do
      case "$v" in __dc* | DC_* | BASH* | FUNCNAME | PIPESTATUS | GROUPS | DIRSTACK | COMP_* | EUID | UID | PPID | SHELLOPTS | SECONDS | RANDOM | LINENO | SRANDOM | EPOCH* | HIST* | _) continue ;; esac
      __dc_decl="$(declare -p "$v" 2>/dev/null)" || continue
      __dc_flags="${__dc_decl#declare -}" __dc_flags="${__dc_flags%% *}"
      [[ "$__dc_flags" == *[xr]* ]] && continue # exported (above) or read-only
      printf '%s\n' "$__dc_decl"
    done
  } >"$DC_STATE/env.new" && mv "$DC_STATE/env.new" "$DC_STATE/env"
  pwd >"$DC_STATE/cwd"
}
"""


@dataclass
class Session:
    """One reader's shell, for one Markdown file."""

    name: str
    env: dict
    state: Path
    python: str | None = None
    node_modules: str | None = None
    skipped_lines: list = field(default_factory=list)

    def __post_init__(self):
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "env").write_text("")
        (self.state / "cwd").write_text(str(ROOT) + "\n")

    def run(self, body: str, timeout: int, label: str) -> tuple[int, str]:
        script = self.state / f"block-{label}.sh"
        script.write_text(
            "# generated by tests/docs_check.py\n"
            f". {shlex.quote(str(WORK / 'lib.sh'))}\n"
            f". {shlex.quote(str(self.state / 'env'))}\n"
            f'cd "$(cat {shlex.quote(str(self.state / "cwd"))})" || exit 99\n'
            f"{body}\n"
            "__dc_save_state\n"
        )
        env = dict(self.env, DC_WORK=str(WORK), DC_STATE=str(self.state), DC_SERVE_TIMEOUT=str(SERVE_TIMEOUT))
        proc = subprocess.Popen(["bash", str(script)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=ROOT)
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return 124, out + f"\n[docs] killed after {timeout}s (DOCS_CHECK_BLOCK_TIMEOUT)\n"
        except BaseException:  # SIGTERM, Ctrl-C: the block's commands go too (servers: by the caller)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise

    def final_env(self, name: str) -> str:
        return subprocess.run(["bash", "-c", f'. "$1" >/dev/null 2>&1; printf %s "${name}"', "-", str(self.state / "env")],
                              capture_output=True, text=True, env=self.env).stdout


def checked(cmd: str, where: str) -> str:
    """A verbatim command followed by the check of its exit status."""
    return (f"{cmd}\n__dc_rc=$?\n"
            f'[ "$__dc_rc" = 0 ] || {{ echo "[docs] {where}: exit status $__dc_rc"; exit "$__dc_rc"; }}\n')


def shell_body(unit: Unit, session: Session) -> tuple[str | None, list[str], str | None]:
    """The script for a sh block: (body, notes, skip reason of the whole block)."""
    cmds = commands(unit.text)
    for _, cmd in cmds:
        reason = skip_reason(cmd, SKIP_COMMANDS)
        if reason:
            return None, [], reason
    parts, notes, ran = [], [], 0
    for offset, cmd in cmds:
        where = f"{unit.file}:{unit.line + 1 + offset}"
        plain = strip_comment(cmd)
        reason = skip_reason(cmd, SKIP_ONE)
        if not reason and plain in ALREADY_RUN:
            reason = "already run by the caller in this run (DOCS_CHECK_ALREADY_RUN)"
        if reason:
            notes.append(f"skipped {where} `{plain}`: {reason}")
            continue
        ran += 1
        if SERVE.search(cmd):
            log = WORK / f"serve-{unit.file.replace('/', '_')}-{unit.line + 1 + offset}.log"
            parts.append(f"__dc_launch {where}\nset -m\n(\n{cmd}\n) >{shlex.quote(str(log))} 2>&1 </dev/null &\n"
                         f"__dc_pid=$!\nset +m\n__dc_served {where} \"$__dc_pid\" {shlex.quote(str(log))} || exit 1\n")
        else:
            parts.append(checked(cmd, where))
    if not ran:
        return None, [], "; ".join(n.split(": ", 1)[1] for n in notes)
    return "\n".join(parts), notes, None


@dataclass
class Result:
    status: str
    unit: Unit
    detail: str = ""
    secs: float = 0.0


class Runner:
    def __init__(self):
        self.results: list[Result] = []
        self.first_call: float | None = None
        self.spans: list[tuple[Unit, float, float]] = []  # README units with start and end times
        self.base_env = self._base_env()

    @staticmethod
    def _base_env() -> dict:
        keep = re.compile(r"^(PATH|HOME|USER|LOGNAME|SHELL|TERM|TMPDIR|LANG|LC_\w+|TZ|CI|CARGO_\w*|RUST\w*|"
                          r"[Hh][Tt][Tt][Pp][Ss]?_[Pp][Rr][Oo][Xx][Yy]|[Nn][Oo]_[Pp][Rr][Oo][Xx][Yy]|"
                          r"NPM_CONFIG_\w+|npm_config_\w+|PIP_\w+|SSL_CERT_\w+|NODE_EXTRA_CA_CERTS)$")
        env = {k: v for k, v in os.environ.items() if keep.match(k)}
        env["TOOLGATE__STORAGE__DATA_DIR"] = str(WORK / "fresh/data")
        env["TOOLGATE__AUTH__DEV_KEY_FILE"] = str(WORK / "fresh/.toolgate/dev-signing.key")
        env["TOOLGATE__TOOLS__CSV_DIR"] = str(WORK / "fresh/data/csv")
        # Node.js: the docs ask for >= 22.19 (the Inspector); use the e2e harness's Node 22 when the
        # machine's is older (CI has Node 20)
        node22 = HARNESS_DIR / "node22"
        have = subprocess.run(["bash", "-c", "node --version 2>/dev/null"], capture_output=True, text=True, env=env).stdout.strip()
        if not re.match(r"^v(2[3-9]|[3-9]\d|22\.(19|[2-9]\d))", have) and (node22 / "node").exists():
            env["PATH"] = f"{node22}:{env.get('PATH', '')}"
        return env

    def report(self, result: Result):
        self.results.append(result)
        u = result.unit
        what = u.lang if u.kind == "block" else f"`{u.text}`"
        timing = f" ({result.secs:.1f} s)" if result.status != "SKIP" else ""
        line = f"{result.status:<5} {u.where:<26} {what}{timing}"
        if result.status == "SKIP":
            line += f": {result.detail}"
        print(line, flush=True)
        if result.status != "SKIP" and result.detail:
            limit = 60 if result.status == "FAIL" else 4
            detail = result.detail.rstrip("\n").split("\n")
            if len(detail) > limit:
                detail = [f"... ({len(detail) - limit} lines before)"] + detail[-limit:]
            for d in detail:
                print(f"      {d}")

    def run_file(self, file: str, env: dict) -> Session:
        session = Session(file, env, WORK / "sessions" / file.replace("/", "_"))
        covered = rust_covered()
        for unit in parse(file):
            started = time.time()
            try:
                status, detail = self.run_unit(unit, session, covered)
            except Exception as e:  # a bug here must fail the check, not pass it
                status, detail = "FAIL", f"docs_check.py: {type(e).__name__}: {e}"
            self.report(Result(status, unit, detail, time.time() - started))
            if file == "README.md":
                self.spans.append((unit, started, time.time()))
            if status == "PASS" and unit.lang in ("python", "js") and self.first_call is None:
                self.first_call = time.time()
        stop_servers()
        return session

    def run_unit(self, unit: Unit, session: Session, covered: dict) -> tuple[str, str]:
        label = f"L{unit.line}"
        if unit.kind == "inline":
            return self.run_inline(unit, session, label)
        lang = unit.lang
        if lang in LANG_SKIPS:
            return "SKIP", LANG_SKIPS[lang]
        if lang in SH_LANGS:
            body, notes, reason = shell_body(unit, session)
            if reason:
                return "SKIP", reason
            rc, out = session.run(body, BLOCK_TIMEOUT + (SERVE_TIMEOUT if SERVE.search(unit.text) or "cargo " in unit.text else 0), label)
            detail = "\n".join(notes + ([out] if rc != 0 or out.strip() else []))
            return ("PASS" if rc == 0 else "FAIL"), detail
        if lang == "toml":
            key = (unit.file, unit.heading)
            if key in covered:
                return "SKIP", f"covered by {covered[key]} (loads this block as settings)"
            path = snippet(unit, "settings.toml")
            rc, out = session.run(checked(f"toolgate check-config --config {shlex.quote(str(path))} >/dev/null", unit.where), BLOCK_TIMEOUT, label)
            return ("PASS" if rc == 0 else "FAIL"), "toolgate check-config: the settings load" if rc == 0 else out
        if lang == "python":
            if not session.python:
                return "FAIL", "no `pip install \"mcp==X\"` line before this snippet pins the SDK it needs"
            if not unit.run:
                return "FAIL", "the text before this snippet does not say how to run it (`python client.py`)"
            path = snippet(unit, RUN_SNIPPET["python"].match(unit.run).group(1))
            venv_bin = str(Path(session.python).parent)  # as if the venv were activated
            rc, out = session.run(f"cd {shlex.quote(str(path.parent))}\nPATH={shlex.quote(venv_bin)}:\"$PATH\"\n"
                                  + checked(unit.run, unit.where) + 'PATH="${PATH#*:}"\ncd "$OLDPWD"\n', BLOCK_TIMEOUT, label)
            return ("PASS" if rc == 0 else "FAIL"), f"`{unit.run}` with {session.python}:\n{out}"
        if lang in JS_LANGS:
            if not session.node_modules:
                return "FAIL", "no `npm install @modelcontextprotocol/sdk@X` line before this snippet pins the SDK it needs"
            if not unit.run:
                return "FAIL", "the text before this snippet does not say how to run it (`node client.mjs`)"
            path = snippet(unit, RUN_SNIPPET["js"].match(unit.run).group(1))
            (path.parent / "node_modules").symlink_to(session.node_modules)
            rc, out = session.run(f"cd {shlex.quote(str(path.parent))}\n" + checked(unit.run, unit.where) + 'cd "$OLDPWD"\n', BLOCK_TIMEOUT, label)
            version = subprocess.run(["bash", "-c", "node --version"], capture_output=True, text=True, env=session.env).stdout.strip()
            return ("PASS" if rc == 0 else "FAIL"), f"`{unit.run}` with node {version}, {session.node_modules}:\n{out}"
        return "FAIL", f"no rule for ```{lang} blocks: add one to tests/docs_check.py (run it, or skip it with a reason)"

    def run_inline(self, unit: Unit, session: Session, label: str) -> tuple[str, str]:
        cmd = unit.text
        reason = skip_reason(cmd, SKIP_COMMANDS) or skip_reason(cmd, SKIP_ONE)
        if reason:
            return "SKIP", reason
        if m := PIP_PIN.match(cmd):
            return self.pip(m.group(1), cmd, session, label)
        if m := NPM_PIN.match(cmd):
            return self.npm(m.group(1), cmd, session, label)
        if re.search(r"\b(FILE|X|<[^>]*>)\b|…|<[a-z-]+>", cmd):
            return "FAIL", "a placeholder in a command: write a runnable one"
        if SERVE.search(cmd):
            return "FAIL", "an inline `serve`: put it in a ```sh block"
        rc, out = session.run(checked(cmd, unit.where), BLOCK_TIMEOUT, label)
        return ("PASS" if rc == 0 else "FAIL"), out

    def pip(self, version: str, cmd: str, session: Session, label: str) -> tuple[str, str]:
        for venv in sorted(HARNESS_DIR.glob("py-mcp*")):
            py = venv / "bin/python"
            got = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                                 capture_output=True, text=True).stdout.strip() if py.exists() else ""
            if got == version:
                session.python = str(py)
                return "PASS", f"mcp {version} is the e2e harness's {venv} (tests/e2e/setup.sh, tests/e2e/requirements/{venv.name}.lock.txt): not installed again"
        venv = WORK / f"venv-mcp-{version}"
        rc, out = session.run(checked(f"python3 -m venv {shlex.quote(str(venv))}", "venv") + f'PATH={shlex.quote(str(venv / "bin"))}:"$PATH"\n'
                              + checked(cmd, session.name) + 'PATH="${PATH#*:}"\n', 600, label)
        session.python = str(venv / "bin/python")
        return ("PASS" if rc == 0 else "FAIL"), f"no e2e harness venv has mcp {version}: installed into {venv}\n{out}"

    def npm(self, version: str, cmd: str, session: Session, label: str) -> tuple[str, str]:
        modules = HARNESS_DIR / "node/node_modules"
        pkg = modules / "@modelcontextprotocol/sdk/package.json"
        if pkg.exists() and json.loads(pkg.read_text()).get("version") == version:
            session.node_modules = str(modules)
            return "PASS", f"@modelcontextprotocol/sdk {version} is the e2e harness's {modules} (tests/e2e/setup.sh, tests/e2e/npm/node/package-lock.json): not installed again"
        where = WORK / f"npm-sdk-{version}"
        where.mkdir(parents=True, exist_ok=True)
        rc, out = session.run(f"cd {shlex.quote(str(where))}\n" + checked(cmd, session.name) + 'cd "$OLDPWD"\n', 600, label)
        session.node_modules = str(where / "node_modules")
        return ("PASS" if rc == 0 else "FAIL"), f"the e2e harness has no @modelcontextprotocol/sdk {version}: installed into {where}\n{out}"


def snippet(unit: Unit, name: str) -> Path:
    d = WORK / "snippets" / f"{unit.file.replace('/', '_')}-L{unit.line}"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(unit.text)
    return d / name


def rust_covered() -> dict:
    """Markdown TOML blocks a Rust test loads: {(file, heading): "tests/api/x.rs::test"}."""
    found = {}
    for rs in sorted(ROOT.glob("tests/api/*.rs")):
        src = rs.read_text()
        for m in re.finditer(r'toml_block\(&(\w+), "([^"]+)"\)', src):
            fns = re.findall(r"fn (\w+)", src[: m.start()])
            md = re.search(rf'let {m.group(1)} = [^;]*"/([\w./-]+\.md)"', src[: m.start()])
            if fns and md:
                found[(md.group(1), m.group(2))] = f"{rs.relative_to(ROOT)}::{fns[-1]}"
    return found


def stop_servers():
    if WORK and (WORK / "servers").exists():
        subprocess.run(["bash", "-c", '. "$DC_WORK/lib.sh"; __dc_stop_servers'], env=dict(os.environ, DC_WORK=str(WORK)))


def timing_report(runner: Runner) -> list[str]:
    events = []
    path = WORK / "timing"
    if path.exists():
        for line in path.read_text().splitlines():
            kind, where, t = line.split()
            events.append((kind, where, float(t)))
    launch = next((e for e in events if e[0] == "launch"), None)
    if not launch or runner.first_call is None:
        return ["time to first tool call: not measured (no server start and client call passed)"]
    t0 = launch[2]
    running = next((e[2] for e in events if e[0] == "running" and e[1] == launch[1]), None)
    listening = next((e[2] for e in events if e[0] == "listening" and e[1] == launch[1]), None)
    total = runner.first_call - t0
    steps, builds = [], 0.0
    if running:  # cargo run: from the command to the binary's start
        steps.append(f"{launch[1]} cargo {running - t0:.1f} s")
        builds += running - t0
    if listening:
        steps.append(f"server start-up {listening - (running or t0):.1f} s")
    for unit, start, end in runner.spans:
        if start >= t0 and end <= runner.first_call and unit.kind == "block" and not SERVE.search(unit.text) and end - start >= 0.05:
            steps.append(f"{unit.where} {unit.lang} {end - start:.1f} s")
            if re.search(r"^cargo (build|run)\b", unit.text, re.M):
                builds += end - start
    return [f"time to first tool call: {total:.1f} s from a fresh data directory ({launch[1]} started) to the first "
            f"client snippet's tools/call answered; {total - builds:.1f} s of it not in cargo builds",
            f"  steps: {', '.join(steps)}"]


def inventory() -> int:
    """--list: every block and inline command, and what the check does with it (nothing is run)."""
    covered = rust_covered()
    for file in FILES:
        for u in parse(file):
            first = u.text.strip().split("\n")[0][:70]
            if u.kind == "inline":
                reason = skip_reason(u.text, SKIP_COMMANDS) or skip_reason(u.text, SKIP_ONE)
                how = f"skip: {reason}" if reason else "pin: use the harness or install" if PIP_PIN.match(u.text) or NPM_PIN.match(u.text) else "run in the session"
            elif u.lang in LANG_SKIPS:
                how = f"skip: {LANG_SKIPS[u.lang]}"
            elif u.lang in SH_LANGS:
                body, notes, reason = shell_body(u, None)
                how = f"skip: {reason}" if reason else "run" + ("".join(f"; {n}" for n in notes))
            elif u.lang == "toml":
                how = f"skip: covered by {covered[(u.file, u.heading)]}" if (u.file, u.heading) in covered else "toolgate check-config"
            elif u.lang == "python":
                how = f"saved and run with `{u.run}`, the pinned mcp's venv activated"
            elif u.lang in JS_LANGS:
                how = f"saved and run with `{u.run}`, the pinned SDK in node_modules"
            else:
                how = "FAIL: no rule"
            print(f"{u.where:<26} {u.lang:<7} {first!r}\n{'':<26} -> {how}")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--list"]:
        global WORK
        WORK = Path("/nonexistent")
        return inventory()
    if not WORK:
        print("run tests/docs_check.sh, not this file", file=sys.stderr)
        return 2
    # SIGTERM (tests/docs_check.sh passing one on, or its timeout): unwind, so that `finally` stops
    # the servers started so far
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    (WORK / "lib.sh").write_text(LIB)
    (WORK / "servers").write_text("")
    (WORK / "fresh").mkdir(exist_ok=True)
    before = {p: (ROOT / p).exists() for p in ("data", ".toolgate", "client.py", "client.mjs", "toolgate.toml")}
    runner = Runner()
    print(f"[docs] files: {', '.join(FILES)}; fresh state in {WORK / 'fresh'}; e2e harness {HARNESS_DIR}", flush=True)
    started = time.time()
    try:
        readme = runner.run_file("README.md", runner.base_env)
        # the deploy guides follow the README's steps: its PATH (the release build) carries over
        env = dict(runner.base_env, PATH=readme.final_env("PATH") or runner.base_env["PATH"])
        for file in FILES[1:]:
            runner.run_file(file, env)
    finally:
        stop_servers()
    for p, existed in before.items():
        if not existed and (ROOT / p).exists():
            print(f"FAIL  the docs check wrote {p} into the repository (state must stay in the fresh directory)")
            runner.results.append(Result("FAIL", Unit("", 0, "", "", "", ""), p))
    passed = sum(r.status == "PASS" for r in runner.results)
    failed = sum(r.status == "FAIL" for r in runner.results)
    skipped = sum(r.status == "SKIP" for r in runner.results)
    for line in timing_report(runner):
        print(line)
    if failed:
        print("failed: " + ", ".join(r.unit.where or r.detail for r in runner.results if r.status == "FAIL"))
    print(f"{skipped} skipped (reasons above); {time.time() - started:.0f} s")
    print(f"docs: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
