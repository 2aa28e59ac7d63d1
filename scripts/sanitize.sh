#!/usr/bin/env bash
# Runs test suites under a sanitizer: scripts/sanitize.sh [thread|address] [FILTER...]
#
#   thread   the thread sanitizer over the suites whose code crosses threads (the default list
#            below: the API, its async layer, the examples, the loops, the transports, cbtool,
#            the daemon, and the bond and identifier stores' multi-process tests, whose writer
#            process is instrumented too); CI runs this.
#   address  the address sanitizer over the whole suite (or the FILTERs given).
#
# FILTERs are `swift test --filter` patterns (a suite, `Module.Suite`, a test). Each sanitizer
# builds into its own scratch path (.build-tsan, .build-asan; gitignored), so the ordinary
# .build is left alone. Exits non-zero when a test fails or the sanitizer reports anything —
# in the test process or in a child it starts (cbtool, corebluetoothd, the stress writer):
# every report goes to a file under a fresh directory (the sanitizer's `log_path`), and any
# file there fails the run, its reports printed. Suppressions: scripts/tsan-suppressions.txt,
# only for reports proven to be in the toolchain, Foundation or libdispatch.
set -uo pipefail
cd "$(dirname "$0")/.."

kind=${1:-thread}
[ $# -gt 0 ] && shift
case "$kind" in
thread)
    scratch=.build-tsan
    default_filters=(CoreBluetoothTests CoreBluetoothAsyncTests ExampleAppsTests SchedulingTests HCITransportTests
        CBToolTests CoreBluetoothDaemonTests BondingTests.KillTests twoProcessesWritingAtOnceLoseNothing)
    ;;
address)
    scratch=.build-asan
    default_filters=()
    ;;
*)
    echo "usage: scripts/sanitize.sh [thread|address] [FILTER...]" >&2
    exit 2
    ;;
esac
filters=("$@")
[ ${#filters[@]} -eq 0 ] && filters=("${default_filters[@]}")

reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
# A report does not stop the run (every report of the run is worth seeing); the files under
# $reports fail it at the end. The sanitizer's own exit code (66) fails it too.
supp="$PWD/scripts/tsan-suppressions.txt"
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 log_path=$reports/report suppressions=$supp history_size=4 ${TSAN_OPTIONS:-}"
# Leak checking is off: the Swift runtime's metadata caches and the suite's process-wide
# singletons are never freed by design and would drown real findings.
export ASAN_OPTIONS="halt_on_error=0 detect_leaks=0 log_path=$reports/report ${ASAN_OPTIONS:-}"

echo "== $kind sanitizer: building into $scratch"
start=$(date +%s)
if ! swift build --build-tests --sanitize="$kind" --scratch-path "$scratch"; then
    echo "sanitize.sh: the $kind-sanitized build failed" >&2
    exit 1
fi
built=$(date +%s)
echo "== build: $((built - start)) s"

args=()
for f in "${filters[@]}"; do args+=(--filter "$f"); done
echo "== $kind sanitizer: swift test ${args[*]:-(whole suite)}"
log=$(mktemp)
swift test --skip-build --no-parallel --sanitize="$kind" --scratch-path "$scratch" ${args[@]+"${args[@]}"} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "== tests: $(($(date +%s) - built)) s, exit $status"

# A test that failed (not a sanitizer report: those fail the run below whatever happens) is
# named here, at the end where CI's tail shows it, and run once more alone. The sanitizer slows
# code 5-15 times, which stretches a timing-sensitive test past what it allows; the plain suite
# (scripts/test.sh) runs every test without a second chance. A crash, or a failure that cannot
# be named as a `--filter`, is not retried.
if [ "$status" -ne 0 ]; then
    failed=$(grep -E '^✘ Test .* failed' "$log" | grep -vE '^✘ Test run with' || true)
    echo "== $kind sanitizer: failed tests:" >&2
    echo "${failed:-  (none named: the test process ended abnormally)}" >&2
    names=$(echo "$failed" | sed -nE 's/^✘ Test ([A-Za-z_][A-Za-z0-9_]*)\(.*\) failed.*/\1/p' | sort -u)
    unnamed=$(echo "$failed" | grep -cvE '^✘ Test [A-Za-z_][A-Za-z0-9_]*\(.*\) failed' || true)
    if [ -n "$failed" ] && [ "$unnamed" -eq 0 ]; then
        retry=()
        for n in $names; do retry+=(--filter "/$n\\("); done
        echo "== $kind sanitizer: once more: swift test ${retry[*]}"
        swift test --skip-build --no-parallel --sanitize="$kind" --scratch-path "$scratch" "${retry[@]}" 2>&1 | tail -20
        if [ "${PIPESTATUS[0]}" -eq 0 ]; then
            echo "== $kind sanitizer: passed alone, counted as slowed by the sanitizer (named above)" >&2
            status=0
        fi
    fi
fi
rm -f "$log"

if compgen -G "$reports/report*" >/dev/null; then
    n=$(cat "$reports"/report* | grep -cE '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: AddressSanitizer)')
    echo "== $kind sanitizer: $n report(s)" >&2
    cat "$reports"/report* >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "sanitize.sh: tests failed under the $kind sanitizer (exit $status)" >&2
    exit 1
fi
echo "== $kind sanitizer: no reports"
