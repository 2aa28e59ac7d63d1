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

/// Lines with the radio time they were printed at (`@unchecked Sendable`: `stored` is behind
/// `lock`).
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

/// A capture written byte by byte (H4 frames in btsnoop records): what `spec-from-capture`
/// makes of a session it did not take itself.
@Suite struct HandMadeCaptureTests {
    static func record(_ frame: [UInt8], received: Bool, at microseconds: Int64) -> [UInt8] {
        func be32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
        let flags: UInt32 = (received ? 1 : 0) | (frame[0] == 0x01 || frame[0] == 0x04 ? 2 : 0)
        let timestamp = UInt64(microseconds + 0x00DC_DDB3_0F2F_8000)
        let time = (0..<8).map { UInt8(truncatingIfNeeded: timestamp >> (56 - 8 * UInt64($0))) }
        return be32(UInt32(frame.count)) + be32(UInt32(frame.count)) + be32(flags) + be32(0) + time + frame
    }

    /// An ATT PDU on connection handle 0x0040, one ACL packet.
    static func att(_ pdu: [UInt8]) -> [UInt8] {
        let l2cap = [UInt8(pdu.count), 0, 0x04, 0x00] + pdu
        return [0x02, 0x40, 0x20, UInt8(l2cap.count), 0] + l2cap
    }

    /// A lamp: service FF00 with FF01 (write) and FF02 (read, 2 bytes long in the MTU-limited
    /// read), read "off", written 01, read "on"; advertised as "Lamp".
    static func session() -> [UInt8] {
        let peer: [UInt8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0xC6]
        let advertising: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0x09] + Array("Lamp".utf8)
        let frames: [([UInt8], Bool)] = [
            ([0x04, 0x3E, UInt8(12 + advertising.count), 0x02, 0x01, 0x00, 0x01] + peer + [UInt8(advertising.count)] + advertising + [0xC0], true),
            ([0x04, 0x3E, 0x13, 0x01, 0x00, 0x40, 0x00, 0x00, 0x01] + peer + [0x18, 0x00, 0x00, 0x00, 0xF4, 0x01, 0x00], true),
            (att([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]), false),
            (att([0x11, 0x06, 0x01, 0x00, 0x05, 0x00, 0x00, 0xFF]), true),
            (att([0x08, 0x01, 0x00, 0x05, 0x00, 0x03, 0x28]), false),
            (att([0x09, 0x07, 0x02, 0x00, 0x08, 0x03, 0x00, 0x01, 0xFF, 0x04, 0x00, 0x02, 0x05, 0x00, 0x02, 0xFF]), true),
            (att([0x0A, 0x05, 0x00]), false),
            // "of", then the rest by Read Blob: a long read put together.
            (att([0x0B, 0x6F, 0x66]), true),
            (att([0x0C, 0x05, 0x00, 0x02, 0x00]), false),
            (att([0x0D, 0x66]), true),
            (att([0x12, 0x03, 0x00, 0x01]), false),
            (att([0x13]), true),
            (att([0x0A, 0x05, 0x00]), false),
            (att([0x0B, 0x6F, 0x6E]), true),
        ]
        var bytes = Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x03, 0xEA]
        for (index, (frame, received)) in frames.enumerated() {
            bytes += record(frame, received: received, at: 1_700_000_000_000_000 + Int64(index) * 10_000)
        }
        return bytes
    }

    /// The same session with datalink 1001 (HCI packets without the H4 indicator; the record
    /// flags say commands and events from data).
    static func unencapsulated(_ h4: [UInt8]) -> [UInt8] {
        var bytes = Array(h4.prefix(12)) + [0, 0, 0x03, 0xE9]
        var offset = 16
        while offset + 24 <= h4.count {
            let length = Int(h4[offset + 4]) << 24 | Int(h4[offset + 5]) << 16 | Int(h4[offset + 6]) << 8 | Int(h4[offset + 7])
            let frame = Array(h4[(offset + 25)..<(offset + 24 + length)])
            func be32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
            bytes += be32(frame.count) + be32(frame.count) + Array(h4[(offset + 8)..<(offset + 24)]) + frame
            offset += 24 + length
        }
        return bytes
    }

    @Test func unencapsulatedCapturesReadTheSame() throws {
        let h4 = try CaptureReader.read(Self.session()).spec().spec
        let plain = try CaptureReader.read(Self.unencapsulated(Self.session())).spec().spec
        #expect(plain == h4 && plain.name == "Lamp" && !plain.services.isEmpty)
    }

    @Test func discoveryLongReadsAndWriteEffects() throws {
        let session = try CaptureReader.read(Self.session())
        #expect(session.address?.description == "C6:55:44:33:22:11")
        let (spec, notes) = session.spec()
        #expect(spec.name == "Lamp")
        #expect(spec.advertisingData == "0201060509" + "4c616d70")
        let characteristics = try #require(spec.services.first?.characteristics)
        #expect(spec.services.map(\.uuid) == ["FF00"])
        #expect(characteristics.map(\.uuid) == ["FF01", "FF02"])
        #expect(characteristics.map(\.properties) == [["write"], ["read"]])
        #expect(characteristics[1].value == "6f6666")
        let write = try #require(characteristics[0].writes?.first)
        #expect(write.value == "01" && write.effects.map(\.uuid) == ["FF02"] && write.effects.map(\.value) == ["6f6e"])
        #expect(notes.isEmpty, "\(notes)")
        try spec.validate()

        // The device by address; another address is an error saying which devices there are.
        #expect(try CaptureReader.read(Self.session(), device: "C6:55:44:33:22:11").services.count == 1)
        do {
            _ = try CaptureReader.read(Self.session(), device: "C6:00:00:00:00:01")
            Issue.record("no error for an absent device")
        } catch {
            #expect(error.description == "no connection to C6:00:00:00:00:01 in the capture (connections to C6:55:44:33:22:11)")
        }

        // Cut in the middle of its last record, or a packet whose length is wrong: named.
        let bytes = Self.session()
        var damaged = bytes
        damaged[damaged.count - 9] = 0x09  // the ACL data length of the last packet
        for (capture, message) in [(Array(bytes.dropLast(1)), "cut short"), (damaged, "malformed HCI packet")] {
            do {
                _ = try CaptureReader.read(capture)
                Issue.record("no error for \(message)")
            } catch {
                #expect(error.record == 14 && error.message.contains(message), "\(error)")
            }
        }
    }
}
