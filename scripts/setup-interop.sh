#!/usr/bin/env bash
# Creates .venv with the independent stacks the interop tests run against, pinned:
# Bumble (host + virtual controller) and RootCanal (Google's virtual controller).
set -euo pipefail
cd "$(dirname "$0")/.."
want="bumble==0.0.236 rootcanal==1.10.0"
if [ -x .venv/bin/python ] && .venv/bin/python -m pip freeze 2>/dev/null | grep -qx "bumble==0.0.236" \
    && .venv/bin/python -m pip freeze 2>/dev/null | grep -qx "rootcanal==1.10.0"; then
    exit 0
fi
command -v python3 >/dev/null || { echo "setup-interop: python3 is needed for the interop tests" >&2; exit 1; }
echo "== creating .venv with $want"
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check $want
