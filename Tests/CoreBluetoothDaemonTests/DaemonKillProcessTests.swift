@testable import CoreBluetooth
import Foundation
import Scheduling
import TestSupport
import TestTools
import Testing
import VirtualController

// Issue 16's acceptance: `kill -9` of a client in the middle of every procedure leaves the
// daemon serving the others, with no leaked connection or subscription.

private func uuid(_ text: String) -> CBUUID { CBUUID(string: text) }

/// A pairing agent that keeps every prompt until the test lets it go.
private final class HoldingAgent: CBPairingAgent, @unchecked Sendable {
    // `held` is behind the lock.
    private let lock = NSLock()
    private var held: [CBPairingRequest] = []
    var ioCapability: CBPairingIOCapability { .displayYesNo }
    var count: Int { lock.withLock { held.count } }
    func handle(_ request: CBPairingRequest) { lock.withLock { held.append(request) } }
    func acceptAll() {
        for request in lock.withLock({ () -> [CBPairingRequest] in defer { held = [] }; return held }) { request.accept() }
    }
}

/// A peripheral app of the test, in this process on the shared radio (a controller of its own):
/// service FEED with FEE1 and FEE3 (notify), FEE2 (a 200-byte value, read and written long),
/// FEE4 (read, needs encryption), FEE5 (read and write, answered at once) and FEE6 (read). While
/// `holding`, it does not answer FEE6's reads, FEE2's writes and FEE2's reads past offset 0:
/// the procedure stays under way until the test lets the requests go.
private final class HoldingPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    // The counters and held requests are behind the lock; `manager` is set once before use.
    private let lock = NSLock()
    private var heldReads: [CBATTRequest] = []
    /// Each a Write Request's or an Execute Write's requests.
    private var heldWrites: [[CBATTRequest]] = []
    private var holdingStorage = true
    private var subscribers: [CBUUID: Set<UUID>] = [:]
    private var fee5 = Data([0x05])
    let advertised: CBUUID
    let queue: DispatchQueue
    let long = Data((0..<200).map { UInt8(truncatingIfNeeded: 200 - $0) })
    let notifying = CBMutableCharacteristic(type: uuid("FEE1"), properties: [.notify], value: nil, permissions: [.readable])
    let feedback = CBMutableCharacteristic(type: uuid("FEE3"), properties: [.notify], value: nil, permissions: [.readable])
    let agent = HoldingAgent()
    /// The channels centrals opened to PSM 0x0080, echoed (their end is seen).
    private var echoes: [ChannelEcho] = []
    let streams = StreamRunLoopThread(name: "holding peripheral streams")
    var manager: CBPeripheralManager!

    init(advertised: String, radioPath: String) {
        self.advertised = uuid(advertised)
        queue = DispatchQueue(label: "peripheral \(advertised)")
        super.init()
        manager = CBPeripheralManager(delegate: self, queue: queue, options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        manager.linuxPairingAgent = agent
    }

    var heldReadOffsets: [Int] { lock.withLock { heldReads.map(\.offset) } }
    /// The bytes of each write held.
    var heldWriteLengths: [Int] { lock.withLock { heldWrites.map { $0.reduce(0) { $0 + ($1.value?.count ?? 0) } } } }
    /// The centrals subscribed to `characteristic` now.
    func subscriberCount(_ characteristic: String) -> Int { lock.withLock { subscribers[uuid(characteristic)]?.count ?? 0 } }

    /// The channels centrals opened that have not ended.
    var openChannels: Int { lock.withLock { echoes.count { !$0.ended } } }

    /// Holds the requests of the next procedure.
    func hold() { lock.withLock { holdingStorage = true } }

    /// Answers what it held (and everything from now on).
    func release() {
        queue.async { [self] in
            let (reads, writes) = lock.withLock { () -> ([CBATTRequest], [[CBATTRequest]]) in
                holdingStorage = false
                defer { heldReads = []; heldWrites = [] }
                return (heldReads, heldWrites)
            }
            for request in reads { answer(request) }
            for requests in writes { if let first = requests.first { manager.respond(to: first, withResult: .success) } }
        }
        agent.acceptAll()
    }

    func notify(_ byte: UInt8) {
        queue.async { [self] in _ = manager.updateValue(Data([byte]), for: notifying, onSubscribedCentrals: nil) }
    }

    private func answer(_ request: CBATTRequest) {
        let value: Data = switch request.characteristic.uuid {
        case uuid("FEE2"): long
        case uuid("FEE5"): lock.withLock { fee5 }
        default: Data([0x04])
        }
        guard request.offset <= value.count else { return manager.respond(to: request, withResult: .invalidOffset) }
        request.value = value.subdata(in: request.offset..<value.count)
        manager.respond(to: request, withResult: .success)
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        // Values longer than one PDU carries: long reads and writes.
        if let device = peripheral.device { device.loop.execute { device.hostDevice?.preferredMTU = 100 } }
        let service = CBMutableService(type: uuid("FEED"), primary: true)
        service.characteristics = [
            notifying,
            CBMutableCharacteristic(type: uuid("FEE2"), properties: [.read, .write], value: nil, permissions: [.readable, .writeable]),
            feedback,
            CBMutableCharacteristic(type: uuid("FEE4"), properties: [.read], value: nil, permissions: [.readEncryptionRequired]),
            CBMutableCharacteristic(type: uuid("FEE5"), properties: [.read, .write], value: nil, permissions: [.readable, .writeable]),
            CBMutableCharacteristic(type: uuid("FEE6"), properties: [.read], value: nil, permissions: [.readable]),
        ]
        peripheral.add(service)
        peripheral.linuxPublishL2CAPChannel(0x0080, withEncryption: false)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return }
        let echo = ChannelEcho(channel, on: streams.runLoop)
        lock.withLock { echoes.append(echo) }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        peripheral.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [advertised]])
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        let uuid = request.characteristic.uuid
        let held = uuid == CBUUID(string: "FEE6") || (uuid == CBUUID(string: "FEE2") && request.offset > 0)
        let holds = lock.withLock { holdingStorage && held }
        if holds { return lock.withLock { heldReads.append(request) } }
        answer(request)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        guard let first = requests.first else { return }
        if first.characteristic.uuid == uuid("FEE5") {
            lock.withLock { fee5 = first.value ?? Data() }
            return peripheral.respond(to: first, withResult: .success)
        }
        let holds = lock.withLock { holdingStorage }
        if holds { return lock.withLock { heldWrites.append(requests) } }
        peripheral.respond(to: first, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        lock.withLock { _ = subscribers[characteristic.uuid, default: []].insert(central.identifier) }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        lock.withLock { _ = subscribers[characteristic.uuid]?.remove(central.identifier) }
    }
}

/// The client that stays: a central manager of this process on the daemon, connected to the
/// peripheral advertising FEED and subscribed to FEE1 before any kill. It writes down values,
/// reads and writes.
private final class Survivor: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    // The log and objects are behind the lock; `manager` is set once before use.
    private let lock = NSLock()
    private var logStorage: [String] = []
    private var peripheralStorage: CBPeripheral?
    private var characteristics: [CBUUID: CBCharacteristic] = [:]
    let queue = DispatchQueue(label: "survivor")
    var manager: CBCentralManager!

    var log: [String] { lock.withLock { logStorage } }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        note("state \(central.state.rawValue)")
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [uuid("FEED")]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        note("discovered")
        guard lock.withLock({ peripheralStorage == nil }) else { return }
        lock.withLock { peripheralStorage = peripheral }
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices([uuid("FEED")])
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        note("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first else { return note("no service") }
        peripheral.discoverCharacteristics(nil, for: service)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        lock.withLock { for characteristic in service.characteristics ?? [] { characteristics[characteristic.uuid] = characteristic } }
        guard let characteristic = lock.withLock({ characteristics[uuid("FEE1")] }) else { return note("no characteristic") }
        peripheral.setNotifyValue(true, for: characteristic)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        note("notifying \(characteristic.isNotifying)")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        let value = characteristic.value.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "-"
        note("value \(characteristic.uuid.uuidString) \(value)\(error.map { " \($0)" } ?? "")")
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        note("wrote \(characteristic.uuid.uuidString)\(error.map { " \($0)" } ?? "")")
    }

    /// Scans for FEED again (every report), until `stopScan`.
    func scan() {
        queue.async { [self] in
            manager.scanForPeripherals(withServices: [uuid("FEED")], options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        }
    }

    func stopScan() { queue.async { [self] in manager.stopScan() } }

    /// Reads FEE5, then writes `byte` to it, then reads it again.
    func readWriteRead(_ byte: UInt8) {
        queue.async { [self] in
            guard let peripheral = lock.withLock({ peripheralStorage }),
                  let fee5 = lock.withLock({ characteristics[uuid("FEE5")] }) else { return note("no FEE5") }
            peripheral.readValue(for: fee5)
            peripheral.writeValue(Data([byte]), for: fee5, type: .withResponse)
            peripheral.readValue(for: fee5)
        }
    }
}

/// The daemon's status line (SIGUSR1), as key → value.
private struct DaemonStatus: CustomStringConvertible {
    var fields: [String: String] = [:]
    var description: String { fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ") }
    subscript(_ key: String) -> String { fields[key] ?? "?" }
    init?(_ line: String) {
        guard let range = line.range(of: "status ") else { return nil }
        for pair in line[range.upperBound...].split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
    }
}

@Suite("corebluetoothd: kill -9 of a client in the middle of a procedure", .serialized)
struct DaemonKillProcessTests {
    static let products = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug")
    static let daemonBinary = BuiltProducts.path("corebluetoothd", fallback: products.appendingPathComponent("corebluetoothd"))
    static let probeBinary = BuiltProducts.path("RestoreProbe", fallback: products.appendingPathComponent("RestoreProbe"))

    private func launch(_ binary: String, _ arguments: [String], output: ChildOutput, errors: ChildOutput? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardOutput = output.pipe
        process.standardError = errors?.pipe ?? FileHandle.nullDevice
        try process.run()
        output.start()
        errors?.start()
        return process
    }

    /// Three kinds of processes on one shared virtual radio: `corebluetoothd`, this one (two
    /// peripheral apps, P advertising FEED and Q advertising FEEF, and the surviving client on
    /// the daemon, connected to P and subscribed to FEE1), and one RestoreProbe per procedure:
    /// it connects (to P, sharing the daemon's link with the survivor, or to Q, alone on its
    /// link), subscribes to FEE3, starts the procedure, and is killed with SIGKILL while it is
    /// under way (the peripheral holds the procedure's request, or its pairing prompt). After
    /// each kill: the daemon serves the survivor (a notification, a read, a write, a read),
    /// holds one link (P's) owned by one session with no GATT procedure left on it, and no
    /// subscription or L2CAP channel of the killed client is left at the peripheral.
    @Test func aClientKilledInTheMiddleOfEachProcedureLeavesTheDaemonServingTheOthersWithNothingLeaked() async throws {
        for binary in [Self.daemonBinary, Self.probeBinary] {
            try #require(FileManager.default.isExecutableFile(atPath: binary), "run `swift build` first: \(binary)")
        }
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("kill-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 16))
        defer { radioServer.close() }
        let socketPath = temporaryPath("corebluetoothd.sock")
        let daemonLog = ChildOutput()
        let daemon = try launch(Self.daemonBinary, ["--transport", "virtual:\(radioPath)", "--listen", socketPath],
                                output: ChildOutput(), errors: daemonLog)
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
        try #require(await eventually { daemonAccepts(socketPath) })

        /// The daemon's status, asked for now (SIGUSR1) and read from its log.
        func status() async -> DaemonStatus? {
            let asked = daemonLog.lines.count
            kill(daemon.processIdentifier, SIGUSR1)
            var found: DaemonStatus?
            _ = await eventually(timeout: .seconds(5)) {
                found = daemonLog.lines.dropFirst(asked).lazy.compactMap(DaemonStatus.init).first
                return found != nil
            }
            return found
        }
        /// Asks for the status until `condition` holds (at most 10 s); the last one seen.
        func statusWhen(_ condition: (DaemonStatus) -> Bool) async -> (Bool, DaemonStatus?) {
            let deadline = ContinuousClock.now + .seconds(10)
            var last: DaemonStatus?
            while ContinuousClock.now < deadline {
                last = await status()
                if let last, condition(last) { return (true, last) }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return (false, last)
        }

        let p = HoldingPeripheral(advertised: "FEED", radioPath: radioPath)
        let q = HoldingPeripheral(advertised: "FEEF", radioPath: radioPath)
        let survivor = Survivor()
        survivor.manager = CBCentralManager(delegate: survivor, queue: survivor.queue,
                                            options: [CBManagerOptionLinuxTransportKey: "daemon:\(socketPath)"])
        #expect(await eventually(timeout: .seconds(20)) { survivor.log.contains("notifying true") && p.subscriberCount("FEE1") == 1 },
                "\(survivor.log)")
        var byte: UInt8 = 0x10

        /// One victim: started, brought to the middle of `procedure` on the peripheral
        /// advertising `service`, killed there; then what must hold after.
        func killInTheMiddle(of procedure: String, on service: String,
                             underWay: @escaping (_ lines: [String], _ status: DaemonStatus) -> Bool) async throws {
            let peripheral = service == "FEED" ? p : q
            p.hold()
            q.hold()
            let output = ChildOutput()
            let victim = try launch(Self.probeBinary, [socketPath, "kill", procedure, service], output: output)
            defer { if victim.isRunning { kill(victim.processIdentifier, SIGKILL) } }
            #expect(await eventually(timeout: .seconds(15)) { output.lines.contains("notifying FEE3 true") },
                    "\(procedure): \(output.lines)")
            #expect(await eventually { peripheral.subscriberCount("FEE3") == 1 }, "\(procedure): the victim's subscription")
            let (middle, seen) = await statusWhen { underWay(output.lines, $0) }
            #expect(middle, "\(procedure) on \(service) under way: \(output.lines) \(seen.map { "\($0)" } ?? "no status")")

            let pid = victim.processIdentifier
            kill(pid, SIGKILL)
            #expect(await eventually { daemonLog.lines.contains { $0.contains("client pid \(pid) left") } }, "\(daemonLog.lines)")
            // What the peripherals held is answered now: what the killed client left queued
            // runs for nobody.
            p.release()
            q.release()

            // Nothing of the victim is left: one link (P's, the survivor's), one owner, no GATT
            // procedure on it, no connection being made, one subscription (the survivor's); the
            // victim's is gone at the peripheral too, the survivor's is not.
            let (clean, last) = await statusWhen {
                $0["clients"] == "1" && $0["links"] == "1" && $0["owners"] == "1" && $0["procedures"] == "0" && $0["pending"] == "0"
                    && $0["subscriptions"] == "1" && $0["channels"] == "0"
            }
            #expect(clean, "\(procedure) on \(service): after the kill \(last.map { "\($0)" } ?? "no status")")
            #expect(await eventually { peripheral.subscriberCount("FEE3") == 0 }, "\(procedure): the victim's FEE3 subscription is left")
            #expect(p.subscriberCount("FEE1") == 1, "\(procedure): the survivor's FEE1 subscription")
            #expect(await eventually { q.subscriberCount("FEE1") == 0 }, "\(procedure): the victim's FEE1 subscription is left on Q")
            #expect(await eventually { peripheral.openChannels == 0 }, "\(procedure): the victim's channel is still open at the peripheral")

            // The daemon serves the survivor: a scan, a notification, a read, a write and a read.
            let discoveries = survivor.log.count { $0 == "discovered" }
            survivor.scan()
            #expect(await eventually { survivor.log.count { $0 == "discovered" } > discoveries }, "\(procedure): the survivor's scan")
            survivor.stopScan()
            byte += 1
            let expected = String(format: "%02x", byte)
            p.notify(byte)
            #expect(await eventually { survivor.log.contains("value FEE1 \(expected)") }, "\(procedure): \(survivor.log)")
            let writes = survivor.log.count { $0 == "wrote FEE5" }
            survivor.readWriteRead(byte)
            #expect(await eventually {
                survivor.log.count { $0 == "wrote FEE5" } == writes + 1 && survivor.log.last == "value FEE5 \(expected)"
            },
                    "\(procedure): \(survivor.log.suffix(4))")
            #expect(!survivor.log.contains("disconnected"), "\(procedure): \(survivor.log)")
        }

        /// The most GATT procedures queued or running on one link.
        func procedures(_ status: DaemonStatus) -> Int { status["procedures"].split(separator: ",").compactMap { Int($0) }.max() ?? 0 }
        // Each procedure on P's link, which the survivor shares (it stays up: what the victim
        // left on it must go), then on Q's, which the victim has alone (it must go down).
        for (service, peripheral) in [("FEED", p), ("FEEF", q)] {
            let links = service == "FEED" ? "1" : "2"
            // Discovery: all services asked for, waiting behind a read the peripheral holds.
            try await killInTheMiddle(of: "discover", on: service) { lines, status in
                lines.contains("discovering") && peripheral.heldReadOffsets == [0] && procedures(status) >= 2 && status["links"] == links
            }
            // Long write: the 200 bytes prepared, Execute Write sent, the peripheral holds its answer.
            try await killInTheMiddle(of: "long-write", on: service) { lines, status in
                lines.contains("writing") && peripheral.heldWriteLengths == [200] && status["links"] == links
            }
            // Long read: the first part read, the peripheral holds the Read Blob.
            try await killInTheMiddle(of: "long-read", on: service) { lines, status in
                let offsets = peripheral.heldReadOffsets
                return lines.contains("reading") && offsets.count == 1 && offsets[0] > 0 && status["links"] == links
            }
            // Subscribe: to FEE1 (on P the survivor's too), waiting behind a read the
            // peripheral holds.
            try await killInTheMiddle(of: "subscribe", on: service) { lines, status in
                lines.contains("subscribing") && peripheral.heldReadOffsets == [0] && procedures(status) >= 2 && status["links"] == links
            }
            // Pairing: a read of FEE4 refused for want of encryption, the daemon pairing (Just
            // Works), the peripheral's agent holding its prompt.
            try await killInTheMiddle(of: "pair", on: service) { lines, status in
                lines.contains("pairing") && peripheral.agent.count == 1 && status["links"] == links
            }
        }
        // Channel open: through the daemon to the peripheral's PSM 0x0080, killed with the
        // channel open (on a link the survivor shares): the channel closes at the peripheral.
        try await killInTheMiddle(of: "channel", on: "FEED") { lines, status in
            lines.contains("channel open") && p.openChannels == 1 && status["channels"] == "1"
        }
        // Nothing under way: connected and subscribed.
        try await killInTheMiddle(of: "idle", on: "FEED") { lines, _ in lines.contains("idle") }

        p.streams.stop()
        q.streams.stop()
        daemon.terminate()
        #expect(await eventually { !daemon.isRunning })
    }
}
