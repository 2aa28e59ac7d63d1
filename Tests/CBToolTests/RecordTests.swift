import CBTool
import CoreBluetooth
import Foundation
import Testing

/// `cbtool record` and `cbtool spec-from-capture` against a simulated device, all on virtual
/// radios (the Bumble round trip is in InteropTests): the recorded spec simulates the same
/// tree, replays notifications with their timing, and a damaged capture is one clear error.
@Suite struct RecordTests {
    /// The tree `explore` printed, without its first line and the stack's own services.
    static func tree(_ lines: [String]) -> [String] {
        var kept: [String] = []
        var skipping = false
        for line in lines.dropFirst() {
            if line.hasPrefix("  service ") { skipping = line.hasPrefix("  service 1800") || line.hasPrefix("  service 1801") }
            if !skipping { kept.append(line) }
        }
        return kept
    }

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbtool-record-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Runs `spec` on a fresh virtual radio with timed air and returns what exploring it
    /// printed and what `body` does there.
    static func simulate<T>(_ spec: PeripheralSpec, _ body: (CBVirtualRadio) throws -> T) throws -> ([String], T) {
        let radio = CBVirtualRadio(clock: .virtual, airTime: .timed)
        let quiet = CapturedRun()
        let peripheral = SimulatedPeripheral(spec: spec, context: quiet.context(radio: radio))
        defer { peripheral.stop() }
        #expect(radio.run(until: { peripheral.isAdvertising || peripheral.problem != nil }, timeout: .seconds(10)))
        #expect(peripheral.problem == nil, "\(peripheral.problem ?? "")")
        let explore = CapturedRun.run(["explore", spec.name], radio: radio)
        #expect(explore.status == 0, "\(explore.err)")
        return (tree(explore.out), try body(radio))
    }

    @Test func recordedSimulationReplaysTreeValuesAndTiming() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recordedPath = directory.appendingPathComponent("recorded.json").path
        let capture = directory.appendingPathComponent("record.btsnoop").path
        let original = try PeripheralSpec.load(path: Repository.spec("heart-rate.json"))

        // Record the shipped heart-rate simulation: 3.5 s of its 1 s measurements.
        let (tree, record) = try Self.simulate(original) { radio in
            CapturedRun.run(["record", "HeartRate", "--seconds", "3.5", "-o", recordedPath, "--snoop", capture], radio: radio)
        }
        #expect(record.status == 0, "\(record.err)")
        #expect(record.out.first?.hasPrefix("recorded HeartRate: 3 services, 7 characteristics, ") == true, "\(record.out)")
        #expect(record.err.contains("note: service 1800 is the simulating stack's own: not recorded"))
        #expect(tree.contains("    characteristic 2A24 (Model Number String) [read] = \"HRM-1\"  [48 52 4d 2d 31]"), "\(tree)")

        let recorded = try PeripheralSpec.load(path: recordedPath)
        // The advertisement as it went on the air: name, services, manufacturer data.
        #expect(recorded.advertisingData?.contains("ffff4842") == true, "\(recorded.advertisingData ?? "-")")
        let notify = try #require(recorded.services.first?.characteristics?.first?.notify)
        let sequence = try #require(notify.sequence)
        // One measurement a second from the simulation's timer: 3 or 4 in 3.5 s, by phase.
        #expect((3...4).contains(sequence.count), "\(sequence)")
        #expect(sequence.allSatisfy { ["0648", "064a", "064d", "0650", "064e", "064b"].contains($0.value) }, "\(sequence)")
        for i in 1..<sequence.count { #expect(abs(sequence[i].at - sequence[i - 1].at - 1) < 0.06, "\(sequence)") }
        #expect(notify.loop == true && (notify.period ?? 0) >= 3.5)

        // Replayed: the same tree; a subscriber gets the values 1 s apart (±10 %).
        let (replayedTree, subscribe) = try Self.simulate(recorded) { radio in
            let times = TimedLines(radio: radio)
            let run = CBToolRunner.run(["subscribe", "HeartRate", "2A37", "--count", "3", "--seconds", "10"],
                                       context: ToolContext(print: times.append, error: { _ in }, radio: radio, isTerminal: false))
            return (run, times.lines)
        }
        #expect(replayedTree == tree)
        #expect(subscribe.0 == 0)
        let arrivals = subscribe.1
        #expect(arrivals.count == 3)
        for i in 1..<min(arrivals.count, sequence.count) {
            let recordedGap = sequence[i].at - sequence[i - 1].at
            #expect(abs(arrivals[i].time - arrivals[i - 1].time - recordedGap) <= 0.1 * recordedGap, "\(arrivals.map(\.time))")
        }

        // The capture of that recording gives the same simulation.
        let fromCapture = directory.appendingPathComponent("from-capture.json").path
        let convert = CapturedRun.run(["spec-from-capture", capture, "-o", fromCapture], radio: nil)
        #expect(convert.status == 0, "\(convert.err)")
        let captured = try PeripheralSpec.load(path: fromCapture)
        #expect(captured.advertisingData == recorded.advertisingData)
        #expect(captured.services.first?.characteristics?.first?.notify?.sequence?.map(\.value) == sequence.map(\.value))
        let (capturedTree, _) = try Self.simulate(captured) { _ in () }
        #expect(capturedTree == tree)
    }

    @Test func damagedCapturesAreOneErrorNamingTheRecord() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let capture = directory.appendingPathComponent("explore.btsnoop").path
        let original = try PeripheralSpec.load(path: Repository.spec("led-remote.json"))
        _ = try Self.simulate(original) { radio in
            CapturedRun.run(["read", "LedRemote", "2A57", "--snoop", capture], radio: radio)
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: capture)))
        #expect(bytes.count > 1000)
        _ = try CaptureReader.read(bytes)

        // Cut anywhere inside a record: that record is named.
        var generator = SplitMix(seed: 21)
        for _ in 0..<200 {
            let cut = Int.random(in: 17..<bytes.count, using: &generator)
            do {
                _ = try CaptureReader.read(Array(bytes.prefix(cut)))
            } catch {
                #expect(error.record != nil || error.message.contains("no LE connection") || error.message.contains("several"), "\(error)")
            }
        }
        // Bytes changed anywhere: a session (whose spec loads) or an error, never a trap.
        let rounds = Int(ProcessInfo.processInfo.environment["CB_CAPTURE_FUZZ_ROUNDS"] ?? "") ?? 300
        for _ in 0..<rounds {
            var damaged = bytes
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            guard let session = try? CaptureReader.read(damaged) else { continue }
            let spec = session.spec().spec
            if !spec.services.isEmpty { #expect(throws: Never.self) { try spec.validate() } }
        }

        // Through the command: one line naming the file and the record.
        let truncated = directory.appendingPathComponent("truncated.btsnoop").path
        try Data(bytes.prefix(bytes.count - 3)).write(to: URL(fileURLWithPath: truncated))
        let run = CapturedRun.run(["spec-from-capture", truncated, "-o", directory.appendingPathComponent("x.json").path], radio: nil)
        #expect(run.status == 1)
        #expect(run.err.count == 1)
        #expect(run.err.first?.hasPrefix("cbtool: capture \(truncated): record ") == true, "\(run.err)")
        #expect(run.err.first?.contains("cut short") == true, "\(run.err)")
        let notSnoop = CapturedRun.run(["spec-from-capture", Repository.spec("led-remote.json"), "-o", "/dev/null"], radio: nil)
        #expect(notSnoop.errors.first?.contains("not a btsnoop capture") == true, "\(notSnoop.err)")
    }

    @Test func newSpecFieldsAreChecked() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = "{\"name\": \"x\", %@ \"services\": [{\"uuid\": \"180D\", \"characteristics\": [{\"uuid\": \"2A37\", \"properties\": [\"notify\"], %@ \"value\": \"00\"}]}]}"
        let cases: [(String, String, String)] = [
            ("\"advertisingData\": \"\(String(repeating: "00", count: 32))\",", "", "advertisingData must be at most 31 bytes"),
            ("\"scanResponseData\": \"00\",", "", "scanResponseData needs advertisingData"),
            ("", "\"notify\": {\"sequence\": []},", "notify.sequence is empty"),
            ("", "\"notify\": {\"sequence\": [{\"at\": 1, \"value\": \"00\"}, {\"at\": 0.5, \"value\": \"01\"}]},", "sequence[1].at"),
            ("", "\"notify\": {\"sequence\": [{\"at\": 1, \"value\": \"00\"}], \"interval\": 1},", "not both"),
            ("", "\"notify\": {\"sequence\": [{\"at\": 1, \"value\": \"00\"}], \"loop\": true, \"period\": 0.5},", "notify.period"),
            ("", "\"writes\": [{\"value\": \"01\", \"effects\": [{\"uuid\": \"2A99\", \"value\": \"01\"}]}],", "names 2A99"),
        ]
        for (index, (top, characteristic, message)) in cases.enumerated() {
            let path = directory.appendingPathComponent("\(index).json").path
            try Data(String(format: base, top, characteristic).utf8).write(to: URL(fileURLWithPath: path))
            let run = CapturedRun.run(["simulate", path], radio: CBVirtualRadio(clock: .virtual))
            #expect(run.status != 0)
            #expect(run.err.first?.contains(message) == true, "\(run.err)")
        }
    }

    @Test func encryptionRequirementsAreKept() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("secure.json").path
        let original = try PeripheralSpec.load(path: Repository.spec("secure-sensor.json"))
        let (tree, record) = try Self.simulate(original) { radio in
            CapturedRun.run(["record", "SecureSensor", "--seconds", "1.5", "-o", path], radio: radio)
        }
        #expect(record.status == 0, "\(record.err)")
        let recorded = try PeripheralSpec.load(path: path)
        let characteristics = try #require(recorded.services.first?.characteristics)
        #expect(characteristics.map(\.permissions) == [["readEncryptionRequired"], ["readEncryptionRequired", "writeable"], nil])
        #expect(characteristics.last?.properties == ["notifyEncryptionRequired"])
        #expect(characteristics.last?.notify?.sequence?.isEmpty == false)
        let (replayed, _) = try Self.simulate(recorded) { _ in () }
        #expect(replayed == tree)
    }

    @Test func writeEffectsSetAndNotify() throws {
        let json = """
            {"name": "Lamp", "services": [{"uuid": "FF00", "characteristics": [
              {"uuid": "FF01", "properties": ["write"], "writes": [{"value": "01", "effects": [{"uuid": "FF02", "value": "6f6e"}]}]},
              {"uuid": "FF02", "properties": ["read"], "value": "6f6666"}]}]}
            """
        let spec = try JSONDecoder().decode(PeripheralSpec.self, from: Data(json.utf8))
        try spec.validate()
        let (_, read) = try Self.simulate(spec) { radio in
            let write = CapturedRun.run(["write", "Lamp", "FF01", "01"], radio: radio)
            #expect(write.status == 0, "\(write.err)")
            return CapturedRun.run(["read", "Lamp", "FF02"], radio: radio)
        }
        #expect(read.out == ["\"on\"  [6f 6e]"], "\(read.out) \(read.err)")
    }
}

/// Lines with the radio time they were printed at.
final class TimedLines: @unchecked Sendable {
    private let lock = NSLock()
    private let radio: CBVirtualRadio
    private var stored: [(time: Double, line: String)] = []
    init(radio: CBVirtualRadio) { self.radio = radio }
    var lines: [(time: Double, line: String)] { lock.withLock { stored } }
    @Sendable func append(_ line: String) {
        let now = radio.now.components
        let time = Double(now.seconds) + Double(now.attoseconds) / 1e18
        lock.withLock { stored.append((time, line)) }
    }
}

/// A seeded generator, so that every run damages the capture the same way.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
