import Foundation
import TestTools
import Testing

/// The built `cbtool` as separate processes sharing one virtual radio over a Unix socket.
/// Everything is bounded in wall time; children are killed when the test ends.
@Suite(.serialized) struct MultiProcessTests {
    static let binary = BuiltProducts.path("cbtool", fallback: Repository.root.appendingPathComponent(".build/debug/cbtool"))

    @Test func scanInOneProcessSeesSimulateInAnother() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "run `swift build` first: \(Self.binary)")
        let socket = "/tmp/cbtool-test-\(UUID().uuidString.prefix(8)).sock"
        let identifiers = FileManager.default.temporaryDirectory.appendingPathComponent("cbtool-ids-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: identifiers) }
        let environment = ["CB_TRANSPORT": "virtual:\(socket)", "CB_IDENTIFIER_STORE": identifiers]

        let radio = try Child(Self.binary, ["radio", "--listen", socket, "--seconds", "30"], environment: [:])
        defer { radio.kill() }
        #expect(radio.waitForOutput(containing: "listening on \(socket)", seconds: 10))

        let simulate = try Child(Self.binary, ["simulate", Repository.spec("heart-rate.json"), "--seconds", "30"],
                                 environment: environment)
        defer { simulate.kill() }
        #expect(simulate.waitForOutput(containing: "simulating HeartRate", seconds: 10), "\(simulate.errorText)")

        let scan = try Child(Self.binary, ["scan", "--json", "--seconds", "2"], environment: environment)
        defer { scan.kill() }
        #expect(scan.waitForExit(seconds: 10) == 0, "\(scan.errorText)")
        let reports = scan.outputText.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let heartRate = try #require(reports.first { $0["name"] as? String == "HeartRate" }, "\(scan.outputText)")
        #expect(heartRate["services"] as? [String] == ["180D", "180F"])
        #expect((heartRate["rssi"] as? Int).map { $0 < 0 } == true)

        let read = try Child(Self.binary, ["read", "HeartRate", "2A19"], environment: environment)
        defer { read.kill() }
        #expect(read.waitForExit(seconds: 10) == 0, "\(read.errorText)")
        #expect(read.outputText == "87 %  [57]\n")
    }

    /// Bonds outlive a run only on a controller that does: two virtual controllers served over
    /// H4 TCP (`cbtool controller`), the secure sensor simulated on one, the tool's runs on the
    /// other, each run its own process, the central's bonds in --bond-dir.
    @Test func pairThenBondsListsTheBondAndUnpairRemovesIt() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "run `swift build` first")
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("cbtool-bonds-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        // CB_BOND_DIR keeps the simulated side's bonds (and anything else) out of the home directory.
        let environment = ["CB_IDENTIFIER_STORE": scratch.appendingPathComponent("identifiers.json").path,
                           "CB_BOND_DIR": scratch.appendingPathComponent("peripheral").path, "CB_TRANSPORT": ""]
        let bondDir = scratch.appendingPathComponent("central").path

        let controllers = try Child(Self.binary, ["controller", "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--seconds", "30"],
                                    environment: environment)
        defer { controllers.kill() }
        #expect(controllers.waitForOutput(seconds: 10) { $0.components(separatedBy: " listening on ").count == 3 }, "\(controllers.errorText)")
        let ports = controllers.outputText.split(separator: "\n").compactMap { $0.split(separator: ":").last.map(String.init) }
        try #require(ports.count == 2, "\(controllers.outputText)")
        let (sensorSide, toolSide) = ("tcp:127.0.0.1:\(ports[0])", "tcp:127.0.0.1:\(ports[1])")

        let simulate = try Child(Self.binary, ["simulate", Repository.spec("secure-sensor.json"), "--seconds", "30", "--transport", sensorSide],
                                 environment: environment)
        defer { simulate.kill() }
        #expect(simulate.waitForOutput(containing: "simulating SecureSensor", seconds: 10), "\(simulate.errorText)")

        func cbtool(_ arguments: [String]) throws -> (status: Int32?, out: String, err: String) {
            let child = try Child(Self.binary, arguments + ["--transport", toolSide, "--bond-dir", bondDir], environment: environment)
            defer { child.kill() }
            let status = child.waitForExit(seconds: 20)
            return (status, child.outputText, child.errorText)
        }

        let pair = try cbtool(["pair", "SecureSensor", "--io", "none"])
        #expect(pair.status == 0, "\(pair.err)")
        #expect(pair.out.hasPrefix("method: Just Works\n"), "\(pair.out)")
        #expect(pair.out.contains("paired with SecureSensor (Just Works), bonded:"))

        let bonds = try cbtool(["bonds", "--json"])
        #expect(bonds.status == 0, "\(bonds.err)")
        let listed = bonds.out.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        try #require(listed.count == 1, "\(bonds.out)")
        let bond = listed[0]
        #expect(bond["authenticated"] as? Bool == false)
        #expect(bond["secureConnections"] as? Bool == true)
        #expect(bond["keySize"] as? Int == 16)
        let identifier = try #require(bond["identifier"] as? String)
        #expect(pair.out.contains(identifier))

        // Over the bond: the protected read needs no second pairing.
        let read = try cbtool(["read", "SecureSensor", PairingCommandTests.secret])
        #expect(read.status == 0, "\(read.err)")
        #expect(read.out == "\"secret\"  [73 65 63 72 65 74]\n")
        #expect(simulate.errorText.components(separatedBy: "pairing: Just Works, accepted").count == 2, "\(simulate.errorText)")

        let unpair = try cbtool(["unpair", identifier])
        #expect(unpair.status == 0, "\(unpair.err)")
        #expect(unpair.out.hasPrefix("removed the bond with \(identifier)"))
        let again = try cbtool(["unpair", identifier])
        #expect(again.status == 1)
        #expect(again.err.hasSuffix("cbtool: no bond with \(identifier)\n"), "\(again.err)")
        let none = try cbtool(["bonds"])
        #expect(none.status == 0)
        #expect(none.out.isEmpty)
    }

    @Test func anUnreachableControllerIsOneLine() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "run `swift build` first")
        let scan = try Child(Self.binary, ["scan", "--seconds", "1", "--transport", "tcp:127.0.0.1:1"], environment: ["CB_LOG": ""])
        defer { scan.kill() }
        #expect(scan.waitForExit(seconds: 20) == 1)
        let lines = scan.errorText.split(separator: "\n")
        #expect(lines.count == 1, "\(scan.errorText)")
        #expect(lines.first?.hasPrefix("cbtool: no usable Bluetooth controller: tcp:127.0.0.1:1") == true)
    }

    @Test func demoRunsWithNoArgumentsAndNoRadio() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "run `swift build` first")
        let identifiers = FileManager.default.temporaryDirectory.appendingPathComponent("cbtool-ids-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: identifiers) }
        let demo = try Child(Self.binary, ["demo"], environment: ["CB_TRANSPORT": "", "CB_IDENTIFIER_STORE": identifiers])
        defer { demo.kill() }
        #expect(demo.waitForExit(seconds: 20) == 0, "\(demo.errorText)")
        #expect(demo.outputText.contains("the LED is off"))
        #expect(demo.outputText.contains("came back intact"))
    }
}

/// A child process whose output is collected as it comes; waits are bounded in wall time and
/// wake on output or exit, never by sleeping.
final class Child: @unchecked Sendable {
    private let process = Process()
    private let condition = NSCondition()
    private var output = Data()
    private var errors = Data()
    private var exited = false

    init(_ path: String, _ arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.terminationHandler = { [weak self] _ in
            guard let self else { return }
            condition.lock()
            exited = true
            condition.broadcast()
            condition.unlock()
        }
        try process.run()
        readers = [
            PipeReader(out.fileHandleForReading) { [weak self] data in self?.append(data, error: false) },
            PipeReader(err.fileHandleForReading) { [weak self] data in self?.append(data, error: true) },
        ]
    }

    /// The output's and the errors' (set once, in init).
    private var readers: [PipeReader] = []

    private func append(_ data: Data, error: Bool) {
        condition.lock()
        if error { errors.append(data) } else { output.append(data) }
        condition.broadcast()
        condition.unlock()
    }

    var outputText: String {
        condition.lock()
        defer { condition.unlock() }
        return String(decoding: output, as: UTF8.self)
    }

    var errorText: String {
        condition.lock()
        defer { condition.unlock() }
        return String(decoding: errors, as: UTF8.self)
    }

    /// Waits until the output contains `text` (false if the deadline passes or the child exits).
    func waitForOutput(containing text: String, seconds: Double) -> Bool {
        waitForOutput(seconds: seconds) { $0.contains(text) }
    }

    /// Waits until `done` holds for the output (false if the deadline passes or the child exits).
    func waitForOutput(seconds: Double, until done: (String) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !done(String(decoding: output, as: UTF8.self)) {
            if exited || !condition.wait(until: deadline) { return done(String(decoding: output, as: UTF8.self)) }
        }
        return true
    }

    /// Waits for the child to exit; its status, or nil if the deadline passed.
    func waitForExit(seconds: Double) -> Int32? {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        while !exited {
            if !condition.wait(until: deadline) { break }
        }
        let done = exited
        condition.unlock()
        guard done else { return nil }
        process.waitUntilExit()
        // The pipes may still hold the last output: wait until the readers have it all.
        for reader in readers { reader.waitForEnd() }
        return process.terminationStatus
    }

    /// SIGKILL: children inherit the test process's signal mask, in which SIGTERM is blocked,
    /// so `terminate()` left them running until their --seconds ran out.
    func kill() {
        if process.isRunning { _ = Foundation.kill(process.processIdentifier, SIGKILL) }
    }
}
