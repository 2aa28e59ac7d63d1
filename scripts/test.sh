#!/usr/bin/env bash
# Runs the whole test suite (the README's test command).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v tshark >/dev/null 2>&1; then
    echo "warning: tshark is not installed; capture tests will fail. Install it: apt-get install -y tshark" >&2
fi
# The independent peers (Bumble, RootCanal) in a pinned venv. Without them only the interop
# tests fail, each naming this setup step.
bash scripts/setup-interop.sh || echo "warning: interop setup failed; run: bash scripts/setup-interop.sh" >&2

swift build --build-tests || exit 1
log=$(mktemp)
# One test at a time: on 2 cores Swift Testing's parallel runs put long blocking tests (peers
# in real time, child processes) on both threads of the cooperative pool, and async tests
# waiting there for a thread to resume on ran into their time limits. Serial costs ~50 s.
swift test --skip-build --no-parallel 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# The benchmarks keep working: a few-second smoke run of every workload (debug build, tiny
# counts, Bumble's side too when .venv has it). Its figures mean nothing; no timing is checked.
echo "== cbbench smoke run"
if ! { swift build --product cbbench && .build/debug/cbbench --smoke --json; }; then
    echo "cbbench smoke run failed" >&2
    status=1
fi
# The delegate lint over the examples, as porting developers run it (LintTests also checks it
# finds every mistake planted in Tests/CBToolTests/LintSamples).
echo "== cbtool lint Examples/"
if ! .build/debug/cbtool lint Examples; then
    echo "cbtool lint found delegate methods that will never be called in Examples/" >&2
    status=1
fi
# One plain closing line with the Swift Testing totals, last (the XCTest runner, which has no
# tests here, prints "Executed 0 tests" first).
total=$(grep -oE 'Test run with [0-9]+ tests?' "$log" | tail -1 | grep -oE '[0-9]+')
failed=$(grep -cE '^✘ Test .*(failed|with [0-9]+ test cases failed)' "$log")
# The failures again, at the end, where a reader of CI's last lines sees them.
if [ "$failed" -gt 0 ]; then
    echo "== failed:"
    grep -E '^✘ Test .*(failed|recorded an issue)' "$log" | grep -vE '^✘ Test run with' | cut -c1-400
fi
rm -f "$log"
if [ -n "$total" ]; then
    echo "swift-testing: $((total - failed)) passed, $failed failed"
fi
exit "$status"
