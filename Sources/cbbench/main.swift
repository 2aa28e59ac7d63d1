import Foundation
import HCI
import StackLogging

// cbbench: the stack's benchmarks (issue 7), run in a release build:
//   swift run -c release cbbench [--quick] [--json] [--no-bumble] [--no-conn-10000]
// Each workload prints named figures; --json prints them as one JSON object.

struct Figure {
    var name: String
    var value: Double
    var unit: String
    var note: String
}

/// Runs `body` and returns the CPU seconds this process spent in it. CPU time, not wall time:
/// on a shared 2-core machine other processes stretch wall time but not our CPU time.
func measure(_ body: () -> Void) -> Double {
    let start = cpuSeconds()
    body()
    return cpuSeconds() - start
}

/// Decoding LE Advertising Report events from raw H4 frames, the scanner's hot path.
func advertisingReportDecode(count: Int) -> [Figure] {
    // A typical report: ADV_IND from a random address with 31 bytes of data, RSSI −60.
    let report = LEAdvertisingReport(reports: [LEAdvertisingReport.Report(
        eventType: .advInd, addressType: .randomDevice, address: BluetoothAddress(value: 0xC1_22_33_44_55_66),
        data: Array(repeating: 0xAB, count: 31), rssi: -60)])
    let frame = HCIPacket.event(report.packet).h4Bytes
    var checksum = 0
    let seconds = measure {
        for _ in 0..<count {
            guard case .event(let packet) = try? HCIPacket(h4: frame),
                  case .le(.advertisingReport(let decoded))? = try? HCIEvent(decoding: packet) else { fatalError("decode failed") }
            checksum &+= Int(decoded.reports[0].rssi)
        }
    }
    precondition(checksum == -60 &* count)
    return [
        Figure(name: "adv_report_decode_per_s", value: Double(count) / seconds, unit: "events/s",
               note: "H4 frame → HCIPacket → HCIEvent, 1 report of 31 bytes"),
        Figure(name: "adv_report_decode_1M_s", value: seconds * 1_000_000 / Double(count), unit: "s",
               note: "time to decode 1,000,000 such events"),
    ]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cbbench: \(message)\n".utf8))
    exit(2)
}

// The stack's logs on standard error at CB_LOG's level (errors only when unset): the figures
// on standard output stay clean.
StackLogging.bootstrapStandardError()

var argumentList = Array(CommandLine.arguments.dropFirst())
/// `--smoke`: tiny counts, a few seconds even in a debug build (CI checks that every workload
/// still runs; its figures mean nothing).
let smoke = argumentList.contains("--smoke")
let quick = argumentList.contains("--quick") || smoke
/// The count for a full run, a --quick run and a --smoke run.
func pick(_ full: Int, _ quickCount: Int, _ smokeCount: Int) -> Int { smoke ? smokeCount : quick ? quickCount : full }
let json = argumentList.contains("--json")
let withBumble = !argumentList.contains("--no-bumble")
/// Internal: `--connections-child N` runs only workload 6 for N connections and prints its
/// figures as JSON (the parent runs it in a fresh process).
var connectionsChild: Int?
if let index = argumentList.firstIndex(of: "--connections-child") {
    guard index + 1 < argumentList.count, let n = Int(argumentList[index + 1]) else { fail("--connections-child needs a number") }
    connectionsChild = n
    argumentList.removeSubrange(index...index + 1)
}
/// `--count N` with `--only notify`: that many notifications after the warm-up (profiling:
/// two counts under callgrind, the difference of their totals over the difference of the
/// counts is the cost of one notification, set-up excluded). With `--only daemon`, that many
/// notifications through the daemon, and no in-process comparison.
var notifyCount: Int?
if let index = argumentList.firstIndex(of: "--count") {
    guard index + 1 < argumentList.count, let n = Int(argumentList[index + 1]), n > 0 else { fail("--count needs a number") }
    notifyCount = n
    argumentList.removeSubrange(index...index + 1)
}
/// `--fleet-seconds N`: the fleet's measured radio time, N seconds whatever the run length
/// (profiling: two lengths under callgrind, the difference of their totals over the difference
/// of the lengths is one second of radio time, set-up and warm-up excluded). The figure is the
/// same ratio as without it.
var fleetSeconds: Int?
if let index = argumentList.firstIndex(of: "--fleet-seconds") {
    guard index + 1 < argumentList.count, let n = Int(argumentList[index + 1]), n > 0 else { fail("--fleet-seconds needs a number") }
    fleetSeconds = n
    argumentList.removeSubrange(index...index + 1)
}
/// `--only NAME` runs one group (decode, pair, notify, adv, timed, fleet, daemon, conn, bumble,
/// channel): for profiling.
let only: String? = {
    guard let index = argumentList.firstIndex(of: "--only") else { return nil }
    guard index + 1 < argumentList.count else {
        fail("--only needs a workload: decode, pair, notify, adv, timed, fleet, daemon, conn, bumble, channel")
    }
    defer { argumentList.removeSubrange(index...index + 1) }
    return argumentList[index + 1]
}()
@MainActor func selected(_ group: String) -> Bool { only == nil || only == group }
if let unknown = Set(argumentList).subtracting(["--quick", "--json", "--no-bumble", "--smoke", "--conn-10000", "--no-conn-10000"]).first {
    fail("unknown option \(unknown) (use --quick, --json, --no-bumble, --smoke, --no-conn-10000, --only NAME, --count N, --fleet-seconds N)")
}

func printJSON(_ figures: [Figure]) {
    let body = figures.map { "\"\($0.name)\": \(String(format: "%.6g", $0.value))" }.joined(separator: ", ")
    print("{\(body)}")
}

if let n = connectionsChild {
    printJSON(apiConnections(count: n))
    exit(0)
}

#if DEBUG
FileHandle.standardError.write(Data("cbbench: this is a debug build; run `swift run -c release cbbench` for real figures\n".utf8))
#endif

/// Progress on standard error, so that --json output stays one object.
func progress(_ text: String) {
    FileHandle.standardError.write(Data("cbbench: \(text)\n".utf8))
}

var figures: [Figure] = []
if selected("decode") {
    progress("HCI decoding")
    figures += advertisingReportDecode(count: pick(1_000_000, 200_000, 10_000))
}

/// The in-process 20-byte notification count, for the pair and for the daemon's comparison.
/// 200,000 in a quick run too (~0.3 s): 50,000 (~70 ms of CPU) came out anywhere from 501k to
/// 692k a second over whole runs while the wall-clock rate stayed at ~690k; 200,000 gave
/// 671k–696k (BENCHMARKS.md, issue 19 step 19).
let notify20Count = pick(300_000, 200_000, 1_000)

if selected("pair") {
    progress("API pair: notify, write without response, read")
    let pair = BenchPair()
    // A short warm-up: first-time costs (buffers growing, lazy metadata) out of the figures.
    _ = apiNotify(pair, count: pick(2_000, 2_000, 100), size: 20)
    figures += apiNotify(pair, count: notify20Count, size: 20)
    figures += apiNotify(pair, count: pick(150_000, 30_000, 1_000), size: 244)
    figures += apiWriteWithoutResponse(pair, count: pick(300_000, 50_000, 1_000))
    figures += apiReadRoundTrip(pair, count: pick(10_000, 2_000, 100))
}
if only == "notify" {
    // Profiling: the 20-byte notification workload alone (a longer run with --quick too).
    progress("API pair: notify 20 B")
    let pair = BenchPair()
    _ = apiNotify(pair, count: pick(2_000, 2_000, 100), size: 20)
    figures += apiNotify(pair, count: notifyCount ?? pick(300_000, 200_000, 1_000), size: 20)
}
if selected("adv") {
    progress("advertising reports, \(pick(1000, 1000, 20)) advertisers")
    figures += apiAdvertisingReports(advertisers: pick(1000, 1000, 20), virtualSeconds: pick(3, 1, 1))
}
if selected("timed") {
    progress("timed air")
    figures += apiTimedThroughput(virtualSeconds: pick(10, 2, 1))
}
if selected("fleet") {
    progress("timed air, a fleet: 100 advertisers, 10 links notifying every 7.5 ms")
    figures += apiFleetTimed(advertisers: pick(100, 100, 10), connections: pick(10, 10, 2),
                             virtualSeconds: fleetSeconds ?? pick(10, 2, 1))
}
if selected("daemon") {
    // Beside the in-process rate of the same run (measured here when `pair` did not run).
    var inProcess = figures.first { $0.name == "notify_20B_per_s" }?.value
    if inProcess == nil && notifyCount == nil {
        progress("API pair: notify 20 B (in process, for the daemon's comparison)")
        let pair = BenchPair()
        _ = apiNotify(pair, count: pick(2_000, 2_000, 100), size: 20)
        let inProcessFigures = apiNotify(pair, count: notify20Count, size: 20)
        figures += inProcessFigures
        inProcess = inProcessFigures.first?.value
    }
    progress("corebluetoothd: notify 20 B to a daemon client")
    figures += apiDaemonNotify(count: notifyCount ?? pick(100_000, 50_000, 500), inProcess: inProcess)
}

/// Children (workload 6, Bumble) that failed: the run exits with status 1 after its table.
nonisolated(unsafe) var failures = 0

/// Runs this executable again with `arguments` and returns the JSON object it prints.
func runChild(_ executable: String, _ arguments: [String]) -> [String: Double]? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    do { try process.run() } catch { progress("could not run \(executable): \(error)"); failures += 1; return nil }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
          let line = String(decoding: data, as: UTF8.self).split(separator: "\n").last(where: { $0.hasPrefix("{") }),
          let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        progress("\(executable) \(arguments.joined(separator: " ")) failed (status \(process.terminationStatus))")
        failures += 1
        return nil
    }
    return object.compactMapValues { ($0 as? NSNumber)?.doubleValue }
}

let executable = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? executable
// 10,000 connections (20,000 managers) give issue 19's `conn_10000_setup_s`, in every run but
// a smoke run: its child takes ~10 s of wall time since a manager no longer reads the whole
// environment (BENCHMARKS.md, issue 19 step 13). `--no-conn-10000` leaves it out;
// `--conn-10000`, which once added it, is still accepted.
let connectionCounts = smoke ? [10] : [100, 1000] + (argumentList.contains("--no-conn-10000") ? [] : [10000])
for n in connectionCounts where selected("conn") {
    progress("\(n) connections (child process)")
    guard let child = runChild(selfPath, ["--connections-child", "\(n)"]) else { continue }
    for key in ["conn_\(n)_setup_s", "conn_\(n)_kib_per_connection", "conn_\(n)_kib_per_device_pair"] {
        guard let value = child[key] else { continue }
        let unit = key.hasSuffix("_s") ? "s CPU" : "KiB"
        let note = key.hasSuffix("_s") ? "\(n) connect(_:) → didConnect (fresh process)"
            : key.hasSuffix("connection") ? "resident memory the connections added, both ends" : "resident memory per central + peripheral manager, devices included"
        figures.append(Figure(name: key, value: value, unit: unit, note: note))
    }
}

/// The repository's root: the working directory, or up from the executable (.build/…/cbbench).
func repositoryRoot() -> URL? {
    var candidates = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath)]
    var up = URL(fileURLWithPath: selfPath).deletingLastPathComponent()
    for _ in 0..<5 { candidates.append(up); up = up.deletingLastPathComponent() }
    return candidates.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("interop/peers/bumble_bench.py").path) }
}

if selected("channel") {
    let total = pick(8 << 20, 2 << 20, 64 << 10)
    progress("L2CAP channel, \(total / 1024) KiB")
    figures += apiChannelThroughput(total: total)
    progress("timed air, L2CAP channel")
    figures += apiTimedChannel(virtualSeconds: pick(10, 2, 1))
    if !smoke { figures += apiTimedChannel(virtualSeconds: pick(10, 2, 1), reverse: true) }
    if withBumble {
        progress("Bumble LE CoC (its own host and virtual link)")
        if let root = repositoryRoot(), FileManager.default.isExecutableFile(atPath: root.appendingPathComponent(".venv/bin/python").path),
           let bumble = runChild(root.appendingPathComponent(".venv/bin/python").path, [
               root.appendingPathComponent("interop/peers/bumble_bench.py").path, "--channel-bytes", "\(total)",
           ]) {
            if let rate = bumble["bumble_channel_bytes_per_s"] {
                figures.append(Figure(name: "bumble_channel_bytes_per_s", value: rate, unit: "B/s",
                                      note: "Bumble 0.0.236: LE CoC write → sink, MTU 4096, MPS 247, 64 credits, LocalLink, CPU time"))
                if let mine = figures.first(where: { $0.name == "channel_bytes_per_s" })?.value {
                    figures.append(Figure(name: "channel_ratio_vs_bumble", value: mine / rate, unit: "×",
                                          note: "channel_bytes_per_s / bumble_channel_bytes_per_s"))
                }
            }
        } else {
            progress("Bumble skipped: no .venv with Bumble (run: bash scripts/setup-interop.sh)")
        }
    }
}

if withBumble && selected("bumble") {
    progress("Bumble (its own host and virtual link)")
    if let root = repositoryRoot(), FileManager.default.isExecutableFile(atPath: root.appendingPathComponent(".venv/bin/python").path),
       let bumble = runChild(root.appendingPathComponent(".venv/bin/python").path, [
           root.appendingPathComponent("interop/peers/bumble_bench.py").path,
           "--notifications", "\(pick(20_000, 5_000, 200))", "--reads", "\(pick(2_000, 500, 20))",
       ]) {
        let ours = Dictionary(figures.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        if let rate = bumble["bumble_notify_20B_per_s"] {
            figures.append(Figure(name: "bumble_notify_20B_per_s", value: rate, unit: "notif/s",
                                  note: "Bumble 0.0.236: notify_subscriber → subscriber callback, LocalLink, CPU time"))
            if let mine = ours["notify_20B_per_s"] {
                figures.append(Figure(name: "notify_20B_ratio_vs_bumble", value: mine / rate, unit: "×", note: "notify_20B_per_s / bumble_notify_20B_per_s"))
            }
        }
        if let median = bumble["bumble_read_rtt_median_us"] {
            figures.append(Figure(name: "bumble_read_rtt_median_us", value: median, unit: "µs", note: "Bumble: read_value round trip, wall clock"))
            if let mine = ours["read_rtt_median_us"] {
                // Above 1: Bumble's round trip is that many times longer than ours.
                figures.append(Figure(name: "read_rtt_ratio_vs_bumble", value: median / mine, unit: "×",
                                      note: "bumble_read_rtt_median_us / read_rtt_median_us (how many times faster ours is)"))
            }
        }
        if let p99 = bumble["bumble_read_rtt_p99_us"] {
            figures.append(Figure(name: "bumble_read_rtt_p99_us", value: p99, unit: "µs", note: "Bumble: 99th percentile"))
        }
    } else {
        progress("Bumble skipped: no .venv with Bumble (run: bash scripts/setup-interop.sh)")
    }
}

if json {
    printJSON(figures)
} else {
    let width = max(32, (figures.map(\.name.count).max() ?? 0) + 1)
    print("figure".padding(toLength: width, withPad: " ", startingAt: 0) + "value".padding(toLength: 22, withPad: " ", startingAt: 0) + "what")
    for f in figures {
        let value = String(format: "%.4g %@", f.value, f.unit)
        print(f.name.padding(toLength: width, withPad: " ", startingAt: 0) + value.padding(toLength: 22, withPad: " ", startingAt: 0) + f.note)
    }
}
if failures > 0 { exit(1) }
