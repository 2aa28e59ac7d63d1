import CoreBluetooth
import CoreBluetoothDaemon
import DaemonProtocol
import Foundation
import HCI
import HCIDriver
import HostDevice
import RemoteRoles
import Scheduling
import TestTools
import Testing
import VirtualController

/// A shared virtual radio (as `cbtool radio --listen`) and `corebluetoothd` on a virtual
/// controller of its own on it, served on a socket, all in this process.
private final class RadioAndDaemon {
    let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
    let radioPath = temporaryPath("daemon-radio.sock")
    let socketPath = temporaryPath("corebluetoothd.sock")
    private let radioServer: RadioServer
    private let proxy: RadioProxy
    private let controller: VirtualController
    let device: HostDevice
    private var daemon: DaemonServer!

    init(seed: UInt64, onEvent: String? = nil) async throws {
        radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: seed))
        proxy = try RadioProxy(path: radioPath)
        try proxy.waitUntilJoined()
        controller = VirtualController(radio: proxy, address: BluetoothAddress("CB:D0:00:00:16:\(String(format: "%02X", seed))")!)
        device = HostDevice(transport: controller.makeHostTransport(), loop: proxy.loop, deviceName: "corebluetoothd")
        let started = Shared<Bool?>(nil)
        let device = self.device
        proxy.loop.execute { device.start { result in started.update { $0 = (try? result.get()) != nil } } }
        _ = await eventually { started.update { $0 } != nil }
        try #require(started.update { $0 } == true)
        daemon = try DaemonServer(path: socketPath, device: device, onEvent: onEvent.map { DaemonEventCommand(command: $0) })
    }

    /// The clients the daemon serves now.
    var clientCount: Int { daemon.clientCredentials.count }

    /// Another path to the daemon's socket: a manager on it has a connection of its own, as a
    /// second process has (managers of one process on one path share theirs).
    func secondPath() throws -> String {
        let link = temporaryPath("corebluetoothd-link.sock")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: socketPath)
        return link
    }

    /// The daemon stops serving (its clients' connections close), as when it exits.
    func closeDaemon() { daemon.close() }

    func close() {
        daemon.close()
        let device = self.device
        withExtendedLifetime(controller) { proxy.loop.execute { device.stop() } }
        radioServer.close()
        radioLoop.shutdown()
    }
}

/// A peripheral app, written only against Apple's API: publishes `service` (a dynamic
/// readable, writable, notifying characteristic and a static one), advertises it when
/// `advertise`, answers reads with 0x2A and its offset, accepts writes, and logs every callback.
private final class ServingApp: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var logStorage: [String] = []
    private var writesStorage: [Data] = []
    private var centralsStorage: [CBCentral] = []
    private var readyStorage = 0
    let serviceUUID: CBUUID
    let dynamic: CBMutableCharacteristic
    let constant: CBMutableCharacteristic
    let advertise: Bool
    var manager: CBPeripheralManager!

    /// `service` and its characteristics' UUIDs: 16-bit, `prefix` then 00, 01, 02.
    init(prefix: String, advertise: Bool) {
        serviceUUID = CBUUID(string: prefix + "00")
        dynamic = CBMutableCharacteristic(type: CBUUID(string: prefix + "01"), properties: [.read, .write, .writeWithoutResponse, .notify],
                                          value: nil, permissions: [.readable, .writeable])
        constant = CBMutableCharacteristic(type: CBUUID(string: prefix + "02"), properties: [.read], value: Data([7, 8]),
                                           permissions: [.readable])
        self.advertise = advertise
    }

    var log: [String] { lock.withLock { logStorage } }
    var writes: [Data] { lock.withLock { writesStorage } }
    var centrals: [CBCentral] { lock.withLock { centralsStorage } }
    var ready: Int { lock.withLock { readyStorage } }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        note("state \(peripheral.state.rawValue)")
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: serviceUUID, primary: true)
        service.characteristics = [dynamic, constant]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        note("added \(error.map { "\($0)" } ?? "")")
        if advertise {
            peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Served", CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
        }
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        note("advertising \(error.map { "\($0)" } ?? "")")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        note("read \(request.characteristic.uuid) @\(request.offset)")
        request.value = Data([0x2A, 0x2B, 0x2C].dropFirst(request.offset))
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        note("write \(requests.count)")
        lock.withLock { writesStorage += requests.compactMap(\.value) }
        peripheral.respond(to: requests[0], withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        note("subscribed \(characteristic.uuid)")
        lock.withLock { centralsStorage.append(central) }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        note("unsubscribed \(characteristic.uuid)")
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {
        lock.withLock { readyStorage += 1 }
    }
}

/// An iOS-style central on the radio: finds `target`, connects, discovers everything, then
/// reads, writes and subscribes as the test asks, logging every callback.
private final class UsingCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var logStorage: [String] = []
    private var valuesStorage: [CBUUID: [Data]] = [:]
    private var characteristicsStorage: [CBUUID: CBCharacteristic] = [:]
    private var peripheralStorage: CBPeripheral?
    let target: CBUUID
    var manager: CBCentralManager!

    init(target: CBUUID) { self.target = target }

    var log: [String] { lock.withLock { logStorage } }
    var peripheral: CBPeripheral? { lock.withLock { peripheralStorage } }
    func values(of uuid: CBUUID) -> [Data] { lock.withLock { valuesStorage[uuid] ?? [] } }
    func characteristic(_ uuid: CBUUID) -> CBCharacteristic? { lock.withLock { characteristicsStorage[uuid] } }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [target]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard lock.withLock({ peripheralStorage == nil }) else { return }
        note("discovered \(advertisementData[CBAdvertisementDataLocalNameKey] as? String ?? "?")")
        lock.withLock { peripheralStorage = peripheral }
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        note("connected")
        peripheral.delegate = self
        peripheral.discoverServices(nil)
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        note("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] { peripheral.discoverCharacteristics(nil, for: service) }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        lock.withLock { for characteristic in service.characteristics ?? [] { characteristicsStorage[characteristic.uuid] = characteristic } }
        note("characteristics of \(service.uuid)")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value, error == nil else { return note("read failed \(error.map { "\($0)" } ?? "")") }
        lock.withLock { valuesStorage[characteristic.uuid, default: []].append(value) }
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        note("wrote \(error.map { "\($0)" } ?? "")")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        note(characteristic.isNotifying ? "notifying" : "not notifying")
    }
}

/// A peripheral manager's delegate that only writes down what it hears (the test drives it).
private final class PublishingApp: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var logStorage: [String] = []
    var log: [String] { lock.withLock { logStorage } }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { note("state \(peripheral.state.rawValue)") }
    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        note("added \(service.uuid) \((error as? CBError).map { "\($0.code.rawValue)" } ?? "ok")")
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) { note("advertising") }
    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        note("channel \((error as? CBError).map { "\($0.code.rawValue)" } ?? "ok")")
    }
    /// Never answered.
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) { note("read") }
}

/// A peripheral app that created its manager with a restore identifier again: writes down what
/// `willRestoreState` gives back (and keeps it), its states, and the reads it answers (0x2B).
private final class RestoringApp: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    // Safe: the log and services are behind the lock; the delegate queue writes, the test reads.
    private let lock = NSLock()
    private var logStorage: [String] = []
    private var servicesStorage: [CBMutableService] = []
    var log: [String] { lock.withLock { logStorage } }
    var services: [CBMutableService] { lock.withLock { servicesStorage } }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any]) {
        let services = dict[CBPeripheralManagerRestoredStateServicesKey] as? [CBMutableService] ?? []
        let advertisement = dict[CBPeripheralManagerRestoredStateAdvertisementDataKey] as? [String: Any]
        let characteristics = services.flatMap { $0.characteristics ?? [] }.compactMap { $0 as? CBMutableCharacteristic }
        lock.withLock { servicesStorage = services }
        note("restored services=\(services.map(\.uuid.uuidString)) characteristics=\(characteristics.map(\.uuid.uuidString))"
             + " values=\(characteristics.map { $0.value.map { Array($0) } ?? [] }) subscribed=\(characteristics.map { $0.subscribedCentrals?.count ?? 0 })"
             + " name=\(advertisement?[CBAdvertisementDataLocalNameKey] as? String ?? "-")"
             + " uuids=\((advertisement?[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] ?? []).map(\.uuidString))")
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        note("state \(peripheral.state.rawValue) advertising=\(peripheral.isAdvertising)")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        note("read \(request.characteristic.uuid)")
        request.value = Data([0x2B])
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        note("unsubscribed \(characteristic.uuid)")
    }
}

/// A central manager on the daemon that watches connection events, and scans (its discoveries
/// tell the test that what it sent before the scan reached the daemon).
private final class ConnectionWatcher: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    // Safe: everything is behind the lock; `manager` is set once before use.
    private let lock = NSLock()
    private var stateStorage: CBManagerState = .unknown
    private var eventsStorage: [CBConnectionEvent] = []
    private var discoveredStorage = false
    var manager: CBCentralManager!

    var state: CBManagerState { lock.withLock { stateStorage } }
    var events: [CBConnectionEvent] { lock.withLock { eventsStorage } }
    var discovered: Bool { lock.withLock { discoveredStorage } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) { lock.withLock { stateStorage = central.state } }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        lock.withLock { discoveredStorage = true }
    }

    func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent, for peripheral: CBPeripheral) {
        lock.withLock { eventsStorage.append(event) }
    }
}

/// A central that connects to the first device advertising `target` and discovers its whole
/// database (services, included services, characteristics), again when the peer's services
/// change: `database` is the last complete picture.
private final class DiscoveringCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var peripheralStorage: CBPeripheral?
    private var databaseStorage: [String] = []
    let target: CBUUID
    var manager: CBCentralManager!

    init(target: CBUUID) { self.target = target }

    /// One line per service: its UUID, included services and characteristics.
    var database: [String] { lock.withLock { databaseStorage } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [target]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard lock.withLock({ peripheralStorage == nil }) else { return }
        lock.withLock { peripheralStorage = peripheral }
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices(nil)
    }

    func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) {
        peripheral.discoverServices(nil)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] {
            peripheral.discoverIncludedServices(nil, for: service)
            peripheral.discoverCharacteristics(nil, for: service)
        }
        snapshot(peripheral)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverIncludedServicesFor service: CBService, error: Error?) { snapshot(peripheral) }
    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) { snapshot(peripheral) }

    /// Discovers the database again (a central that did not hear Service Changed, having
    /// subscribed to it after the change, asks again as an app would).
    func rediscover() { lock.withLock { peripheralStorage }?.discoverServices(nil) }

    /// The database as far as it is discovered, once every service's includes and
    /// characteristics are (discoveries that overlap, after Service Changed, end in the last one).
    private func snapshot(_ peripheral: CBPeripheral) {
        let services = peripheral.services ?? []
        guard services.allSatisfy({ $0.includedServices != nil && $0.characteristics != nil }) else { return }
        let lines = services.map { service in
            "\(service.uuid) \(service.isPrimary ? "primary" : "secondary") includes [\((service.includedServices ?? []).map { "\($0.uuid)" }.joined(separator: ","))]"
                + " [\((service.characteristics ?? []).map { "\($0.uuid)" }.joined(separator: ","))]"
        }
        lock.withLock { databaseStorage = lines }
    }
}

@Suite("corebluetoothd: peripheral managers on the daemon (CB_TRANSPORT=daemon:PATH)")
struct DaemonPeripheralTests {
    @Test func aPeripheralManagerOnTheDaemonServesACentralAndAnotherClientHearsOnlyItsOwn() async throws {
        let bench = try await RadioAndDaemon(seed: 0x31)
        defer { bench.close() }

        // Two client connections of the daemon, as two processes: each publishes a service,
        // one advertises.
        let app = ServingApp(prefix: "FA", advertise: true)
        app.manager = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        let other = ServingApp(prefix: "D0", advertise: false)
        other.manager = CBPeripheralManager(delegate: other, queue: DispatchQueue(label: "other"),
                                            options: [CBManagerOptionLinuxTransportKey: "daemon:\(try bench.secondPath())"])
        #expect(await eventually { app.log == ["state 5", "added ", "advertising "] }, "\(app.log)")
        #expect(await eventually { other.log == ["state 5", "added "] }, "\(other.log)")
        #expect(app.manager.isAdvertising)

        // A central on the radio (another phone) sees the device's one database: both services.
        let central = UsingCentral(target: app.serviceUUID)
        central.manager = CBCentralManager(delegate: central, queue: DispatchQueue(label: "central"),
                                           options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually {
            [app.dynamic.uuid, app.constant.uuid, other.dynamic.uuid].allSatisfy { central.characteristic($0) != nil }
        }, "\(central.log)")
        let peripheral = try #require(central.peripheral)
        let dynamic = try #require(central.characteristic(app.dynamic.uuid))
        let constant = try #require(central.characteristic(app.constant.uuid))
        let otherDynamic = try #require(central.characteristic(other.dynamic.uuid))

        // Reads: the dynamic one is the app's to answer, the static one the daemon's.
        peripheral.readValue(for: dynamic)
        peripheral.readValue(for: constant)
        peripheral.readValue(for: otherDynamic)
        #expect(await eventually { central.values(of: dynamic.uuid) == [Data([0x2A, 0x2B, 0x2C])] })
        #expect(await eventually { central.values(of: constant.uuid) == [Data([7, 8])] })
        #expect(await eventually { central.values(of: otherDynamic.uuid) == [Data([0x2A, 0x2B, 0x2C])] })
        // Writes, with and without response.
        peripheral.writeValue(Data([1, 2]), for: dynamic, type: .withResponse)
        peripheral.writeValue(Data([3]), for: dynamic, type: .withoutResponse)
        #expect(await eventually { app.writes == [Data([1, 2]), Data([3])] }, "\(app.writes)")
        #expect(await eventually { central.log.contains("wrote ") })

        // Subscribing, and the central's MTU as the app sees it.
        peripheral.setNotifyValue(true, for: dynamic)
        #expect(await eventually { app.log.contains("subscribed \(dynamic.uuid)") && central.log.contains("notifying") })
        let subscriber = try #require(app.centrals.first)
        #expect(subscriber.maximumUpdateValueLength == peripheral.maximumWriteValueLength(for: .withoutResponse))
        #expect(dynamic.uuid == app.dynamic.uuid && app.dynamic.subscribedCentrals?.count == 1)

        // Updates with back-pressure: values until one is refused, then readiness, in order.
        var sent = 0
        while sent < 5000, app.manager.updateValue(Data([UInt8(sent & 0xFF), UInt8(sent >> 8)]), for: app.dynamic,
                                                   onSubscribedCentrals: nil) {
            sent += 1
        }
        #expect(sent >= 1 && sent < 5000, "updateValue never refused a value")
        #expect(await eventually { app.ready == 1 })
        #expect(await eventually(timeout: .seconds(20)) { central.values(of: dynamic.uuid).count == 1 + sent })
        let received = central.values(of: dynamic.uuid).dropFirst()
        #expect(received.elementsEqual((0..<sent).map { Data([UInt8($0 & 0xFF), UInt8($0 >> 8)]) }))
        #expect(app.manager.updateValue(Data([9]), for: app.dynamic, onSubscribedCentrals: [subscriber]))
        #expect(await eventually { central.values(of: dynamic.uuid).last == Data([9]) })

        peripheral.setNotifyValue(false, for: dynamic)
        #expect(await eventually { app.log.last == "unsubscribed \(dynamic.uuid)" })

        // The other client heard its own read and nothing of the app's.
        #expect(other.log == ["state 5", "added ", "read \(other.dynamic.uuid) @0"])
        #expect(!app.log.contains { $0.contains("\(other.dynamic.uuid)") })
        #expect(other.ready == 0 && other.writes.isEmpty)
    }

    @Test func aManagerThatGoesEndsItsSessionAndItsAdvertising() async throws {
        let bench = try await RadioAndDaemon(seed: 0x32)
        defer { bench.close() }
        var app: ServingApp? = ServingApp(prefix: "FA", advertise: true)
        app?.manager = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                           options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { app?.log == ["state 5", "added ", "advertising "] }, "\(app?.log ?? [])")
        let device = bench.device
        let sets = Shared<Int>(-1)
        func probe() -> Int {
            sets.update { $0 = -1 }
            device.loop.execute { let count = device.host.advertisingSets.count; sets.update { $0 = count } }
            while sets.update({ $0 }) < 0 { usleep(100) }
            return sets.update { $0 }
        }
        #expect(probe() == 1)
        app = nil // the manager is released: the daemon ends its session (services, advertising)
        #expect(await eventually(timeout: .seconds(5)) { probe() == 0 })
    }

    /// As iOS apps see `bluetoothd` restart: `.resetting` (while the client tries to reach
    /// the daemon again), with the reason; advertising and updates stop.
    @Test func aDaemonThatGoesLeavesThePeripheralManagerResettingWithWhy() async throws {
        let bench = try await RadioAndDaemon(seed: 0x33)
        defer { bench.close() }
        let app = ServingApp(prefix: "FA", advertise: true)
        app.manager = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { app.log == ["state 5", "added ", "advertising "] }, "\(app.log)")
        #expect(app.manager.isAdvertising)
        bench.closeDaemon()
        #expect(await eventually { app.log.last == "state 1" }, "\(app.log)")
        #expect(!app.manager.isAdvertising)
        #expect(app.manager.linuxUnavailableReason?.contains("corebluetoothd") == true)
        #expect(!app.manager.updateValue(Data([1]), for: app.dynamic, onSubscribedCentrals: nil))
    }

    @Test func includedServicesAndRemovalAsAppleDescribesThem() async throws {
        let bench = try await RadioAndDaemon(seed: 0x34)
        defer { bench.close() }
        let app = PublishingApp()
        let manager = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { app.log == ["state 5"] })
        let battery = CBMutableService(type: CBUUID(string: "180F"), primary: false)
        battery.characteristics = [CBMutableCharacteristic(type: CBUUID(string: "2A19"), properties: [.read], value: Data([99]),
                                                           permissions: [.readable])]
        let main = CBMutableService(type: CBUUID(string: "FA00"), primary: true)
        main.includedServices = [battery]
        let described = CBMutableCharacteristic(type: CBUUID(string: "2A6E"), properties: [.read, .notify], value: nil,
                                                permissions: [.readable])
        described.descriptors = [CBMutableDescriptor(type: CBUUID(string: CBUUIDCharacteristicUserDescriptionString), value: "Temperature")]
        main.characteristics = [described]

        // Included before it is published: an error (Invalid Parameters, 1).
        manager.add(main)
        #expect(await eventually { app.log.last == "added FA00 1" })
        manager.add(battery)
        manager.add(main)
        #expect(await eventually { app.log.suffix(2) == ["added 180F ok", "added FA00 ok"] }, "\(app.log)")
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [main.uuid]])

        let central = DiscoveringCentral(target: main.uuid)
        central.manager = CBCentralManager(delegate: central, queue: DispatchQueue(label: "central"),
                                           options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        // The primary services (the secondary one is found through the include).
        #expect(await eventually { central.database.count == 3 }, "\(central.database)")
        #expect(central.database == ["1800 primary includes [] [2A00,2A01]", "1801 primary includes [] [2A05,2B29,2B2A]",
                                     "FA00 primary includes [180F] [2A6E]"])

        // Included by a published service: refused. Then both go, and the central hears it
        // (Service Changed) and finds none of them.
        manager.remove(battery)
        manager.remove(main)
        manager.remove(battery)
        var polls = 0
        func changed(_ condition: ([String]) -> Bool) -> Bool {
            polls += 1
            if polls % 100 == 0 { central.rediscover() }
            return condition(central.database)
        }
        #expect(await eventually { changed { $0.allSatisfy { $0.hasPrefix("1800") || $0.hasPrefix("1801") } } }, "\(central.database)")
        let other = CBMutableService(type: CBUUID(string: "FA10"), primary: true)
        manager.add(other)
        #expect(await eventually { app.log.last == "added FA10 ok" })
        #expect(await eventually { changed { $0.contains { $0.hasPrefix("FA10") } } }, "\(central.database)")
        manager.removeAllServices()
        #expect(await eventually { changed { !$0.contains { $0.hasPrefix("FA10") } } }, "\(central.database)")
    }

    @Test func aClientThatGoesWithARequestUnansweredLeavesTheCentralsLinkUp() async throws {
        let bench = try await RadioAndDaemon(seed: 0x35)
        defer { bench.close() }
        let app = PublishingApp()
        var manager: CBPeripheralManager? = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                                                options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { app.log == ["state 5"] })
        let service = CBMutableService(type: CBUUID(string: "FA00"), primary: true)
        service.characteristics = [CBMutableCharacteristic(type: CBUUID(string: "FA01"), properties: [.read], value: nil,
                                                           permissions: [.readable])]
        manager?.add(service)
        manager?.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [service.uuid]])
        #expect(await eventually { app.log == ["state 5", "added FA00 ok", "advertising"] }, "\(app.log)")
        // A channel server published through the daemon (DaemonChannelTests has its channels).
        manager?.publishL2CAPChannel(withEncryption: false)
        #expect(await eventually { app.log.last == "channel ok" }, "\(app.log)")

        let central = UsingCentral(target: service.uuid)
        central.manager = CBCentralManager(delegate: central, queue: DispatchQueue(label: "central"),
                                           options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { central.characteristic(CBUUID(string: "FA01")) != nil }, "\(central.log)")
        let peripheral = try #require(central.peripheral)
        peripheral.readValue(for: try #require(central.characteristic(CBUUID(string: "FA01"))))
        #expect(await eventually { app.log.last == "read" })
        // The app goes with the read unanswered: the central hears an error at once (not the ATT
        // timeout, 30 s of this real-time radio, which would end the link) and stays connected.
        manager = nil
        #expect(await eventually(timeout: .seconds(5)) { central.log.contains { $0.hasPrefix("read failed") } }, "\(central.log)")
        // The bearer is free: the next request is answered (it would wait behind the one left
        // unanswered until the link ended).
        let name = try #require(central.characteristic(CBUUID(string: "2A00")))
        peripheral.readValue(for: name)
        #expect(await eventually(timeout: .seconds(5)) { !central.values(of: name.uuid).isEmpty }, "\(central.log)")
        #expect(peripheral.state == .connected)
        #expect(!central.log.contains("disconnected"))
    }

    /// Issue 16: a peripheral manager with a restore identifier whose process ends abruptly
    /// (here its connection to the daemon is abandoned, as a crash leaves it) keeps its services,
    /// advertising and subscribers on the daemon; the central never sees a change; the next
    /// manager with the identifier gets them in `willRestoreState` before its first state, and
    /// its updates reach the central. Meanwhile a read needing the app is refused, and the
    /// `--on-event` command runs, naming the identifier and the event.
    @Test func aPeripheralManagerWithARestoreIdentifierGetsItsServicesAdvertisingAndSubscribersBack() async throws {
        let marker = temporaryPath("on-event.txt")
        let bench = try await RadioAndDaemon(seed: 0x36, onEvent: "printf '%s %s %s' \"$CB_RESTORE_IDENTIFIER\" \"$CB_RESTORE_ROLE\" "
                                                 + "\"$CB_RESTORE_EVENT\" > \(marker).tmp && mv \(marker).tmp \(marker)")
        defer { bench.close() }
        let firstPath = try bench.secondPath()
        let app = ServingApp(prefix: "FA", advertise: true)
        app.manager = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"), options: [
            CBManagerOptionLinuxTransportKey: "daemon:\(firstPath)", CBPeripheralManagerOptionRestoreIdentifierKey: "com.example.served",
        ])
        #expect(await eventually { app.log == ["state 5", "added ", "advertising "] }, "\(app.log)")

        let central = UsingCentral(target: app.serviceUUID)
        central.manager = CBCentralManager(delegate: central, queue: DispatchQueue(label: "central"),
                                           options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { central.characteristic(app.dynamic.uuid) != nil }, "\(central.log)")
        let peripheral = try #require(central.peripheral)
        let dynamic = try #require(central.characteristic(app.dynamic.uuid))
        peripheral.setNotifyValue(true, for: dynamic)
        #expect(await eventually { app.log.contains("subscribed \(dynamic.uuid)") && central.log.contains("notifying") })

        // The process dies: its connection to the daemon ends with no goodbye.
        try DaemonSessionHost.connecting(to: firstPath, name: "test").abandon()
        #expect(await eventually { bench.clientCount == 0 })
        // A read that needs the app: refused at once; the command runs for it.
        peripheral.readValue(for: dynamic)
        #expect(await eventually { central.log.contains { $0.hasPrefix("read failed") } }, "\(central.log)")
        #expect(await eventually { (try? String(contentsOfFile: marker, encoding: .utf8)) == "com.example.served peripheral read" })

        // The app's next process: everything back before the first state, nothing added again.
        let restored = RestoringApp()
        let manager = CBPeripheralManager(delegate: restored, queue: DispatchQueue(label: "restored"), options: [
            CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)", CBPeripheralManagerOptionRestoreIdentifierKey: "com.example.served",
        ])
        #expect(await eventually { restored.log.count >= 2 }, "\(restored.log)")
        #expect(restored.log == [
            "restored services=[\"FA00\"] characteristics=[\"FA01\", \"FA02\"] values=[[], [7, 8]] subscribed=[1, 0] name=Served uuids=[\"FA00\"]",
            "state 5 advertising=true",
        ])
        let characteristic = try #require(restored.services.first?.characteristics?.first as? CBMutableCharacteristic)
        let subscriber = try #require(characteristic.subscribedCentrals?.first)
        #expect(subscriber.maximumUpdateValueLength == peripheral.maximumWriteValueLength(for: .withoutResponse))
        #expect(manager.updateValue(Data([0x55]), for: characteristic, onSubscribedCentrals: nil))
        #expect(await eventually { central.values(of: dynamic.uuid).last == Data([0x55]) }, "\(central.values(of: dynamic.uuid))")
        #expect(manager.updateValue(Data([0x56]), for: characteristic, onSubscribedCentrals: [subscriber]))
        #expect(await eventually { central.values(of: dynamic.uuid).last == Data([0x56]) })
        // Its requests reach the new process.
        peripheral.readValue(for: dynamic)
        #expect(await eventually { central.values(of: dynamic.uuid).last == Data([0x2B]) })
        #expect(restored.log.last == "read \(dynamic.uuid)")

        // The central never saw its subscription or link end.
        #expect(peripheral.state == .connected && dynamic.isNotifying)
        #expect(!central.log.contains("disconnected") && !central.log.contains("not notifying"))
        withExtendedLifetime(manager) {}
    }

    /// A remote central connecting to a peripheral manager on the daemon is a connection event
    /// for another client's central manager (iOS reports connections whichever app made them).
    @Test func aRemoteCentralConnectingToAPeripheralManagerIsAConnectionEvent() async throws {
        let bench = try await RadioAndDaemon(seed: 0x37)
        defer { bench.close() }
        let app = ServingApp(prefix: "FA", advertise: true)
        app.manager = CBPeripheralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { app.log == ["state 5", "added ", "advertising "] }, "\(app.log)")
        let watcher = ConnectionWatcher()
        watcher.manager = CBCentralManager(delegate: watcher, queue: DispatchQueue(label: "watcher"),
                                           options: [CBManagerOptionLinuxTransportKey: "daemon:\(try bench.secondPath())"])
        #expect(await eventually { watcher.state == .poweredOn })
        watcher.manager.registerForConnectionEvents(options: nil)
        // In order on the watcher's connection: once its scan reports a device on the radio (a
        // beacon: the daemon's own advertising is not heard by its own controller), the
        // registration is in.
        let beacon = ServingApp(prefix: "FB", advertise: true)
        beacon.manager = CBPeripheralManager(delegate: beacon, queue: DispatchQueue(label: "beacon"),
                                             options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        watcher.manager.scanForPeripherals(withServices: [beacon.serviceUUID])
        #expect(await eventually { watcher.discovered })
        watcher.manager.stopScan()

        let central = UsingCentral(target: app.serviceUUID)
        central.manager = CBCentralManager(delegate: central, queue: DispatchQueue(label: "central"),
                                           options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { central.log.contains("connected") }, "\(central.log)")
        #expect(await eventually { watcher.events == [.peerConnected] }, "\(watcher.events)")
        central.manager.cancelPeripheralConnection(try #require(central.peripheral))
        #expect(await eventually { watcher.events == [.peerConnected, .peerDisconnected] }, "\(watcher.events)")
    }
}
