@testable import GATT
import HCI
@testable import HCIDriver
import HostStack
import Scheduling
import Testing
import VirtualController
@testable import HostDevice

/// Issue 17: the controller under a host device resets itself (a Hardware Error event). Every
/// link ends as a disconnection would (Hardware Failure), the clients' scans, advertising and
/// services go, the controller is reset and initialised again, and the clients hear it is back.
@Suite("Host device: a controller that resets itself")
struct ControllerResetTests {
    @Test func aHardwareErrorEndsEveryLinkAndTheDeviceComesBack() throws {
        let bench = try Bench()
        let central = Client("central"), server = Client("server")
        bench.shared.addClient(central, roles: .central)
        bench.shared.addClient(server, roles: .peripheral)
        // The shared device is central to peer A, and serves a service and advertises to peer B.
        let advertiser = Client("advertiser")
        bench.peerA.addClient(advertiser, roles: .peripheral)
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
        bench.shared.connect(to: try #require(bench.peerA.address), for: central)
        #expect(bench.run { central.connected.count == 1 })
        try bench.shared.addService(Bench.service(0x1810), for: server)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: server, completion: $0) }
        let dialer = Client("dialer")
        bench.peerB.addClient(dialer, roles: .central)
        bench.peerB.connect(to: try #require(bench.shared.address), for: dialer)
        #expect(bench.run { dialer.connected.count == 1 && server.connected.count == 1 })
        bench.shared.startScanning(for: central)
        bench.runFor(.milliseconds(100))
        let address = bench.shared.address
        let links = bench.shared.connections.values
        #expect(links.count == 2)

        bench.sharedController.failHardware(code: 0x42)
        bench.runFor(.zero)
        // Each client heard its links end (Hardware Failure), then the reset, in that order.
        #expect(central.disconnected.map(\.1) == [.hardwareFailure])
        #expect(server.disconnected.map(\.1) == [.hardwareFailure])
        #expect(central.resets.prefix(2) == ["disconnect", "willReset"])
        #expect(server.resets.prefix(2) == ["disconnect", "willReset"])
        #expect(links.allSatisfy { !$0.isOpen })
        #expect(bench.run { central.resets.last == "didReset" && server.resets.last == "didReset" })
        #expect(central.resets == ["disconnect", "willReset", "didReset"])
        // Nothing of the links is left at any layer; the services and advertising are gone.
        #expect(bench.shared.connections.isEmpty && bench.shared.host.connections.isEmpty)
        #expect(bench.shared.host.driver.connections.isEmpty)
        #expect(bench.shared.host.driver.aclCredits == bench.shared.host.driver.controllerInfo?.totalACLDataPackets)
        #expect(bench.shared.gattServer.connections.isEmpty)
        #expect(bench.shared.services.isEmpty)
        #expect(bench.shared.advertisingSet(of: server) == nil && !bench.shared.controllerScanning)
        #expect(!bench.shared.isResetting && !bench.shared.isClosed)
        #expect(bench.shared.address == address)
        #expect(central.closed == 0 && server.closed == 0)

        // The peers lose the link by supervision timeout; then the device works again.
        #expect(bench.run { bench.peerA.connections.isEmpty && bench.peerB.connections.isEmpty })
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
        bench.shared.connect(to: try #require(bench.peerA.address), for: central)
        #expect(bench.run { central.connected.count == 2 })
        try bench.shared.addService(Bench.service(0x1810), for: server)
        try bench.run { bench.shared.startAdvertising(Bench.advertising(), for: server, completion: $0) }
        bench.peerB.connect(to: try #require(bench.shared.address), for: dialer)
        #expect(bench.run { server.connected.count == 2 })
    }

    @Test func aControllerThatKeepsFailingIsGone() throws {
        let bench = try Bench()
        let central = Client("central")
        bench.shared.addClient(central, roles: .central)
        for n in 1...3 {
            bench.sharedController.failHardware()
            #expect(bench.run { central.resets.count(where: { $0 == "didReset" }) == n })
        }
        bench.sharedController.failHardware()
        #expect(bench.run { central.closed == 1 })
        #expect(bench.shared.isClosed && !bench.shared.isResetting)
        #expect(central.resets == ["willReset", "didReset", "willReset", "didReset", "willReset", "didReset"])
    }

    @Test func aResetTheControllerAnnouncesOnlyByItsCommandCompleteIsRecoveredToo() throws {
        let bench = try Bench()
        let central = Client("central")
        bench.shared.addClient(central, roles: .central)
        let advertiser = Client("advertiser")
        bench.peerA.addClient(advertiser, roles: .peripheral)
        try bench.run { bench.peerA.startAdvertising(Bench.advertising(), for: advertiser, completion: $0) }
        bench.shared.connect(to: try #require(bench.peerA.address), for: central)
        #expect(bench.run { central.connected.count == 1 })
        bench.sharedController.failHardware(announced: false)
        #expect(bench.run { central.resets == ["disconnect", "willReset", "didReset"] })
        #expect(central.disconnected.map(\.1) == [.hardwareFailure])
    }
}
