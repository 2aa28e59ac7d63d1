#!/usr/bin/env bash
# The Core Bluetooth suite and the example apps' suite again, with every manager on a daemon
# (CB_TEST_ON_DAEMON=1): each manager that would own a virtual controller is served by a
# corebluetoothd server of its own in the test process, over a real Unix socket, so every call
# and event crosses the wire protocol (docs/daemon.md, "The suites on a daemon"). Reuses the
# debug build scripts/test.sh made (same flags: no rebuild when it is current).
set -uo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests || exit 1
log=$(mktemp)
start=$(date +%s)
# One test at a time, as scripts/test.sh (long blocking tests and the cooperative pool).
CB_TEST_ON_DAEMON=1 swift test --skip-build --no-parallel --filter 'CoreBluetoothTests|ExampleAppsTests' 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
total=$(grep -oE 'Test run with [0-9]+ tests?' "$log" | tail -1 | grep -oE '[0-9]+')
failed=$(grep -cE '^✘ Test .*(failed|with [0-9]+ test cases failed)' "$log")
skipped=$(grep -cE '^➜ Test .* skipped' "$log")
if [ "$failed" -gt 0 ]; then
    echo "== failed on a daemon:"
    grep -E '^✘ Test .*(failed|recorded an issue)' "$log" | grep -vE '^✘ Test run with' | cut -c1-400
fi
rm -f "$log"
if [ -n "$total" ]; then
    echo "swift-testing on a daemon: $((total - failed - skipped)) passed, $failed failed, $skipped skipped (docs/daemon.md says why), $(($(date +%s) - start)) s"
fi
exit "$status"
