import HCI
import Scheduling
import Testing
@testable import VirtualController

/// The faults and quirks a virtual controller can be told to have, for the host's tests
/// (issue 17): forgetting a link without telling the host, and LE Create Connection Cancel
/// answered without (or late with) its LE Connection Complete.
@Suite("Virtual controller: faults and quirks")
struct ControllerQuirkTests {
    static func createConnection() -> LECreateConnection {
        LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicDevice,
            peerAddress: TwoDevices.addressB, ownAddressType: .publicDevice, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)
    }

    static func connectionCompletes(_ host: RawHost) -> [HCIStatus] {
        host.takeLEEvents().compactMap { if case .enhancedConnectionComplete(let c) = $0 { c.status } else { nil } }
    }

    @Test func aForgottenLinkIsUnknownToCommandsAndReportedToNoOne() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        d.a.sendACL(handle: central, [4, 0, 0x04, 0, 1, 2, 3, 4])
        d.a.controller.forgetConnection(central)
        d.loop.run(for: .milliseconds(100))
        // No Disconnection Complete, no Number Of Completed Packets for it.
        #expect(d.a.take { if case .disconnectionComplete(let e) = $0 { e } else { nil } }.isEmpty)
        #expect(d.a.take { if case .numberOfCompletedPackets(let e) = $0 { e } else { nil } }.isEmpty)
        // Its handle is unknown to the commands naming it.
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .unknownConnectionIdentifier)
        #expect(d.a.status(ReadRSSI(connectionHandle: central)) == .unknownConnectionIdentifier)
        // Its buffers are free again; the peer loses the link by supervision timeout.
        #expect(d.a.controller.freeACLBuffers == Int(d.a.controller.configuration.totalACLDataPackets))
        d.loop.run(for: .seconds(1))
        let lost = d.b.take { if case .disconnectionComplete(let e) = $0 { e } else { nil } }
        #expect(lost.map(\.reason) == [.connectionTimeout])
    }

    @Test func aControllerThatKeepsInitiatingAfterACancelSaysNothingAndConnectsLater() throws {
        var configuration = VirtualController.Configuration()
        configuration.createConnectionCancel = .keepsInitiating
        let d = TwoDevices(configurationA: configuration)
        #expect(d.a.status(Self.createConnection()) == .success)
        d.loop.run(for: .seconds(1))
        #expect(d.a.status(LECreateConnectionCancel()) == .success)
        d.loop.run(for: .seconds(10))
        #expect(Self.connectionCompletes(d.a).isEmpty)
        // Still initiating: another attempt is refused, and the peer's advertising connects.
        #expect(d.a.status(Self.createConnection()) == .commandDisallowed)
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x0020, advertisingIntervalMax: 0x0020, advertisingType: .advInd,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        d.loop.run(for: .seconds(1))
        #expect(Self.connectionCompletes(d.a) == [.success])
    }

    @Test func aLateCancellationEventComesAfterItsDelay() throws {
        var configuration = VirtualController.Configuration()
        configuration.createConnectionCancel = .late(.seconds(3))
        let d = TwoDevices(configurationA: configuration)
        #expect(d.a.status(Self.createConnection()) == .success)
        #expect(d.a.status(LECreateConnectionCancel()) == .success)
        d.loop.run(for: .milliseconds(2900))
        #expect(Self.connectionCompletes(d.a).isEmpty)
        // The attempt did stop: there is nothing left to cancel.
        #expect(d.a.status(LECreateConnectionCancel()) == .commandDisallowed)
        d.loop.run(for: .milliseconds(200))
        #expect(Self.connectionCompletes(d.a) == [.unknownConnectionIdentifier])
    }
}
