import CBTool
import CoreBluetooth
import Foundation
import Scheduling
import Testing

/// `cbtool channel` against specs/echo-channel.json (a simulated device publishing an L2CAP echo
/// channel, its PSM in Apple's PSM characteristic), in-process on a wall-clock test radio: the
/// command's streams run on its thread's run loop, in wall time.
@Suite struct ChannelCommandTests {
    static func startEcho(on radio: CBVirtualRadio) throws -> (SimulatedPeripheral, LogWatcher) {
        let spec = try PeripheralSpec.load(path: Repository.spec("echo-channel.json"))
        let log = LogWatcher()
        let peripheral = SimulatedPeripheral(spec: spec, context: CapturedRun().context(radio: radio), log: log.append)
        #expect(log.line(containing: "advertising as", seconds: 10) != nil)
        return (peripheral, log)
    }

    /// Standard input of these lines, then its end.
    static func input(_ lines: [String]) -> @Sendable () -> String? {
        let remaining = Locked(lines)
        return { remaining.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
    }

    @Test func linesGoThroughTheEchoChannelAndComeBack() throws {
        let radio = CBVirtualRadio(clock: .realTime)
        let (echo, log) = try Self.startEcho(on: radio)
        defer { echo.stop() }
        #expect(log.line(containing: "L2CAP echo channel on PSM 128 (0x80)", seconds: 1) != nil)
        let run = CapturedRun.run(["channel", "EchoChannel", "--seconds", "1"], radio: radio,
                                  input: Self.input(["hello channel", "a second line"]))
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out == ["hello channel", "a second line"])
        #expect(run.err.contains("channel open to PSM 128 (0x80)"))
        #expect(log.line(containing: "a central opened an L2CAP channel to PSM 128", seconds: 5) != nil)
        // Closing the streams closed the channel: the echo saw its end.
        #expect(log.line(containing: "L2CAP channel closed after echoing 28 bytes", seconds: 5) != nil)
    }

    @Test func aNamedPSMInHex() throws {
        let radio = CBVirtualRadio(clock: .realTime)
        let (echo, _) = try Self.startEcho(on: radio)
        defer { echo.stop() }
        let run = CapturedRun.run(["channel", "EchoChannel", "--psm", "0x80", "--hex", "--seconds", "1"], radio: radio,
                                  input: Self.input(["AB"]))
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out.joined(separator: " ") == "41 42 0a")
    }

    @Test func aPSMWithNoChannelFailsInOneLine() throws {
        let radio = CBVirtualRadio(clock: .realTime)
        let (echo, _) = try Self.startEcho(on: radio)
        defer { echo.stop() }
        let run = CapturedRun.run(["channel", "EchoChannel", "--psm", "0x90"], radio: radio)
        #expect(run.status != 0)
        #expect(run.errors == [
            "cbtool: opening an L2CAP channel to PSM 144 failed: The peer has no L2CAP channel published on this PSM. (CBErrorDomain 0)"
        ])
    }

    @Test(arguments: ["0", "256", "0x100", "psm"])
    func anInvalidPSMIsRefusedBeforeAnythingRuns(psm: String) {
        let run = CapturedRun.run(["channel", "EchoChannel", "--psm", psm], radio: nil)
        #expect(run.status != 0)
        #expect(run.errors.count == 1)
        #expect(run.errors.first?.contains("--psm must be an LE PSM, 1–255 (0x01–0xFF)") == true, "\(run.err)")
    }
}
