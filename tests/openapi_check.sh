#!/usr/bin/env bash
# Checks deploy/admin/openapi.yaml, the admin API's OpenAPI 3.1 description:
#   1. it is a valid OpenAPI 3.1 document (openapi-spec-validator, from PyPI);
#   2. it describes exactly the routes and methods src/admin/mod.rs serves (no drift);
#   3. every example in it is valid against the schema beside it.
# Exits non-zero on any problem. The validator is installed once, pinned, into a venv under
# $OPENAPI_CHECK_DIR (default ~/.cache/toolgate-openapi-check); later runs work offline.
#
#   tests/openapi_check.sh [spec.yaml]     (default deploy/admin/openapi.yaml)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
SPEC="${1:-deploy/admin/openapi.yaml}"
ROUTER=src/admin/mod.rs
VENV="${OPENAPI_CHECK_DIR:-$HOME/.cache/toolgate-openapi-check}/venv"
PYTHON="${PYTHON:-python3}"

# Pinned, with the transitive dependencies, so a check passes or fails for the same reasons
# everywhere.
REQUIREMENTS='openapi-spec-validator==0.9.0
openapi-schema-validator==0.9.0
jsonschema==4.26.0
jsonschema-path==0.5.0
jsonschema-specifications==2025.9.1
referencing==0.37.0
rpds-py==2026.9.1
attrs==26.1.0
PyYAML==6.0.3
pathable==0.6.0
lazy-object-proxy==1.13.0
rfc3339-validator==0.1.4
six==1.17.0
pydantic==2.14.3
pydantic-settings==2.16.3
pydantic_core==2.50.4
python-dotenv==1.2.4
annotated-types==0.8.0
typing-inspection==0.4.5
typing_extensions==4.16.0'

log() { printf '[openapi check] %s\n' "$*" >&2; }

marker="$VENV/.toolgate-requirements"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$marker" 2>/dev/null)" != "$REQUIREMENTS" ]; then
  log "installing openapi-spec-validator into $VENV"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  printf '%s\n' "$REQUIREMENTS" >"$VENV/requirements.txt"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$VENV/requirements.txt"
  printf '%s' "$REQUIREMENTS" >"$marker"
fi

log "1/3 OpenAPI 3.1 validity"
"$VENV/bin/openapi-spec-validator" --schema 3.1 "$SPEC"

log "2/3 routes match $ROUTER; 3/3 examples match their schemas"
"$VENV/bin/python" - "$SPEC" "$ROUTER" <<'PY'
import re
import sys

import yaml
from openapi_schema_validator import OAS31Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

spec_path, router_path = sys.argv[1], sys.argv[2]
spec = yaml.safe_load(open(spec_path, encoding="utf-8"))
problems = []

# Routes: `.route("<path>", get(..).post(..))` lines in the router.
served = set()
for path, methods in re.findall(r'\.route\(\s*"([^"]+)",\s*([^\n]*)', open(router_path, encoding="utf-8").read()):
    for method in re.findall(r"\b(get|post|put|delete|patch)\(", methods):
        served.add((path, method))
documented = {
    (path, method)
    for path, item in spec.get("paths", {}).items()
    for method in item
    if method in ("get", "post", "put", "delete", "patch")
}
for path, method in sorted(served - documented):
    problems.append(f"{method.upper()} {path} is served but not described")
for path, method in sorted(documented - served):
    problems.append(f"{method.upper()} {path} is described but not served")
if not served:
    problems.append(f"no routes found in {router_path}: has the router's shape changed?")

# Examples: every object holding `schema` and `example`/`examples` (media types).
base = "urn:toolgate:admin-openapi"
registry = Registry().with_resource(base, Resource.from_contents(spec, default_specification=DRAFT202012))


def pointer(parts):
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def check(node, where):
    if isinstance(node, dict):
        if "schema" in node and ("example" in node or "examples" in node):
            validator = OAS31Validator({"$ref": f"{base}#{pointer(where + ['schema'])}"}, registry=registry)
            examples = [("example", node["example"])] if "example" in node else []
            examples += [(f"examples.{k}", v.get("value")) for k, v in node.get("examples", {}).items()]
            for label, value in examples:
                for error in validator.iter_errors(value):
                    at = "/".join(str(p) for p in error.absolute_path) or "(root)"
                    problems.append(f"{pointer(where)} {label} at {at}: {error.message}")
        for key, value in node.items():
            check(value, where + [key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            check(value, where + [i])


check(spec, [])
for p in problems:
    print(f"openapi check: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"{spec_path}: {len(documented)} operations, all served, examples valid")
PY
log "ok"
