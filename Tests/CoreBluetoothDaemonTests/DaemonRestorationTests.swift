import ATT
import AssignedNumbers
import CoreBluetoothDaemon
import DaemonProtocol
import GATT
import HCI
import HostDevice
import Scheduling
import Testing

@Suite("corebluetoothd: restoration (sessions kept under their restore identifier)")
struct DaemonRestorationTests {
    /// A client of user `uid` that said hello.
    func client(_ bench: DaemonBench, _ name: String, uid: UInt32, restoration: DaemonRestoration) throws -> (DaemonClient, Inbox) {
        let inbox = Inbox()
        let client = DaemonClient(device: bench.daemonDevice, name: name, uid: uid, restoration: restoration) { inbox.take($0) }
        try client.receive(.hello(version: 1, minimumVersion: 1, name: name))
        return (client, inbox)
    }

    @Test func aRestorableSessionOutlivesItsClientAndTheNextOneWithItsIdentifierGetsItBack() throws {
        let bench = try DaemonBench()
        let woken = Locked<[DaemonRestoration.Event]>([])
        let restoration = DaemonRestoration(parkedLimit: 2, onEvent: { _, event in woken.withLock { $0.append(event) } })
        let (first, inbox) = try client(bench, "first", uid: 501, restoration: restoration)
        try first.receive(.openCentral(session: 1, restoreIdentifier: "com.example.app"))
        try bench.connect(first, inbox)
        let characteristic = try bench.subscribe(first, inbox)
        let peer = bench.peer
        let service = try #require(inbox.first { if case .services(1, 1, .success(let found)) = $0 { found.first } else { nil } })

        // The client goes (its socket closed: exit, crash, kill -9). The link, its subscription
        // and the peripheral's view of them stay.
        first.close()
        #expect(restoration.count == 1)
        for value: UInt8 in 1...3 {
            bench.peripheral.device.gattServer.updateValue([value], forCharacteristic: bench.peripheral.valueHandle)
            bench.loop.run(for: .seconds(1))
        }
        #expect(bench.peripheral.disconnections == 0 && bench.peripheral.subscribers == 1)
        // The registered command hears the first notification only.
        #expect(woken.withLock { $0 } == [.notification])

        // Another user's session with the same identifier is a new one.
        let (stranger, strangerInbox) = try client(bench, "stranger", uid: 502, restoration: restoration)
        try stranger.receive(.openCentral(session: 1, restoreIdentifier: "com.example.app"))
        #expect(strangerInbox.messages.dropFirst() == [.state(session: 1, state: 5, reason: nil)])

        // The same user's next process: what was kept, then the state, then the notifications
        // that came meanwhile (the oldest past the bound dropped and counted), in order.
        let (second, secondInbox) = try client(bench, "second", uid: 501, restoration: restoration)
        try second.receive(.openCentral(session: 7, restoreIdentifier: "com.example.app"))
        #expect(restoration.count == 0)
        let heard = Array(secondInbox.messages.dropFirst())
        try #require(heard.count == 4, "\(heard)")
        guard case .restoreState(7, let peers, .none, 1) = heard[0] else { Issue.record("\(heard[0])"); return }
        let restored = try #require(peers.first)
        #expect(peers.count == 1 && restored.peer == peer && restored.isConnected)
        #expect(restored.services == [DaemonRestoredService(service: service, characteristics: [
            DaemonRestoredCharacteristic(characteristic: characteristic, descriptors: nil, isNotifying: true),
        ])])
        #expect(Array(heard[1...]) == [
            .state(session: 7, state: 5, reason: nil),
            .notification(session: 7, peer: peer, handle: characteristic.valueHandle, value: [2]),
            .notification(session: 7, peer: peer, handle: characteristic.valueHandle, value: [3]),
        ])

        // Everything goes on with no connect or subscribe: values, and GATT on the link.
        bench.peripheral.device.gattServer.updateValue([4], forCharacteristic: bench.peripheral.valueHandle)
        #expect(bench.run { secondInbox.messages.last == .notification(session: 7, peer: peer, handle: characteristic.valueHandle, value: [4]) })
        try second.receive(.read(session: 7, peer: peer, request: 1, handle: characteristic.valueHandle))
        #expect(bench.run { secondInbox.messages.contains(.value(session: 7, request: 1, result: .success([0x2A]))) })
        #expect(inbox.messages.filter { if case .notification = $0 { true } else { false } }.isEmpty)
        #expect(bench.peripheral.disconnections == 0 && bench.peripheral.subscribers == 1)

        // Released by the app (close): nothing is kept, the link ends.
        try second.receive(.close(session: 7))
        #expect(restoration.count == 0)
        #expect(bench.run { bench.peripheral.disconnections == 1 })
        stranger.close()
        restoration.close()
    }

    @Test func aPendingConnectionAndTheScanAreKeptAndASessionWithoutIdentifierIsNot() throws {
        let bench = try DaemonBench()
        let woken = Locked<[DaemonRestoration.Event]>([])
        let restoration = DaemonRestoration(onEvent: { _, event in woken.withLock { $0.append(event) } })
        let (first, _) = try client(bench, "first", uid: 501, restoration: restoration)
        try first.receive(.openCentral(session: 1, restoreIdentifier: "scanner"))
        try first.receive(.openCentral(session: 2, restoreIdentifier: nil))
        let absent = LEAddress(.randomDevice, BluetoothAddress(value: 0xC0_00_00_00_16_99))
        try first.receive(.connect(session: 1, peer: absent, autoReconnect: false))
        try first.receive(.startScan(session: 1, services: [bench.service], solicited: [], allowDuplicates: true))
        bench.loop.run(for: .seconds(1))
        first.close()
        #expect(restoration.count == 1)
        // Pending connections never time out.
        bench.loop.run(for: .seconds(60))
        // The scan went on and found the peripheral: the registered command heard it, once.
        #expect(woken.withLock { $0 } == [.discovered])

        let (second, inbox) = try client(bench, "second", uid: 501, restoration: restoration)
        try second.receive(.openCentral(session: 1, restoreIdentifier: "scanner"))
        #expect(inbox.messages.dropFirst().first == .restoreState(session: 1, peers: [
            DaemonRestoredPeer(peer: absent, isConnected: false, mtu: 23, services: nil),
        ], scan: DaemonRestoredScan(services: [bench.service], solicited: [], allowDuplicates: true), droppedNotifications: 0))
        // The scan went on: the peripheral is still reported.
        #expect(bench.run { inbox.first { if case .discovered(1, bench.peer, _, _, _, _) = $0 { true } else { nil } } != nil })
        second.close()
        restoration.close()
    }
}

@Suite("corebluetoothd: connection events")
struct DaemonConnectionEventTests {
    @Test func aSessionHearsEveryClientsConnectionsThatMatchItsRegistration() throws {
        let bench = try DaemonBench()
        let events = DaemonConnectionEvents()  // ConnectionEvents (RoleServices), as the daemon makes it
        func client(_ name: String) throws -> (DaemonClient, Inbox) {
            let inbox = Inbox()
            let client = DaemonClient(device: bench.daemonDevice, name: name, connectionEvents: events) { inbox.take($0) }
            try client.receive(.hello(version: 1, minimumVersion: 1, name: name))
            try client.receive(.openCentral(session: 1, restoreIdentifier: nil))
            return (client, inbox)
        }
        let (byService, byServiceInbox) = try client("by service")
        try byService.receive(.registerConnectionEvents(session: 1, services: [bench.service], peripherals: nil))
        let (byPeer, byPeerInbox) = try client("by peer")
        try byPeer.receive(.registerConnectionEvents(session: 1, services: nil, peripherals: [bench.peer]))
        let (other, otherInbox) = try client("other service")
        try other.receive(.registerConnectionEvents(session: 1, services: [BluetoothUUID(uuid16: 0xBEEF)], peripherals: nil))

        // Another client connects (and a second one shares the link: still one event).
        let (connector, connectorInbox) = try client("connector")
        try bench.connect(connector, connectorInbox)
        let (sharer, sharerInbox) = try client("sharer")
        try bench.connect(sharer, sharerInbox, scanning: false)
        let connected = DaemonMessage.connectionEvent(session: 1, peer: bench.peer, connected: true)
        #expect(byServiceInbox.messages.filter { $0.kind == .connectionEvent } == [connected])
        #expect(byPeerInbox.messages.filter { $0.kind == .connectionEvent } == [connected])
        #expect(connectorInbox.messages.filter { $0.kind == .connectionEvent }.isEmpty)

        // The last user of the link goes: disconnected.
        sharer.close()
        try connector.receive(.cancel(session: 1, peer: bench.peer, notify: true))
        let disconnected = DaemonMessage.connectionEvent(session: 1, peer: bench.peer, connected: false)
        #expect(bench.run { byServiceInbox.messages.last == disconnected })
        #expect(byPeerInbox.messages.filter { $0.kind == .connectionEvent } == [connected, disconnected])
        #expect(otherInbox.messages.filter { $0.kind == .connectionEvent }.isEmpty)
        for client in [byService, byPeer, other, connector] { client.close() }
    }
}
