import ATT
import AssignedNumbers
import CoreBluetoothDaemon
import DaemonProtocol
import GATT
import HCI
import HCIDriver
import HCITransport
import HostDevice
import HostStack
import Scheduling
import Testing
import VirtualController

/// A peripheral on the radio, straight on its host device: one service (0xAA00) whose
/// characteristic (0xAA01) reads 0x2A, takes writes and notifies.
final class TestPeripheral: HostDeviceClient, @unchecked Sendable {
    let device: HostDevice
    var handles: GATTServiceHandles!
    var writes: [[UInt8]] = []
    var subscribers = 0
    var disconnections = 0

    init(device: HostDevice) { self.device = device }

    var valueHandle: ATTHandle { handles.characteristics[0].value }

    func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) { respond(.success([0x2A])) }
    func device(_ device: HostDevice, write requests: [GATTWriteRequest], on connection: DeviceConnection,
                respond: @escaping (ATTErrorCode?) -> Void) {
        writes += requests.map(\.value)
        respond(nil)
    }
    func device(_ device: HostDevice, subscriptionChanged configuration: GATTClientConfiguration, from old: GATTClientConfiguration,
                forCharacteristic valueHandle: ATTHandle, on connection: DeviceConnection) {
        subscribers += configuration.isEmpty ? -1 : (old.isEmpty ? 1 : 0)
    }
    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) { disconnections += 1 }
}

/// What a client of the daemon hears: every message, through the wire's codec.
final class Inbox: @unchecked Sendable {
    var messages: [DaemonMessage] = []
    private var reader = DaemonFrameReader()

    func take(_ message: DaemonMessage) {
        reader.append(DaemonFrame.encode(message))
        // The daemon never sends what its client could not decode.
        while let decoded = try! reader.next() { messages.append(decoded) }
    }

    func first<T>(_ match: (DaemonMessage) -> T?) -> T? { messages.lazy.compactMap(match).first }
}

/// The daemon's device and a peripheral on one virtual radio, on virtual time.
struct DaemonBench {
    let loop = EventLoop(name: "radio", pacing: .manual)
    let daemonDevice: HostDevice
    /// The controller under `daemonDevice`.
    let daemonController: VirtualController
    let peripheral: TestPeripheral
    let service = BluetoothUUID(uuid16: 0xAA00)

    init() throws {
        let radio = VirtualRadio(loop: loop, seed: 16)
        let loop = self.loop
        func make(_ address: String, x: Double) -> HostDevice {
            let controller = VirtualController(radio: radio, address: BluetoothAddress(address)!, position: RadioPosition(x: x))
            return HostDevice(transport: controller.makeHostTransport(), loop: loop, deviceName: address)
        }
        daemonController = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:16:01")!, position: RadioPosition(x: 0))
        daemonDevice = HostDevice(transport: daemonController.makeHostTransport(), loop: loop, deviceName: "C0:00:00:00:16:01")
        let peripheralDevice = make("C0:00:00:00:16:02", x: 2)
        for device in [daemonDevice, peripheralDevice] {
            var started: Result<LEAddress, HCIError>?
            device.start { started = $0 }
            loop.run(until: { started != nil }, timeout: .seconds(30))
            _ = try #require(started).get()
        }
        peripheral = TestPeripheral(device: peripheralDevice)
        peripheralDevice.addClient(peripheral, roles: .peripheral)
        peripheral.handles = try peripheralDevice.addService(GATTService(uuid: service, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0xAA01), properties: [.read, .write, .notify],
                               permissions: [.readable, .writeable], value: .dynamic),
        ]), for: peripheral)
        let data: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0x00, 0xAA]
        var advertising: Result<Void, HCIError>?
        peripheralDevice.startAdvertising(AdvertisingParameters(data: data, ownRandomAddress: true), for: peripheral) { advertising = $0 }
        loop.run(until: { advertising != nil }, timeout: .seconds(5))
        try #require(advertising).get()
    }

    var peer: LEAddress { peripheral.device.address! }

    func run(until condition: () -> Bool) -> Bool {
        loop.run(until: condition, timeout: .seconds(10))
        return condition()
    }

    /// A client that said hello and opened central session 1 (`subscriptions`: the daemon's,
    /// when several clients must share them as a daemon's do).
    func client(_ name: String, subscriptions: DaemonSubscriptions = DaemonSubscriptions()) throws -> (DaemonClient, Inbox) {
        let inbox = Inbox()
        let client = DaemonClient(device: daemonDevice, name: name, subscriptions: subscriptions) { inbox.take($0) }
        try client.receive(.hello(version: 3, minimumVersion: 1, name: name))
        try client.receive(.openCentral(session: 1, restoreIdentifier: nil))
        #expect(inbox.messages == [.welcome(version: DaemonFrame.version, deviceAddress: daemonDevice.address),
                                   .state(session: 1, state: 5, reason: nil)])
        return (client, inbox)
    }

    /// Scans until the peripheral is seen (unless `scanning` is false: it stops advertising
    /// once connected), then connects to it.
    func connect(_ client: DaemonClient, _ inbox: Inbox, scanning: Bool = true) throws {
        if scanning {
            try client.receive(.startScan(session: 1, services: [service], solicited: [], allowDuplicates: false))
            #expect(run { inbox.first { if case .discovered(1, peer, _, _, true, _) = $0 { true } else { nil } } != nil })
            try client.receive(.stopScan(session: 1))
        }
        try client.receive(.connect(session: 1, peer: peer, autoReconnect: false))
        #expect(run { inbox.first { if case .connected(1, peer, _) = $0 { true } else { nil } } != nil })
    }

    /// Discovers the characteristic and subscribes to it.
    func subscribe(_ client: DaemonClient, _ inbox: Inbox) throws -> DiscoveredCharacteristic {
        try client.receive(.discoverServices(session: 1, peer: peer, request: 1, uuid: service))
        #expect(run { inbox.first { if case .services(1, 1, _) = $0 { true } else { nil } } != nil })
        let services = try #require(inbox.first { if case .services(1, 1, .success(let found)) = $0 { found } else { nil } })
        let target = try #require(services.first)
        try client.receive(.discoverCharacteristics(session: 1, peer: peer, request: 2, service: target))
        #expect(run { inbox.first { if case .characteristics(1, 2, _) = $0 { true } else { nil } } != nil })
        let found = try #require(inbox.first { if case .characteristics(1, 2, .success(let found)) = $0 { found } else { nil } })
        let characteristic = try #require(found.first)
        try client.receive(.setNotify(session: 1, peer: peer, request: 3, characteristic: characteristic, clientConfiguration: nil,
                                      enabled: true))
        #expect(run { inbox.messages.contains(.done(session: 1, request: 3, error: nil)) })
        return characteristic
    }

    func notifications(_ inbox: Inbox) -> [[UInt8]] {
        inbox.messages.compactMap { if case .notification(1, _, _, let value) = $0 { value } else { nil } }
    }
}

@Suite("corebluetoothd: clients and their sessions")
struct DaemonClientTests {
    @Test func aControllerThatResetsItselfIsResettingForTheSessionsThenOnAgain() throws {
        let bench = try DaemonBench()
        let (client, inbox) = try bench.client("app")
        try bench.connect(client, inbox)
        let peer = bench.peer
        let before = inbox.messages.count
        bench.daemonController.failHardware(code: 0x42)
        #expect(bench.run { inbox.messages.contains(.state(session: 1, state: 5, reason: nil)) && inbox.messages.count > before + 2 })
        let after = Array(inbox.messages[before...])
        // The link is reported lost (Hardware Failure), then .resetting, then .poweredOn.
        #expect(after.first == .disconnected(session: 1, peer: peer, cause: .link(.hardwareFailure), isReconnecting: false))
        guard after.count >= 3, case .state(1, 1, _?) = after[1] else {
            Issue.record("expected .resetting after the disconnection: \(after)")
            return
        }
        #expect(after[2] == .state(session: 1, state: 5, reason: nil))
    }

    @Test func aCentralSessionScansConnectsUsesGATTAndHearsNotificationsAsMessages() throws {
        let bench = try DaemonBench()
        let (client, inbox) = try bench.client("app")
        try bench.connect(client, inbox)
        let peer = bench.peer
        let characteristic = try bench.subscribe(client, inbox)
        #expect(characteristic.valueHandle == bench.peripheral.valueHandle)
        #expect(bench.peripheral.subscribers == 1)

        try client.receive(.read(session: 1, peer: peer, request: 4, handle: characteristic.valueHandle))
        #expect(bench.run { inbox.messages.contains(.value(session: 1, request: 4, result: .success([0x2A]))) })
        try client.receive(.write(session: 1, peer: peer, request: 5, handle: characteristic.valueHandle, value: [1, 2, 3]))
        #expect(bench.run { inbox.messages.contains(.done(session: 1, request: 5, error: nil)) })
        #expect(bench.peripheral.writes == [[1, 2, 3]])

        bench.peripheral.device.gattServer.updateValue([0x10, 0x11], forCharacteristic: bench.peripheral.valueHandle)
        #expect(bench.run { bench.notifications(inbox) == [[0x10, 0x11]] })

        try client.receive(.cancel(session: 1, peer: peer, notify: true))
        #expect(bench.run {
            inbox.messages.contains(.disconnected(session: 1, peer: peer, cause: .requested(notify: true), isReconnecting: false))
        })
        #expect(bench.run { bench.peripheral.disconnections == 1 })
    }

    @Test func eachClientHearsOnlyItsOwnAndAClientThatBreaksTheProtocolIsDroppedAlone() throws {
        let bench = try DaemonBench()
        let (one, oneInbox) = try bench.client("one")
        let (two, twoInbox) = try bench.client("two")
        try bench.connect(one, oneInbox)
        _ = try bench.subscribe(one, oneInbox)
        // Two did not scan or connect: it heard nothing but its own handshake.
        #expect(twoInbox.messages.count == 2)

        // Two shares the link and reads, then sends what is not the protocol: it is dropped,
        // and its sessions leave the device; one's link and subscription are untouched.
        try bench.connect(two, twoInbox, scanning: false)
        try two.receive(.read(session: 1, peer: bench.peer, request: 7, handle: bench.peripheral.valueHandle))
        #expect(bench.run { twoInbox.messages.contains(.value(session: 1, request: 7, result: .success([0x2A]))) })
        #expect(oneInbox.first { if case .value = $0 { true } else { nil } } == nil)
        #expect(bench.peripheral.disconnections == 0)
        #expect(throws: DaemonClientViolation.self) {
            try two.receive(.read(session: 9, peer: bench.peer, request: 1, handle: 0x0001))
        }
        #expect(two.isClosed && two.sessionCount == 0)
        let heardByTwo = twoInbox.messages.count
        bench.peripheral.device.gattServer.updateValue([0x01], forCharacteristic: bench.peripheral.valueHandle)
        #expect(bench.run { bench.notifications(oneInbox) == [[0x01]] })
        #expect(twoInbox.messages.count == heardByTwo)
        #expect(bench.peripheral.disconnections == 0)

        // One goes too (a socket that closed): the link has no owner left and ends.
        one.close()
        #expect(bench.run { bench.peripheral.disconnections == 1 })
    }

    /// Clients sharing a link share its subscriptions: both get the values of a characteristic
    /// both subscribed to, the CCCD goes off only when the last one unsubscribes or goes, and
    /// a client that goes (a socket that closed: exit, crash, kill -9) takes its subscription
    /// with it at the peer while the link stays up for the other.
    @Test func clientsSharingALinkShareItsSubscriptionsAndOneThatGoesTakesItsOwnWithIt() throws {
        let bench = try DaemonBench()
        let subscriptions = DaemonSubscriptions()
        let (one, oneInbox) = try bench.client("one", subscriptions: subscriptions)
        let (two, twoInbox) = try bench.client("two", subscriptions: subscriptions)
        try bench.connect(one, oneInbox)
        let characteristic = try bench.subscribe(one, oneInbox)
        try bench.connect(two, twoInbox, scanning: false)
        _ = try bench.subscribe(two, twoInbox)
        #expect(bench.peripheral.subscribers == 1 && subscriptions.count == 2)
        let server = bench.peripheral.device.gattServer
        server.updateValue([0x01], forCharacteristic: bench.peripheral.valueHandle)
        #expect(bench.run { bench.notifications(oneInbox) == [[0x01]] && bench.notifications(twoInbox) == [[0x01]] })

        // One unsubscribes: two still is, at the peer too.
        try one.receive(.setNotify(session: 1, peer: bench.peer, request: 4, characteristic: characteristic, clientConfiguration: nil,
                                   enabled: false))
        #expect(bench.run { oneInbox.messages.contains(.done(session: 1, request: 4, error: nil)) })
        #expect(bench.peripheral.subscribers == 1 && subscriptions.count == 1)
        server.updateValue([0x02], forCharacteristic: bench.peripheral.valueHandle)
        #expect(bench.run { bench.notifications(twoInbox) == [[0x01], [0x02]] })
        #expect(bench.notifications(oneInbox) == [[0x01]])

        // Two goes: the link stays up for one, and nobody is subscribed any more, at the peer
        // neither.
        two.close()
        #expect(bench.run { bench.peripheral.subscribers == 0 })
        #expect(subscriptions.count == 0 && bench.peripheral.disconnections == 0)
        one.close()
        #expect(bench.run { bench.peripheral.disconnections == 1 })
    }

    @Test func theHandshakeComesFirstAndNeedsACommonVersion() throws {
        let bench = try DaemonBench()
        let inbox = Inbox()
        let early = DaemonClient(device: bench.daemonDevice, name: "early") { inbox.take($0) }
        #expect(throws: DaemonClientViolation.self) { try early.receive(.openCentral(session: 1, restoreIdentifier: nil)) }
        #expect(early.isClosed && inbox.messages.isEmpty)

        let future = DaemonClient(device: bench.daemonDevice, name: "future") { inbox.take($0) }
        #expect(throws: DaemonClientViolation.self) { try future.receive(.hello(version: 9, minimumVersion: 7, name: "v7")) }
        #expect(inbox.messages.count == 1)
        if case .refused = inbox.messages.first {} else { Issue.record("expected refused, got \(inbox.messages)") }

        let (client, clientInbox) = try bench.client("app")
        // The daemon's own messages are not the client's to send.
        #expect(throws: DaemonClientViolation.self) { try client.receive(.scanFailed(session: 1)) }
        #expect(client.isClosed)
        // A peripheral session is served, and takes only the peripheral role's calls.
        let (other, otherInbox) = try bench.client("peripheral app")
        try other.receive(.openPeripheral(session: 2, restoreIdentifier: nil))
        #expect(otherInbox.messages.last == .state(session: 2, state: 5, reason: nil))
        #expect(throws: DaemonClientViolation.self) { try other.receive(.stopScan(session: 2)) }
        #expect(other.isClosed)
        #expect(clientInbox.messages.count == 2)
    }

    /// Version 2's messages (channels, pairing) are for clients that agreed to version 2: a
    /// version-1 client sending one breaks the protocol; a version-2 client is answered.
    @Test func channelAndPairingMessagesNeedVersion2() throws {
        let bench = try DaemonBench()
        let inbox = Inbox()
        let old = DaemonClient(device: bench.daemonDevice, name: "v1") { inbox.take($0) }
        try old.receive(.hello(version: 1, minimumVersion: 1, name: "v1"))
        #expect(inbox.messages == [.welcome(version: 1, deviceAddress: bench.daemonDevice.address)])
        try old.receive(.openCentral(session: 1, restoreIdentifier: nil))
        #expect(throws: DaemonClientViolation.self) { try old.receive(.setPairingAgent(session: 1, ioCapability: 1)) }
        #expect(old.isClosed)

        let (client, clientInbox) = try bench.client("v2")
        try client.receive(.setPairingAgent(session: 1, ioCapability: 1))
        try client.receive(.channelClose(session: 1, channel: 99))
        // Not connected: the open fails as disconnected.
        try client.receive(.openChannel(session: 1, peer: bench.peer, request: 4, psm: 0x0080))
        #expect(clientInbox.messages.last == .channelOpened(session: 1, request: 4, result: .failure(.disconnected)))
        try client.receive(.openPeripheral(session: 2, restoreIdentifier: nil))
        try client.receive(.publishChannel(session: 2, request: 5, psm: 0x0025, requiresEncryption: false))
        #expect(clientInbox.messages.last == .channelPublished(session: 2, request: 5, result: .success(0x0025)))
        // Another client cannot take the PSM, nor unpublish it.
        let (other, otherInbox) = try bench.client("other")
        try other.receive(.openPeripheral(session: 2, restoreIdentifier: nil))
        try other.receive(.publishChannel(session: 2, request: 1, psm: 0x0025, requiresEncryption: false))
        #expect(otherInbox.messages.last == .channelPublished(session: 2, request: 1, result: .failure(.psmInUse(0x0025))))
        try other.receive(.unpublishChannel(session: 2, request: 2, psm: 0x0025))
        #expect(otherInbox.messages.last == .channelUnpublished(session: 2, request: 2, wasPublished: false))
        // The owner goes: its PSM is free.
        client.close()
        try other.receive(.publishChannel(session: 2, request: 3, psm: 0x0025, requiresEncryption: false))
        #expect(otherInbox.messages.last == .channelPublished(session: 2, request: 3, result: .success(0x0025)))
    }
}
