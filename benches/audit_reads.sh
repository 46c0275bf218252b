#!/usr/bin/env bash
# The audit log's reads on a large SQLite table (issue 31: "the reads the admin API and `audit
# query` need keep working and fast; give their p50 on a table of 10 million records"). For ONE
# toolgate binary: a fresh data directory migrated by it (so the schema is that binary's), ROWS
# records written straight into audit_log (python3's sqlite3: 30 days ending now, in time order,
# 200 subjects, 40 tools, ~90% ok, UUIDv7 ids whose millisecond prefix is the record's time),
# then p50 and p90 over N runs (after one warm-up) of five `toolgate audit query` reads (limit 100;
# one 1000; oldest first; a CLI process each, start-up included) and four `GET /admin/audit` reads
# (newest first; `toolgate serve` with auth off and the admin listener on loopback; curl's
# time_total). With UPGRADE_FROM=<older binary> the records are written in that binary's layout
# and `BIN migrate` (the upgrade of ROWS records) is timed and its row count checked first.
#
#   benches/audit_reads.sh BIN
#   UPGRADE_FROM=/tmp/tg-base/toolgate benches/audit_reads.sh /tmp/tg-new1/toolgate
#
# Environment: ROWS [10000000], N [15], UPGRADE_FROM (unset: no upgrade), BENCH_HOME [/tmp]
# (the data directory goes under it: GBs at 10M rows), KEEP=1 keeps it, PORT [18831],
# ADMIN_PORT [18832]. The fill runs under `nice`; the reads do not, so run on a quiet machine.
set -uo pipefail

[[ $# -eq 1 && -x $1 ]] || { sed -n '2,18s/^# \{0,1\}//p' "$0" >&2; exit 2; }
BIN=$(realpath "$1")
ROWS=${ROWS:-10000000} N=${N:-15} PORT=${PORT:-18831} ADMIN_PORT=${ADMIN_PORT:-18832}
OLD=${UPGRADE_FROM:+$(realpath "$UPGRADE_FROM")}
[[ -z $OLD || -x $OLD ]] || { echo "audit_reads.sh: UPGRADE_FROM=$UPGRADE_FROM is not executable" >&2; exit 2; }
for port in "$PORT" "$ADMIN_PORT"; do
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then echo "audit_reads.sh: port $port already serves; not measuring" >&2; exit 2; fi
done

data=$(mktemp -d "${BENCH_HOME:-/tmp}/audit-reads.XXXXXX") || exit 1
pid=
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $data"; else rm -rf "$data"; fi
}
trap cleanup EXIT
# Every command reads its settings from here alone (cwd = the data directory, so no stray
# toolgate.toml is picked up); auth off, so the admin API needs no token (loopback only).
export TOOLGATE__STORAGE__DATA_DIR=$data TOOLGATE__LOG__FILTER=warn TOOLGATE__AUTH__MODE=off
cd "$data" || exit 1
db=$data/toolgate.db
say() { printf '%s\n' "$*"; }
now() { printf '%s' "$EPOCHREALTIME"; }
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
size() { du -h --apparent-size "$1" | cut -f1; }

say "binary: $BIN ($("$BIN" --version 2>/dev/null))${OLD:+, filled by $OLD}; ROWS=$ROWS N=$N; $(uptime | sed 's/.*load/load/')"
"${OLD:-$BIN}" migrate >/dev/null || { echo "audit_reads.sh: migrate failed" >&2; exit 1; }

# ---- fill ----------------------------------------------------------------------------------
# One INSERT … SELECT over a recursive CTE per million rows. The CTE carries two random() per
# row (a, b): a recursive CTE's rows are stored once, so every field derived from a or b is
# consistent wherever SQLite re-evaluates it (the time and the id's millisecond prefix); single-use
# values call random()/randomblob() in place. The id's last 32 bits are the row number, so ids are
# unique by construction and still valid UUIDv7 (version 7, variant 10, RFC 9562's counter bits).
nice -n 10 python3 - "$db" "$ROWS" >"$data/fill.env" <<'PY' || { echo "audit_reads.sh: fill failed" >&2; exit 1; }
import os, sqlite3, sys, time

db, rows = sys.argv[1], int(sys.argv[2])
con = sqlite3.connect(db, isolation_level=None)
cols = {r[1]: r[2].upper() for r in con.execute("PRAGMA table_info(audit_log)")}
compact = cols["time"] == "INTEGER"   # the new layout: time µs INTEGER, id BLOB(16)
if compact:
    # SQLite 3.40 has no unhex() (3.41 does); the id is built as hex text either way.
    con.create_function("unhex", 1, bytes.fromhex, deterministic=True)
# journal off while filling (one writer, a throwaway file); WAL again at the end, as toolgate keeps it.
con.execute("PRAGMA journal_mode=OFF")
con.execute("PRAGMA synchronous=OFF")
con.execute("PRAGMA cache_size=-262144")

span_us = 30 * 86400 * 1_000_000
step = span_us // rows                       # mean gap between records (259 ms at 10M)
end_us = time.time_ns() // 1000
start_us = end_us - step * rows
tools = ["github_search_issues", "github_get_pull_request", "github_create_issue", "jira_search", "jira_get_issue",
         "jira_add_comment", "confluence_search", "confluence_get_page", "slack_post_message", "slack_search",
         "gdrive_search", "gdrive_read_file", "postgres_query", "postgres_list_tables", "s3_list_objects",
         "s3_get_object", "http_fetch", "web_search", "weather_forecast", "calendar_list_events",
         "calendar_create_event", "email_send", "email_search", "crm_lookup_account", "crm_update_opportunity",
         "zendesk_get_ticket", "zendesk_reply", "pagerduty_incidents", "grafana_query", "k8s_get_pods",
         "k8s_logs", "sentry_issues", "notion_search", "notion_get_page", "linear_create_issue",
         "linear_search", "figma_get_file", "stripe_get_invoice", "translate_text", "summarize_document"]
assert len(tools) == 40
W = max(map(len, tools))
packed = "".join(t.ljust(W) for t in tools)

def subject(s):   # the SQL below builds the same text for subject number s
    return "auth0|%08x%08x%08x" % ((s + 1) * 2654435761 % 4294967296, (s + 7) * 40503 % 4294967296,
                                   (s + 3) * 2246822519 % 4294967296)

us = "(:start + r.i * :step + (r.a & 4294967295) % :step)"
ms_hex = f"printf('%012x', {us} / 1000)"
id_hex = (f"{ms_hex} || printf('7%03x%04x%04x%08x', r.a >> 32 & 4095, 32768 | (r.a >> 44 & 16383), "
          "r.b >> 48 & 65535, r.i)")
if compact:
    id_sql, time_sql = f"unhex({id_hex})", us
else:
    id_sql = (f"substr({id_hex}, 1, 8) || '-' || substr({id_hex}, 9, 4) || '-' || substr({id_hex}, 13, 4) || '-' "
              f"|| substr({id_hex}, 17, 4) || '-' || substr({id_hex}, 21, 12)")
    time_sql = f"strftime('%Y-%m-%dT%H:%M:%S', {us} / 1000000, 'unixepoch') || printf('.%06dZ', {us} % 1000000)"
# Outcomes per mille: ok 900, tool_error 40, denied 20 (auth_failure 10, authz_denied 10),
# rate_limited 15, timeout 12, invalid_input 8, internal_error 3, cancelled 2.
o = "(r.a >> 20 & 1023) % 1000"
outcome = (f"CASE WHEN {o} < 900 THEN 'ok' WHEN {o} < 940 THEN 'tool_error' WHEN {o} < 960 THEN 'denied' "
           f"WHEN {o} < 975 THEN 'rate_limited' WHEN {o} < 987 THEN 'timeout' WHEN {o} < 995 THEN 'invalid_input' "
           f"WHEN {o} < 998 THEN 'internal_error' ELSE 'cancelled' END")
kind = (f"CASE WHEN {o} >= 940 AND {o} < 950 THEN 'auth_failure' WHEN {o} >= 950 AND {o} < 960 THEN 'authz_denied' "
        f"WHEN {o} >= 960 AND {o} < 975 THEN 'rate_limited' ELSE 'tool_call' END")
authn = f"NOT ({o} >= 940 AND {o} < 950)"   # an authentication failure has no principal
s = "((r.b & 65535) % 200)"
t = "((r.b >> 16 & 65535) % 40)"
tool_call = f"({o} < 940 OR {o} >= 975)"
values = {
    "id": id_sql,
    "time": time_sql,
    "request_id": "CASE WHEN r.b >> 32 & 3 THEN lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || "
                  "substr(hex(randomblob(2)), 2) || '-a' || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))) END",
    "session_id": "CASE WHEN r.b >> 34 & 1 THEN lower(hex(randomblob(16))) END",
    "issuer": f"CASE WHEN {authn} THEN 'https://acme.eu.auth0.com/' END",
    "subject": f"CASE WHEN {authn} THEN printf('auth0|%08x%08x%08x', ({s} + 1) * 2654435761 % 4294967296, "
               f"({s} + 7) * 40503 % 4294967296, ({s} + 3) * 2246822519 % 4294967296) END",
    "client_id": f"CASE WHEN {authn} THEN CASE {s} % 4 WHEN 0 THEN 'claude-desktop' WHEN 1 THEN 'cursor' "
                 "WHEN 2 THEN '3f2b8c1e-9a4d-4e7b-8c21-5d6f7a8b9c0d' ELSE 'acme-support-agent' END END",
    "client_ip": f"'10.' || ({s} % 16) || '.' || (r.b >> 36 & 255) || '.' || (r.b >> 44 & 255)",
    "kind": kind,
    "tool": f"CASE WHEN {authn} THEN rtrim(substr(:tools, {t} * {W} + 1, {W})) END",
    "args_sha256": f"CASE WHEN {tool_call} THEN lower(hex(randomblob(32))) END",
    "arguments": "NULL",
    "outcome": outcome,
    "detail": (f"CASE WHEN {o} < 900 THEN NULL WHEN {o} < 940 THEN 'upstream returned HTTP 502' "
               f"WHEN {o} < 950 THEN 'token expired' WHEN {o} < 960 THEN 'missing scope mcp:tools' "
               f"WHEN {o} < 975 THEN 'per-client request limit' WHEN {o} < 987 THEN 'tool timed out after 30 s' "
               f"WHEN {o} < 995 THEN 'arguments do not match the input schema' ELSE 'internal error' END"),
    "duration_ms": f"CASE WHEN {tool_call} THEN (random() & 1023) * (random() & 1023) / 256 + 1 END",
    "result_bytes": f"CASE WHEN {o} < 900 THEN (random() & 65535) * (random() & 15) / 8 + 64 END",
    "replica_id": "'toolgate-7d9f8c6b5-' || CASE r.b >> 40 & 3 WHEN 0 THEN 'x2kqp' WHEN 1 THEN 'm8zrt' ELSE 'c4wvd' END",
    "trace_id": "CASE WHEN r.b >> 52 & 1 THEN lower(hex(randomblob(16))) END",
    "server": "NULL",
}
names = [c for c in values if c in cols]
missing = set(cols) - set(names)
assert not missing, f"columns this fill does not know: {missing}"
sql = (f"WITH RECURSIVE r(i, a, b) AS (SELECT :lo, random(), random() UNION ALL "
       f"SELECT i + 1, random(), random() FROM r WHERE i + 1 < :hi) "
       f"INSERT INTO audit_log ({', '.join(names)}) SELECT {', '.join(values[c] for c in names)} FROM r")
chunk = 1_000_000
began = time.monotonic()
for lo in range(0, rows, chunk):
    hi = min(rows, lo + chunk)
    con.execute("BEGIN")
    con.execute(sql, {"lo": lo, "hi": hi, "start": start_us, "step": step, "tools": packed})
    con.execute("COMMIT")
    el = time.monotonic() - began
    print(f"  filled {hi:>10,} rows, {hi / el:,.0f} rows/s", file=sys.stderr)
fill_s = time.monotonic() - began
count = con.execute("SELECT count(*) FROM audit_log").fetchone()[0]
assert count == rows, (count, rows)
# Spot checks: the id's millisecond prefix is the time's, the id is a UUIDv7, the ids are unique.
if compact:
    bad = con.execute("SELECT count(*) FROM (SELECT * FROM audit_log LIMIT 100000) "
                      "WHERE length(id) != 16 OR hex(substr(id, 1, 6)) != printf('%012X', time / 1000) "
                      "OR substr(hex(id), 13, 1) != '7' OR substr(hex(id), 17, 1) NOT IN ('8', '9', 'A', 'B')").fetchone()[0]
else:
    bad = con.execute("SELECT count(*) FROM (SELECT * FROM audit_log LIMIT 100000) "
                      "WHERE length(id) != 36 OR replace(substr(id, 1, 13), '-', '') != "
                      "printf('%012x', (unixepoch(substr(time, 1, 19)) * 1000000 + CAST(substr(time, 21, 6) AS INTEGER)) / 1000) "
                      "OR substr(id, 15, 1) != '7' OR substr(id, 20, 1) NOT IN ('8', '9', 'a', 'b')").fetchone()[0]
assert bad == 0, f"{bad} malformed ids"
con.execute("PRAGMA journal_mode=WAL")
con.close()
print(f"FILL_RATE={rows / fill_s:.0f} FILL_S={fill_s:.0f} END={end_us // 1_000_000} LAYOUT={'compact' if compact else 'text'} "
      f"SUBJECT='{subject(17)}' TOOL={tools[5]}")
PY
# shellcheck disable=SC1091
source "$data/fill.env"
say "fill: $ROWS rows ($LAYOUT layout) in ${FILL_S} s, $FILL_RATE rows/s; $db $(size "$db")"

db_stats() {  # file size, and the pages in use (a dropped table's pages stay in the file as free pages)
  python3 - "$db" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
ps, pc, fc = (con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count", "freelist_count"))
n = con.execute("SELECT count(*) FROM audit_log").fetchone()[0]
t = con.execute("SELECT typeof(time) FROM audit_log LIMIT 1").fetchone()[0]
print(f"{n} {t} {pc * ps / 2**30:.2f} {(pc - fc) * ps / 2**30:.2f}")
PY
}

read -r count type file_gb used_gb < <(db_stats)
say "db: $count rows (time $type), file ${file_gb} GiB, ${used_gb} GiB in use"

# ---- upgrade -------------------------------------------------------------------------------
if [[ -n $OLD ]]; then
  t0=$(now)
  "$BIN" migrate >/dev/null || { echo "audit_reads.sh: $BIN migrate failed on the old layout" >&2; exit 1; }
  took=$(ms_since "$t0")
  read -r count type file_gb used_gb < <(db_stats)
  say "upgrade: $BIN migrate took $(awk -v m="$took" 'BEGIN { printf "%.1f s", m / 1000 }') for $ROWS rows; after it $count rows (time $type), file ${file_gb} GiB, ${used_gb} GiB in use"
  [[ $count -eq $ROWS ]] || { echo "audit_reads.sh: row count changed by the upgrade: $ROWS -> $count" >&2; exit 1; }
fi

# ---- reads ---------------------------------------------------------------------------------
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# Windows from the end of the data (not from now: an upgrade may have taken minutes).
H1=$(iso $((END - 3600))) D1=$(iso $((END - 86400))) D2=$(iso $((END - 2 * 86400)))

# p50 and p90 (nearest rank) of the numbers on stdin, in ms.
pcts() { sort -g | awk '{ v[NR] = $1 } END { p50 = int((NR * 50 + 99) / 100); p90 = int((NR * 90 + 99) / 100); printf "%8.1f %8.1f", v[p50], v[p90] }'; }
row() { printf '%-50s %6s %8s %8s\n' "$@"; }
row "query" "rows" "p50 ms" "p90 ms"

cli() {  # label, then the filter arguments
  local label=$1 got t0 i
  shift
  got=$("$BIN" audit query "$@" | wc -l)  # the warm-up, and what it returns
  for ((i = 0; i < N; i++)); do
    t0=$(now)
    "$BIN" audit query "$@" >/dev/null
    ms_since "$t0"
    echo
  done | pcts | { read -r p50 p90; row "$label" "$got" "$p50" "$p90"; }
}
cli "cli: --since 1h ago" --limit 100 --since "$H1"
cli "cli: --subject S (oldest 100)" --limit 100 --subject "$SUBJECT"
cli "cli: --tool T --since 1d ago" --limit 100 --tool "$TOOL" --since "$D1"
cli "cli: --outcome denied" --limit 100 --outcome denied
cli "cli: --since 2d ago --until 1d ago --limit 1000" --limit 1000 --since "$D2" --until "$D1"

TOOLGATE__SERVER__BIND=127.0.0.1:$PORT TOOLGATE__ADMIN__ENABLED=true TOOLGATE__ADMIN__BIND=127.0.0.1:$ADMIN_PORT \
  "$BIN" serve >"$data/server.log" 2>&1 &
pid=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" || { echo "audit_reads.sh: $BIN serve did not start:" >&2; tail -5 "$data/server.log" >&2; exit 1; }

api() {  # label, query string
  local label=$1 url="http://127.0.0.1:$ADMIN_PORT/admin/audit?$2" got i
  got=$(curl -sf "$url" | jq '.records | length') || { echo "audit_reads.sh: GET $url failed" >&2; return; }
  for ((i = 0; i < N; i++)); do
    curl -s -o /dev/null -w '%{time_total}\n' "$url" | awk '{ printf "%.3f\n", $1 * 1000 }'
  done | pcts | { read -r p50 p90; row "$label" "$got" "$p50" "$p90"; }
}
enc() { jq -rn --arg v "$1" '$v | @uri'; }
api "api: ?limit=100" "limit=100"
api "api: ?subject=S&limit=100" "subject=$(enc "$SUBJECT")&limit=100"
api "api: ?tool=T&limit=100" "tool=$TOOL&limit=100"
api "api: ?outcome=denied&limit=100" "outcome=denied&limit=100"
say "subject S = $SUBJECT, tool T = $TOOL; data ends $(iso "$END"); $(uptime | sed 's/.*load/load/')"
