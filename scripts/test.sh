#!/usr/bin/env bash
# Runs the whole test suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tshark >/dev/null 2>&1; then
    echo "warning: tshark is not installed; capture tests will fail. Install it: apt-get install -y tshark" >&2
fi
# The independent peers (Bumble, RootCanal) in a pinned venv.
bash scripts/setup-interop.sh
swift build --build-tests
swift test --skip-build
