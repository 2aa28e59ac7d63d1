import CoreBluetooth
import CoreBluetoothDaemon
import DaemonProtocol
import Foundation
import HCI
import HCIDriver
import HCITransport
import HostDevice
import Scheduling
import TestTools
import Testing
import VirtualController

/// Whether a daemon accepts connections at `path` (the probe connection is closed at once).
func daemonAccepts(_ path: String) -> Bool {
    guard let fd = try? FramedSocket.connect(path: path) else { return false }
    close(fd)
    return true
}

private let serviceUUID = CBUUID(string: "FEED")
private let characteristicUUID = CBUUID(string: "FEE1")

/// A peripheral app on the shared radio (its own virtual controller, as another phone).
private final class FeedPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var subscribersStorage = 0
    let characteristic = CBMutableCharacteristic(type: characteristicUUID, properties: [.read, .notify], value: nil,
                                                 permissions: [.readable])
    var manager: CBPeripheralManager!

    var subscribers: Int { lock.withLock { subscribersStorage } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: serviceUUID, primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Feed", CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        request.value = Data([0x2A])
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        lock.withLock { subscribersStorage += 1 }
    }
}

/// An iOS-style central: scan, connect, discover, read, subscribe, written only against Apple's API.
private final class FeedCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var logStorage: [String] = []
    private var valuesStorage: [Data] = []
    var manager: CBCentralManager!
    /// Set on the delegate queue; the test clears it to have the app connect anew.
    var peripheral: CBPeripheral?
    let scanFor: CBUUID

    init(scanFor: CBUUID) { self.scanFor = scanFor }

    private var connectionEventsStorage: [CBConnectionEvent] = []
    var log: [String] { lock.withLock { logStorage } }
    var values: [Data] { lock.withLock { valuesStorage } }
    var connectionEvents: [CBConnectionEvent] { lock.withLock { connectionEventsStorage } }

    func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent, for peripheral: CBPeripheral) {
        lock.withLock { connectionEventsStorage.append(event) }
    }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        note("state \(central.state.rawValue)")
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [scanFor]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard self.peripheral == nil else { return }
        note("discovered \(advertisementData[CBAdvertisementDataLocalNameKey] as? String ?? "?")")
        self.peripheral = peripheral
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        note("connected")
        peripheral.delegate = self
        peripheral.discoverServices([serviceUUID])
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        note("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first(where: { $0.uuid == serviceUUID }) else { return note("no service \(error.map { "\($0)" } ?? "")") }
        peripheral.discoverCharacteristics([characteristicUUID], for: service)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristic = service.characteristics?.first else { return note("no characteristic") }
        peripheral.readValue(for: characteristic)
        peripheral.setNotifyValue(true, for: characteristic)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        note(characteristic.isNotifying ? "notifying" : "not notifying \(error.map { "\($0)" } ?? "")")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value else { return }
        lock.withLock { valuesStorage.append(value) }
    }
}

@Suite("corebluetoothd: managers on the daemon (CB_TRANSPORT=daemon:PATH)")
struct DaemonTransportTests {
    @Test func anIOSStyleCentralOnTheDaemonUsesAPeripheralOnTheRadioAndAnotherHearsNothingOfIt() async throws {
        // The shared radio (as `cbtool radio --listen`), in this process.
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("daemon-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 16))
        defer { radioServer.close() }

        // corebluetoothd on a virtual controller of its own on that radio.
        let proxy = try RadioProxy(path: radioPath)
        try proxy.waitUntilJoined()  // the controller attaches once joined
        let controller = VirtualController(radio: proxy, address: BluetoothAddress("CB:D0:00:00:16:01")!)
        let device = HostDevice(transport: controller.makeHostTransport(), loop: proxy.loop, deviceName: "corebluetoothd")
        let started = Shared<Bool?>(nil)
        proxy.loop.execute { device.start { result in started.update { $0 = (try? result.get()) != nil } } }
        #expect(await eventually(timeout: .seconds(10)) { started.update { $0 } != nil })
        #expect(started.update { $0 } == true)
        let socketPath = temporaryPath("corebluetoothd.sock")
        let daemon = try DaemonServer(path: socketPath, device: device)
        defer {
            daemon.close()
            withExtendedLifetime(controller) { proxy.loop.execute { device.stop() } }
        }

        let peripheral = FeedPeripheral()
        peripheral.manager = CBPeripheralManager(delegate: peripheral, queue: DispatchQueue(label: "peripheral"),
                                                 options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        let app = FeedCentral(scanFor: serviceUUID)
        app.manager = CBCentralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                       options: [CBManagerOptionLinuxTransportKey: "daemon:\(socketPath)"])
        let other = FeedCentral(scanFor: CBUUID(string: "BEEF"))
        other.manager = CBCentralManager(delegate: other, queue: DispatchQueue(label: "other"),
                                         options: [CBManagerOptionLinuxTransportKey: "daemon:\(socketPath)"])
        // The other hears of the app's connection through connection events only.
        other.manager.registerForConnectionEvents(options: [.serviceUUIDs: [serviceUUID]])

        #expect(await eventually(timeout: .seconds(20)) { app.log.contains("notifying") && app.values.count >= 1 }, "\(app.log)")
        #expect(app.values.first == Data([0x2A]))
        #expect(app.log.starts(with: ["state 5", "discovered Feed", "connected"]))
        #expect(await eventually(timeout: .seconds(5)) { peripheral.subscribers == 1 })
        // A notification through the daemon.
        _ = peripheral.manager.updateValue(Data([0x01, 0x02]), for: peripheral.characteristic, onSubscribedCentrals: nil)
        #expect(await eventually(timeout: .seconds(5)) { app.values.contains(Data([0x01, 0x02])) })
        // The other client of the daemon scanned for something else: none of the app's callbacks.
        #expect(other.log == ["state 5"])
        #expect(app.manager.state == .poweredOn && other.manager.state == .poweredOn)

        #expect(other.connectionEvents == [.peerConnected])
        #expect(app.connectionEvents.isEmpty)

        app.manager.cancelPeripheralConnection(try #require(app.peripheral))
        #expect(await eventually(timeout: .seconds(5)) { app.log.last == "disconnected" })
        #expect(await eventually(timeout: .seconds(5)) { other.connectionEvents == [.peerConnected, .peerDisconnected] })
    }

    @Test func aDaemonThatRestartsIsSeenAsResettingWithItsLinksLostThenOnAgainAndUsable() async throws {
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("daemon-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 19))
        defer { radioServer.close() }
        let proxy = try RadioProxy(path: radioPath)
        try proxy.waitUntilJoined()
        let controller = VirtualController(radio: proxy, address: BluetoothAddress("CB:D0:00:00:16:03")!)
        let device = HostDevice(transport: controller.makeHostTransport(), loop: proxy.loop, deviceName: "corebluetoothd")
        let started = Shared<Bool?>(nil)
        proxy.loop.execute { device.start { result in started.update { $0 = (try? result.get()) != nil } } }
        #expect(await eventually(timeout: .seconds(10)) { started.update { $0 } != nil })
        let socketPath = temporaryPath("corebluetoothd.sock")
        let daemon = try DaemonServer(path: socketPath, device: device)
        defer { withExtendedLifetime(controller) { proxy.loop.execute { device.stop() } } }

        let peripheral = FeedPeripheral()
        peripheral.manager = CBPeripheralManager(delegate: peripheral, queue: DispatchQueue(label: "peripheral"),
                                                 options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        let queue = DispatchQueue(label: "app")
        let app = FeedCentral(scanFor: serviceUUID)
        app.manager = CBCentralManager(delegate: app, queue: queue, options: [
            CBManagerOptionLinuxTransportKey: "daemon:\(socketPath)", CBCentralManagerOptionRestoreIdentifierKey: "restarting",
        ])
        #expect(await eventually(timeout: .seconds(20)) { app.log.contains("notifying") }, "\(app.log)")

        // The daemon stops: the link is lost with an error, the manager is resetting.
        daemon.close()
        #expect(await eventually(timeout: .seconds(5)) { app.log.suffix(2) == ["disconnected", "state 1"] }, "\(app.log)")
        #expect(app.manager.state == .resetting)
        queue.sync { app.peripheral = nil }

        // A daemon on the same path again: the client connects by itself, its session opens
        // again (powered on), and the app scans, connects and subscribes anew.
        let again = try DaemonServer(path: socketPath, device: device)
        defer { again.close() }
        #expect(await eventually(timeout: .seconds(10)) { app.log.last == "state 5" || app.log.filter { $0 == "connected" }.count == 2 },
                "\(app.log)")
        #expect(await eventually(timeout: .seconds(20)) { app.log.filter { $0 == "notifying" }.count == 2 }, "\(app.log)")
        #expect(app.manager.state == .poweredOn)
        #expect(app.log.filter { $0 == "state 5" }.count == 2)
    }

    @Test func aManagerWithNoDaemonIsUnsupportedWithTheReason() async throws {
        let app = FeedCentral(scanFor: serviceUUID)
        app.manager = CBCentralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                       options: [CBManagerOptionLinuxTransportKey: "daemon:\(temporaryPath("nobody.sock"))"])
        #expect(await eventually(timeout: .seconds(5)) { app.log == ["state 2"] })
        #expect(app.manager.linuxUnavailableReason?.contains("no daemon at") == true)
    }
}

/// The built `corebluetoothd` as a child process.
@Suite("corebluetoothd: the executable")
struct DaemonProcessTests {
    static let binary = BuiltProducts.path(
        "corebluetoothd",
        fallback: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/corebluetoothd"))

    @Test func aCentralInThisProcessUsesTheDaemonProcessAndHearsItGo() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "run `swift build` first: \(Self.binary)")
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("daemon-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 17))
        defer { radioServer.close() }

        let socketPath = temporaryPath("corebluetoothd.sock")
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: Self.binary)
        daemon.arguments = ["--transport", "virtual:\(radioPath)", "--listen", socketPath]
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
        // Listening (the socket file exists from bind, a moment before listen).
        #expect(await eventually(timeout: .seconds(10)) { daemonAccepts(socketPath) })

        let peripheral = FeedPeripheral()
        peripheral.manager = CBPeripheralManager(delegate: peripheral, queue: DispatchQueue(label: "peripheral"),
                                                 options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        let app = FeedCentral(scanFor: serviceUUID)
        app.manager = CBCentralManager(delegate: app, queue: DispatchQueue(label: "app"),
                                       options: [CBManagerOptionLinuxTransportKey: "daemon:\(socketPath)"])
        #expect(await eventually(timeout: .seconds(20)) { app.log.contains("notifying") && app.values.first == Data([0x2A]) }, "\(app.log)")

        // The daemon goes (SIGTERM): the link is reported lost, and the manager resetting (it
        // connects again when a daemon comes back), with why.
        daemon.terminate()
        #expect(await eventually(timeout: .seconds(10)) { !daemon.isRunning })
        #expect(daemon.terminationStatus == 0)
        #expect(!FileManager.default.fileExists(atPath: socketPath))
        #expect(await eventually(timeout: .seconds(5)) { app.log.suffix(2) == ["disconnected", "state 1"] }, "\(app.log)")
        #expect(app.manager.linuxUnavailableReason?.contains("corebluetoothd") == true)
    }
}

/// A central that only listens: its state and connection events.
private final class EventWatcher: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var stateStorage: CBManagerState = .unknown
    private var eventsStorage: [CBConnectionEvent] = []
    var manager: CBCentralManager!

    var state: CBManagerState { lock.withLock { stateStorage } }
    var events: [CBConnectionEvent] { lock.withLock { eventsStorage } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) { lock.withLock { stateStorage = central.state } }

    func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent, for peripheral: CBPeripheral) {
        lock.withLock { eventsStorage.append(event) }
    }
}

/// Connection events without a daemon: the managers of one process that share a controller.
@Suite("Connection events of managers sharing a controller in one process")
struct LocalConnectionEventTests {
    @Test func aManagerHearsTheConnectionsOfAnotherManagerOnItsControllerThatMatch() async throws {
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("events-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 20))
        defer { radioServer.close() }
        // An external controller (H4 over TCP) on the radio: the process's managers naming it share it.
        let proxy = try RadioProxy(path: radioPath)
        try proxy.waitUntilJoined()
        let controller = VirtualController(radio: proxy, address: BluetoothAddress("CB:E0:00:00:16:01")!)
        let server = try H4TCPServer(host: "127.0.0.1", port: 0) { transport in controller.attachHost(transport) }
        defer { server.close() }
        let transport = "tcp:127.0.0.1:\(server.port)"

        let peripheral = FeedPeripheral()
        peripheral.manager = CBPeripheralManager(delegate: peripheral, queue: DispatchQueue(label: "peripheral"),
                                                 options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        let watcher = EventWatcher()
        watcher.manager = CBCentralManager(delegate: watcher, queue: DispatchQueue(label: "watcher"),
                                           options: [CBManagerOptionLinuxTransportKey: transport])
        let stranger = EventWatcher()
        stranger.manager = CBCentralManager(delegate: stranger, queue: DispatchQueue(label: "stranger"),
                                            options: [CBManagerOptionLinuxTransportKey: transport])
        #expect(await eventually(timeout: .seconds(10)) { watcher.state == .poweredOn && stranger.state == .poweredOn })
        watcher.manager.registerForConnectionEvents(options: [.serviceUUIDs: [serviceUUID]])
        stranger.manager.registerForConnectionEvents(options: [.serviceUUIDs: [CBUUID(string: "BEEF")]])

        let app = FeedCentral(scanFor: serviceUUID)
        app.manager = CBCentralManager(delegate: app, queue: DispatchQueue(label: "app"), options: [CBManagerOptionLinuxTransportKey: transport])
        #expect(await eventually(timeout: .seconds(20)) { app.log.contains("notifying") }, "\(app.log)")
        #expect(await eventually(timeout: .seconds(5)) { watcher.events == [.peerConnected] })
        app.manager.cancelPeripheralConnection(try #require(app.peripheral))
        #expect(await eventually(timeout: .seconds(5)) { watcher.events == [.peerConnected, .peerDisconnected] }, "\(watcher.events)")
        #expect(stranger.events.isEmpty && app.connectionEvents.isEmpty)
    }
}
