import CBTool
import CoreBluetooth
import Foundation
import TestSupport
import Testing

/// Issue 21: a Bumble peripheral recorded once (`cbtool record`, and `cbtool spec-from-capture`
/// from the captures of our central exploring and recording it), then simulated on a virtual
/// radio: exploring the simulation prints the tree exploring Bumble printed, and a subscriber
/// gets the recorded notifications with their timing. Recording is real time (kept to 2 s);
/// replay runs on a virtual clock with timed air.
@Suite("Interop: record a Bumble peripheral, replay it", .serialized)
struct RecordInteropTests {
    /// cbtool's output lines, with the time each came on the context's clock (`@unchecked
    /// Sendable`: the lines are behind `lock`; `status` is set before any other thread reads it).
    final class ToolRun: @unchecked Sendable {
        private let lock = NSLock()
        private var outLines: [(time: Double, line: String)] = []
        private var errLines: [String] = []
        private(set) var status: Int32 = -1
        var out: [String] { lock.withLock { outLines.map(\.line) } }
        var timed: [(time: Double, line: String)] { lock.withLock { outLines } }
        var err: [String] { lock.withLock { errLines } }

        @discardableResult
        static func run(_ arguments: [String], radio: CBVirtualRadio? = nil) -> ToolRun {
            let run = ToolRun()
            let clock: @Sendable () -> Double = {
                guard let radio else { return ProcessInfo.processInfo.systemUptime }
                let now = radio.now.components
                return Double(now.seconds) + Double(now.attoseconds) / 1e18
            }
            let context = ToolContext(print: { line in run.lock.withLock { run.outLines.append((clock(), line)) } },
                                      error: { line in run.lock.withLock { run.errLines.append(line) } },
                                      radio: radio, isTerminal: false, readLine: { nil })
            run.status = CBToolRunner.run(arguments, context: context)
            return run
        }
    }

    static let name = "BumbleRec"

    /// The tree `explore` printed, without its first line (identifier, RSSI) and without the
    /// Generic Access and Generic Attribute services, which are each stack's own.
    static func tree(_ lines: [String]) -> [String] {
        var kept: [String] = []
        var skipping = false
        for line in lines.dropFirst() {
            if line.hasPrefix("  service ") { skipping = line.hasPrefix("  service 1800") || line.hasPrefix("  service 1801") }
            if !skipping { kept.append(line) }
        }
        return kept
    }

    static func load(_ path: String) throws -> PeripheralSpec { try PeripheralSpec.load(path: path) }

    /// Simulates `spec` on a virtual radio with timed air; explores it, then subscribes to
    /// 2A37 for `count` values. Returns the tree and the values with their arrival times.
    static func replay(_ spec: PeripheralSpec, count: Int) -> (tree: [String], values: [(time: Double, line: String)], errors: [String]) {
        let radio = CBVirtualRadio(clock: .virtual, airTime: .timed)
        let log = Log()
        let context = ToolContext(print: { _ in }, error: log.append, radio: radio, isTerminal: false, readLine: { nil })
        let peripheral = SimulatedPeripheral(spec: spec, context: context, log: log.append)
        defer { peripheral.stop() }
        guard radio.run(until: { peripheral.isAdvertising || peripheral.problem != nil }, timeout: .seconds(10)),
              peripheral.problem == nil else { return ([], [], ["the simulation did not start: \(peripheral.problem ?? "?")"] + log.lines) }
        let explore = ToolRun.run(["explore", spec.name], radio: radio)
        guard count > 0 else { return (tree(explore.out), [], explore.err.filter { $0.hasPrefix("cbtool:") }) }
        let subscribe = ToolRun.run(["subscribe", spec.name, "2A37", "--count", "\(count)", "--seconds", "10"], radio: radio)
        return (tree(explore.out), subscribe.timed, (explore.err + subscribe.err).filter { $0.hasPrefix("cbtool:") })
    }

    /// The simulated peripheral's log (`@unchecked Sendable`: `stored` is behind `lock`).
    final class Log: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: [String] = []
        var lines: [String] { lock.withLock { stored } }
        @Sendable func append(_ line: String) { lock.withLock { stored.append(line) } }
    }

    /// Checks that the values came with the sequence's intervals, each within 10 %.
    static func checkTiming(_ values: [(time: Double, line: String)], against sequence: [PeripheralSpec.Timed],
                            sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(values.count == sequence.count, "values \(values.map(\.line))", sourceLocation: sourceLocation)
        guard values.count == sequence.count, values.count > 1 else { return }
        for i in 1..<values.count {
            let recorded = sequence[i].at - sequence[i - 1].at
            let replayed = values[i].time - values[i - 1].time
            #expect(abs(replayed - recorded) <= 0.1 * recorded,
                    "interval \(i): replayed \(replayed) s, recorded \(recorded) s", sourceLocation: sourceLocation)
            // The value too: "… [00 3d]" for 00 3d.
            let hex = stride(from: 0, to: sequence[i].value.count, by: 2).map {
                String(sequence[i].value.dropFirst($0).prefix(2))
            }.joined(separator: " ")
            #expect(values[i].line.hasSuffix("[\(hex)]"), "\(values[i].line) is not \(hex)", sourceLocation: sourceLocation)
        }
    }

    @Test func recordedAndCapturedBumblePeripheralReplays() throws {
        let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var failed = true
        defer { controllers.stop(failed: failed) }
        #expect(controllers.waitFor("READY"))
        let bumble = try PeerProcess(script: "bumble_record_peripheral.py",
                                     arguments: ["tcp-client:127.0.0.1:\(ports[1])", Self.name, "F0:F1:F2:F3:F4:F7"])
        defer { bumble.stop(failed: failed) }
        #expect(bumble.waitFor("ADVERTISING"))
        let transport = "tcp:127.0.0.1:\(ports[0])"
        let directory = temporaryPath("record-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { if failed { Issue.record("files in \(directory)") } else { try? FileManager.default.removeItem(atPath: directory) } }
        func file(_ name: String) -> String { "\(directory)/\(name)" }

        // The real device, explored (and captured).
        let original = ToolRun.run(["explore", Self.name, "--transport", transport, "--snoop", file("explore.btsnoop")])
        #expect(original.status == 0, "\(original.err)")
        let tree = Self.tree(original.out)
        #expect(tree.contains { $0.contains("characteristic 2A37 (Heart Rate Measurement) [notify]") }, "\(tree)")
        #expect(tree.contains { $0.contains("descriptor 2901 (Characteristic User Description) = \"Long value\"") }, "\(tree)")

        // Recorded (and captured): 2 s of notifications.
        let record = ToolRun.run(["record", Self.name, "--seconds", "2", "-o", file("recorded.json"),
                                  "--transport", transport, "--snoop", file("record.btsnoop")])
        #expect(record.status == 0, "\(record.err)")
        #expect(bumble.waitFor("NOTIFIED 003f"))
        let recorded = try Self.load(file("recorded.json"))
        // The advertisement as received; Bumble's controller reports the advertising data again
        // as the scan response (not the peer's scan response data), which is what is kept.
        #expect(recorded.advertisingData == "0201060a09" + Data(Self.name.utf8).map { String(format: "%02x", $0) }.joined() + "05030d180f18")
        #expect(recorded.scanResponseData != nil)
        let measurement = recorded.services.flatMap { $0.characteristics ?? [] }.first { $0.uuid == "2A37" }
        let sequence = try #require(measurement?.notify?.sequence, "no recorded sequence")
        #expect(sequence.map(\.value) == ["003c", "003d", "003e", "003f"])
        // Bumble notifies every 0.5 s; real time on a busy machine is loose.
        for i in 1..<sequence.count { #expect((0.4...0.9).contains(sequence[i].at - sequence[i - 1].at), "\(sequence.map(\.at))") }

        // Replayed: the same tree, the same notifications with their timing.
        let replayed = Self.replay(recorded, count: sequence.count)
        #expect(replayed.errors.isEmpty, "\(replayed.errors)")
        #expect(replayed.tree == tree, "recorded:\n\(replayed.tree.joined(separator: "\n"))\nBumble:\n\(tree.joined(separator: "\n"))")
        Self.checkTiming(replayed.values, against: sequence)

        // From the capture of the recording: the same.
        let fromRecord = ToolRun.run(["spec-from-capture", file("record.btsnoop"), "-o", file("from-record.json")])
        #expect(fromRecord.status == 0, "\(fromRecord.err)")
        let captured = try Self.load(file("from-record.json"))
        #expect(captured.advertisingData == recorded.advertisingData && captured.scanResponseData == recorded.scanResponseData)
        let capturedSequence = try #require(captured.services.flatMap { $0.characteristics ?? [] }.first { $0.uuid == "2A37" }?.notify?.sequence)
        #expect(capturedSequence.map(\.value) == sequence.map(\.value))
        let replayedCapture = Self.replay(captured, count: capturedSequence.count)
        #expect(replayedCapture.errors.isEmpty, "\(replayedCapture.errors)")
        #expect(replayedCapture.tree == tree, "from the capture:\n\(replayedCapture.tree.joined(separator: "\n"))")
        Self.checkTiming(replayedCapture.values, against: capturedSequence)

        // From the capture of exploring: the tree and values (exploring subscribes to nothing).
        let fromExplore = ToolRun.run(["spec-from-capture", file("explore.btsnoop"), "-o", file("from-explore.json")])
        #expect(fromExplore.status == 0, "\(fromExplore.err)")
        let explored = Self.replay(try Self.load(file("from-explore.json")), count: 0)
        #expect(explored.errors.isEmpty, "\(explored.errors)")
        #expect(explored.tree == tree, "from the explore capture:\n\(explored.tree.joined(separator: "\n"))")

        failed = record.status != 0 || replayed.tree != tree || replayedCapture.tree != tree || explored.tree != tree
    }
}
