import CoreBluetooth
import Foundation
import Scheduling
import TestSupport
import Testing

/// Issue 17, hostile peers: a Bumble host (interop/peers/hostile_peer.py, one process holding
/// its own linked controllers) that writes malformed, out-of-order, oversized and unsolicited
/// PDUs on ATT (0x0004), LE signalling (0x0005) and SMP (0x0006), in the middle of our
/// procedures, and floods us. Each scenario asserts that the process survives, that the stack
/// answers with the spec's codes (the numbers Apple's `CBATTError` uses) or reports Apple's
/// errors to the app, that what it keeps is bounded, and that a normal read works afterwards.
/// Real time (another process): each scenario takes one Bumble process and 1–4 seconds.
///
/// Not here: the 30-second ATT timeout that closes the bearer when a peer never confirms our
/// indication (the "unconfirmed-indications" scenario checks only what happens meanwhile). It
/// would run on the wall clock against Bumble; ATTBearerTests covers it on the virtual clock.
@Suite("Interop: hostile Bumble peers (issue 17)", .serialized)
struct HostilePeerTests {
    static func uuid(_ n: Int) -> CBUUID { CBUUID(string: String(format: "6E43%04X-B5A3-F393-E0A9-E50E24DCCA9E", n)) }
    static let service = uuid(1), hello = uuid(2), long = uuid(3), notifying = uuid(4), protected = uuid(5)
    /// CBError.unknown: how the API reports a peer that broke the protocol.
    static let protocolError = "error cb \(CBError.Code.unknown.rawValue)"
    static func att(_ code: CBATTError.Code) -> String { String(format: "%02x", code.rawValue) }

    // MARK: - Our central against a hostile peripheral

    /// What the hostile peripheral does to our central's client.
    enum PeripheralScenario: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case tinyMTU = "tiny-mtu"
        case hugeMTU = "huge-mtu"
        case wrongOpcodeDiscovery = "wrong-opcode-discovery"
        case malformedFindInformation = "malformed-find-info"
        case endlessLongRead = "endless-long-read"
        case oversizedBlob = "oversized-blob"
        case unsolicited
        case badNotifications = "bad-notifications"
        case signalling
        case smp
        case channelOpenGarbage = "channel-open-garbage"
        case smpInitiatorBadKey = "smp-initiator-bad-key"
        var testDescription: String { rawValue }
        /// Hooks armed before the connection (the MTU exchange happens as it opens).
        var armedAtStart: [String] { self == .tinyMTU || self == .hugeMTU ? [rawValue] : [] }
    }

    /// Our CBCentralManager connected (through `tcp:`) to a hostile Bumble peripheral.
    final class CentralRig: Checks, @unchecked Sendable {
        let peer: PeerProcess
        let recorder = CentralRecorder()
        var central: CBCentralManager?
        var peripheral: CBPeripheral!

        init(armed: [String]) throws {
            let port = try freeLoopbackPort()
            peer = try PeerProcess(script: "hostile_peer.py", arguments: ["peripheral", "\(port)", "Hostile"] + armed)
            super.init()
            check(peer.waitFor("ADVERTISING", timeout: .seconds(30)), "the hostile peripheral started")
            central = CBCentralManager(delegate: recorder, queue: recorder.queue,
                                       options: [CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(port)"])
            wait({ self.recorder.log.contains("state 5") }, "powered on")
            central?.scanForPeripherals(withServices: nil)
            wait({ self.recorder.discovered(named: "Hostile") != nil }, "discovered")
            peripheral = try #require(recorder.discovered(named: "Hostile"))
            central?.stopScan()
            central?.connect(peripheral)
            wait({ self.recorder.log.count(prefix: "connect") == 1 }, "connected")
        }

        func discover() {
            let before = recorder.log.count(prefix: "services")
            peripheral.discoverServices([HostilePeerTests.service])
            wait({ self.recorder.log.count(prefix: "services") > before }, "services")
        }

        func discoverCharacteristics() throws {
            let service = try #require(peripheral.services?.first { $0.uuid == HostilePeerTests.service })
            let key = "characteristics \(HostilePeerTests.service.uuidString)"
            let before = recorder.log.count(prefix: key)
            peripheral.discoverCharacteristics(nil, for: service)
            wait({ self.recorder.log.count(prefix: key) > before }, key)
        }

        func characteristic(_ uuid: CBUUID) throws -> CBCharacteristic {
            let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
            return try #require(all.first { $0.uuid == uuid }, "characteristic \(uuid)")
        }

        /// Reads `uuid`; the line the recorder wrote for it.
        func read(_ uuid: CBUUID) throws -> String? {
            let key = "value \(uuid.uuidString)"
            let before = recorder.log.count(prefix: key)
            peripheral.readValue(for: try characteristic(uuid))
            wait({ self.recorder.log.count(prefix: key) > before }, key)
            return recorder.log.all.last { $0.hasPrefix(key) }
        }

        /// The link still works: "hello" reads back.
        func checkUsable(sourceLocation: SourceLocation = #_sourceLocation) throws {
            check(try read(HostilePeerTests.hello), "value \(HostilePeerTests.hello.uuidString) 68656c6c6f",
                  "a normal read afterwards", sourceLocation: sourceLocation)
            check(peripheral.state == .connected, "still connected", sourceLocation: sourceLocation)
        }

        /// Sends `command` and waits for the peer's `answer` line; the lines it printed meanwhile.
        @discardableResult
        func peer(_ command: String, expect answer: String) -> [String] {
            let before = peer.completeLines.count
            check(peer.command(command, expect: answer), "the peer answered \(command)")
            return peer.completeLines.dropFirst(before).map(String.init)
        }

        func stop() {
            central = nil
            peer.stop(failed: !ok)
        }
    }

    @Test(arguments: PeripheralScenario.allCases)
    func ourCentralAgainstAHostilePeripheral(_ scenario: PeripheralScenario) throws {
        let rig = try CentralRig(armed: scenario.armedAtStart)
        defer { rig.stop() }
        let log = rig.recorder.log
        switch scenario {
        case .tinyMTU:
            // Server Rx MTU 5: ATT_MTU stays at the LE minimum, 23.
            rig.check(rig.peripheral.maximumWriteValueLength(for: .withoutResponse), 20, "write length with MTU 5")
            rig.discover()
            try rig.discoverCharacteristics()
        case .hugeMTU:
            // Server Rx MTU 65535: ATT_MTU is our own 517.
            rig.check(rig.peripheral.maximumWriteValueLength(for: .withoutResponse), 514, "write length with MTU 65535")
            rig.discover()
            try rig.discoverCharacteristics()
        case .wrongOpcodeDiscovery:
            rig.peer("arm \(scenario.rawValue)", expect: "ARMED")
            rig.discover()
            rig.check(log.all.last { $0.hasPrefix("services") }?.hasSuffix(Self.protocolError) == true,
                      "a Read Response to a service discovery fails it with CBError.unknown: \(log.all)")
            rig.discover()
            rig.check(rig.peripheral.services?.contains { $0.uuid == Self.service } == true, "rediscovered")
            try rig.discoverCharacteristics()
            let key = "characteristics \(Self.service.uuidString)"
            rig.check(log.all.last { $0.hasPrefix(key) }?.hasSuffix(Self.protocolError) == true,
                      "a Find Information Response to a characteristic discovery fails it: \(log.all)")
            try rig.discoverCharacteristics()
            rig.check((rig.peripheral.services?.first?.characteristics ?? []).count, 4, "characteristics rediscovered")
        case .malformedFindInformation:
            rig.discover()
            try rig.discoverCharacteristics()
            rig.peer("arm \(scenario.rawValue)", expect: "ARMED")
            let notifying = try rig.characteristic(Self.notifying)
            let key = "descriptors \(Self.notifying.uuidString)"
            for attempt in 1...3 {
                rig.peripheral.discoverDescriptors(for: notifying)
                rig.wait({ log.count(prefix: key) == attempt }, key)
            }
            let answers = log.all.filter { $0.hasPrefix(key) }
            rig.check(answers.prefix(2).allSatisfy { $0.hasSuffix(Self.protocolError) }, "malformed answers fail: \(answers)")
            rig.check(answers.last, "\(key) 2902", "the third discovery")
        case .endlessLongRead, .oversizedBlob:
            rig.discover()
            try rig.discoverCharacteristics()
            rig.peer("arm \(scenario.rawValue)", expect: "ARMED")
            // Every blob fills the PDU (a value without end) or overflows it: the read fails
            // with CBError.unknown, at the latest at offset 0xFFFF (memory bounded).
            rig.check(try rig.read(Self.long)?.hasSuffix(Self.protocolError) == true, "the read fails: \(log.all)")
            let blobs = rig.peer("arm disarm", expect: "ARMED").compactMap { $0.hasPrefix("BLOBS ") ? Int($0.dropFirst(6)) : nil }
            let count = try #require(blobs.first)
            if scenario == .oversizedBlob {
                rig.check(count, 1, "one oversized blob ends the read")
            } else {
                // ATT_MTU 517: 516 octets a part, 127 parts reach 0xFFFF.
                rig.check(count >= 100 && count <= 65535 / 516 + 1, "blobs asked for: \(count)")
            }
            rig.check(try rig.read(Self.long), "value \(Self.long.uuidString) 40 bytes", "the real value afterwards")
        case .unsolicited:
            rig.discover()
            try rig.discoverCharacteristics()
            rig.peer("push unsolicited", expect: "DONE")
        case .badNotifications:
            rig.discover()
            try rig.discoverCharacteristics()
            let notifying = try rig.characteristic(Self.notifying)
            rig.peripheral.setNotifyValue(true, for: notifying)
            rig.wait({ log.contains("notifying \(Self.notifying.uuidString) true") }, "subscribed")
            let lines = rig.peer("push bad-notifications", expect: "DONE")
            // Each well-formed indication is confirmed, whatever its handle; the malformed
            // ones and those for unknown handles reach nobody; the good notification does.
            rig.check(lines.contains("CONFIRMATIONS 3"), "three confirmations: \(lines)")
            rig.wait({ rig.recorder.values == [Data("ok".utf8)] }, "only the valid notification: \(rig.recorder.values)")
        case .signalling:
            rig.discover()
            try rig.discoverCharacteristics()
            let lines = rig.peer("push signalling", expect: "DONE")
            let sig = lines.filter { $0.hasPrefix("SIG ") }.map { String($0.dropFirst(4)) }
            // Unknown command: Command Reject, Command Not Understood.
            rig.check(sig.contains("012102000000"), "unknown code rejected: \(sig)")
            // Invalid connection parameters: Connection Parameters Rejected.
            for id in ["22", "23", "24"] { rig.check(sig.contains("13\(id)02000100"), "parameters \(id) refused: \(sig)") }
            // Disconnection of an unknown channel: Invalid CID in Request, with the CIDs.
            rig.check(sig.contains("012a0600020040004000"), "unknown CID rejected: \(sig)")
            // Nothing answers an unsolicited response.
            for id in ["27", "28", "29"] { rig.check(!sig.contains { $0.dropFirst(2).hasPrefix(id) }, "no answer to \(id): \(sig)") }
            // Truncated: not understood; past our signalling MTU: Signaling MTU Exceeded, 23.
            rig.check(sig.contains("012502000000"), "truncated update rejected: \(sig)")
            rig.check(sig.contains("012b040001001700"), "oversized command rejected: \(sig)")
            // Identifier 0 is invalid: no answer.
            rig.check(!sig.contains { $0.dropFirst(2).hasPrefix("00") }, "no answer to identifier 0: \(sig)")
        case .smp:
            rig.discover()
            try rig.discoverCharacteristics()
            let lines = rig.peer("push smp", expect: "DONE")
            let smp = lines.filter { $0.hasPrefix("SMP ") }
            // Only Pairing Failed ever comes back: no pairing starts from these.
            rig.check(smp.allSatisfy { $0.hasPrefix("SMP 05") }, "only Pairing Failed: \(smp)")
        case .smpInitiatorBadKey:
            rig.discover()
            try rig.discoverCharacteristics()
            rig.peer("arm \(scenario.rawValue)", expect: "ARMED")
            // The refused read makes our central pair; the peer's key is off the curve: our
            // central fails the pairing (DHKey Check Failed) and the read reports an error.
            let outcome = try rig.read(Self.protected) ?? ""
            // The refusal stands: CBATTError.insufficientEncryption.
            rig.check(outcome.hasSuffix("error att \(CBATTError.Code.insufficientEncryption.rawValue)"), "the read: \(outcome)")
            // Our Pairing Failed is sent before the read's error reaches the app, but a line to
            // the peer can overtake it on the way: the hook must still be armed when it lands.
            rig.check(rig.peer.waitFor("SMP 050b"), "Pairing Failed reached the peer")
            rig.peer("arm disarm", expect: "ARMED")
            let smp = rig.peer.completeLines.filter { $0.hasPrefix("SMP ") }.map(String.init)
            rig.check(smp.first?.hasPrefix("SMP 01") == true, "our Pairing Request: \(smp)")
            rig.check(smp.contains("SMP 050b"), "Pairing Failed, DHKey Check Failed: \(smp)")
            rig.check(!smp.contains { $0.hasPrefix("SMP 03") || $0.hasPrefix("SMP 0d") }, "nothing after the bad key: \(smp)")
        case .channelOpenGarbage:
            rig.discover()
            try rig.discoverCharacteristics()
            rig.peer("arm \(scenario.rawValue)", expect: "ARMED")
            // Mid channel open: the answers carry an MTU and MPS below 23 (then an unknown
            // result, for the LE request the stack falls back to): the open fails.
            rig.peripheral.openL2CAPChannel(0x0080)
            rig.wait({ log.count(prefix: "l2cap") == 1 }, "the open ended")
            let outcome = log.all.last { $0.hasPrefix("l2cap") } ?? ""
            rig.check(outcome.contains(" error "), "the open fails: \(outcome)")
            // The peer, which believes its side open, is asked to close it (CIDs 0x0040 and ours).
            rig.check(rig.peer.waitFor("DISCONNECTION 06"), "the half-open channel is disconnected")
            let request = rig.peer.line(startingWith: "DISCONNECTION 06") ?? ""
            rig.check(request.dropFirst("DISCONNECTION 06".count + 2).hasPrefix("0400" + "4000"), "its CIDs: \(request)")
            rig.peer("arm disarm", expect: "ARMED")
        }
        try rig.checkUsable()
    }

    // MARK: - A hostile central against our peripheral manager

    enum CentralScenario: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case serverUnsolicited = "server-unsolicited"
        case mtuTwice = "mtu-twice"
        case preparedWriteFlood = "prepared-write-flood"
        case signalling
        case invalidChannelOpen = "invalid-coc-open"
        case creditFlood = "credit-flood"
        case smpOutOfOrder = "smp-out-of-order"
        case smpOversized = "smp-oversized"
        case smpMidPairing = "smp-mid-pairing"
        case smpBadConfirm = "smp-bad-confirm"
        case smpBadPublicKey = "smp-bad-public-key"
        case unconfirmedIndications = "unconfirmed-indications"
        var testDescription: String { rawValue }
    }

    /// Our peripheral manager's delegate: takes every write, records channels.
    final class Server: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
        let log = EventLog()
        let queue = DispatchQueue(label: "hostile-server")
        private let published = Locked<CBL2CAPPSM?>(nil)
        private let openChannels = Locked<[CBL2CAPChannel]>([])
        var psm: CBL2CAPPSM? { published.current }

        func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("state \(peripheral.state.rawValue)") }
        func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
            log.append("added\(error == nil ? "" : " error")")
        }
        func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
            log.append("advertising\(error == nil ? "" : " error")")
        }
        func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
            if error == nil { published.withLock { $0 = PSM } }
            log.append("published\(error == nil ? "" : " error")")
        }
        func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
            if let channel { openChannels.withLock { $0.append(channel) } }
            log.append(channel == nil ? "open error" : "opened")
        }
        func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
            log.append("subscribed")
        }
        func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) { log.append("ready") }
        func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
            log.append("write \(requests.count)")
            peripheral.respond(to: requests[0], withResult: .success)
        }
    }

    @Test(arguments: CentralScenario.allCases)
    func ourPeripheralAgainstAHostileCentral(_ scenario: CentralScenario) throws {
        let checks = Checks()
        let port = try freeLoopbackPort()
        let server = Server()
        let agent = InteropPairingAgent(.noInputNoOutput)
        // The peer's process serves our controller: it listens before the manager starts, and
        // connects once told our address.
        let controllerPeer = try PeerProcess(script: "hostile_peer.py", arguments: ["central", "\(port)"])
        var manager: CBPeripheralManager?
        defer {
            manager = nil
            controllerPeer.stop(failed: !checks.ok)
        }
        checks.check(controllerPeer.waitFor("LISTENING", timeout: .seconds(30)), "the hostile central started")
        manager = CBPeripheralManager(delegate: server, queue: server.queue,
                                      options: [CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(port)"])
        manager?.linuxPairingAgent = agent
        checks.wait({ server.log.contains("state 5") }, seconds: 30, "powered on")
        let service = CBMutableService(type: Self.service, primary: true)
        let indicating = CBMutableCharacteristic(type: Self.notifying, properties: .indicate, value: nil, permissions: [])
        service.characteristics = [
            CBMutableCharacteristic(type: Self.hello, properties: .read, value: Data("hello".utf8), permissions: .readable),
            CBMutableCharacteristic(type: Self.long, properties: .write, value: nil, permissions: .writeable),
            indicating,
        ]
        manager?.add(service)
        checks.wait({ server.log.contains("added") }, "service added")
        manager?.publishL2CAPChannel(withEncryption: false)
        checks.wait({ server.psm != nil }, "channel published")
        manager?.startAdvertising([CBAdvertisementDataLocalNameKey: "HostileTarget"])
        checks.wait({ server.log.contains("advertising") }, "advertising")
        let address = try #require(manager?.linuxDeviceAddress)
        controllerPeer.send("connect \(address)/R")
        checks.check(controllerPeer.waitFor("READY", timeout: .seconds(30)), "the hostile central connected and discovered")

        let before = controllerPeer.completeLines.count
        let psm = server.psm.map { " \($0)" } ?? ""
        var accepted = 0
        if scenario == .unconfirmedIndications {
            // While the peer sits on our first indication, the app's updates queue up to a
            // bound, then updateValue says no (and the ready callback would follow a confirmation).
            controllerPeer.send("run \(scenario.rawValue)")
            checks.wait({ server.log.contains("subscribed") }, "subscribed")
            while accepted < 10_000, manager?.updateValue(Data([UInt8(truncatingIfNeeded: accepted)]), for: indicating,
                                                           onSubscribedCentrals: nil) == true {
                accepted += 1
            }
            checks.check(controllerPeer.waitFor("DONE \(scenario.rawValue)"), "the scenario ran")
        } else {
            checks.check(controllerPeer.command("run \(scenario.rawValue)\(psm)", expect: "DONE", timeout: .seconds(60)),
                         "the scenario ran")
        }
        let lines = controllerPeer.completeLines.dropFirst(before).map(String.init)
        func line(_ prefix: String) -> String? { lines.first { $0.hasPrefix(prefix + " ") }.map { String($0.dropFirst(prefix.count + 1)) } }
        func smp() -> [String] { lines.filter { $0.hasPrefix("SMP ") }.map { String($0.dropFirst(4)) } }

        switch scenario {
        case .serverUnsolicited:
            // Unknown request: Request Not Supported; malformed or over ATT_MTU: Invalid PDU.
            let notSupported = Self.att(.requestNotSupported), invalid = Self.att(.invalidPdu)
            checks.check(lines.contains("ANSWER 3F00 013f0000\(notSupported)"), "unknown request: \(lines)")
            for request in ["0A01", "0A010101", "10", "0803", "04"] {
                let opcode = String(request.prefix(2)).lowercased()
                checks.check(lines.contains("ANSWER \(request) 01\(opcode)0000\(invalid)"), "\(request) is an Invalid PDU: \(lines)")
            }
            // Twelve reads at once: the one served and the eight that may wait are answered.
            let pipelined = Int(line("PIPELINED") ?? "") ?? 0
            checks.check(pipelined >= 9 && pipelined <= 12, "pipelined reads answered: \(pipelined)")
        case .mtuTwice:
            checks.check(line("FIRST"), "030502", "the first exchange (client Rx MTU 5, ours 517)")
            checks.check(line("SECOND"), "0102000006", "the second: Request Not Supported")
        case .preparedWriteFlood:
            // 64 prepared writes queue; the 9,936 others get Prepare Queue Full.
            checks.check(line("PREPARED"), "ok=64 full=9936 other=0 unanswered=0", "10,000 prepared writes")
            checks.check(line("EXECUTE"), "19", "cancelled")
            checks.check(!server.log.all.contains { $0.hasPrefix("write") }, "no write reached the app: \(server.log.all)")
        case .signalling:
            // A peripheral understands no Connection Parameter Update Request.
            checks.check(line("ANSWER 7F21"), "012102000000", "unknown code")
            checks.check(line("ANSWER 1222"), "012202000000", "update request to a peripheral")
            checks.check(line("ANSWER 1223"), "012302000000", "invalid update request to a peripheral")
            checks.check(line("ANSWER 062A"), "012a0600020040004000", "disconnect an unknown channel")
            checks.check(line("ANSWER 1327"), "", "unsolicited response: no answer")
            checks.check(line("ANSWER 0A2C"), "012c02000000", "a BR/EDR-only command")
        case .invalidChannelOpen:
            for (label, result) in [("mtu22", "000b"), ("mps22", "000b"), ("mps65534", "000b"), ("cid0010", "0009"),
                                    ("unknown-psm", "0002"), ("first", "0000"), ("duplicate", "000a"), ("psm-zero", "0002")] {
                checks.check(lines.contains { $0.hasPrefix("OPEN \(label) result=\(result)") }, "\(label) → \(result): \(lines)")
            }
            checks.check(lines.contains { $0.hasPrefix("OPEN truncated answer=01490200") }, "truncated → Command Reject: \(lines)")
            checks.wait({ server.log.count(of: "opened") == 1 }, "one channel opened")
        case .creditFlood:
            checks.check(lines.contains { $0.hasPrefix("OPEN ok") }, "opened: \(lines)")
            // Credits past 65535: we disconnect the channel (Vol 3 Part A §10.1).
            checks.check(line("CLOSED")?.hasPrefix("06") == true, "the channel closed: \(lines)")
        case .unconfirmedIndications:
            checks.check(line("SUBSCRIBE"), "13", "subscribed to indications")
            // One indication outstanding at a time (Vol 3 Part F §3.3.2): only the first goes out.
            checks.check(line("INDICATIONS"), "1", "indications sent while none is confirmed")
            checks.check(accepted >= 1 && accepted < 10_000, "updates queued: \(accepted) (bounded)")
            checks.check(!server.log.contains("ready"), "no readiness without a confirmation")
        case .smpOutOfOrder:
            // Out of order: Pairing Failed, Unspecified Reason; a responder's PDU from the
            // initiator: Command Not Supported.
            checks.check(line("CONFIRM-FIRST"), "0508", "a confirm before the request")
            checks.check(line("RESPONSE"), "0507", "a Pairing Response to the responder")
            checks.check(line("RANDOM"), "0508", "a random before the request")
        case .smpMidPairing:
            checks.check(line("PAIRING-RESPONSE")?.hasPrefix("02") == true, "pairing answered: \(lines)")
            // Mid pairing, a new request ends it: Unspecified Reason.
            checks.check(line("SECOND-REQUEST"), "0508", "a second Pairing Request mid pairing")
            // Afterwards: answered again, or paced (Repeated Attempts, Vol 3 Part H §2.3.6).
            let again = line("AFTERWARDS") ?? ""
            checks.check(again.hasPrefix("02") || again == "0509", "a request after the failure: \(again)")
        case .smpOversized:
            checks.check(line("OVERSIZED"), "050a", "an oversized Pairing Request: Invalid Parameters")
        case .smpBadConfirm:
            checks.check(line("PAIRING-RESPONSE")?.hasPrefix("02") == true, "legacy pairing answered: \(lines)")
            checks.check(line("CONFIRM")?.hasPrefix("03") == true, "our confirm: \(lines)")
            checks.check(line("RANDOM"), "0504", "Confirm Value Failed")
        case .smpBadPublicKey:
            checks.check(line("PAIRING-RESPONSE")?.hasPrefix("02") == true, "Secure Connections answered: \(lines)")
            // A key off the curve: refused, never used.
            checks.check(["050a", "050b"].contains(line("KEY-FAILED") ?? ""), "the key refused: \(lines)")
            checks.check(line("DHKEY-CHECKS-SENT"), "0", "no DHKey check from us")
        }
        // The link works afterwards (or, for SMP, at least was not taken over by the peer).
        checks.check(controllerPeer.command("check", expect: "READ-OK 0b68656c6c6f"), "a normal read afterwards: \(controllerPeer.text.suffix(300))")
    }
}
