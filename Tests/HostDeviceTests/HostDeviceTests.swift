import ATT
import AssignedNumbers
import GATT
import HCI
import HCIDriver
import HCITransport
import HostStack
import SMP
import Scheduling
import StackLogging
import Testing
import VirtualController
@testable import HostDevice

/// Writes down what a device tells one client.
final class Client: HostDeviceClient, @unchecked Sendable {
    let name: String
    var reports: [AdvertisingReport] = []
    var connected: [DeviceConnection] = []
    var failed: [LEAddress] = []
    var disconnected: [(DeviceConnection, HCIStatus)] = []
    var reads: [ATTHandle] = []
    var subscriptions: [(ATTHandle, GATTClientConfiguration)] = []
    var advertisingStopped = 0
    var closed = 0
    /// "willReset" and "didReset", in order, with the disconnections (`disconnect`) among them.
    var resets: [String] = []
    /// What reads of dynamic values answer.
    var answer: [UInt8] = []

    init(_ name: String) { self.name = name }

    func device(_ device: HostDevice, didDiscover report: AdvertisingReport) { reports.append(report) }
    func device(_ device: HostDevice, didConnect connection: DeviceConnection) { connected.append(connection) }
    func device(_ device: HostDevice, didFailToConnectTo peer: LEAddress, error: DeviceConnectError) { failed.append(peer) }
    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {
        disconnected.append((connection, reason))
        resets.append("disconnect")
    }
    func deviceWillReset(_ device: HostDevice) { resets.append("willReset") }
    func deviceDidReset(_ device: HostDevice) { resets.append("didReset") }
    func deviceDidStopAdvertising(_ device: HostDevice) { advertisingStopped += 1 }
    func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) {
        reads.append(request.handle)
        respond(.success(answer))
    }
    func device(_ device: HostDevice, subscriptionChanged configuration: GATTClientConfiguration,
                from old: GATTClientConfiguration, forCharacteristic valueHandle: ATTHandle, on connection: DeviceConnection) {
        subscriptions.append((valueHandle, configuration))
    }
    func device(_ device: HostDevice, didClose error: HCITransportError?) { closed += 1 }
}

/// Host devices on one virtual radio, on virtual time: `shared` (the device under test, whose
/// clients share it) and two peers.
struct Bench {
    let loop = EventLoop(name: "radio", pacing: .manual)
    let radio: VirtualRadio
    let shared: HostDevice
    let peerA: HostDevice
    let peerB: HostDevice
    /// The controller under `shared`.
    let sharedController: VirtualController

    /// `logging`: where the devices' loggers come from (a test's capture, or the process's).
    /// `cancel`: how the controllers answer LE Create Connection Cancel.
    init(extended: Bool = true, cancel: VirtualController.CreateConnectionCancelBehaviour = .standard,
         logging: StackLogging = .standard) throws {
        let radio = VirtualRadio(loop: loop, seed: 5)
        self.radio = radio
        var configuration = VirtualController.Configuration()
        configuration.supportsExtendedAdvertising = extended
        configuration.createConnectionCancel = cancel
        let loop = self.loop
        func controller(_ address: String, x: Double) -> VirtualController {
            VirtualController(radio: radio, address: BluetoothAddress(address)!, configuration: configuration,
                              position: RadioPosition(x: x))
        }
        func make(_ address: String, x: Double) -> HostDevice {
            HostDevice(transport: controller(address, x: x).makeHostTransport(), loop: loop, deviceName: address, logging: logging)
        }
        sharedController = controller("C0:00:00:00:02:01", x: 0)
        shared = HostDevice(transport: sharedController.makeHostTransport(), loop: loop, deviceName: "C0:00:00:00:02:01",
                            logging: logging)
        peerA = make("C0:00:00:00:02:02", x: 2)
        peerB = make("C0:00:00:00:02:03", x: 4)
        for device in [shared, peerA, peerB] { _ = try run { device.start(completion: $0) } }
    }

    @discardableResult
    func run<T>(_ body: (@escaping (Result<T, HCIError>) -> Void) -> Void) throws -> T {
        var result: Result<T, HCIError>?
        body { result = $0 }
        loop.run(until: { result != nil }, timeout: .seconds(30))
        return try #require(result).get()
    }

    func runFor(_ duration: Duration) { loop.run(for: duration) }
    func run(until condition: () -> Bool) -> Bool {
        loop.run(until: condition, timeout: .seconds(10))
        return condition()
    }

    static func advertising(_ data: [UInt8] = [0x02, 0x01, 0x06]) -> AdvertisingParameters {
        AdvertisingParameters(data: data, ownRandomAddress: true)
    }

    /// A service whose one characteristic is read dynamically and notifies.
    static func service(_ uuid: UInt16) -> GATTService {
        GATTService(uuid: BluetoothUUID(uuid16: uuid), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: uuid + 1), properties: [.read, .notify], permissions: .readable,
                               value: .dynamic),
        ])
    }
}

@Suite("Host device: one host per controller, many clients")
struct HostDeviceTests {
    @Test func scansAreMergedAndReportsReachOnlyScanningClients() throws {
        let bench = try Bench()
        let one = Client("one"), two = Client("two")
        bench.shared.addClient(one, roles: .central)
        bench.shared.addClient(two, roles: .central)
        let advertiser = Client("advertiser")
        bench.peerA.addClient(advertiser, roles: .peripheral)
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }

        bench.shared.startScanning(for: one)
        #expect(bench.run { !one.reports.isEmpty })
        #expect(two.reports.isEmpty)
        #expect(bench.shared.controllerScanning)

        bench.shared.startScanning(for: two)
        #expect(bench.run { !two.reports.isEmpty })
        // One leaves: the controller goes on scanning for the other.
        bench.shared.stopScanning(for: one)
        bench.runFor(.milliseconds(50))
        let seen = one.reports.count
        let before = two.reports.count
        bench.runFor(.seconds(1))
        #expect(one.reports.count == seen)
        #expect(two.reports.count > before)
        #expect(bench.shared.controllerScanning)
        // The last one leaves: the controller stops.
        bench.shared.stopScanning(for: two)
        bench.runFor(.milliseconds(50))
        #expect(!bench.shared.controllerScanning)
    }

    @Test func connectionsBelongToTheClientsThatMadeThem() throws {
        let bench = try Bench()
        let one = Client("one"), two = Client("two"), server = Client("server")
        bench.shared.addClient(one, roles: .central)
        bench.shared.addClient(two, roles: .central)
        bench.shared.addClient(server, roles: .peripheral)
        let advertiser = Client("advertiser")
        bench.peerA.addClient(advertiser, roles: .peripheral)
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
        let peer = try #require(bench.peerA.address)

        bench.shared.connect(to: peer, for: one)
        #expect(bench.run { one.connected.count == 1 })
        let connection = try #require(one.connected.first)
        // Only its maker hears of it: not the other central, not the peripheral role.
        #expect(two.connected.isEmpty && server.connected.isEmpty)
        #expect(connection.isOwned(by: ObjectIdentifier(one)) && !connection.isOwned(by: ObjectIdentifier(two)))

        // A client that does not own it cannot end it.
        bench.shared.disconnect(connection, for: two)
        bench.runFor(.milliseconds(200))
        #expect(connection.isOpen && one.disconnected.isEmpty)

        // The second central connecting to the same peer shares the link.
        bench.shared.connect(to: peer, for: two)
        #expect(bench.run { two.connected.count == 1 })
        #expect(two.connected.first === connection)
        #expect(bench.shared.connections.count == 1)

        // The first gives it up: only it hears a disconnection; the link stays for the other.
        bench.shared.disconnect(connection, for: one)
        #expect(bench.run { one.disconnected.count == 1 })
        #expect(one.disconnected.first?.1 == .connectionTerminatedByLocalHost)
        #expect(connection.isOpen && two.disconnected.isEmpty)

        // The last owner gives it up: the link goes down.
        bench.shared.disconnect(connection, for: two)
        #expect(bench.run { two.disconnected.count == 1 })
        #expect(!connection.isOpen && bench.shared.connections.isEmpty)
        #expect(one.disconnected.count == 1 && server.disconnected.isEmpty)
    }

    @Test func pendingConnectionsEndOnlyWhenNoClientWantsThem() throws {
        let bench = try Bench()
        let one = Client("one"), two = Client("two")
        bench.shared.addClient(one, roles: .central)
        bench.shared.addClient(two, roles: .central)
        let absent = LEAddress(.randomDevice, BluetoothAddress("F0:00:00:00:00:09")!)
        bench.shared.connect(to: absent, for: one)
        bench.shared.connect(to: absent, for: two)
        bench.runFor(.milliseconds(100))
        #expect(bench.shared.initiating == absent)
        #expect(bench.shared.cancelConnecting(to: absent, for: one))
        #expect(!bench.shared.cancelConnecting(to: absent, for: one))
        bench.runFor(.milliseconds(100))
        #expect(bench.shared.initiating == absent)
        #expect(bench.shared.cancelConnecting(to: absent, for: two))
        #expect(bench.run { bench.shared.initiating == nil && bench.shared.pending.isEmpty })
        // Cancelling is not a failure for anyone.
        #expect(one.failed.isEmpty && two.failed.isEmpty)

        // Now the peer appears for a client that waits: it gets the connection.
        let advertiser = Client("advertiser")
        bench.peerA.addClient(advertiser, roles: .peripheral)
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
        bench.shared.connect(to: try #require(bench.peerA.address), for: two)
        #expect(bench.run { two.connected.count == 1 })
        #expect(one.connected.isEmpty)
    }

    @Test func incomingConnectionsBelongToThePeripheralClients() throws {
        let bench = try Bench()
        let central = Client("central"), server = Client("server"), otherServer = Client("other server")
        bench.shared.addClient(central, roles: .central)
        bench.shared.addClient(server, roles: .peripheral)
        bench.shared.addClient(otherServer, roles: .peripheral)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: server, completion: $0) }
        let visitor = Client("visitor")
        bench.peerA.addClient(visitor, roles: .central)
        bench.peerA.connect(to: try #require(bench.shared.address), for: visitor)
        #expect(bench.run { server.connected.count == 1 && otherServer.connected.count == 1 && visitor.connected.count == 1 })
        #expect(central.connected.isEmpty)
        // Legacy PDUs in a set: a connection ends that set's advertising, and its client hears it.
        #expect(bench.run { server.advertisingStopped == 1 })
        #expect(otherServer.advertisingStopped == 0)
        bench.peerA.disconnect(try #require(visitor.connected.first), for: visitor)
        #expect(bench.run { server.disconnected.count == 1 && otherServer.disconnected.count == 1 })
        #expect(central.disconnected.isEmpty)
    }

    @Test func eachClientAdvertisesInASetOfItsOwn() throws {
        let bench = try Bench(extended: true)
        let one = Client("one"), two = Client("two")
        bench.shared.addClient(one, roles: .peripheral)
        bench.shared.addClient(two, roles: .peripheral)
        try bench.run { bench.shared.startAdvertising(Bench.advertising([0x02, 0x01, 0x06, 0x02, 0x09, 0x41]), for: one, completion: $0) }
        try bench.run { bench.shared.startAdvertising(Bench.advertising([0x02, 0x01, 0x06, 0x02, 0x09, 0x42]), for: two, completion: $0) }
        #expect(bench.shared.advertisingSet(of: one) == 0 && bench.shared.advertisingSet(of: two) == 1)
        #expect(bench.shared.host.advertisingSets == [0, 1])

        // A scanner sees both advertisements, from the device's one address.
        let scanner = Client("scanner")
        bench.peerA.addClient(scanner, roles: .central)
        bench.peerA.startScanning(for: scanner)
        #expect(bench.run {
            let names = Set(scanner.reports.filter { !$0.isScanResponse }.compactMap(\.data.last))
            return names == [0x41, 0x42]
        })
        #expect(Set(scanner.reports.map(\.address)) == [try #require(bench.shared.address)])

        // One stops: the other's set goes on.
        try bench.run { bench.shared.stopAdvertising(for: one, completion: $0) }
        #expect(bench.shared.host.advertisingSets == [1] && bench.shared.advertisingSet(of: one) == nil)
    }

    @Test func withOneLegacySetOneClientAdvertisesAtATime() throws {
        let bench = try Bench(extended: false)
        let one = Client("one"), two = Client("two")
        bench.shared.addClient(one, roles: .peripheral)
        bench.shared.addClient(two, roles: .peripheral)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: one, completion: $0) }
        #expect(throws: HCIError.self) { try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: two, completion: $0) } }
        // The holder may change its data.
        try bench.run { bench.shared.startAdvertising(Bench.advertising([0x02, 0x01, 0x04]), for: one, completion: $0) }
        try bench.run { bench.shared.stopAdvertising(for: one, completion: $0) }
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: two, completion: $0) }
        #expect(bench.shared.advertisingSet(of: two) == 0)
    }

    @Test func servicesMergeIntoOneDatabaseAndRequestsReachTheirOwner() throws {
        let bench = try Bench()
        let one = Client("one"), two = Client("two")
        one.answer = [0x01]
        two.answer = [0x02]
        bench.shared.addClient(one, roles: .peripheral)
        bench.shared.addClient(two, roles: .peripheral)
        let first = try bench.shared.addService(Bench.service(0xAA00), for: one)
        let second = try bench.shared.addService(Bench.service(0xBB00), for: two)
        // Neither removes the other's service.
        #expect(throws: GATTDatabaseError.self) { try bench.shared.removeService(second.id, for: one) }

        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: one, completion: $0) }
        let visitor = Client("visitor")
        bench.peerA.addClient(visitor, roles: .central)
        bench.peerA.connect(to: try #require(bench.shared.address), for: visitor)
        #expect(bench.run { visitor.connected.count == 1 })
        let client = try #require(visitor.connected.first).client

        var services: [DiscoveredService]?
        client.discoverPrimaryServices { services = try? $0.get() }
        #expect(bench.run { services != nil })
        let uuids = Set((services ?? []).map(\.uuid))
        #expect(uuids.isSuperset(of: [BluetoothUUID(uuid16: 0xAA00), BluetoothUUID(uuid16: 0xBB00)]))

        var values: [[UInt8]] = []
        for handle in [first.characteristics[0].value, second.characteristics[0].value] {
            client.readValue(of: handle) { if case .success(let value) = $0 { values.append(value) } }
        }
        #expect(bench.run { values.count == 2 })
        #expect(values == [[0x01], [0x02]])
        #expect(one.reads == [first.characteristics[0].value] && two.reads == [second.characteristics[0].value])

        // Subscriptions reach the owner of the characteristic only.
        var subscribed = false
        let characteristics = try #require(services?.first { $0.uuid == BluetoothUUID(uuid16: 0xBB00) })
        client.discoverCharacteristics(of: characteristics) { result in
            guard case .success(let found) = result, let characteristic = found.first else { return }
            client.subscribe(to: characteristic, onValue: { _ in }) { _ in subscribed = true }
        }
        #expect(bench.run { subscribed })
        #expect(one.subscriptions.isEmpty && two.subscriptions.count == 1)
        // A peripheral client that used a connection it also owns hears its end once.
        bench.peerA.disconnect(try #require(visitor.connected.first), for: visitor)
        #expect(bench.run { two.disconnected.count == 1 })
        #expect(two.subscriptions.last?.1 == [])

        // One client's services go, the other's stay.
        bench.shared.removeAllServices(for: one)
        #expect(bench.shared.gattServer.handles(of: first.id) == nil)
        #expect(bench.shared.gattServer.handles(of: second.id) != nil)
    }

    @Test func removingAClientLeavesTheOthersUntouched() throws {
        let bench = try Bench()
        let leaving = Client("leaving"), staying = Client("staying")
        bench.shared.addClient(leaving, roles: [.central, .peripheral])
        bench.shared.addClient(staying, roles: [.central, .peripheral])
        let advertiserA = Client("A"), advertiserB = Client("B")
        bench.peerA.addClient(advertiserA, roles: .peripheral)
        bench.peerB.addClient(advertiserB, roles: .peripheral)
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiserA, completion: $0) }
        try bench.run { bench.peerB.startAdvertising(Bench.advertising(), for: advertiserB, completion: $0) }

        // Both share a link to A; only the leaving one has a link to B.
        bench.shared.connect(to: try #require(bench.peerA.address), for: leaving)
        #expect(bench.run { leaving.connected.count == 1 })
        bench.shared.connect(to: try #require(bench.peerA.address), for: staying)
        #expect(bench.run { staying.connected.count == 1 })
        bench.shared.connect(to: try #require(bench.peerB.address), for: leaving)
        #expect(bench.run { leaving.connected.count == 2 })
        let leavingService = try bench.shared.addService(Bench.service(0xCC00), for: leaving)
        let stayingService = try bench.shared.addService(Bench.service(0xDD00), for: staying)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: leaving, completion: $0) }
        bench.shared.startScanning(for: leaving)
        bench.runFor(.milliseconds(100))

        bench.shared.removeClient(leaving)
        #expect(bench.run { bench.shared.connections.count == 1 })
        let left = try #require(bench.shared.connections.values.first)
        #expect(left.peer == bench.peerA.address && left.isOpen)
        #expect(staying.disconnected.isEmpty)
        #expect(leaving.disconnected.isEmpty)  // a removed client is not called again
        #expect(bench.shared.gattServer.handles(of: leavingService.id) == nil)
        #expect(bench.shared.gattServer.handles(of: stayingService.id) != nil)
        bench.runFor(.milliseconds(100))
        #expect(!bench.shared.controllerScanning)
        #expect(bench.shared.host.advertisingSets.isEmpty)
    }

    @Test func theLongTermKeyRequestIsAnsweredFromThePeersBond() throws {
        let bench = try Bench()
        let server = Client("server")
        bench.shared.addClient(server, roles: .peripheral)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: server, completion: $0) }
        let visitor = Client("visitor")
        bench.peerA.addClient(visitor, roles: .central)
        bench.peerA.connect(to: try #require(bench.shared.address), for: visitor)
        #expect(bench.run { visitor.connected.count == 1 && server.connected.count == 1 })
        let incoming = try #require(server.connected.first)
        let outgoing = try #require(visitor.connected.first)
        let key = [UInt8](0..<16)
        var outcome = PairingOutcome(method: .passkeyInput, linkKeySecurity: .authenticatedEncryption, keySize: 16, bonded: true)
        outcome.peripheralLTK = SMPLongTermKey(key: key, ediv: 0x1234, rand: 0x0102_0304_0506_0708, keySize: 16,
                                               authenticated: true, secureConnections: false)
        #expect(try bench.shared.bonds.save(outcome, peer: incoming.peer) != nil)
        try bench.run { bench.peerA.host.startEncryption(outgoing.le, longTermKey: key, rand: 0x0102_0304_0506_0708, ediv: 0x1234,
                                                          completion: $0) }
        // The bond's key is worth authenticated encryption; the central, which has no bond of
        // its own here, counts its link as merely encrypted.
        #expect(bench.run { incoming.security.level == .authenticatedEncryption && outgoing.security.level.isEncrypted })
        #expect(incoming.security.keySize == 16)
    }
}
