import HCI
import Scheduling
import Testing
@testable import VirtualController

@Suite("Virtual controller: connections")
struct ConnectionTests {
    func disconnections(_ host: RawHost) -> [DisconnectionComplete] {
        host.take { if case .disconnectionComplete(let d) = $0 { d } else { nil } }
    }

    func completedPackets(_ host: RawHost) -> Int {
        host.take { if case .numberOfCompletedPackets(let n) = $0 { n } else { nil } }
            .flatMap(\.entries).reduce(0) { $0 + Int($1.completedPackets) }
    }

    /// Reassembles what a host received into one byte string.
    func received(_ host: RawHost) -> [UInt8] {
        defer { host.acl.removeAll() }
        return host.acl.flatMap(\.data)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func connectBothRoles(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = try #require(d.connect())
        #expect(central != 0 && peripheral != 0)
        // Connecting stopped the advertising: no more reports for a scanner.
        #expect(d.a.status(LESetScanParameters(leScanType: .passive, leScanInterval: 0x10, leScanWindow: 0x10,
                                               ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) == .success)
        #expect(d.a.status(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) == .success)
        d.loop.run(for: .seconds(1))
        #expect(!d.a.takeLEEvents().contains { if case .advertisingReport = $0 { true } else { false } })
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func aclBothWaysWithFragmentationAndCredits(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = try #require(d.connect())
        // A 100-byte L2CAP PDU crosses as 27-byte link-layer PDUs before the data length update.
        let pdu = [UInt8(96), 0, 0x04, 0] + (0..<96).map { UInt8($0) }
        d.a.sendACL(handle: central, pdu)
        d.loop.run(until: { d.b.acl.flatMap(\.data).count == 100 }, timeout: .seconds(2))
        #expect(d.b.acl.count == 4)
        #expect(d.b.acl.first?.boundary == .firstFlushable)
        #expect(d.b.acl.dropFirst().allSatisfy { $0.boundary == .continuing })
        #expect(received(d.b) == pdu)
        d.loop.run(for: .milliseconds(100))
        #expect(completedPackets(d.a) == 1)

        // The other way, after the data length update: one PDU, one ACL packet.
        let status = d.b.command(LESetDataLength(connectionHandle: peripheral, txOctets: 251, txTime: 2120))
        guard case .commandComplete(let c)? = status else { Issue.record("no Command Complete"); return }
        #expect(c.returnParameters == [0x00, UInt8(peripheral & 0xFF), UInt8(peripheral >> 8)])
        d.loop.run(for: .milliseconds(200))
        let changes = d.b.takeLEEvents().compactMap { if case .dataLengthChange(let e) = $0 { e } else { nil } }
        #expect(changes.last?.maxTxOctets == 251)
        d.b.sendACL(handle: peripheral, pdu)
        d.loop.run(until: { !d.a.acl.isEmpty }, timeout: .seconds(2))
        #expect(d.a.acl.count == 1)
        #expect(received(d.a) == pdu)
    }

    @Test func timedModeTakesAirTime() throws {
        let d = TwoDevices(airTime: .timed)
        let (central, _) = try #require(d.connect(intervalMin: 0x0006))  // 7.5 ms
        _ = d.a.takeLEEvents()
        // Twelve 27-byte fragments on the 1M PHY need a few connection events, not zero time.
        let start = d.loop.now
        for _ in 0..<12 { d.a.sendACL(handle: central, [23, 0, 0x04, 0] + [UInt8](repeating: 0xAB, count: 23)) }
        d.loop.run(until: { d.b.acl.count == 12 }, timeout: .seconds(2))
        let elapsed = d.loop.now - start
        #expect(d.b.acl.count == 12)
        #expect(elapsed > .microseconds(300 * 12))
        #expect(elapsed < .milliseconds(60))
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func disconnectReportsReasonsOnBothSides(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = try #require(d.connect())
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .success)
        d.loop.run(until: { !d.b.events.isEmpty }, timeout: .seconds(2))
        d.loop.run(for: .milliseconds(10))
        #expect(disconnections(d.a).map(\.reason) == [.connectionTerminatedByLocalHost])
        let remote = disconnections(d.b)
        #expect(remote.map(\.reason) == [.remoteUserTerminatedConnection])
        #expect(remote.first?.connectionHandle == peripheral)
        // The handle is gone.
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .unknownConnectionIdentifier)
        // An invalid reason is refused.
        let again = try #require(d.connect())
        #expect(d.a.status(Disconnect(connectionHandle: again.0, reason: .hardwareFailure)) == .invalidHCICommandParameters)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func supervisionTimeoutWhenPeerMovesAway(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        _ = try #require(d.connect())  // supervision timeout 0x48 = 720 ms
        // Let the first connection events happen: before them a lost peer is a failed
        // establishment (0x3E), tested below.
        d.loop.run(for: .milliseconds(100))
        let start = d.loop.now
        d.b.controller.position = RadioPosition(x: 5000)
        d.loop.run(until: { !d.a.events.isEmpty && !d.b.events.isEmpty }, timeout: .seconds(5))
        #expect(d.loop.now - start == .milliseconds(720))
        #expect(disconnections(d.a).map(\.reason) == [.connectionTimeout])
        #expect(disconnections(d.b).map(\.reason) == [.connectionTimeout])
    }

    @Test func peerLostBeforeFirstEventFailsEstablishment() throws {
        let d = TwoDevices(airTime: .timed)
        _ = try #require(d.connect())  // 30 ms interval
        d.b.controller.position = RadioPosition(x: 5000)
        d.loop.run(for: .seconds(2))
        #expect(disconnections(d.a).map(\.reason) == [.connectionFailedToBeEstablished])
    }

    @Test func powerOffTimesOutThePeerAndClosesTheHost() throws {
        let d = TwoDevices()
        _ = try #require(d.connect())
        d.b.controller.setPowered(false)
        d.loop.run(for: .seconds(1))
        #expect(disconnections(d.a).map(\.reason) == [.connectionTimeout])
        #expect(disconnections(d.b).isEmpty)
        guard case .some(.some(let error)) = d.b.closedWith else { Issue.record("host link not closed"); return }
        #expect(error.message.contains("powered off"))
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func encryptionWithMatchingKeys(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = try #require(d.connect())
        let ltk = (0..<16).map { UInt8($0 * 7) }
        #expect(d.a.status(LEEnableEncryption(connectionHandle: central, randomNumber: 0x1122_3344_5566_7788,
                                              encryptedDiversifier: 0xBEEF, longTermKey: ltk)) == .success)
        d.loop.run(until: { d.b.events.contains { if case .le(.longTermKeyRequest) = $0 { true } else { false } } }, timeout: .seconds(1))
        let request = d.b.takeLEEvents().compactMap { if case .longTermKeyRequest(let r) = $0 { r } else { nil } }
        #expect(request.first?.randomNumber == 0x1122_3344_5566_7788)
        #expect(request.first?.encryptedDiversifier == 0xBEEF)
        #expect(d.b.status(LELongTermKeyRequestReply(connectionHandle: peripheral, longTermKey: ltk)) == .success)
        d.loop.run(for: .milliseconds(200))
        let changeA = d.a.take { if case .encryptionChange(let e) = $0 { e } else { nil } }
        let changeB = d.b.take { if case .encryptionChange(let e) = $0 { e } else { nil } }
        #expect(changeA.map(\.status) == [.success])
        #expect(changeB.map(\.status) == [.success])
        #expect(changeA.first?.encryptionEnabled == 1)
        // Data still flows, now with a MIC.
        d.a.sendACL(handle: central, [4, 0, 0x04, 0, 1, 2, 3, 4])
        d.loop.run(until: { !d.b.acl.isEmpty }, timeout: .seconds(1))
        #expect(received(d.b) == [4, 0, 0x04, 0, 1, 2, 3, 4])
    }

    @Test func encryptionWithDifferentKeysFailsTheMIC() throws {
        let d = TwoDevices()
        let (central, peripheral) = try #require(d.connect())
        #expect(d.a.status(LEEnableEncryption(connectionHandle: central, randomNumber: 1, encryptedDiversifier: 2,
                                              longTermKey: [UInt8](repeating: 1, count: 16))) == .success)
        d.loop.run(for: .milliseconds(10))
        #expect(d.b.status(LELongTermKeyRequestReply(connectionHandle: peripheral, longTermKey: [UInt8](repeating: 2, count: 16))) == .success)
        d.loop.run(for: .milliseconds(200))
        #expect(disconnections(d.a).map(\.reason) == [.connectionTerminatedMICFailure])
        #expect(disconnections(d.b).map(\.reason) == [.connectionTerminatedMICFailure])
    }

    @Test func encryptionNegativeReply() throws {
        let d = TwoDevices()
        let (central, peripheral) = try #require(d.connect())
        #expect(d.a.status(LEEnableEncryption(connectionHandle: central, randomNumber: 1, encryptedDiversifier: 2,
                                              longTermKey: [UInt8](repeating: 1, count: 16))) == .success)
        d.loop.run(for: .milliseconds(10))
        #expect(d.b.status(LELongTermKeyRequestNegativeReply(connectionHandle: peripheral)) == .success)
        d.loop.run(for: .milliseconds(100))
        let change = d.a.take { if case .encryptionChange(let e) = $0 { e } else { nil } }
        #expect(change.map(\.status) == [.pinOrKeyMissing])
        #expect(change.first?.encryptionEnabled == 0)
        #expect(disconnections(d.a).isEmpty)
    }

    @Test func encryptionOnlyFromTheCentral() throws {
        let d = TwoDevices()
        let (_, peripheral) = try #require(d.connect())
        #expect(d.b.status(LEEnableEncryption(connectionHandle: peripheral, randomNumber: 1, encryptedDiversifier: 2,
                                              longTermKey: [UInt8](repeating: 1, count: 16))) == .commandDisallowed)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func connectionUpdateFromCentralAndPeripheral(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = try #require(d.connect())
        _ = d.a.takeLEEvents(); _ = d.b.takeLEEvents()
        #expect(d.a.status(LEConnectionUpdate(connectionHandle: central, connectionIntervalMin: 0x28, connectionIntervalMax: 0x28,
                                              maxLatency: 0, supervisionTimeout: 0x100, minCELength: 0, maxCELength: 0)) == .success)
        d.loop.run(for: .seconds(1))
        func updates(_ h: RawHost) -> [LEConnectionUpdateComplete] {
            h.takeLEEvents().compactMap { if case .connectionUpdateComplete(let u) = $0 { u } else { nil } }
        }
        #expect(updates(d.a).map(\.connectionInterval) == [0x28])
        #expect(updates(d.b).map(\.connectionInterval) == [0x28])

        // The peripheral asks; the central's host is asked and accepts.
        #expect(d.b.status(LEConnectionUpdate(connectionHandle: peripheral, connectionIntervalMin: 0x10, connectionIntervalMax: 0x20,
                                              maxLatency: 0, supervisionTimeout: 0x100, minCELength: 0, maxCELength: 0)) == .success)
        d.loop.run(until: { d.a.events.contains { if case .le(.remoteConnectionParameterRequest) = $0 { true } else { false } } }, timeout: .seconds(1))
        #expect(d.a.status(LERemoteConnectionParameterRequestReply(connectionHandle: central, intervalMin: 0x18, intervalMax: 0x18,
                                                                   maxLatency: 0, timeout: 0x100, minCELength: 0, maxCELength: 0)) == .success)
        d.loop.run(for: .seconds(1))
        #expect(updates(d.b).map(\.connectionInterval) == [0x18])
    }

    @Test func phyUpdateTo2M() throws {
        let d = TwoDevices()
        let (central, peripheral) = try #require(d.connect())
        _ = d.a.takeLEEvents(); _ = d.b.takeLEEvents()
        #expect(d.a.status(LESetPHY(connectionHandle: central, allPHYs: 0, txPHYs: 0b010, rxPHYs: 0b010, phyOptions: 0)) == .success)
        d.loop.run(for: .milliseconds(100))
        for h in [d.a, d.b] {
            let updates = h.takeLEEvents().compactMap { if case .phyUpdateComplete(let u) = $0 { u } else { nil } }
            #expect(updates.count == 1)
            #expect(updates.first?.txPhy == LEPHY.le2M.rawValue && updates.first?.rxPhy == LEPHY.le2M.rawValue)
        }
        let read = try #require(d.b.returning(LEReadPHY(connectionHandle: peripheral)))
        #expect(read.txPHY == .le2M)
    }

    @Test func remoteFeaturesAndVersion() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        _ = d.a.takeLEEvents()
        #expect(d.a.status(LEReadRemoteFeatures(connectionHandle: central)) == .success)
        #expect(d.a.status(ReadRemoteVersionInformation(connectionHandle: central)) == .success)
        d.loop.run(for: .milliseconds(100))
        let features = d.a.takeLEEvents().compactMap { if case .readRemoteFeaturesComplete(let f) = $0 { f } else { nil } }
        #expect(features.first.map { LEFeatures(rawValue: $0.leFeatures).contains(.leEncryption) } == true)
        let version = d.a.take { if case .readRemoteVersionInformationComplete(let v) = $0 { v } else { nil } }
        #expect(version.first?.version == 0x0D)
        #expect(version.first?.companyIdentifier == 0xFFFF)
    }

    @Test func bufferOverflowAndReadRSSI() throws {
        let d = TwoDevices(distance: 2)
        let (central, _) = try #require(d.connect())
        let rssi = try #require(d.a.returning(ReadRSSI(connectionHandle: central)))
        #expect(rssi.rssi == -65)
        // Out of reach, nothing leaves the controller: the 13th packet overflows its 12 buffers.
        d.b.controller.position = RadioPosition(x: 5000)
        d.loop.run(for: .milliseconds(1))
        for _ in 0..<13 { d.a.sendACL(handle: central, [1, 0, 0x04, 0, 0xAA]) }
        d.loop.run(for: .milliseconds(1))
        let overflows: [DataBufferOverflow] = d.a.take { if case .dataBufferOverflow(let o) = $0 { o } else { nil } }
        #expect(overflows.map(\.linkType) == [DataBufferOverflow.aclLinkType])
    }

    @Test func connectionCancel() {
        let d = TwoDevices()
        #expect(d.a.status(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicDevice,
            peerAddress: TwoDevices.addressB, ownAddressType: .publicDevice, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)) == .success)
        // Nobody advertises: the attempt stays pending (it never times out by itself).
        d.loop.run(for: .seconds(10))
        #expect(d.a.takeLEEvents().isEmpty)
        #expect(d.a.status(LECreateConnectionCancel()) == .success)
        d.loop.run(for: .milliseconds(1))
        let complete = d.a.takeLEEvents().compactMap { if case .enhancedConnectionComplete(let c) = $0 { c } else { nil } }
        #expect(complete.map(\.status) == [.unknownConnectionIdentifier])
    }

    @Test func connectedPeripheralRejectsSecondCentralAtAdvertising() throws {
        let d = TwoDevices()
        _ = try #require(d.connect())
        // A second connection attempt to the same device: Connection Already Exists.
        #expect(d.a.status(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicDevice,
            peerAddress: TwoDevices.addressB, ownAddressType: .publicDevice, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)) == .connectionAlreadyExists)
    }
}
