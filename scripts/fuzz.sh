#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/Targets (one per decoder or state machine fed by outside
# bytes; FUZZING.md lists them) and runs each for SECONDS (default 60), one after another.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. bash scripts/fuzz.sh 10, bash scripts/fuzz.sh 600 smp
#
# How: the package's library targets are built with the address sanitizer and libFuzzer's
# coverage into their own scratch path (.build-fuzz), then `swiftc` links each harness with
# `-sanitize=fuzzer,address` (libFuzzer supplies `main`). Nothing of this is in Package.swift,
# so the package stays usable as a dependency (no unsafe flags in its targets).
#
# Each target starts from its seeds (Fuzz/corpus/<target>, committed) plus what earlier runs
# found (.build-fuzz/corpus/<target>, kept locally). A crash or sanitizer report stops that
# target; its input is kept as Fuzz/findings/<target>-crash-<sha1> and the script exits 1
# after running the others. Reproduce one with: .build-fuzz/fuzzers/<target> <input>.
# FUZZ_JOBS_NICE=1 runs the fuzzers under `nice -n 10` (on a shared machine); FUZZ_RUNS=N stops
# a target after N executions if that comes before SECONDS. Every run is logged (time, target,
# executions, result) in .build-fuzz/runs.tsv, where FUZZING.md's counts come from.
# FUZZ_NO_BUILD=1 runs the fuzzers as they were last built (long campaigns in chunks: the no-op
# `swift build` of every module takes minutes on a loaded machine); a missing one is an error.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
# FUZZ_CONFIG=release builds optimised (with -enable-testing, for the harnesses' @testable
# imports) into .build-fuzz-release: several times the executions per second of the debug build,
# for long campaigns; CI and quick runs use the debug build, which builds faster.
config=${FUZZ_CONFIG:-debug}
case "$config" in
    debug) scratch=.build-fuzz; optimise=(-Onone) ;;
    release) scratch=.build-fuzz-release; optimise=(-O) ;;
    *) echo "fuzz: FUZZ_CONFIG is debug or release" >&2; exit 2 ;;
esac
build_config=(-c "$config")
[ "$config" = release ] && build_config+=(-Xswiftc -enable-testing)
coverage=edge,inline-8bit-counters,pc-table,trace-cmp
if [ $# -gt 0 ]; then targets=("$@"); else
    targets=()
    for f in Fuzz/Targets/*.swift; do targets+=("$(basename "$f" .swift)"); done
fi

# 1. The library targets the harnesses import, instrumented (incremental after the first time).
# Every harness's modules, even when running a few targets: each harness links every library
# object of the build, and none may be left from an older tree.
for target in "${targets[@]}"; do
    [ -f "Fuzz/Targets/$target.swift" ] || { echo "fuzz: no target $target in Fuzz/Targets" >&2; exit 2; }
done
modules=$(cat Fuzz/Targets/*.swift 2>/dev/null | sed -n 's/^\(@testable \)\{0,1\}import \([A-Za-z0-9_]*\)$/\2/p' \
    | grep -vx Foundation | sort -u)
[ -n "$modules" ] || { echo "fuzz: no harness in Fuzz/Targets" >&2; exit 2; }
start=$(date +%s)
mkdir -p "$scratch"
no_build=${FUZZ_NO_BUILD:-0}
[ "$no_build" = 1 ] && modules=
for module in $modules; do
    if ! swift build "${build_config[@]}" --target "$module" --sanitize=address -Xswiftc "-sanitize-coverage=$coverage" \
        --scratch-path "$scratch" >"$scratch/build.log" 2>&1; then
        cat "$scratch/build.log" >&2
        echo "fuzz: building $module with the sanitizers failed" >&2
        exit 2
    fi
done
debug=$(swift build "${build_config[@]}" --scratch-path "$scratch" --show-bin-path 2>/dev/null)

# 2. Each harness linked against every library object of that build (executables and tests
# are never built there), with the module maps of the C targets (BoringSSL, CSwiftRuntime) for imports.
objects=()
while IFS= read -r o; do objects+=("$o"); done < <(find "$debug" -path '*.build/*.o' -not -path '*-tool.build/*' \
    -not -path '*/Modules/*' | sort)
maps=()
while IFS= read -r m; do maps+=(-Xcc "-fmodule-map-file=$m"); done < <(find "$scratch/checkouts" -path '*/Sources/*' -name module.modulemap 2>/dev/null)
# ... and of this package's C targets (CSwiftRuntime), which SwiftPM generates beside their objects.
while IFS= read -r m; do maps+=(-Xcc "-fmodule-map-file=$m"); done < <(find "$debug" -mindepth 2 -maxdepth 2 -path '*.build/module.modulemap' 2>/dev/null)
mkdir -p "$scratch/fuzzers" Fuzz/findings
for target in "${targets[@]}"; do
    out="$scratch/fuzzers/$target"
    if [ "$no_build" = 1 ]; then
        [ -x "$out" ] || { echo "fuzz: FUZZ_NO_BUILD=1 but $out was never built" >&2; exit 2; }
        continue
    fi
    # Linked already, and nothing it is made of changed since.
    if [ -f "$out" ] && [ -z "$(find "Fuzz/Targets/$target.swift" Fuzz/Support "$debug" -newer "$out" \
        \( -name '*.swift' -o -name '*.o' \) -print -quit)" ]; then continue; fi
    if ! swiftc -parse-as-library -swift-version 6 -g "${optimise[@]}" -sanitize=fuzzer,address -I "$debug/Modules" "${maps[@]}" \
        "Fuzz/Targets/$target.swift" Fuzz/Support/*.swift "${objects[@]}" -o "$out" 2>"$out.log"; then
        cat "$out.log" >&2
        echo "fuzz: linking the $target harness failed" >&2
        exit 2
    fi
done
echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start)) s"

# 3. Run each target, one at a time.
status=0
nice_cmd=()
[ "${FUZZ_JOBS_NICE:-0}" = 1 ] && nice_cmd=(nice -n 10)
printf '%-16s %12s %8s %s\n' target executions exec/s result
for target in "${targets[@]}"; do
    work="$scratch/corpus/$target"
    artifacts="$scratch/artifacts/$target/"
    mkdir -p "$work" "$artifacts" "Fuzz/corpus/$target"
    log="$scratch/fuzzers/$target.run.log"
    # A harness's own settings, if it needs any (Fuzz/Targets/<target>.flags, one line):
    # VAR=value words go to the environment, -flag=value words to libFuzzer.
    environment=() extra=()
    if [ -f "Fuzz/Targets/$target.flags" ]; then
        read -r -a words <"Fuzz/Targets/$target.flags"
        for word in "${words[@]}"; do
            case "$word" in -*) extra+=("$word") ;; *) environment+=("$word") ;; esac
        done
    fi
    env "${environment[@]}" "${nice_cmd[@]}" "$scratch/fuzzers/$target" "${extra[@]}" -max_total_time="$seconds" -runs="${FUZZ_RUNS:--1}" \
        -print_final_stats=1 -max_len=4096 \
        -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$artifacts" "$work" "Fuzz/corpus/$target" >"$log" 2>&1
    code=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    result="ok"
    if [ $code -ne 0 ]; then
        status=1
        result="FINDING (exit $code), log $log"
        for unit in "$artifacts"*; do
            [ -f "$unit" ] || continue
            kept="Fuzz/findings/$target-$(basename "$unit")"
            mv "$unit" "$kept"
            result="$result; input kept as $kept"
        done
        grep -m1 -E 'ERROR: |Fatal error|SUMMARY' "$log" | sed 's/^/    /'
    fi
    printf '%-16s %12s %8s %s\n' "$target" "${runs:-?}" "${speed:-?}" "$result"
    printf '%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "${runs:-0}" "$result" >>"$scratch/runs.tsv"
done
exit $status
