import ATT
import AssignedNumbers
import CoreBluetoothDaemon
import DaemonProtocol
import GAP
import GATT
import HCI
import HostDevice
import HostStack
import Scheduling
import Testing

/// A remote central on the bench's other device (a phone): scans for a service, connects to
/// the daemon's device, and uses its GATT client as the test asks; counts its disconnections.
final class RemoteTestCentral: HostDeviceClient, @unchecked Sendable {
    // Safe: made and touched on the bench's one loop (the test's thread runs it).
    let device: HostDevice
    let target: BluetoothUUID
    var connection: DeviceConnection?
    var disconnections = 0
    private var connecting = false

    init(device: HostDevice, target: BluetoothUUID) {
        self.device = device
        self.target = target
        device.addClient(self, roles: .central)
        device.startScanning(for: self)
    }

    func device(_ device: HostDevice, didDiscover report: AdvertisingReport) {
        guard !connecting, report.isConnectable, AdvertisingData(bytes: report.data).serviceUUIDs.contains(target) else { return }
        connecting = true
        device.stopScanning(for: self)
        device.connect(to: report.address, for: self)
    }

    func device(_ device: HostDevice, didConnect connection: DeviceConnection) { self.connection = connection }
    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) { disconnections += 1 }
}

@Suite("corebluetoothd: peripheral sessions kept under their restore identifier")
struct DaemonPeripheralRestorationTests {
    let serviceUUID = BluetoothUUID(uuid16: 0xBB00)

    func client(_ bench: DaemonBench, _ name: String, uid: UInt32, restoration: DaemonRestoration,
                events: DaemonConnectionEvents? = nil) throws -> (DaemonClient, Inbox) {
        let inbox = Inbox()
        let client = DaemonClient(device: bench.daemonDevice, name: name, uid: uid, restoration: restoration,
                                  connectionEvents: events) { inbox.take($0) }
        try client.receive(.hello(version: 1, minimumVersion: 1, name: name))
        return (client, inbox)
    }

    var definition: GATTService {
        GATTService(uuid: serviceUUID, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0xBB01), properties: [.read, .write, .notify],
                               permissions: [.readable, .writeable], value: .dynamic),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0xBB02), properties: [.read], permissions: [.readable],
                               value: .stored([7, 8])),
        ])
    }

    @Test func servicesAdvertisingAndSubscribersOutliveTheClientAndComeBackToTheNextOne() throws {
        let bench = try DaemonBench()
        let launched = Locked<[(DaemonRestoration.Key, DaemonRestoration.Event)]>([])
        let restoration = DaemonRestoration(onEvent: { key, event in launched.withLock { $0.append((key, event)) } })
        let events = DaemonConnectionEvents()
        events.observeAcceptedConnections(on: bench.daemonDevice)

        // Another client watches connection events (any peer).
        let (watcher, watcherInbox) = try client(bench, "watcher", uid: 501, restoration: restoration, events: events)
        try watcher.receive(.openCentral(session: 1, restoreIdentifier: nil))
        try watcher.receive(.registerConnectionEvents(session: 1, services: nil, peripherals: nil))

        // The app publishes, advertises; a remote central connects and subscribes.
        let (first, inbox) = try client(bench, "first", uid: 501, restoration: restoration, events: events)
        try first.receive(.openPeripheral(session: 1, restoreIdentifier: "com.example.peripheral"))
        try first.receive(.publish(session: 1, key: 1, includedKeys: [], service: definition))
        let handles = try #require(inbox.first { if case .published(1, 1, .success(let handles)) = $0 { handles } else { nil } })
        let advertisement = DaemonAdvertisement(name: "Kept", serviceUUIDs: [serviceUUID], manufacturerData: nil, raw: nil)
        try first.receive(.startAdvertising(session: 1, advertisement: advertisement))
        #expect(bench.run { inbox.messages.contains(.advertisingStarted(session: 1, error: nil, isOn: true)) })

        let central = RemoteTestCentral(device: bench.peripheral.device, target: serviceUUID)
        #expect(bench.run { central.connection != nil })
        let gatt = try #require(central.connection).client
        var found: [DiscoveredCharacteristic] = []
        gatt.discoverPrimaryServices(uuid: serviceUUID) { result in
            guard case .success(let services) = result, let service = services.first else { return }
            gatt.discoverCharacteristics(of: service) { if case .success(let all) = $0 { found = all } }
        }
        #expect(bench.run { found.count == 2 })
        let dynamic = try #require(found.first { $0.uuid == BluetoothUUID(uuid16: 0xBB01) })
        let stored = try #require(found.first { $0.uuid == BluetoothUUID(uuid16: 0xBB02) })
        var values: [[UInt8]] = []
        var subscribed = false
        gatt.subscribe(to: dynamic, onValue: { values.append($0) }, completion: { subscribed = (try? $0.get()) != nil })
        #expect(bench.run { subscribed && inbox.first { if case .subscribed(1, _, dynamic.valueHandle) = $0 { true } else { nil } } != nil })
        let centralID = try #require(inbox.first { if case .centralConnected(1, let central, _, _) = $0 { central } else { nil } })
        let centralPeer = try #require(inbox.first { if case .centralConnected(1, _, let peer, _) = $0 { peer } else { nil } })
        // A connection the device accepted as peripheral is a connection event.
        #expect(watcherInbox.messages.filter { $0.kind == .connectionEvent }
            == [.connectionEvent(session: 1, peer: centralPeer, connected: true)])

        // The client goes (its socket closed). Nothing changes for the central.
        first.close()
        #expect(restoration.count == 1)
        #expect(bench.daemonDevice.host.advertisingSets.count == 1)
        #expect(bench.daemonDevice.gattServer.handles(of: handles.id) == handles)

        // Meanwhile: a stored value is the database's to answer; a dynamic one needs the app,
        // so Unlikely Error, at once (and the registered command hears of it, once).
        var reads: [Result<[UInt8], GATTClientError>] = []
        gatt.readValue(of: stored.valueHandle) { reads.append($0) }
        gatt.readValue(of: dynamic.valueHandle) { reads.append($0) }
        gatt.readValue(of: dynamic.valueHandle) { reads.append($0) }
        #expect(bench.run { reads.count == 3 })
        #expect(reads == [.success([7, 8]), .failure(.attributeError(.unlikelyError, handle: dynamic.valueHandle)),
                          .failure(.attributeError(.unlikelyError, handle: dynamic.valueHandle))])
        let key = DaemonRestoration.Key(uid: 501, role: .peripheral, identifier: "com.example.peripheral")
        #expect(launched.withLock { $0.map(\.0) } == [key] && launched.withLock { $0.map(\.1) } == [.read])

        // Another user's session with the identifier is a new one; the same user's next process
        // gets everything back before its state.
        let (stranger, strangerInbox) = try client(bench, "stranger", uid: 502, restoration: restoration)
        try stranger.receive(.openPeripheral(session: 1, restoreIdentifier: "com.example.peripheral"))
        #expect(strangerInbox.messages.dropFirst() == [.state(session: 1, state: 5, reason: nil)])
        let (second, secondInbox) = try client(bench, "second", uid: 501, restoration: restoration)
        try second.receive(.openPeripheral(session: 3, restoreIdentifier: "com.example.peripheral"))
        #expect(restoration.count == 0)
        var kept = definition
        kept.includedServices = []
        let mtu = try #require(inbox.messages.reversed().lazy.compactMap { message -> UInt16? in
            switch message {
            case .centralMTU(1, centralID, let mtu), .centralConnected(1, centralID, _, let mtu): mtu
            default: nil
            }
        }.first)
        #expect(Array(secondInbox.messages.dropFirst()) == [
            .restorePeripheralState(session: 3, services: [
                DaemonRestoredLocalService(key: 1, includedKeys: [], service: kept, handles: handles),
            ], advertisement: advertisement, centrals: [
                DaemonRestoredCentral(central: centralID, peer: centralPeer, mtu: mtu, subscribed: [dynamic.valueHandle]),
            ]),
            .state(session: 3, state: 5, reason: nil),
        ])

        // Updates reach the still-subscribed central, with no re-publish or re-advertise; its
        // requests reach the new client.
        try second.receive(.update(session: 3, handle: dynamic.valueHandle, value: [9], centrals: nil))
        #expect(bench.run { values == [[9]] })
        #expect(bench.run { secondInbox.messages.contains(.updatesHandedOver(session: 3, count: 1)) })
        gatt.readValue(of: dynamic.valueHandle) { reads.append($0) }
        #expect(bench.run { secondInbox.first { if case .readRequest(3, _, centralID, dynamic.valueHandle, 0) = $0 { true } else { nil } } != nil })
        #expect(central.disconnections == 0)
        #expect(launched.withLock { $0.count } == 1)

        // Released by the app (close): nothing is kept; services and advertising go.
        try second.receive(.close(session: 3))
        #expect(restoration.count == 0)
        #expect(bench.daemonDevice.gattServer.handles(of: handles.id) == nil)
        #expect(bench.run { bench.daemonDevice.host.advertisingSets.isEmpty })

        // The central goes: the watcher hears it.
        bench.peripheral.device.disconnect(try #require(central.connection), for: central)
        #expect(bench.run { watcherInbox.messages.last == .connectionEvent(session: 1, peer: centralPeer, connected: false) })
        for client in [watcher, stranger] { client.close() }
        restoration.close()
    }

    @Test func aSessionWithoutIdentifierEndsWithItsClientAndTheCommandRunsOncePerKeep() throws {
        let bench = try DaemonBench()
        let launched = Locked<[DaemonRestoration.Event]>([])
        let restoration = DaemonRestoration(onEvent: { _, event in launched.withLock { $0.append(event) } })
        let (first, inbox) = try client(bench, "first", uid: 501, restoration: restoration)
        try first.receive(.openPeripheral(session: 1, restoreIdentifier: nil))
        try first.receive(.publish(session: 1, key: 1, includedKeys: [], service: definition))
        let handles = try #require(inbox.first { if case .published(1, 1, .success(let handles)) = $0 { handles } else { nil } })
        first.close()
        #expect(restoration.count == 0)
        #expect(bench.daemonDevice.gattServer.handles(of: handles.id) == nil)

        // Kept, woken, taken, kept again: woken again.
        let (second, _) = try client(bench, "second", uid: 501, restoration: restoration)
        try second.receive(.openPeripheral(session: 1, restoreIdentifier: "app"))
        try second.receive(.publish(session: 1, key: 1, includedKeys: [], service: definition))
        try second.receive(.startAdvertising(session: 1, advertisement: DaemonAdvertisement(
            name: nil, serviceUUIDs: [serviceUUID], manufacturerData: nil, raw: nil)))
        bench.loop.run(for: .seconds(1))
        second.close()
        let central = RemoteTestCentral(device: bench.peripheral.device, target: serviceUUID)
        #expect(bench.run { central.connection != nil })
        let gatt = try #require(central.connection).client
        var written: [Result<Void, GATTClientError>] = []
        gatt.discoverPrimaryServices(uuid: serviceUUID) { result in
            guard case .success(let services) = result, let service = services.first else { return }
            gatt.discoverCharacteristics(of: service) { found in
                guard case .success(let all) = found, let dynamic = all.first else { return }
                gatt.writeValue([1], to: dynamic.valueHandle) { written.append($0) }
                gatt.writeValue([2], to: dynamic.valueHandle) { written.append($0) }
            }
        }
        #expect(bench.run { written.count == 2 })
        #expect(written.allSatisfy { if case .failure(.attributeError(.unlikelyError, _)) = $0 { true } else { false } })
        #expect(launched.withLock { $0 } == [.write])
        let (third, _) = try client(bench, "third", uid: 501, restoration: restoration)
        try third.receive(.openPeripheral(session: 1, restoreIdentifier: "app"))
        third.close()
        gatt.writeValue([3], to: handles.characteristics[0].value) { written.append($0) }
        #expect(bench.run { written.count == 3 })
        #expect(launched.withLock { $0 } == [.write, .write])
        restoration.close()
    }
}
