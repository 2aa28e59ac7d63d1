import ATT
import GATT
import HCI
@testable import HCIDriver
@testable import HostStack
import Scheduling
import Testing
import VirtualController
@testable import HostDevice

/// Issue 17: a controller that forgets a link without telling the host (no Disconnection
/// Complete, no Number Of Completed Packets for it, Unknown Connection Identifier for its
/// handle). The host finds out through a command naming the link, tears it down as a
/// disconnection would, and the other links go on. Virtual time throughout.
@Suite("Host device: a controller that forgets a link")
struct ForgottenLinkDeviceTests {
    /// The shared device connected as central to `peer` (advertising for a client of its own).
    static func connect(_ bench: Bench, to peer: HostDevice, for central: Client) throws -> DeviceConnection {
        let advertiser = Client("advertiser")
        peer.addClient(advertiser, roles: .peripheral)
        try bench.run { peer.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
        let before = central.connected.count
        bench.shared.connect(to: try #require(peer.address), for: central)
        #expect(bench.run { central.connected.count == before + 1 })
        return try #require(central.connected.last)
    }

    /// An ATT Write Command (to the GAP device name, which ignores it) in one L2CAP PDU.
    static let writeCommand: [UInt8] = [0x08, 0x00, 0x04, 0x00, 0x52, 0x03, 0x00, 1, 2, 3, 4, 5]

    /// Nothing of the link is left in the shared device's layers, and every ACL credit is back.
    static func expectNothingLeft(of connection: DeviceConnection, in bench: Bench) {
        let driver = bench.shared.host.driver
        #expect(!connection.isOpen)
        #expect(bench.shared.connections[connection.handle] == nil)
        #expect(bench.shared.host.connections[connection.handle] == nil)
        #expect(!driver.isConnected(handle: connection.handle))
        #expect(driver.aclCredits == Int(driver.controllerInfo?.totalACLDataPackets ?? 0)
            - driver.connections.values.reduce(0) { $0 + $1.inFlight })
    }

    @Test func aReadInFlightFailsAtTheATTTimeoutAndTheLinkEnds() throws {
        let bench = try Bench()
        let central = Client("central")
        bench.shared.addClient(central, roles: .central)
        let connection = try Self.connect(bench, to: bench.peerA, for: central)

        bench.sharedController.forgetConnection(connection.handle)
        let sent = bench.loop.now
        var read: Result<[UInt8], GATTClientError>?
        connection.client.readValue(of: 0x0003) { read = $0 }
        bench.runFor(.seconds(29))
        #expect(read == nil && central.disconnected.isEmpty)
        // The 30 s ATT transaction timeout: the read fails, the device disconnects, the
        // controller answers Unknown Connection Identifier, and the link ends at once.
        #expect(bench.run { !central.disconnected.isEmpty })
        #expect(bench.loop.now - sent >= .seconds(30) && bench.loop.now - sent < .seconds(31))
        #expect(read == .failure(.timeout))
        #expect(connection.attTimedOut)
        #expect(central.disconnected.count == 1)
        Self.expectNothingLeft(of: connection, in: bench)
        bench.runFor(.seconds(5))
        #expect(central.disconnected.count == 1)
    }

    /// The shared device's central with links to peers A (the one to forget) and B, settled.
    static func twoLinks() throws -> (Bench, Client, forgotten: DeviceConnection, other: DeviceConnection) {
        let bench = try Bench()
        let central = Client("central")
        bench.shared.addClient(central, roles: .central)
        let forgotten = try connect(bench, to: bench.peerA, for: central)
        let other = try connect(bench, to: bench.peerB, for: central)
        bench.runFor(.milliseconds(500))
        return (bench, central, forgotten, other)
    }

    @Test func theOtherLinkGoesOnOnceTheForgottenLinksCreditsAreBack() throws {
        let (bench, central, forgotten, other) = try Self.twoLinks()
        let driver = bench.shared.host.driver
        let total = Int(try #require(driver.controllerInfo?.totalACLDataPackets))
        #expect(driver.aclCredits == total)

        // The controller forgets the link with a read and every buffer's worth of writes on
        // it: their packets never complete, and the other link has no buffer left.
        bench.sharedController.forgetConnection(forgotten.handle)
        var read: Result<[UInt8], GATTClientError>?
        forgotten.client.readValue(of: 0x0003) { read = $0 }
        for _ in 0..<total { #expect(driver.sendACL(handle: forgotten.handle, pdu: Self.writeCommand)) }
        for _ in 0..<20 { #expect(driver.sendACL(handle: other.handle, pdu: Self.writeCommand)) }
        bench.runFor(.seconds(10))
        #expect(driver.aclCredits == 0)
        #expect(driver.queuedPDUs(handle: other.handle) == 20)

        // The read's ATT timeout ends the forgotten link; its credits return and the other
        // link's writes all go.
        bench.runFor(.seconds(21))
        #expect(read == .failure(.timeout))
        #expect(central.disconnected.map(\.0.handle) == [forgotten.handle])
        #expect(driver.queuedPDUs(handle: other.handle) == 0)
        #expect(bench.run { driver.aclCredits == total })
        #expect(other.isOpen && driver.isConnected(handle: other.handle))
        Self.expectNothingLeft(of: forgotten, in: bench)
        var otherRead: Result<[UInt8], GATTClientError>?
        other.client.readValue(of: 0x0003) { otherRead = $0 }
        #expect(bench.run { otherRead != nil })
        #expect((try? otherRead?.get()) != nil)
    }

    @Test func withNoRequestOnTheForgottenLinkItsStalledBuffersEndIt() throws {
        let (bench, central, forgotten, other) = try Self.twoLinks()
        let driver = bench.shared.host.driver
        let total = Int(try #require(driver.controllerInfo?.totalACLDataPackets))

        // Writes without response only: no ATT transaction will time out on the forgotten link.
        bench.sharedController.forgetConnection(forgotten.handle)
        let start = bench.loop.now
        for _ in 0..<total { #expect(driver.sendACL(handle: forgotten.handle, pdu: Self.writeCommand)) }
        for _ in 0..<20 { #expect(driver.sendACL(handle: other.handle, pdu: Self.writeCommand)) }
        bench.runFor(.seconds(39))
        #expect(driver.queuedPDUs(handle: other.handle) == 20 && central.disconnected.isEmpty)
        // 40 s without a completion while the other link waits: the driver disconnects the
        // link, the controller does not know it, and it ends as a link lost (Connection Timeout).
        #expect(bench.run { !central.disconnected.isEmpty })
        #expect(bench.loop.now - start < .seconds(41))
        #expect(central.disconnected.map(\.1) == [.connectionTimeout])
        #expect(central.disconnected.map(\.0.handle) == [forgotten.handle])
        #expect(bench.run { driver.queuedPDUs(handle: other.handle) == 0 && driver.aclCredits == total })
        #expect(other.isOpen)
        Self.expectNothingLeft(of: forgotten, in: bench)
    }

    @Test func disconnectingAForgottenLinkEndsItPromptly() throws {
        let bench = try Bench()
        let central = Client("central")
        bench.shared.addClient(central, roles: .central)
        let connection = try Self.connect(bench, to: bench.peerA, for: central)
        bench.sharedController.forgetConnection(connection.handle)
        var read: Result<[UInt8], GATTClientError>?
        connection.client.readValue(of: 0x0003) { read = $0 }
        bench.runFor(.milliseconds(100))

        bench.shared.disconnect(connection, for: central)
        bench.runFor(.milliseconds(10))
        // Disconnect is answered Unknown Connection Identifier: the link ends as if the
        // controller had said so (Connection Terminated By Local Host), once.
        #expect(central.disconnected.map(\.1) == [.connectionTerminatedByLocalHost])
        #expect(read == .failure(.disconnected))
        Self.expectNothingLeft(of: connection, in: bench)
        bench.runFor(.seconds(40))
        #expect(central.disconnected.count == 1)
    }
}

/// Bumble's controller (0.0.236) answers LE Create Connection Cancel with success and sends no
/// LE Connection Complete; it goes on initiating. After `LEHost.cancelCompletionGrace` the host
/// counts the attempt as cancelled; a link the controller makes anyway is adopted when a client
/// still wants it and ended otherwise; a late cancellation event is ignored.
@Suite("Host device: a controller that does not finish a cancelled connection attempt")
struct CancelQuirkTests {
    static let grace = LEHost.cancelCompletionGrace

    static func advertise(_ bench: Bench, _ peer: HostDevice) throws {
        let advertiser = Client("advertiser")
        peer.addClient(advertiser, roles: .peripheral)
        try bench.run { peer.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
    }

    /// `client` starts connecting to peer B (not advertising) and gives up 100 ms later.
    static func connectToPeerBThenCancel(_ bench: Bench, for client: Client) throws -> LEAddress {
        let peerB = try #require(bench.peerB.address)
        bench.shared.connect(to: peerB, for: client)
        bench.runFor(.milliseconds(100))
        #expect(bench.shared.cancelConnecting(to: peerB, for: client))
        return peerB
    }

    @Test(arguments: [true, false])
    func aCancelWithoutItsEventEndsAfterTheGraceAndALinkMadeAnywayIsEnded(extended: Bool) throws {
        let bench = try Bench(extended: extended, cancel: .keepsInitiating)
        let one = Client("one"), two = Client("two")
        bench.shared.addClient(one, roles: .central)
        bench.shared.addClient(two, roles: .central)
        // `one` wants peer B (not advertising yet), then gives up.
        let peerB = try Self.connectToPeerBThenCancel(bench, for: one)
        bench.runFor(Self.grace - .milliseconds(100))
        #expect(bench.shared.initiating == peerB && bench.shared.cancellingInitiation)
        bench.runFor(.milliseconds(200))
        #expect(bench.shared.initiating == nil && !bench.shared.cancellingInitiation)
        #expect(bench.shared.host.awaitsLateCancelOutcome)
        #expect(one.failed.isEmpty)

        // `two` wants peer A: the controller still initiates peer B and refuses; the device
        // tries again rather than failing `two`.
        try Self.advertise(bench, bench.peerA)
        bench.shared.connect(to: try #require(bench.peerA.address), for: two)
        bench.runFor(.seconds(5))
        #expect(two.connected.isEmpty && two.failed.isEmpty)
        #expect(bench.shared.pendingConnectionCount == 1)

        // Peer B appears: the controller connects it, nobody wants it, the device ends it;
        // `two`'s attempt then goes through.
        try Self.advertise(bench, bench.peerB)
        #expect(bench.run { two.connected.count == 1 })
        #expect(one.connected.isEmpty && one.failed.isEmpty && two.failed.isEmpty)
        #expect(bench.run { bench.shared.connections.count == 1 })
        #expect(bench.shared.connections.values.first?.peer == bench.peerA.address)
        #expect(!bench.shared.host.awaitsLateCancelOutcome)
    }

    @Test func aLinkMadeAfterTheGraceIsAdoptedWhenStillWanted() throws {
        let bench = try Bench(cancel: .keepsInitiating)
        let one = Client("one")
        bench.shared.addClient(one, roles: .central)
        // `one` gives up on peer B (not advertising), then wants it again: the controller still
        // initiates the attempt it said it cancelled, and refuses the new one.
        let peerB = try Self.connectToPeerBThenCancel(bench, for: one)
        bench.runFor(Self.grace + .milliseconds(100))
        #expect(bench.shared.host.awaitsLateCancelOutcome)
        bench.shared.connect(to: peerB, for: one)
        bench.runFor(.seconds(5))
        #expect(one.connected.isEmpty && one.failed.isEmpty)
        // Peer B appears: the old attempt connects, and `one`, still wanting it, gets the link.
        try Self.advertise(bench, bench.peerB)
        #expect(bench.run { one.connected.count == 1 })
        #expect(one.connected.first?.peer == peerB)
        #expect(bench.shared.pendingConnectionCount == 0 && bench.shared.initiating == nil)
        bench.runFor(.seconds(5))
        #expect(one.failed.isEmpty && one.disconnected.isEmpty && bench.shared.connections.count == 1)
    }

    @Test func aLateCancellationEventDoesNotEndTheNextAttempt() throws {
        let bench = try Bench(cancel: .late(Self.grace + .seconds(1)))
        let one = Client("one"), two = Client("two")
        bench.shared.addClient(one, roles: .central)
        bench.shared.addClient(two, roles: .central)
        _ = try Self.connectToPeerBThenCancel(bench, for: one)
        bench.runFor(.milliseconds(10))
        #expect(bench.shared.host.connecting != nil)
        #expect(bench.shared.host.cancelWatchdog != nil)
        bench.runFor(Self.grace + .milliseconds(100))
        #expect(bench.shared.initiating == nil && bench.shared.host.awaitsLateCancelOutcome)
        // A new attempt is under way when the cancelled one's event finally comes.
        let peerA = try #require(bench.peerA.address)
        bench.shared.connect(to: peerA, for: two)
        bench.runFor(.seconds(2))
        #expect(bench.shared.initiating == peerA)
        #expect(!bench.shared.host.awaitsLateCancelOutcome)
        #expect(two.failed.isEmpty && one.failed.isEmpty)
        try Self.advertise(bench, bench.peerA)
        #expect(bench.run { two.connected.count == 1 })
    }
}
