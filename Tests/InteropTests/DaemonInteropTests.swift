import CoreBluetooth
import Foundation
import TestSupport
import Testing

/// One of our executables (`.build/debug/NAME`) run for one test, its output (both streams)
/// kept and printed when the test fails; killed when the test ends.
final class ToolProcess: @unchecked Sendable {
    static let directory = Interop.repository.appendingPathComponent(".build/debug")
    let process = Process()
    private let output = ChildOutput()

    init(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let path = Self.directory.appendingPathComponent(name).path
        try #require(FileManager.default.isExecutableFile(atPath: path), "run `swift build` first: \(path)")
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = output.pipe
        process.standardError = output.pipe
        try process.run()
        output.start()
    }

    var text: String { output.text }

    @discardableResult
    func waitFor(_ line: String, timeout: Duration = .seconds(20)) -> Bool {
        waitUntil(timeout: timeout) { self.text.contains(line) || !self.process.isRunning } && text.contains(line)
    }

    func stop(failed: Bool) {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if failed { Issue.record("\(process.executableURL?.lastPathComponent ?? "?") output:\n\(text)") }
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// Issue 16's acceptance: two processes share one Bumble controller through `corebluetoothd`.
/// The daemon owns controller P0 of three linked Bumble controllers; a peripheral process
/// (`cbtool simulate`, on the daemon) serves a Bumble central on P1, while this process, on
/// the daemon too, scans and connects as a central to a Bumble heart-rate peripheral on P2.
/// Each process hears only of its own. Real time, against an independent stack.
@Suite("Interop: two processes on one Bumble controller through corebluetoothd", .serialized)
struct DaemonInteropTests {
    func wait(_ condition: @escaping () -> Bool, seconds: Int64 = 20) -> Bool {
        CBVirtualRadio.waitForCallbacks(until: condition, timeout: .seconds(seconds))
    }

    @Test func aCentralProcessAndAPeripheralProcessShareOneBumbleControllerThroughTheDaemon() throws {
        let ports = try (0..<3).map { _ in try freeLoopbackPort() }
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var failed = true
        defer { controllers.stop(failed: failed) }
        #expect(controllers.waitFor("READY"))
        let heartRate = try PeerProcess(script: "bumble_gatt_peripheral.py",
                                        arguments: ["tcp-client:127.0.0.1:\(ports[2])", "BumbleHR", "F0:F1:F2:F3:F4:F9"])
        defer { heartRate.stop(failed: failed) }
        #expect(heartRate.waitFor("ADVERTISING"))

        // The daemon owns P0.
        let socket = temporaryPath("corebluetoothd-bumble.sock")
        let daemon = try ToolProcess("corebluetoothd", ["--transport", "tcp:127.0.0.1:\(ports[0])", "--listen", socket])
        defer { daemon.stop(failed: failed) }
        #expect(waitUntil(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: socket) || !daemon.process.isRunning })
        try #require(FileManager.default.fileExists(atPath: socket), "the daemon did not listen: \(daemon.text)")

        // Process 1: a peripheral on the daemon (its manager a session of the daemon's).
        let spec = Interop.repository.appendingPathComponent("specs/echo-server.json").path
        let serving = try ToolProcess("cbtool", ["simulate", spec], environment: ["CB_TRANSPORT": "daemon:\(socket)"])
        defer { serving.stop(failed: failed) }
        #expect(serving.waitFor("simulating EchoServer"), "\(serving.text)")

        // Process 2 (this one): a central on the daemon, at the same time as a Bumble central
        // (P1) finds and uses the peripheral process's service.
        let bumbleCentral = try PeerProcess(script: "bumble_central.py",
                                            arguments: ["tcp-client:127.0.0.1:\(ports[1])", "name=EchoServer", "64"])
        defer { bumbleCentral.stop(failed: failed) }
        let using = SharedCentralDelegate()
        var central: CBCentralManager? = CBCentralManager(delegate: using, queue: using.queue,
                                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(socket)"])
        #expect(wait { using.log.contains("state 5") }, "\(using.log.all)")
        central?.scanForPeripherals(withServices: [CBUUID(string: "180D")])
        #expect(wait { using.recorder.discovered(named: "BumbleHR") != nil })
        let hr = try #require(using.recorder.discovered(named: "BumbleHR"))
        central?.stopScan()
        central?.connect(hr)
        #expect(wait { using.log.count(prefix: "connect") == 1 })
        hr.discoverServices([CBUUID(string: "180D")])
        #expect(wait { using.log.count(prefix: "services") == 1 })
        for service in hr.services ?? [] { hr.discoverCharacteristics(nil, for: service) }
        #expect(wait { using.log.count(prefix: "characteristics") == 1 })
        let all = (hr.services ?? []).flatMap { $0.characteristics ?? [] }
        let location = try #require(all.first { $0.uuid == CBUUID(string: "2A38") })
        hr.readValue(for: location)
        hr.setNotifyValue(true, for: try #require(all.first { $0.uuid == CBUUID(string: "2A37") }))

        // The Bumble central found the peripheral process's advertisement (the daemon's
        // controller), connected and uses its service through the daemon.
        #expect(bumbleCentral.waitFor("READY", timeout: .seconds(30)))
        #expect(bumbleCentral.text.contains("SERVICE 180C"))
        #expect(bumbleCentral.command("subscribe 2A56", expect: "SUBSCRIBED 2A56"))
        #expect(bumbleCentral.command("write 2A57 0102", expect: "WROTE 2A57"))
        #expect(bumbleCentral.waitFor("VALUE 2A56 0102"))
        #expect(serving.waitFor("a central subscribed to 2A56"))

        // Our central's reads and Bumble's notifications, over the daemon's other link.
        #expect(wait { using.log.contains("value 2A37 0040") && using.log.count(prefix: "value 2A38") == 1 }, "\(using.log.all)")
        #expect(location.value == Data([1]))
        #expect(hr.state == .connected)

        // Each process heard only of its own: this central of its scan and its one connection
        // (never of the Bumble central's link to the daemon's device), the peripheral process
        // of the one central that used its service (never of our link or the heart rate).
        #expect(using.connections == ["connect BumbleHR"])
        #expect(using.discoveries.allSatisfy { $0 == "BumbleHR" }, "\(using.discoveries)")
        #expect(!using.log.all.contains { $0.hasPrefix("disconnect") || $0.hasPrefix("connection event") || $0.hasPrefix("fail") })
        let heard = serving.text.split(separator: "\n").filter { $0.contains("central") || $0.contains("written") }
        #expect(heard.count == 2 && heard.allSatisfy { $0.contains("2A56") || $0.contains("2A57") }, "\(heard)")
        #expect(!serving.text.contains("2A37") && !serving.text.contains("180D"))

        // Two client processes of the daemon (it logs each by its peer credentials).
        let clients = daemon.text.split(separator: "\n").filter { $0.contains("client pid") && $0.hasSuffix("connected") }
            .compactMap { $0.split(separator: " ").drop { $0 != "pid" }.dropFirst().first }
        #expect(Set(clients).count == 2 && clients.contains("\(getpid())") && clients.contains("\(serving.process.processIdentifier)"),
                "\(daemon.text)")

        // Our central leaves: the peripheral process's link stays up.
        central?.cancelPeripheralConnection(hr)
        #expect(wait { using.log.count(prefix: "disconnect") == 1 })
        #expect(heartRate.waitFor("DISCONNECTED"))
        #expect(bumbleCentral.command("write 2A57 03", expect: "WROTE 2A57"))
        #expect(bumbleCentral.waitFor("VALUE 2A56 03"))
        central = nil
        failed = !(bumbleCentral.text.contains("VALUE 2A56 03") && using.connections == ["connect BumbleHR"]
            && using.log.contains("value 2A37 0040"))
    }
}
