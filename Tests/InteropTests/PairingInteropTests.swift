import CoreBluetooth
import Foundation
import TestSupport
import Testing

/// A pairing agent for the interop tests: writes down each request and answers it; a passkey
/// to enter comes from `passkey` (run off the delegate queue: it may wait on the peer's output).
final class InteropPairingAgent: CBPairingAgent {
    let ioCapability: CBPairingIOCapability
    let log = EventLog()
    private let passkey: @Sendable () -> UInt32?

    init(_ ioCapability: CBPairingIOCapability, passkey: @escaping @Sendable () -> UInt32? = { nil }) {
        self.ioCapability = ioCapability
        self.passkey = passkey
    }

    func handle(_ request: CBPairingRequest) {
        switch request.kind {
        case .confirmPairing:
            log.append("confirm \(request.method)")
            request.accept()
        case .displayPasskey(let value):
            log.append("display \(value)")
            request.accept()
        case .confirmNumber(let value):
            log.append("compare \(value)")
            request.accept()
        case .enterPasskey:
            log.append("enter")
            let passkey = passkey
            DispatchQueue.global().async {
                guard let value = passkey() else { return request.reject() }
                request.enterPasskey(value)
            }
        case .outOfBandData:
            log.append("oob")
            request.reject()
        }
    }
}

extension PeerProcess {
    /// The lines printed so far, without a last one still being written (output arrives in
    /// chunks: "PASSKEY 12" may be the start of "PASSKEY 123456").
    var completeLines: [Substring] {
        let text = text
        guard let end = text.lastIndex(of: "\n") else { return [] }
        return text[..<end].split(separator: "\n")
    }

    /// Waits (real time) until the peer printed a line starting with `prefix`; the first such line.
    func line(startingWith prefix: String, timeout: Duration = .seconds(20)) -> String? {
        func first() -> String? { completeLines.first { $0.hasPrefix(prefix) }.map(String.init) }
        _ = waitUntil(timeout: timeout) { first() != nil || !self.process.isRunning }
        return first()
    }

    /// How many lines the peer printed that start with `prefix`.
    func count(prefix: String) -> Int { completeLines.filter { $0.hasPrefix(prefix) }.count }
}

/// Expectations that remember whether one failed, so that the peers' logs and the capture are
/// kept (and named) only for a failing test.
class Checks: @unchecked Sendable {
    private(set) var ok = true

    @discardableResult
    func check(_ condition: Bool, _ what: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        if !condition {
            ok = false
            Issue.record(Comment(rawValue: what()), sourceLocation: sourceLocation)
        }
        return condition
    }

    func check<T: Equatable>(_ actual: T, _ expected: T, _ what: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
        check(actual == expected, "\(what.isEmpty ? "" : what + ": ")\(actual) ≠ \(expected)", sourceLocation: sourceLocation)
    }

    /// Waits (wall time) for a delegate callback after which `condition` holds.
    func wait(_ condition: @escaping () -> Bool, seconds: Int64 = 20, _ what: @autoclosure () -> String,
              sourceLocation: SourceLocation = #_sourceLocation) {
        check(CBVirtualRadio.waitForCallbacks(until: condition, timeout: .seconds(seconds)), "timed out: \(what())",
              sourceLocation: sourceLocation)
    }

    /// The capture's frames tshark finds malformed (none allowed) and whether it holds SMP.
    func checkCapture(_ path: String, connections: Bool = true, smp: Bool = true,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try connections ? Tshark.checkEachConnection(capture: path) : Tshark.check(capture: path)
        check(result.malformedSent.isEmpty, "malformed frames we sent: \(result.malformedSent)", sourceLocation: sourceLocation)
        check(result.malformedReceived.isEmpty, "malformed frames we received: \(result.malformedReceived)",
              sourceLocation: sourceLocation)
        check(result.frameProtocols.contains { $0.hasSuffix(":btsmp") } == smp, "SMP in the capture: \(!smp)",
              sourceLocation: sourceLocation)
    }
}

/// Issue 14: pairing (SMP) against Bumble's host, over linked Bumble controllers reached through
/// `tcp:`. Real time. Peers: interop/peers/bumble_pairing_peripheral.py and
/// bumble_pairing_central.py (checked Bumble to Bumble by interop/peers/check_pairing_peers.py).
@Suite("Interop: pairing with Bumble", .serialized)
struct PairingInteropTests {
    static func uuid(_ n: Int) -> String { String(format: "6E42%04X-B5A3-F393-E0A9-E50E24DCCA9E", n) }
    static func cb(_ n: Int) -> CBUUID { CBUUID(string: uuid(n)) }
    /// The Bumble peripheral's characteristics: open, encryption required, MITM required.
    static let open = cb(2), encrypted = cb(3), authenticated = cb(4)
    static let encryptedValue = Data("encrypted value".utf8)

    /// Our central and a Bumble pairing peripheral on linked controllers; `stop()` ends them
    /// and keeps the logs and capture when a check failed (or the test threw before `finish`).
    final class CentralRig: Checks, @unchecked Sendable {
        let controllers: PeerProcess
        let bumble: PeerProcess
        let name: String
        let transport: String
        let agent: InteropPairingAgent?
        /// The current manager's capture; `restart()` starts another.
        private(set) var capture: String
        private var earlierCaptures: [String] = []
        /// Bonds of an external controller persist (by its address, the same Bumble gives every
        /// run): each test keeps them in a fresh directory, not the user's.
        let bondDirectory = temporaryPath("bonds")
        let recorder = CentralRecorder()
        var central: CBCentralManager?
        var peripheral: CBPeripheral!
        private var finished = false

        init(name: String, bumbleOptions: [String], agent: InteropPairingAgent?) throws {
            let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
            controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
            // Bumble's host may connect only once the controllers listen.
            let ready = controllers.waitFor("READY")
            bumble = try PeerProcess(script: "bumble_pairing_peripheral.py",
                                     arguments: ["tcp-client:127.0.0.1:\(ports[1])", name, "F0:F1:F2:F3:F4:F7"] + bumbleOptions)
            capture = temporaryPath("pairing-\(name).btsnoop")
            self.name = name
            transport = "tcp:127.0.0.1:\(ports[0])"
            self.agent = agent
            super.init()
            check(ready, "controllers not ready")
            check(bumble.waitFor("ADVERTISING"), "Bumble not advertising")
            do {
                try start()
            } catch {
                stop()
                throw error
            }
        }

        /// A manager on the controller (bonds in `bondDirectory`): scans for the peer by name,
        /// connects, discovers the test service's characteristics.
        private func start() throws {
            let recorder = recorder, name = name
            let powered = recorder.log.count(of: "state 5")
            central = CBCentralManager(delegate: recorder, queue: recorder.queue, options: [
                CBManagerOptionLinuxTransportKey: transport, CBManagerOptionLinuxSnoopPathKey: capture,
                CBManagerOptionLinuxBondDirectoryKey: bondDirectory,
            ])
            if let agent { central?.linuxPairingAgent = agent }
            wait({ recorder.log.count(of: "state 5") == powered + 1 }, "powered on")
            central?.scanForPeripherals(withServices: nil)
            wait({ recorder.discovered(named: name) != nil }, "discovered \(name)")
            let found: CBPeripheral = try #require(recorder.discovered(named: name))
            peripheral = found
            central?.stopScan()
            try reconnect()
        }

        /// Ends the manager (its links close) and starts another on the same controller and bond
        /// directory, connected to the peer; its traffic goes to a new capture.
        func restart() throws {
            central = nil
            peripheral = nil
            check(bumble.waitFor("DISCONNECTED"), "Bumble saw no disconnection")
            try checkCapture(capture)
            earlierCaptures.append(capture)
            capture = temporaryPath("pairing-\(name)-\(earlierCaptures.count + 1).btsnoop")
            recorder.forget()
            try start()
        }

        /// Connects (again) and discovers the test service.
        func reconnect() throws {
            let recorder = recorder
            let connects = recorder.log.count(prefix: "connect")
            let services = recorder.log.count(prefix: "services")
            let discoveries = recorder.log.count(prefix: "characteristics")
            central?.connect(peripheral)
            wait({ recorder.log.count(prefix: "connect") == connects + 1 }, "connected")
            peripheral.discoverServices([PairingInteropTests.cb(1)])
            wait({ recorder.log.count(prefix: "services") == services + 1 }, "services")
            let service = try #require(peripheral.services?.first { $0.uuid == PairingInteropTests.cb(1) })
            peripheral.discoverCharacteristics(nil, for: service)
            wait({ recorder.log.count(prefix: "characteristics") == discoveries + 1 }, "characteristics")
        }

        func characteristic(_ uuid: CBUUID) throws -> CBCharacteristic {
            let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
            return try #require(all.first { $0.uuid == uuid }, "characteristic \(uuid)")
        }

        /// Reads `uuid` and waits for its callback: "value UUID HEX" or "value UUID error att CODE".
        @discardableResult
        func read(_ uuid: CBUUID, seconds: Int64 = 40, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            let recorder = recorder
            let key = "value \(uuid.uuidString)"
            let before = recorder.log.count(prefix: key)
            peripheral.readValue(for: try characteristic(uuid))
            wait({ recorder.log.count(prefix: key) > before }, seconds: seconds, "an answer to the read of \(uuid)",
                 sourceLocation: sourceLocation)
            return recorder.log.all.last { $0.hasPrefix(key) } ?? "no answer"
        }

        /// Ends the manager (the capture is complete then) and checks the capture.
        func finish(smp: Bool = true, _ checks: (CaptureFrames) throws -> Void = { _ in }) throws {
            central = nil
            peripheral = nil
            try checkCapture(capture, smp: smp)
            try checks(try CaptureFrames(capture))
            finished = true
        }

        /// Our side's bonds (never their keys).
        var bonds: [CBLinuxBond] { central?.linuxBonds ?? [] }

        func stop() {
            try? FileManager.default.removeItem(atPath: bondDirectory)
            let failed = !ok || !finished
            controllers.stop(failed: failed)
            bumble.stop(failed: failed)
            for capture in earlierCaptures + [capture] {
                if failed {
                    Issue.record("capture \(capture) (`tshark -r FILE -Y btsmp -V`)")
                } else if ProcessInfo.processInfo.environment["INTEROP_KEEP_CAPTURES"] != nil {
                    print("capture \(capture)")
                } else {
                    try? FileManager.default.removeItem(atPath: capture)
                }
            }
        }
    }

    static func hex(_ text: String) -> String { Data(text.utf8).hex }

    // MARK: Our central, Bumble's peripheral

    /// 1. No pairing call: the encrypted read pairs (LE Secure Connections, Just Works,
    /// bonding: Bumble's defaults) and is retried, transparently.
    @Test func transparentPairingOnEncryptedRead() throws {
        let rig = try CentralRig(name: "PairSC", bumbleOptions: [], agent: nil)
        defer { rig.stop() }
        rig.check(try rig.read(Self.open), "value \(Self.open.uuidString) \(Self.hex("open"))")
        rig.check(try rig.read(Self.encrypted), "value \(Self.encrypted.uuidString) \(Self.encryptedValue.hex)")
        rig.check(try rig.characteristic(Self.encrypted).value, Self.encryptedValue)
        rig.check(rig.bumble.line(startingWith: "PAIRED"), "PAIRED sc 0", "Bumble's pairing")
        rig.check(rig.bonds.map { [$0.isSecureConnections, $0.isAuthenticated] }, [[true, false]], "our bond (SC, MITM)")
        try rig.finish { frames in
            rig.check(try frames.count("btsmp.opcode == 0x01"), 1, "Pairing Requests")
            rig.check(try frames.count("btsmp.opcode == 0x0c"), 2, "Pairing Public Keys (LE Secure Connections)")
            rig.check(try frames.count("btsmp.opcode == 0x0d"), 2, "DHKey Checks")
            rig.check(try frames.count("bthci_cmd.opcode == 0x2019"), 1, "LE Enable Encryption commands")
            rig.check(try frames.count("bthci_evt.code == 0x08"), 1, "Encryption Change events")
        }
    }

    /// 2. A characteristic that needs a MITM-protected key, read by a NoInputNoOutput central:
    /// the best pairing it can do is Just Works, so the read ends in Insufficient
    /// Authentication, promptly (not a hang).
    @Test func authenticationRequiredWithoutInputOutputFails() throws {
        let agent = InteropPairingAgent(.noInputNoOutput)
        let rig = try CentralRig(name: "PairMITM", bumbleOptions: [], agent: agent)
        defer { rig.stop() }
        let started = ContinuousClock.now
        rig.check(try rig.read(Self.authenticated),
                  "value \(Self.authenticated.uuidString) error att \(CBATTError.insufficientAuthentication.rawValue)")
        let took = ContinuousClock.now - started
        rig.check(took < .seconds(35), "the refusal took \(took)")
        let error = rig.recorder.error("value \(Self.authenticated.uuidString)")
        rig.check((error as? CBATTError)?.code == .insufficientAuthentication, "error \(String(describing: error))")
        rig.check(rig.peripheral.state, .connected, "the link")
        rig.check(!agent.log.all.contains("enter"), "agent asked for a passkey: \(agent.log.all)")
        // Just Works was all a NoInputNoOutput side could do: bonded, unauthenticated.
        rig.check(rig.bonds.map(\.isAuthenticated), [false], "our bond's MITM protection")
        try rig.finish()
    }

    /// 4. LE Secure Connections Passkey Entry: Bumble shows the passkey (DisplayOnly), our
    /// keyboard-only agent types what Bumble printed; the MITM-only characteristic reads.
    @Test func passkeyEntry() throws {
        let shown = Shared<PeerProcess?>(nil)
        let agent = InteropPairingAgent(.keyboardOnly) {
            guard let line = shown.value?.line(startingWith: "PASSKEY ") else { return nil }
            return UInt32(line.dropFirst("PASSKEY ".count))
        }
        let rig = try CentralRig(name: "PairKey", bumbleOptions: ["io=display"], agent: agent)
        defer { rig.stop() }
        shown.value = rig.bumble
        rig.check(try rig.read(Self.authenticated), "value \(Self.authenticated.uuidString) \(Self.hex("mitm value"))")
        rig.check(agent.log.all, ["enter"], "agent requests")
        rig.check(rig.bumble.line(startingWith: "PAIRED"), "PAIRED sc 1", "Bumble's pairing")
        rig.check(rig.bonds.map { [$0.isSecureConnections, $0.isAuthenticated] }, [[true, true]], "our bond (SC, MITM)")
        try rig.finish { frames in
            // Passkey Entry: 20 rounds of Pairing Confirm and Pairing Random each way.
            rig.check(try frames.count("btsmp.opcode == 0x03"), 40, "Pairing Confirms")
            rig.check(try frames.count("btsmp.opcode == 0x04"), 40, "Pairing Randoms")
        }
    }

    /// 5. Legacy pairing, Just Works: Bumble without LE Secure Connections.
    @Test func legacyJustWorks() throws {
        let rig = try CentralRig(name: "PairLegacy", bumbleOptions: ["sc=0"], agent: nil)
        defer { rig.stop() }
        rig.check(try rig.read(Self.encrypted), "value \(Self.encrypted.uuidString) \(Self.encryptedValue.hex)")
        rig.check(rig.bumble.line(startingWith: "PAIRED"), "PAIRED legacy 0", "Bumble's pairing")
        rig.check(rig.bonds.map { [$0.isSecureConnections, $0.isAuthenticated] }, [[false, false]], "our bond (SC, MITM)")
        try rig.finish { frames in
            rig.check(try frames.count("btsmp.opcode == 0x01"), 1, "Pairing Requests")
            rig.check(try frames.count("btsmp.opcode == 0x0c"), 0, "Pairing Public Keys (none in legacy pairing)")
            // Legacy key distribution: Encryption Information and Central Identification (Bumble's at least).
            rig.check(try frames.count("btsmp.opcode == 0x06") >= 1, "no Encryption Information")
            rig.check(try frames.count("btsmp.opcode == 0x07") >= 1, "no Central Identification")
            rig.check(try frames.count("bthci_evt.code == 0x08"), 1, "Encryption Change events")
        }
    }

    /// 6. A wrong passkey: the pairing fails, the read reports the server's refusal, and no key
    /// is kept: a second read pairs again (or meets the Repeated Attempts back-off) rather
    /// than encrypting with a key.
    @Test func wrongPasskeyFailsAndStoresNothing() throws {
        let shown = Shared<PeerProcess?>(nil)
        let agent = InteropPairingAgent(.keyboardOnly) {
            guard let line = shown.value?.line(startingWith: "PASSKEY "),
                  let passkey = UInt32(line.dropFirst("PASSKEY ".count)) else { return nil }
            return (passkey + 1) % 1_000_000
        }
        let rig = try CentralRig(name: "PairWrong", bumbleOptions: ["io=display"], agent: agent)
        defer { rig.stop() }
        shown.value = rig.bumble
        rig.check(try rig.read(Self.encrypted),
                  "value \(Self.encrypted.uuidString) error att \(CBATTError.insufficientEncryption.rawValue)")
        rig.check(rig.bumble.line(startingWith: "PAIRING-FAILED") != nil, "Bumble saw no pairing failure")
        let again = try rig.read(Self.encrypted)
        rig.check(again.contains(" error "), "second read: \(again)")
        rig.check(rig.bumble.count(prefix: "PAIRED"), 0, "Bumble's completed pairings")
        rig.check(rig.bonds, [], "our bonds")
        try rig.finish { frames in
            rig.check(try frames.count("btsmp.opcode == 0x05") >= 1, "no Pairing Failed")
            rig.check(try frames.count("bthci_cmd.opcode == 0x2019"), 0, "LE Enable Encryption commands (no key was kept)")
        }
    }

    /// 7. A bond: pair once (as in 1), disconnect, reconnect; the read encrypts with the bond's
    /// key, without pairing again.
    @Test func bondedReconnectEncryptsWithoutPairing() throws {
        let agent = InteropPairingAgent(.noInputNoOutput)
        let rig = try CentralRig(name: "PairBond", bumbleOptions: [], agent: agent)
        defer { rig.stop() }
        rig.check(try rig.read(Self.encrypted), "value \(Self.encrypted.uuidString) \(Self.encryptedValue.hex)")
        rig.check(rig.bumble.waitFor("PAIRED sc 0"), "Bumble's pairing")
        let recorder = rig.recorder
        rig.central?.cancelPeripheralConnection(rig.peripheral)
        rig.wait({ recorder.log.count(prefix: "disconnect") == 1 }, "disconnected")
        rig.check(rig.bumble.waitFor("DISCONNECTED"), "Bumble saw no disconnection")

        try rig.reconnect()
        rig.check(try rig.read(Self.encrypted), "value \(Self.encrypted.uuidString) \(Self.encryptedValue.hex)")
        rig.check(rig.bumble.count(prefix: "PAIRED"), 1, "Bumble's pairings")
        rig.check(rig.bumble.count(prefix: "ENCRYPTED 1"), 2, "Bumble's encryptions")
        rig.check(rig.bonds.count, 1, "our bonds")
        rig.check(agent.log.count(prefix: "confirm") <= 1, "agent requests: \(agent.log.all)")
        try rig.finish { frames in
            let connections = try frames.numbers("bthci_evt.le_meta_subevent == 0x01 || bthci_evt.le_meta_subevent == 0x0a")
            rig.check(connections.count, 2, "LE Connection Complete events")
            let second = connections.last ?? 0
            rig.check(try frames.numbers("btsmp.opcode == 0x01").filter { $0 > second }, [], "Pairing Requests on the second connection")
            rig.check(try frames.numbers("bthci_cmd.opcode == 0x2019").filter { $0 > second }.count, 1,
                      "LE Enable Encryption on the second connection")
            rig.check(try frames.numbers("bthci_evt.code == 0x08").filter { $0 > second }.count, 1,
                      "Encryption Change on the second connection")
        }
    }

    /// 7, across managers: the bond is in the bond directory, so a new manager on the same
    /// controller (an app restarted) encrypts with it without pairing.
    @Test func bondOutlivesTheManager() throws {
        let rig = try CentralRig(name: "PairKeep", bumbleOptions: [], agent: nil)
        defer { rig.stop() }
        rig.check(try rig.read(Self.encrypted), "value \(Self.encrypted.uuidString) \(Self.encryptedValue.hex)")
        rig.check(rig.bumble.waitFor("PAIRED sc 0"), "Bumble's pairing")
        try rig.restart()
        rig.check(rig.bonds.count, 1, "our bonds, read back")
        rig.check(try rig.read(Self.encrypted), "value \(Self.encrypted.uuidString) \(Self.encryptedValue.hex)")
        rig.check(rig.bumble.count(prefix: "PAIRED"), 1, "Bumble's pairings")
        rig.check(rig.bumble.count(prefix: "ENCRYPTED 1"), 2, "Bumble's encryptions")
        // No SMP at all on the new manager's link.
        try rig.finish(smp: false) { frames in
            rig.check(try frames.count("btsmp.opcode == 0x01"), 0, "Pairing Requests from the new manager")
            rig.check(try frames.count("bthci_cmd.opcode == 0x2019"), 1, "LE Enable Encryption from the new manager")
            rig.check(try frames.count("bthci_evt.code == 0x08"), 1, "Encryption Change for the new manager")
        }
    }

    // MARK: Bumble's central, our peripheral manager

    static func peripheralUUID(_ n: Int) -> String { String(format: "6E43%04X-B5A3-F393-E0A9-E50E24DCCA9E", n) }

    /// 3. A Bumble central reads our encryption-required characteristics: refused, then it
    /// pairs (Just Works; LE Secure Connections, or legacy with our EDIV/Rand key) and reads
    /// them; it reconnects and encrypts with the bond's key, which we find again.
    @Test(.serialized, arguments: [true, false])
    func bumbleCentralPairsWithOurPeripheral(secureConnections: Bool) throws {
        let checks = Checks()
        let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var finished = false
        defer { controllers.stop(failed: !checks.ok || !finished) }
        checks.check(controllers.waitFor("READY"), "controllers not ready")

        let capture = temporaryPath("pairing-peripheral.btsnoop")
        let bondDirectory = temporaryPath("bonds")
        defer { try? FileManager.default.removeItem(atPath: bondDirectory) }
        defer { if !checks.ok || !finished { Issue.record("capture \(capture)") } else { try? FileManager.default.removeItem(atPath: capture) } }
        let delegate = InteropPeripheral()
        let agent = InteropPairingAgent(.noInputNoOutput)
        var manager: CBPeripheralManager? = CBPeripheralManager(delegate: delegate, queue: delegate.queue, options: [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
            CBManagerOptionLinuxBondDirectoryKey: bondDirectory,
        ])
        manager?.linuxPairingAgent = agent
        checks.wait({ delegate.log.contains("state 5") }, "powered on")
        let cached = Self.peripheralUUID(2), dynamic = Self.peripheralUUID(3)
        let service = CBMutableService(type: CBUUID(string: Self.peripheralUUID(1)), primary: true)
        service.characteristics = [
            // Answered by the stack (cached) and by the delegate (dynamic): both readable over
            // an encrypted link only.
            CBMutableCharacteristic(type: CBUUID(string: cached), properties: .read,
                                    value: Data("secret".utf8), permissions: .readEncryptionRequired),
            CBMutableCharacteristic(type: CBUUID(string: dynamic), properties: .read,
                                    value: nil, permissions: .readEncryptionRequired),
        ]
        manager?.add(service)
        checks.wait({ delegate.log.contains("added \(Self.peripheralUUID(1))") }, "service added")
        manager?.startAdvertising([CBAdvertisementDataLocalNameKey: "SwiftPairing"])
        checks.wait({ delegate.log.contains("advertising") }, "advertising")
        let address = try #require(manager?.linuxDeviceAddress)

        let bumble = try PeerProcess(script: "bumble_pairing_central.py",
                                     arguments: ["tcp-client:127.0.0.1:\(ports[1])", "\(address)/R", "sc=\(secureConnections ? 1 : 0)"])
        defer { bumble.stop(failed: !checks.ok || !finished) }
        checks.check(bumble.waitFor("READY", timeout: .seconds(30)), "Bumble's central not ready")
        // Unencrypted, no key yet: Insufficient Authentication (Vol 3 Part C §10.3.1).
        checks.check(bumble.command("read \(cached)", expect: "ERROR read \(cached) 05"), "read before pairing not refused with 05")
        checks.check(!delegate.log.all.contains { $0.hasPrefix("read \(dynamic)") }, "delegate asked before pairing")
        bumble.send("pair")
        checks.check(bumble.line(startingWith: "PAIRED", timeout: .seconds(30)), "PAIRED \(secureConnections ? "sc" : "legacy") 0",
                     "Bumble's pairing")
        checks.check(bumble.waitFor("ENCRYPTED 1"), "Bumble's link not encrypted")
        checks.check(bumble.command("read \(cached)", expect: "READ \(cached) \(Self.hex("secret"))"), "cached read after pairing")
        checks.check(bumble.command("read \(dynamic)", expect: "READ \(dynamic) \(InteropPeripheral.longValue.hex)"),
                     "dynamic read after pairing")
        checks.check(delegate.log.count(prefix: "read \(dynamic)") >= 1, "delegate not asked")
        checks.check(agent.log.all.allSatisfy { $0.hasPrefix("confirm") }, "agent requests: \(agent.log.all)")

        // The bond: Bumble reconnects and encrypts with the key we gave it; no pairing again.
        checks.check(bumble.command("disconnect", expect: "DISCONNECTED"), "Bumble's disconnection")
        let advertiser = manager
        // Polled: advertising resumes without a delegate callback.
        checks.check(waitUntil(timeout: .seconds(10)) { advertiser?.isAdvertising == true }, "not advertising after the disconnection")
        checks.check(bumble.command("connect", expect: "READY", timeout: .seconds(30)), "Bumble's reconnection")
        // Unencrypted but bonded: Insufficient Encryption now (§10.3.1).
        checks.check(bumble.command("read \(cached)", expect: "ERROR read \(cached) 0f"), "read before encrypting not refused with 0f")
        checks.check(bumble.command("encrypt", expect: "ENCRYPTED 1"), "Bumble's encryption with the bond")
        checks.check(bumble.command("read \(cached)", expect: "READ \(cached) \(Self.hex("secret"))"), "cached read after encrypting")
        checks.check(bumble.count(prefix: "PAIRED"), 1, "Bumble's pairings")
        checks.check(manager?.linuxBonds.map(\.isSecureConnections), [secureConnections], "our bond (SC)")

        manager = nil
        try checks.checkCapture(capture, connections: false)
        let frames = try CaptureFrames(capture)
        checks.check(try frames.count("btsmp.opcode == 0x01"), 1, "Bumble's Pairing Requests")
        checks.check(try frames.count("btsmp.opcode == 0x02"), 1, "our Pairing Responses")
        checks.check(try frames.count("bthci_evt.code == 0x08"), 2, "Encryption Change events (pairing, bond)")
        checks.check(try frames.count("bthci_evt.le_meta_subevent == 0x05"), 2, "LE Long Term Key Requests")
        finished = true
    }
}

/// Frames of a btsnoop capture picked by tshark display filters (SMP opcodes, HCI commands).
struct CaptureFrames {
    let path: String
    let tshark: String

    init(_ path: String) throws {
        self.path = path
        guard let tshark = Tshark.locate() else {
            throw CaptureError(description: "tshark is not installed: run `apt-get install -y tshark`")
        }
        self.tshark = tshark
    }

    /// The frame numbers matching `filter`.
    func numbers(_ filter: String) throws -> [Int] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tshark)
        process.arguments = ["-r", path, "-Y", filter, "-T", "fields", "-e", "frame.number"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CaptureError(description: "tshark -Y \(filter) failed") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { Int($0) }
    }

    func count(_ filter: String) throws -> Int { try numbers(filter).count }
}

struct CaptureError: Error, CustomStringConvertible {
    var description: String
}
