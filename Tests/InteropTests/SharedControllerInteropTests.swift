import CoreBluetooth
import Foundation
import TestSupport
import Testing

/// A peripheral manager's delegate that answers reads of one long characteristic, takes every
/// write, and writes down everything it hears and from which centrals.
final class SharedPeripheralDelegate: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let queue = DispatchQueue(label: "shared-peripheral")
    /// The value of the characteristic answered here (the others are cached or write-only).
    static let longValue = Data((0..<400).map { UInt8(truncatingIfNeeded: $0 * 13 + 5) })
    private let lock = NSLock()
    private var writesStorage: [(uuid: String, value: Data)] = []
    private var centralsStorage: Set<UUID> = []
    var writes: [(uuid: String, value: Data)] { lock.withLock { writesStorage } }
    /// Every central a request or subscription came from.
    var centrals: Set<UUID> { lock.withLock { centralsStorage } }

    private func heard(from central: CBCentral) { _ = lock.withLock { centralsStorage.insert(central.identifier) } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("state \(peripheral.state.rawValue)") }
    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        log.append("added \(service.uuid.uuidString)\(error == nil ? "" : " error")")
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append("advertising\(error == nil ? "" : " error")")
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        heard(from: request.central)
        log.append("read \(request.characteristic.uuid.uuidString) \(request.offset)")
        guard request.offset <= Self.longValue.count else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = Self.longValue.subdata(in: request.offset..<Self.longValue.count)
        peripheral.respond(to: request, withResult: .success)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        for request in requests { heard(from: request.central) }
        lock.withLock { writesStorage += requests.map { ($0.characteristic.uuid.uuidString, $0.value ?? Data()) } }
        log.append("write \(requests[0].characteristic.uuid.uuidString) \(requests.count)")
        peripheral.respond(to: requests[0], withResult: .success)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        heard(from: central)
        log.append("subscribed \(characteristic.uuid.uuidString)")
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        heard(from: central)
        log.append("unsubscribed \(characteristic.uuid.uuidString)")
    }
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) { log.append("ready to update") }
}

/// A central manager's delegate: a CentralRecorder (which also serves the peripherals), plus
/// connection events, which no manager here registers for and so must never hear.
final class SharedCentralDelegate: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    let recorder = CentralRecorder()
    var log: EventLog { recorder.log }
    var queue: DispatchQueue { recorder.queue }

    func centralManagerDidUpdateState(_ central: CBCentralManager) { recorder.centralManagerDidUpdateState(central) }
    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        recorder.centralManager(central, didDiscover: peripheral, advertisementData: advertisementData, rssi: RSSI)
    }
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        recorder.centralManager(central, didConnect: peripheral)
    }
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        recorder.centralManager(central, didFailToConnect: peripheral, error: error)
    }
    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        recorder.centralManager(central, didDisconnectPeripheral: peripheral, error: error)
    }
    func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent, for peripheral: CBPeripheral) {
        log.append("connection event \(event.rawValue) \(peripheral.name ?? "?")")
    }

    /// The names of the peripherals this manager's delegate heard of in discoveries, in order.
    var discoveries: [String] { log.all.filter { $0.hasPrefix("discover ") }.map { String($0.dropFirst("discover ".count)) } }
    var connections: [String] { log.all.filter { $0.hasPrefix("connect ") } }
}

/// Captures of a device that several managers share, read with tshark beyond `Tshark.check`.
enum SharedCapture {
    /// The frames of `capture` that match the display filter `filter`, as `fields` separated by tabs.
    static func frames(_ capture: String, filter: String, fields: [String] = ["frame.number"]) throws -> [[String]] {
        let tshark = try #require(Tshark.locate(), "tshark is not installed: apt-get install -y tshark")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tshark)
        process.arguments = ["-r", capture, "-Y", filter, "-T", "fields"] + fields.flatMap { ["-e", $0] }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self).split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    static func count(_ capture: String, _ filter: String) throws -> Int { try frames(capture, filter: filter).count }

    /// For each ACL connection handle that carried ATT, the first and last frame numbers.
    static func attSpans(_ capture: String) throws -> [String: ClosedRange<Int>] {
        var spans: [String: ClosedRange<Int>] = [:]
        for row in try frames(capture, filter: "btatt", fields: ["frame.number", "bthci_acl.chandle"]) where row.count == 2 {
            guard let frame = Int(row[0]) else { continue }
            let span = spans[row[1]]
            spans[row[1]] = min(span?.lowerBound ?? frame, frame)...max(span?.upperBound ?? frame, frame)
        }
        return spans
    }
}

/// Issue 13: the managers of one process that name the same controller share ONE local device
/// on it, as an app's managers share a phone's radio: one HCI connection, one initialisation,
/// one address; the device serves every manager at once and each manager hears only of its
/// own scans, connections and services. Real time, against independent stacks.
@Suite("Interop: managers sharing one controller", .serialized)
struct SharedControllerInteropTests {
    static func uuid(_ n: Int) -> String { String(format: "6E42%04X-B5A3-F393-E0A9-E50E24DCCA9E", n) }
    static func cb(_ n: Int) -> CBUUID { CBUUID(string: uuid(n)) }
    /// The custom characteristics of bumble_gatt_peripheral.py.
    static func bumbleUUID(_ n: Int) -> String { String(format: "6E40%04X-B5A3-F393-E0A9-E50E24DCCA9E", n) }

    func wait(_ condition: @escaping () -> Bool, seconds: Int64 = 15) -> Bool {
        CBVirtualRadio.waitForCallbacks(until: condition, timeout: .seconds(seconds))
    }

    func characteristic(_ uuid: String, of peripheral: CBPeripheral) throws -> CBCharacteristic {
        let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
        return try #require(all.first { $0.uuid == CBUUID(string: uuid) }, "characteristic \(uuid)")
    }

    /// What the managers' states are, and why a manager is unusable: the failure message when
    /// the managers do not all power on.
    func states(_ managers: [(String, CBManager?)]) -> String {
        managers.map { name, manager in
            "\(name): state \(manager?.state.rawValue ?? -1)\(manager?.linuxUnavailableReason.map { " (\($0))" } ?? "")"
        }.joined(separator: "; ")
    }

    /// Scenario 1. One Bumble controller (P0) for a CBPeripheralManager and a CBCentralManager
    /// of ours; linked to it, a Bumble central (P1) that finds and uses our peripheral manager's
    /// service, and a Bumble heart-rate peripheral (P2) that our central manager uses, at the
    /// same time.
    @Test func peripheralAndCentralManagersShareOneBumbleController() throws {
        let ports = try (0..<3).map { _ in try freeLoopbackPort() }
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var failed = true
        defer { controllers.stop(failed: failed) }
        #expect(controllers.waitFor("READY"))
        let heartRate = try PeerProcess(script: "bumble_gatt_peripheral.py",
                                        arguments: ["tcp-client:127.0.0.1:\(ports[2])", "BumbleHR", "F0:F1:F2:F3:F4:F8"])
        defer { heartRate.stop(failed: failed) }
        #expect(heartRate.waitFor("ADVERTISING"))

        // One capture for the one device: both managers name the same file (the device takes the
        // first manager's), so it holds the traffic of both roles.
        let capture = temporaryPath("shared-bumble.btsnoop")
        defer { if failed { Issue.record("capture \(capture)") } else { try? FileManager.default.removeItem(atPath: capture) } }
        let options: [String: Any] = [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
        ]
        // Made together, as an app makes its managers at launch.
        let serving = SharedPeripheralDelegate()
        let using = SharedCentralDelegate()
        var peripheralManager: CBPeripheralManager? = CBPeripheralManager(delegate: serving, queue: serving.queue, options: options)
        var centralManager: CBCentralManager? = CBCentralManager(delegate: using, queue: using.queue, options: options)
        _ = wait { serving.log.contains("state 5") && using.log.contains("state 5") }
        try #require(peripheralManager?.state == .poweredOn && centralManager?.state == .poweredOn,
                     "both managers on tcp:127.0.0.1:\(ports[0]) power on: \(states([("peripheral manager", peripheralManager), ("central manager", centralManager)]))")
        // One device: one address on the air for both roles. (Two hosts on one Bumble port can
        // both come up, each with an address of its own, while the port serves only the last.)
        let address = try #require(peripheralManager?.linuxDeviceAddress)
        try #require(centralManager?.linuxDeviceAddress == address, "one device, one address for both managers")

        // Our service: a long dynamic value, a characteristic writable both ways, a notifying one.
        let service = CBMutableService(type: Self.cb(1), primary: true)
        let notifying = CBMutableCharacteristic(type: Self.cb(4), properties: .notify, value: nil, permissions: [])
        service.characteristics = [
            CBMutableCharacteristic(type: Self.cb(2), properties: .read, value: nil, permissions: .readable),
            CBMutableCharacteristic(type: Self.cb(3), properties: [.write, .writeWithoutResponse], value: nil, permissions: .writeable),
            notifying,
        ]
        peripheralManager?.add(service)
        #expect(wait { serving.log.contains("added \(Self.uuid(1))") })
        // The name alone: with a 128-bit UUID it would not fit in the advertisement, and Bumble's
        // controller never delivers scan responses.
        peripheralManager?.startAdvertising([CBAdvertisementDataLocalNameKey: "SwiftShared"])
        #expect(wait { serving.log.contains("advertising") })

        // Both activities start together: the Bumble central scans for our name and connects
        // (MTU 64, so that the 400-byte read takes several PDUs) while our central scans for
        // Bumble's heart-rate peripheral and connects.
        let bumbleCentral = try PeerProcess(script: "bumble_central.py",
                                            arguments: ["tcp-client:127.0.0.1:\(ports[1])", "name=SwiftShared", "64"])
        defer { bumbleCentral.stop(failed: failed) }
        centralManager?.scanForPeripherals(withServices: [CBUUID(string: "180D")])
        #expect(wait { using.recorder.discovered(named: "BumbleHR") != nil })
        let hr = try #require(using.recorder.discovered(named: "BumbleHR"))
        centralManager?.stopScan()
        centralManager?.connect(hr)
        #expect(wait { using.log.count(prefix: "connect") == 1 })
        hr.discoverServices([CBUUID(string: "180D"), CBUUID(string: Self.bumbleUUID(1))])
        #expect(wait { using.log.count(prefix: "services") == 1 })
        for service in hr.services ?? [] { hr.discoverCharacteristics(nil, for: service) }
        #expect(wait { using.log.count(prefix: "characteristics") == 2 })

        // The Bumble central found our advertisement (from the shared address), connected and
        // discovered our database over its own link.
        #expect(bumbleCentral.waitFor("READY", timeout: .seconds(30)))
        #expect(bumbleCentral.text.uppercased().contains("FOUND \(address.uppercased())"))
        #expect(bumbleCentral.text.contains("MTU 64"))
        #expect(bumbleCentral.text.contains("SERVICE \(Self.uuid(1))"))
        for n in 2...4 { #expect(bumbleCentral.text.contains("CHARACTERISTIC \(Self.uuid(n))"), "\(n)") }
        // Both links are up at once.
        #expect(hr.state == .connected)
        #expect(!bumbleCentral.text.contains("DISCONNECTED"))

        // Both sides' GATT traffic at once: the Bumble central's commands are queued on its
        // standard input while our central reads (one long read) and subscribes.
        bumbleCentral.send("read \(Self.uuid(2))")
        bumbleCentral.send("write \(Self.uuid(3)) 0102")
        bumbleCentral.send("write-command \(Self.uuid(3)) 0304")
        bumbleCentral.send("subscribe \(Self.uuid(4))")
        let location = try characteristic("2A38", of: hr)
        let long = try characteristic(Self.bumbleUUID(2), of: hr)
        hr.readValue(for: location)
        hr.readValue(for: long)
        hr.setNotifyValue(true, for: try characteristic("2A37", of: hr))

        // (b) our central: the reads and Bumble's five notifications.
        #expect(wait { using.log.contains("value 2A37 0040") && using.log.count(prefix: "value \(Self.bumbleUUID(2))") == 1 })
        #expect(location.value == Data([1]))
        #expect(long.value == Data((0..<600).map { UInt8(($0 * 7) % 256) }))
        #expect(using.log.all.filter { $0.hasPrefix("value 2A37") } == (60...64).map { "value 2A37 00\(String(format: "%02x", $0))" })

        // (a) the Bumble central: a long read answered by our delegate at each offset, a write
        // request, a write command, a subscription and our notifications.
        #expect(bumbleCentral.waitFor("READ \(Self.uuid(2)) \(SharedPeripheralDelegate.longValue.hex)"))
        #expect(bumbleCentral.waitFor("WROTE \(Self.uuid(3))"))
        #expect(bumbleCentral.waitFor("SENT \(Self.uuid(3))"))
        #expect(bumbleCentral.waitFor("SUBSCRIBED \(Self.uuid(4))"))
        #expect(wait { serving.log.contains("subscribed \(Self.uuid(4))") && serving.writes.count == 2 })
        #expect(serving.log.count(prefix: "read \(Self.uuid(2))") > 1)
        #expect(serving.writes.map(\.value) == [Data([1, 2]), Data([3, 4])])
        for value: UInt8 in 0xA0...0xA2 {
            #expect(peripheralManager?.updateValue(Data([value]), for: notifying, onSubscribedCentrals: nil) == true)
        }
        for value in ["a0", "a1", "a2"] { #expect(bumbleCentral.waitFor("VALUE \(Self.uuid(4)) \(value)")) }

        // Each manager heard only of its own: the central manager of its own scan and its one
        // connection (never of the Bumble central's connection to the device), the peripheral
        // manager of requests to its own service from the one central that made them (never of
        // the link our central made).
        #expect(using.connections == ["connect BumbleHR"])
        #expect(using.discoveries.allSatisfy { $0 == "BumbleHR" }, "\(using.discoveries)")
        #expect(!using.log.all.contains { $0.hasPrefix("disconnect") || $0.hasPrefix("connection event") || $0.hasPrefix("fail") })
        let ours = Set((2...4).map(Self.uuid))
        let requests = serving.log.all.filter { !$0.hasPrefix("state") && !$0.hasPrefix("added") && !$0.hasPrefix("advertising") && !$0.hasPrefix("ready") }
        #expect(requests.allSatisfy { entry in ours.contains { entry.contains($0) } }, "\(requests)")
        #expect(serving.centrals.count == 1)

        // The Bumble central leaves: our central's link stays up and usable.
        #expect(bumbleCentral.command("disconnect", expect: "DISCONNECTED"))
        hr.readValue(for: location)
        #expect(wait { using.log.count(prefix: "value 2A38") == 2 })
        #expect(hr.state == .connected)
        #expect(!using.log.all.contains { $0.hasPrefix("disconnect") })
        // Our central leaves: only its delegate hears of it.
        let servingBefore = serving.log.all.filter { !$0.hasPrefix("unsubscribed") }
        centralManager?.cancelPeripheralConnection(hr)
        #expect(wait { using.log.count(prefix: "disconnect") == 1 })
        #expect(heartRate.waitFor("DISCONNECTED"))
        #expect(serving.log.all.filter { !$0.hasPrefix("unsubscribed") } == servingBefore)

        peripheralManager = nil
        centralManager = nil
        // One device on the controller: one capture with both roles' traffic, one Reset, and
        // the two links' ATT traffic overlapping in time.
        let result = try Tshark.checkEachConnection(capture: capture)
        #expect(result.frameCount > 100)
        #expect(result.malformedSent.isEmpty && result.malformedReceived.isEmpty, "\(result.malformed)")
        let resets = try SharedCapture.count(capture, "bthci_cmd.opcode == 0x0c03")
        #expect(resets == 1, "HCI Reset sent \(resets) times")
        #expect(try SharedCapture.count(capture, "bthci_cmd.opcode == 0x200d || bthci_cmd.opcode == 0x2043") == 1, "LE Create Connection")
        #expect(try SharedCapture.count(capture, "bthci_cmd.opcode == 0x200a || bthci_cmd.opcode == 0x2039") >= 1, "advertising enabled")
        // Read Blob Requests: ours to Bumble's peripheral, and the Bumble central's to us.
        #expect(try SharedCapture.count(capture, "btatt.opcode == 0x0c && frame.p2p_dir == 0") >= 1)
        #expect(try SharedCapture.count(capture, "btatt.opcode == 0x0c && frame.p2p_dir == 1") >= 1)
        let spans = try SharedCapture.attSpans(capture)
        #expect(spans.count == 2, "\(spans)")
        if spans.count == 2 {
            let (first, second) = (Array(spans.values)[0], Array(spans.values)[1])
            #expect(first.overlaps(second), "the two links' ATT traffic overlaps: \(spans)")
        }
        // The logs and the capture are kept unless the main outcomes all held.
        failed = !(result.malformedSent.isEmpty && result.malformedReceived.isEmpty) || resets != 1
            || spans.count != 2 || using.connections != ["connect BumbleHR"] || serving.centrals.count != 1
            || !bumbleCentral.text.contains("VALUE \(Self.uuid(4)) a2") || long.value?.count != 600
    }

    /// Scenario 2. One RootCanal controller for two CBCentralManagers and a CBPeripheralManager
    /// of ours; on the same RootCanal radio, a Bumble heart-rate peripheral and a Bumble
    /// advertiser (each a controller of its own: every TCP connection to RootCanal's HCI port
    /// makes one). Central A connects to the heart-rate peripheral, central B scans and connects
    /// to the advertiser, the peripheral manager advertises; each hears only of its own.
    @Test func twoCentralManagersAndAPeripheralManagerShareOneRootCanalController() throws {
        let ports = try (0..<4).map { _ in try freeLoopbackPort() }
        let rootCanal = try PeerProcess(script: "rootcanal_server.py", arguments: ports.map(String.init))
        var failed = true
        defer { rootCanal.stop(failed: failed) }
        #expect(rootCanal.waitFor("READY"))
        let hci = "tcp-client:127.0.0.1:\(ports[0])"
        let heartRate = try PeerProcess(script: "bumble_gatt_peripheral.py", arguments: [hci, "CanalHR", "F0:C1:C1:C1:C1:01"])
        defer { heartRate.stop(failed: failed) }
        let advertiser = try PeerProcess(script: "bumble_advertiser.py", arguments: [hci, "CanalAdv", "F0:C1:C1:C1:C1:02"])
        defer { advertiser.stop(failed: failed) }
        #expect(heartRate.waitFor("ADVERTISING") && advertiser.waitFor("ADVERTISING"))
        // RootCanal logs each controller it makes (one per HCI connection).
        func controllersMade() -> Int { rootCanal.text.components(separatedBy: "Initialized device with address").count - 1 }
        let peerControllers = controllersMade()
        #expect(peerControllers == 2)

        let capture = temporaryPath("shared-rootcanal.btsnoop")
        defer { if failed { Issue.record("capture \(capture)") } else { try? FileManager.default.removeItem(atPath: capture) } }
        let options: [String: Any] = [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
        ]
        let serving = SharedPeripheralDelegate()
        let a = SharedCentralDelegate()
        let b = SharedCentralDelegate()
        var centralA: CBCentralManager? = CBCentralManager(delegate: a, queue: a.queue, options: options)
        var peripheralManager: CBPeripheralManager? = CBPeripheralManager(delegate: serving, queue: serving.queue, options: options)
        var centralB: CBCentralManager? = CBCentralManager(delegate: b, queue: b.queue, options: options)
        _ = wait { a.log.contains("state 5") && b.log.contains("state 5") && serving.log.contains("state 5") }
        try #require(centralA?.state == .poweredOn && centralB?.state == .poweredOn && peripheralManager?.state == .poweredOn,
                     "three managers on one RootCanal controller power on: \(states([("central A", centralA), ("central B", centralB), ("peripheral manager", peripheralManager)]))")
        // RootCanal's controller has extended advertising and scanning, 2M and Coded: `supports`
        // says so for it (issue 18).
        #expect(CBCentralManager.linuxSupports(.extendedScanAndConnect, transport: "tcp:127.0.0.1:\(ports[0])"))
        // One device: one HCI connection (one RootCanal controller), one address.
        let ours = controllersMade() - peerControllers
        let address = try #require(peripheralManager?.linuxDeviceAddress)
        let addresses = [centralA?.linuxDeviceAddress, centralB?.linuxDeviceAddress]
        try #require(ours == 1 && addresses.allSatisfy { $0 == address },
                     "the three managers share one device: RootCanal made \(ours) controllers for them; addresses \(address), \(addresses)")

        // The peripheral manager advertises a service of its own.
        let service = CBMutableService(type: Self.cb(0x11), primary: true)
        service.characteristics = [CBMutableCharacteristic(type: Self.cb(0x12), properties: .notify, value: nil, permissions: [])]
        peripheralManager?.add(service)
        #expect(wait { serving.log.contains("added \(Self.uuid(0x11))") })
        peripheralManager?.startAdvertising([CBAdvertisementDataLocalNameKey: "SwiftCanal", CBAdvertisementDataServiceUUIDsKey: [Self.cb(0x11)]])
        #expect(wait { serving.log.contains("advertising") })

        // A scans for heart-rate sensors only; B for everything, every packet.
        centralA?.scanForPeripherals(withServices: [CBUUID(string: "180D")])
        centralB?.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        #expect(wait { a.recorder.discovered(named: "CanalHR") != nil })
        #expect(wait { b.recorder.discovered(named: "CanalHR") != nil && b.recorder.discovered(named: "CanalAdv") != nil })
        let hr = try #require(a.recorder.discovered(named: "CanalHR"))
        centralA?.stopScan()
        centralA?.connect(hr)
        #expect(wait { a.log.count(prefix: "connect") == 1 })
        #expect(heartRate.waitFor("CONNECTED"))
        // A's scan is over: B's goes on, and A hears nothing of it.
        let aDiscoveries = a.discoveries.count
        let bDiscoveries = b.discoveries.count
        #expect(wait { b.discoveries.count >= bDiscoveries + 10 })
        #expect(a.discoveries.count == aDiscoveries)
        #expect(a.discoveries.allSatisfy { $0 == "CanalHR" }, "A's discoveries: \(Set(a.discoveries))")
        #expect(Set(b.discoveries).isSuperset(of: ["CanalHR", "CanalAdv"]))
        // A device does not hear its own advertising.
        #expect(!b.discoveries.contains("SwiftCanal"))

        let adv = try #require(b.recorder.discovered(named: "CanalAdv"))
        centralB?.stopScan()
        centralB?.connect(adv)
        #expect(wait { b.log.count(prefix: "connect") == 1 })
        #expect(a.connections == ["connect CanalHR"])
        #expect(b.connections == ["connect CanalAdv"])

        // Both use their links at once: A reads the sensor location, B the advertiser's name.
        hr.discoverServices([CBUUID(string: "180D")])
        adv.discoverServices([CBUUID(string: "1800")])
        #expect(wait { a.log.count(prefix: "services") == 1 && b.log.count(prefix: "services") == 1 })
        if let s = hr.services?.first { hr.discoverCharacteristics([CBUUID(string: "2A38")], for: s) }
        if let s = adv.services?.first { adv.discoverCharacteristics([CBUUID(string: "2A00")], for: s) }
        #expect(wait { a.log.count(prefix: "characteristics") == 1 && b.log.count(prefix: "characteristics") == 1 })
        let location = try characteristic("2A38", of: hr)
        let name = try characteristic("2A00", of: adv)
        hr.readValue(for: location)
        adv.readValue(for: name)
        #expect(wait { location.value != nil && name.value != nil })
        #expect(location.value == Data([1]))
        #expect(name.value == Data("CanalAdv".utf8))
        // No manager's delegate heard of another's peripherals.
        #expect(!a.log.all.contains { $0.contains("1800") || $0.contains("2A00") })
        #expect(!b.log.all.contains { $0.contains("180D") || $0.contains("2A38") })

        // The peripheral manager is still advertising with both outgoing connections up: an
        // independent scanner sees it at the shared address.
        let scanner = try PeerProcess(script: "bumble_scanner.py", arguments: [hci, "3"])
        defer { scanner.stop(failed: failed) }
        #expect(scanner.waitFor("DONE", timeout: .seconds(30)))
        #expect(scanner.text.uppercased().contains("FOUND \(address.uppercased()) SWIFTCANAL"), "\(scanner.text)")
        #expect(peripheralManager?.isAdvertising == true)

        // Cancelling A's connection ends A's link only: B's stays up and usable.
        centralA?.cancelPeripheralConnection(hr)
        #expect(wait { a.log.count(prefix: "disconnect") == 1 })
        #expect(heartRate.waitFor("DISCONNECTED"))
        adv.readValue(for: name)
        #expect(wait { b.log.count(prefix: "value 2A00") == 2 })
        #expect(adv.state == .connected)
        #expect(!b.log.all.contains { $0.hasPrefix("disconnect") })

        // The peripheral manager never took the centrals' outgoing links for incoming centrals:
        // it heard of nothing but its own set-up.
        #expect(serving.log.all == ["state 5", "added \(Self.uuid(0x11))", "advertising"])
        #expect(serving.centrals.isEmpty)
        for delegate in [a, b] {
            #expect(!delegate.log.all.contains { $0.hasPrefix("connection event") || $0.hasPrefix("fail") })
        }

        centralB?.cancelPeripheralConnection(adv)
        #expect(wait { b.log.count(prefix: "disconnect") == 1 })
        centralA = nil
        centralB = nil
        peripheralManager = nil
        let result = try Tshark.checkEachConnection(capture: capture)
        #expect(result.malformedSent.isEmpty && result.malformedReceived.isEmpty, "\(result.malformed)")
        let resets = try SharedCapture.count(capture, "bthci_cmd.opcode == 0x0c03")
        #expect(resets == 1, "HCI Reset sent \(resets) times")
        // Two connections made from the one device (LE Create Connection or its extended form),
        // reported with LE Enhanced Connection Complete.
        #expect(try SharedCapture.count(capture, "bthci_cmd.opcode == 0x200d || bthci_cmd.opcode == 0x2043") == 2)
        #expect(result.verboseOutput.contains("LE Enhanced Connection Complete"))
        failed = !(result.malformedSent.isEmpty && result.malformedReceived.isEmpty) || resets != 1
            || a.connections != ["connect CanalHR"] || b.connections != ["connect CanalAdv"]
            || !a.discoveries.allSatisfy { $0 == "CanalHR" } || b.discoveries.contains("SwiftCanal")
            || b.log.count(prefix: "value 2A00") != 2
            || serving.log.all != ["state 5", "added \(Self.uuid(0x11))", "advertising"]
    }
}
