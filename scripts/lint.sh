#!/usr/bin/env bash
# Lints Sources, Tests, Examples and Fuzz with the toolchain's `swift format` and the repository's
# .swift-format; exits non-zero on any finding. A few seconds; .ci/run runs it before the tests.
#
# What is checked: swift-format's rule-based lint, its default rule set (the list is in
# .swift-format), except these rules, off because the code follows another convention on
# purpose and turning them on would mean rewriting dozens to hundreds of lines or renaming
# helpers used throughout a suite:
#   AlwaysUseLowerCamelCase           Apple's API keeps Apple's spelling (CBAdvertisementDataLocalNameKey,
#                                     `PSM`, `RSSI` parameters), which CoreBluetooth must match.
#   AmbiguousTrailingClosureOverload  test harnesses overload `run` on purpose: `run { x.start(completion: $0) }`
#                                     waits for a completion, `run { condition }` for a condition.
#   DoNotUseSemicolons                codecs write a command's fields on one line
#                                     (`w.u16(min); w.u16(max)`) to mirror the spec's tables.
#   OneVariableDeclarationPerLine     decoders read fields in wire order on one line
#                                     (`let mtu = try r.u16(), mps = try r.u16()`).
#   OrderedImports                    imports are sorted case-insensitively, `@testable` and
#                                     `#if` imports where they read best; not swift-format's order.
#   ReplaceForEachWithForLoop         one-expression `forEach` in expression position
#                                     (`scids.forEach { w.u16($0) }` inside a `case` line).
#   UseLetInEveryBoundCaseVariable    `case let .x(a, b)` is used as much as `case .x(let a, let b)`.
#
# What is not checked: layout. swift-format's pretty printer cannot be told the existing layout
# (continuation lines aligned under the opening parenthesis, one-line `case` bodies and
# closures, lines over 130 columns in tables of test vectors), so its layout findings
# (Indentation, AddLines, LineLength, Spacing, ...; about 3,800 on the tree) cannot be turned
# off rule by rule and would need the tree reformatted. `--debug-disable-pretty-print` skips
# them. The layout settings in .swift-format (4 spaces, 130 columns, existing line breaks
# kept) describe the house style for `swift format` on new code; do not run `swift format
# format` over whole existing files.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! swift format --version >/dev/null 2>&1; then
    echo "error: \`swift format\` is not available in this toolchain (Swift 6 ships it)" >&2
    exit 2
fi

swift format lint --strict --recursive --debug-disable-pretty-print \
    --configuration .swift-format Sources Tests Examples Fuzz
echo "lint: no findings"
