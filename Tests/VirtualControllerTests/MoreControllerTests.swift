import ByteCoding
import HCI
import Scheduling
import Testing
@testable import VirtualController

/// What every flavour of connection complete event says, whichever the LE mask chose.
struct ConnectionSummary: Equatable {
    enum Flavour { case legacy, enhancedV1, enhancedV2 }
    var flavour: Flavour
    var status: HCIStatus
    var handle: ConnectionHandle
    var role: LERole
    var peer: LEAddress
}

extension RawHost {
    func connectionCompletes() -> [ConnectionSummary] {
        takeLEEvents().compactMap { e -> ConnectionSummary? in
            switch e {
            case .connectionComplete(let c):
                ConnectionSummary(flavour: .legacy, status: c.status, handle: c.connectionHandle, role: c.role,
                                  peer: LEAddress(c.peerAddressType, c.peerAddress))
            case .enhancedConnectionComplete(let c):
                ConnectionSummary(flavour: .enhancedV1, status: c.status, handle: c.connectionHandle, role: c.role,
                                  peer: LEAddress(c.peerAddressType, c.peerAddress))
            case .enhancedConnectionCompleteV2(let c):
                ConnectionSummary(flavour: .enhancedV2, status: c.status, handle: c.connectionHandle, role: c.role,
                                  peer: LEAddress(c.peerAddressType, c.peerAddress))
            default: nil
            }
        }
    }

    func advertiseWith(type: LESetAdvertisingParameters.AdvertisingType = .advInd, own: LEAddressType = .publicDevice,
                       peer: LEAddress = LEAddress(.publicDevice, .zero), filter: LEAdvertisingFilterPolicy = .acceptAll,
                       interval: UInt16 = 0x0020, sourceLocation: SourceLocation = #_sourceLocation) -> HCIStatus? {
        #expect(status(LESetAdvertisingParameters(
            advertisingIntervalMin: interval, advertisingIntervalMax: interval, advertisingType: type,
            ownAddressType: own, peerAddressType: peer.type, peerAddress: peer.address,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: filter), sourceLocation: sourceLocation) == .success)
        #expect(status(LESetAdvertisingData(advertisingData: AdvertisingScanningTests.adData), sourceLocation: sourceLocation) == .success)
        #expect(status(LESetScanResponseData(scanResponseData: AdvertisingScanningTests.scanResponse), sourceLocation: sourceLocation) == .success)
        return status(LESetAdvertisingEnable(advertisingEnable: true), sourceLocation: sourceLocation)
    }

    func createConnection(to peer: LEAddress, own: LEAddressType = .publicDevice,
                          filter: LEInitiatorFilterPolicy = .peerAddress, interval: UInt16 = 0x18) -> HCIStatus? {
        status(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: filter, peerAddressType: peer.type,
            peerAddress: peer.address, ownAddressType: own, connectionIntervalMin: interval, connectionIntervalMax: interval,
            maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0))
    }
}

@Suite("Virtual controller: more behaviour")
struct MoreControllerTests {
    static let a = LEAddress(.publicDevice, TwoDevices.addressA)
    static let b = LEAddress(.publicDevice, TwoDevices.addressB)
    static let randomStatic = BluetoothAddress("D1:22:33:44:55:66")!

    func reports(_ host: RawHost) -> [LEAdvertisingReport.Report] { AdvertisingScanningTests().reports(host) }

    // MARK: Directed advertising

    @Test func lowDutyDirectedAdvertising() throws {
        let d = Devices(at: [0, 1, 1])
        // Device 0 advertises to device 1 only.
        #expect(d.hosts[0].advertiseWith(type: .advDirectIndLowDuty, peer: LEAddress(.publicDevice, Devices.address(1))) == .success)
        for i in [1, 2] { AdvertisingScanningTests().scan(d.hosts[i], active: true, filterDuplicates: false) }
        d.loop.run(for: .milliseconds(500))
        // The target sees ADV_DIRECT_IND reports (no data, no scan response); the other scanner nothing.
        let target = reports(d.hosts[1])
        #expect(target.count >= 15 && target.allSatisfy { $0.eventType == .advDirectInd && $0.data.isEmpty })
        #expect(reports(d.hosts[2]).isEmpty)
        // Still advertising after 1.28 s: only high duty cycle stops by itself.
        d.loop.run(for: .seconds(1))
        #expect(d.hosts[0].controller.advertising.enabled)
        // The non-target's attempt is never answered; the target connects.
        for i in [1, 2] { #expect(d.hosts[i].status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success) }
        #expect(d.hosts[2].createConnection(to: LEAddress(.publicDevice, Devices.address(0))) == .success)
        d.loop.run(for: .milliseconds(300))
        #expect(d.hosts[2].connectionCompletes().isEmpty)
        #expect(d.hosts[1].createConnection(to: LEAddress(.publicDevice, Devices.address(0))) == .success)
        d.loop.run(for: .milliseconds(300))
        #expect(d.hosts[1].connectionCompletes().map(\.status) == [.success])
        #expect(d.hosts[0].connectionCompletes().map(\.peer) == [LEAddress(.publicDevice, Devices.address(1))])
    }

    @Test func highDutyDirectedAdvertisingTimesOut() throws {
        let d = Devices(at: [0, 1, 1])
        _ = d.hosts[0].takeLEEvents()
        let start = d.loop.now
        #expect(d.hosts[0].advertiseWith(type: .advDirectIndHighDuty, peer: LEAddress(.publicDevice, Devices.address(1))) == .success)
        AdvertisingScanningTests().scan(d.hosts[1], active: false, filterDuplicates: false)
        // A PDU from a device that is not the target, asking to connect: ignored.
        let ll = ConnectLLData(accessAddress: 0x1357_9BDF, interval: 0x18, latency: 0, timeout: 0x48)
        let intruder = d.hosts[2].controller.radioID
        d.loop.execute {
            d.hosts[0].controller.radioDidReceive(.connectInd(initA: LEAddress(.publicDevice, Devices.address(2)),
                                                              advA: LEAddress(.publicDevice, Devices.address(0)), llData: ll),
                                                  rssi: -50, from: intruder)
        }
        d.loop.run(until: { d.hosts[0].events.contains { if case .le = $0 { true } else { false } } }, timeout: .seconds(3))
        // 1.28 s after enabling (to the next 3.75 ms advertising event), LE Connection Complete 0x3C.
        let elapsed = d.loop.now - start
        #expect(elapsed >= .milliseconds(1280) && elapsed < .milliseconds(1290), "\(elapsed)")
        let completes = d.hosts[0].connectionCompletes()
        #expect(completes.map(\.status) == [.advertisingTimeout])
        #expect(completes.first?.role == .peripheral)
        #expect(!d.hosts[0].controller.advertising.enabled)
        // At most every 3.75 ms while it lasted (Vol 6 Part B §4.4.2.4.3): about 340 PDUs.
        let heard = reports(d.hosts[1])
        #expect((300...345).contains(heard.count), "\(heard.count)")
        d.loop.run(for: .seconds(1))
        #expect(reports(d.hosts[1]).isEmpty)
    }

    // MARK: Scanning

    @Test func scanWindowShorterThanIntervalHearsLess() {
        func count(window: UInt16) -> Int {
            let d = TwoDevices()
            #expect(d.b.advertiseWith(interval: 0x0020) == .success)  // 20 ms
            #expect(d.a.status(LESetScanParameters(leScanType: .passive, leScanInterval: 0x0040, leScanWindow: window,
                                                   ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) == .success)
            #expect(d.a.status(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) == .success)
            d.loop.run(for: .seconds(4))
            return reports(d.a).count
        }
        let full = count(window: 0x0040)
        let quarter = count(window: 0x0010)  // 10 ms of every 40 ms
        // 20 ms + 0–10 ms advDelay: about 160 events in 4 s, a quarter of them inside the window.
        #expect((140...180).contains(full), "\(full)")
        #expect(quarter > full / 8 && quarter < full / 2, "\(quarter) of \(full)")
    }

    // MARK: Filter accept lists

    @Test func advertisingFilterPolicyScanRequests() {
        let d = TwoDevices()
        #expect(d.b.advertiseWith(filter: .filterScanRequests) == .success)
        AdvertisingScanningTests().scan(d.a, active: true, filterDuplicates: false)
        d.loop.run(for: .milliseconds(300))
        // A is not in B's list: its scan requests go unanswered.
        let unlisted = reports(d.a)
        #expect(!unlisted.isEmpty && !unlisted.contains { $0.eventType == .scanRsp })
        // While advertising with a filter the list is in use.
        #expect(d.b.status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: TwoDevices.addressA)) == .commandDisallowed)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        #expect(d.b.status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: TwoDevices.addressA)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        d.loop.run(for: .milliseconds(300))
        #expect(reports(d.a).contains { $0.eventType == .scanRsp })
    }

    @Test func advertisingFilterPolicyConnectionRequests() throws {
        let d = TwoDevices()
        #expect(d.b.advertiseWith(filter: .filterConnectionRequests) == .success)
        // Scan requests are still answered under policy 2.
        AdvertisingScanningTests().scan(d.a, active: true, filterDuplicates: true)
        d.loop.run(for: .milliseconds(300))
        #expect(reports(d.a).map(\.eventType) == [.advInd, .scanRsp])
        #expect(d.a.status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success)
        // A is not listed: B ignores its CONNECT_IND. A's link layer believed it connected and
        // fails to establish after six intervals without a packet (Vol 6 Part B §4.5.2).
        #expect(d.a.createConnection(to: Self.b) == .success)
        d.loop.run(for: .milliseconds(500))
        #expect(d.b.connectionCompletes().isEmpty)
        #expect(d.b.controller.advertising.enabled)
        #expect(disconnections(d.a).map(\.reason) == [.connectionFailedToBeEstablished])
        // Listed, it connects.
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        #expect(d.b.status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: TwoDevices.addressA)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        _ = d.a.takeLEEvents()
        #expect(d.a.createConnection(to: Self.b) == .success)
        d.loop.run(for: .milliseconds(300))
        #expect(d.b.connectionCompletes().map(\.peer) == [Self.a])
    }

    @Test func initiatorFilterPolicyUsesTheList() {
        let d = Devices(at: [0, 1, 1])
        d.advertise(1)
        d.advertise(2)
        // Device 0's list holds only device 2: the peer address of the command is ignored.
        #expect(d.hosts[0].status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: Devices.address(2))) == .success)
        #expect(d.hosts[0].createConnection(to: LEAddress(.publicDevice, Devices.address(1)), filter: .filterAcceptList) == .success)
        // In use by the initiator.
        #expect(d.hosts[0].status(LEClearFilterAcceptList()) == .commandDisallowed)
        d.loop.run(for: .milliseconds(300))
        let completes = d.hosts[0].connectionCompletes()
        #expect(completes.map(\.peer) == [LEAddress(.publicDevice, Devices.address(2))])
        #expect(d.hosts[1].connectionCompletes().isEmpty)
        #expect(d.hosts[2].connectionCompletes().count == 1)
    }

    // MARK: Random addresses

    @Test func setRandomAddressRules() {
        let d = TwoDevices()
        let h = d.a
        // Without a random address, random own addresses are refused with 0x12.
        #expect(h.advertiseWith(own: .randomDevice) == .invalidHCICommandParameters)
        #expect(h.createConnection(to: Self.b, own: .randomDevice) == .invalidHCICommandParameters)
        #expect(h.status(LESetRandomAddress(randomAddress: Self.randomStatic)) == .success)
        // Not while advertising, scanning or initiating (Vol 4 Part E §7.8.4).
        #expect(h.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        #expect(h.status(LESetRandomAddress(randomAddress: Self.randomStatic)) == .commandDisallowed)
        #expect(h.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        AdvertisingScanningTests().scan(h, active: false, filterDuplicates: false)
        #expect(h.status(LESetRandomAddress(randomAddress: Self.randomStatic)) == .commandDisallowed)
        #expect(h.status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success)
        #expect(h.createConnection(to: LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:00:99")!)) == .success)
        #expect(h.status(LESetRandomAddress(randomAddress: Self.randomStatic)) == .commandDisallowed)
        #expect(h.status(LECreateConnectionCancel()) == .success)
        #expect(h.status(LESetRandomAddress(randomAddress: BluetoothAddress("D1:00:00:00:00:02")!)) == .success)
        // Reset forgets it.
        #expect(h.status(Reset()) == .success)
        #expect(h.advertiseWith(own: .randomDevice) == .invalidHCICommandParameters)
    }

    @Test func randomOwnAddressOnTheAir() throws {
        let d = TwoDevices()
        let randomA = LEAddress(.randomDevice, Self.randomStatic)
        let randomB = LEAddress(.randomDevice, BluetoothAddress("D2:00:00:00:00:0B")!)
        #expect(d.a.status(LESetRandomAddress(randomAddress: randomA.address)) == .success)
        #expect(d.b.status(LESetRandomAddress(randomAddress: randomB.address)) == .success)
        // B advertises from its random address and answers scan requests only from A's random one.
        #expect(d.b.status(LEAddDeviceToFilterAcceptList(addressType: .randomDevice, address: randomA.address)) == .success)
        #expect(d.b.advertiseWith(own: .randomDevice, filter: .filterScanRequests) == .success)
        #expect(d.a.status(LESetScanParameters(leScanType: .active, leScanInterval: 0x10, leScanWindow: 0x10,
                                               ownAddressType: .randomDevice, scanningFilterPolicy: .basicUnfiltered)) == .success)
        #expect(d.a.status(LESetScanEnable(leScanEnable: true, filterDuplicates: true)) == .success)
        d.loop.run(for: .milliseconds(300))
        let seen = reports(d.a)
        #expect(seen.map(\.eventType) == [.advInd, .scanRsp])
        #expect(seen.allSatisfy { $0.addressType == .randomDevice && $0.address == randomB.address })
        #expect(d.a.status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success)
        // A initiates from its random address to B's random address.
        #expect(d.a.createConnection(to: randomB, own: .randomDevice) == .success)
        d.loop.run(for: .milliseconds(300))
        #expect(d.a.connectionCompletes().map(\.peer) == [randomB])
        #expect(d.b.connectionCompletes().map(\.peer) == [randomA])
    }

    // MARK: Buffers and masks

    @Test func bufferSizesByteExact() throws {
        let d = TwoDevices()
        // LE Read Buffer Size [v2]: status 00 · LE_ACL_Data_Packet_Length 251 (FB 00) ·
        // Total_Num_LE_ACL_Data_Packets 12 (0C) · ISO_Data_Packet_Length 0 (00 00) · Total_Num_ISO 0.
        guard case .commandComplete(let v2)? = d.a.command(LEReadBufferSizeV2()) else { Issue.record("no answer"); return }
        #expect(HCIPacket.event(v2.packet).h4Bytes == [UInt8](hex: "04 0e 0a 01 60 20 00 fb 00 0c 00 00 00"))
        // Read Buffer Size: status · ACL_Data_Packet_Length FB 00 · Synchronous_Data_Packet_Length 00 ·
        // Total_Num_ACL_Data_Packets 0C 00 · Total_Num_Synchronous_Data_Packets 00 00.
        guard case .commandComplete(let v)? = d.a.command(ReadBufferSize()) else { Issue.record("no answer"); return }
        #expect(HCIPacket.event(v.packet).h4Bytes == [UInt8](hex: "04 0e 0b 01 05 10 00 fb 00 00 0c 00 00 00"))
        // A smaller configuration is what both report.
        var configuration = VirtualController.Configuration()
        configuration.aclDataPacketLength = 27
        configuration.totalACLDataPackets = 3
        let small = RawHost(VirtualController(radio: d.radio, address: BluetoothAddress("C0:00:00:00:00:33")!, configuration: configuration))
        let le = try #require(small.returning(LEReadBufferSizeV2()))
        #expect(le.leACLDataPacketLength == 27 && le.totalNumLEACLDataPackets == 3)
        let bredr = try #require(small.returning(ReadBufferSize()))
        #expect(bredr.aclDataPacketLength == 27 && bredr.totalNumACLDataPackets == 3)
    }

    @Test func eventMasks() throws {
        let d = TwoDevices()
        // Command Complete and Command Status are never masked.
        #expect(d.a.status(SetEventMask(eventMask: 0)) == .success)
        #expect(d.a.status(Disconnect(connectionHandle: 0x0ABC, reason: .remoteUserTerminatedConnection)) == .unknownConnectionIdentifier)
        // LE Meta off: no LE events at all, even with the LE mask full.
        #expect(d.a.status(LESetEventMask(leEventMask: 0x000F_FFFF)) == .success)
        #expect(d.b.advertiseWith() == .success)
        AdvertisingScanningTests().scan(d.a, active: false, filterDuplicates: false)
        d.loop.run(for: .milliseconds(200))
        #expect(d.a.takeLEEvents().isEmpty)
        // LE Meta on, but the LE Advertising Report bit (bit 1) off: no reports.
        #expect(d.a.status(SetEventMask(eventMask: 0x3DBF_FFFF_FFFF_FFFF)) == .success)
        #expect(d.a.status(LESetEventMask(leEventMask: 0x000F_FFFD)) == .success)
        d.loop.run(for: .milliseconds(200))
        #expect(d.a.takeLEEvents().isEmpty)
        #expect(d.a.status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success)
        // Disconnection Complete (bit 4) masked on A: A's host hears nothing, B's does.
        #expect(d.a.status(LESetEventMask(leEventMask: 0x000F_FFFF)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        let (central, _) = try #require(d.connect())
        #expect(d.a.status(SetEventMask(eventMask: 0x3DBF_FFFF_FFFF_FFEF)) == .success)
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .success)
        d.loop.run(for: .milliseconds(200))
        #expect(disconnections(d.a).isEmpty)
        #expect(disconnections(d.b).map(\.reason) == [.remoteUserTerminatedConnection])
        #expect(d.a.controller.connections.isEmpty)
    }

    @Test func connectionCompleteFlavourFollowsTheLEMask() throws {
        // Bit 0 LE Connection Complete, bit 9 LE Enhanced Connection Complete [v1], bit 40 [v2]
        // (subevent − 1); the newest unmasked one is sent, and only it.
        let cases: [(UInt64, ConnectionSummary.Flavour?)] = [
            (0x000F_FDFF, .legacy), (0x000F_FFFF, .enhancedV1), (0x0100_000F_FFFF, .enhancedV2),
            (0x0100_000F_FDFE, .enhancedV2), (0x000F_FDFE, nil),
        ]
        for (mask, flavour) in cases {
            let d = TwoDevices()
            for h in [d.a, d.b] { #expect(h.status(LESetEventMask(leEventMask: mask)) == .success) }
            #expect(d.b.advertiseWith() == .success)
            #expect(d.a.createConnection(to: Self.b) == .success)
            d.loop.run(for: .milliseconds(200))
            for h in [d.a, d.b] {
                let completes = h.connectionCompletes()
                #expect(completes.map(\.flavour) == (flavour.map { [$0] } ?? []), "mask \(String(mask, radix: 16))")
                #expect(completes.allSatisfy { $0.status == .success })
            }
            #expect(d.a.controller.connections.count == 1)
        }
    }

    // MARK: Encryption

    func encrypt(_ d: TwoDevices, _ central: ConnectionHandle, _ peripheral: ConnectionHandle, ltk: [UInt8]) {
        #expect(d.a.status(LEEnableEncryption(connectionHandle: central, randomNumber: 0x55, encryptedDiversifier: 0x66, longTermKey: ltk)) == .success)
        d.loop.run(until: { d.b.events.contains { if case .le(.longTermKeyRequest) = $0 { true } else { false } } }, timeout: .seconds(1))
        _ = d.b.takeLEEvents()
        #expect(d.b.status(LELongTermKeyRequestReply(connectionHandle: peripheral, longTermKey: ltk)) == .success)
        d.loop.run(for: .milliseconds(200))
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func encryptionKeyRefresh(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = try #require(d.connect())
        encrypt(d, central, peripheral, ltk: [UInt8](repeating: 0x11, count: 16))
        for h in [d.a, d.b] {
            let changes: [EncryptionChange] = h.take { if case .encryptionChange(let e) = $0 { e } else { nil } }
            #expect(changes.map(\.status) == [.success])
        }
        // LE Enable Encryption on an encrypted link pauses and restarts with the new key.
        encrypt(d, central, peripheral, ltk: [UInt8](repeating: 0x22, count: 16))
        for (h, handle) in [(d.a, central), (d.b, peripheral)] {
            let refreshed = h.take { if case .encryptionKeyRefreshComplete(let e) = $0 { e } else { nil } }
            #expect(refreshed.map(\.status) == [.success])
            #expect(refreshed.first?.connectionHandle == handle)
            #expect(h.take { if case .encryptionChange(let e) = $0 { e } else { nil } }.isEmpty)
        }
        // The new key is in use on both sides: data flows, no MIC failure.
        d.a.sendACL(handle: central, [1, 0, 0x04, 0, 0x77])
        d.loop.run(for: .milliseconds(200))
        #expect(d.b.acl.flatMap(\.data) == [1, 0, 0x04, 0, 0x77])
        #expect(disconnections(d.a).isEmpty && disconnections(d.b).isEmpty)
    }

    @Test func encryptionChangeV2WhenUnmaskedOnPage2() throws {
        let d = TwoDevices()
        // Set Event Mask Page 2 bit 25: Encryption Change [v2].
        for h in [d.a, d.b] { #expect(h.status(SetEventMaskPage2(eventMaskPage2: 1 << 25)) == .success) }
        let (central, peripheral) = try #require(d.connect())
        encrypt(d, central, peripheral, ltk: [UInt8](repeating: 0x33, count: 16))
        for h in [d.a, d.b] {
            let v2 = h.take { if case .encryptionChangeV2(let e) = $0 { e } else { nil } }
            #expect(v2.map(\.status) == [.success])
            #expect(v2.first?.encryptionEnabled == 1 && v2.first?.encryptionKeySize == 16)
            #expect(h.take { if case .encryptionChange(let e) = $0 { e } else { nil } }.isEmpty)
        }
    }

    // MARK: Connection parameters, PHY, data length

    @Test func remoteConnectionParameterRequestNegativeReply() throws {
        let d = TwoDevices()
        let (central, peripheral) = try #require(d.connect())
        _ = d.a.takeLEEvents(); _ = d.b.takeLEEvents()
        #expect(d.b.status(LEConnectionUpdate(connectionHandle: peripheral, connectionIntervalMin: 0x10, connectionIntervalMax: 0x20,
                                              maxLatency: 0, supervisionTimeout: 0x100, minCELength: 0, maxCELength: 0)) == .success)
        d.loop.run(until: { d.a.events.contains { if case .le(.remoteConnectionParameterRequest) = $0 { true } else { false } } }, timeout: .seconds(1))
        let request = d.a.takeLEEvents().compactMap { if case .remoteConnectionParameterRequest(let r) = $0 { r } else { nil } }
        #expect(request.first.map { [$0.intervalMin, $0.intervalMax, $0.timeout] } == [0x10, 0x20, 0x100])
        guard case .commandComplete(let c)? = d.a.command(LERemoteConnectionParameterRequestNegativeReply(
            connectionHandle: central, reason: .unacceptableConnectionParameters)) else { Issue.record("no answer"); return }
        // Return parameters: status, then the handle.
        #expect(c.returnParameters == [0x00, UInt8(central & 0xFF), UInt8(central >> 8)])
        d.loop.run(for: .milliseconds(100))
        // The peripheral's host hears the reason; the central's nothing; nothing changed.
        let update = d.b.takeLEEvents().compactMap { if case .connectionUpdateComplete(let u) = $0 { u } else { nil } }
        #expect(update.map(\.status) == [.unacceptableConnectionParameters])
        #expect(update.first?.connectionInterval == 0x18)
        #expect(d.a.takeLEEvents().isEmpty)
        // A second reply has nothing to answer.
        #expect(d.a.status(LERemoteConnectionParameterRequestNegativeReply(connectionHandle: central, reason: .unacceptableConnectionParameters)) == .commandDisallowed)
    }

    /// When each host heard of the procedure's outcome, after the command at `start`.
    func completionTimes(_ d: TwoDevices, since start: LoopInstant, _ match: @escaping (LEMetaEvent) -> Bool) -> [Duration] {
        var times: [Duration?] = [nil, nil]
        d.loop.run(until: {
            for (i, h) in [d.a, d.b].enumerated() where times[i] == nil {
                if h.events.contains(where: { if case .le(let e) = $0 { match(e) } else { false } }) { times[i] = d.loop.now - start }
            }
            return times.allSatisfy { $0 != nil }
        }, timeout: .seconds(2))
        return times.compactMap { $0 }
    }

    @Test func connectionUpdateTakesEffectAtTheInstantInTimedMode() throws {
        let d = TwoDevices(airTime: .timed)
        let (central, peripheral) = try #require(d.connect())  // 30 ms interval
        d.loop.run(for: .milliseconds(100))
        _ = d.a.takeLEEvents(); _ = d.b.takeLEEvents()
        let start = d.loop.now
        #expect(d.a.status(LEConnectionUpdate(connectionHandle: central, connectionIntervalMin: 0x28, connectionIntervalMax: 0x28,
                                              maxLatency: 0, supervisionTimeout: 0x100, minCELength: 0, maxCELength: 0)) == .success)
        let times = completionTimes(d, since: start) { if case .connectionUpdateComplete = $0 { true } else { false } }
        // Six connection events of 30 ms after the LL_CONNECTION_UPDATE_IND goes out (the next
        // event, within one interval): 180–210 ms; never before.
        #expect(times.count == 2)
        for t in times { #expect(t >= .milliseconds(180) && t <= .milliseconds(210), "\(t)") }
        #expect(d.a.controller.connections[central]?.interval == 0x28)
        #expect(d.b.controller.connections[peripheral]?.interval == 0x28)
        // The link lives on at the new interval.
        d.loop.run(for: .milliseconds(500))
        #expect(disconnections(d.a).isEmpty && disconnections(d.b).isEmpty)
    }

    @Test func phyUpdateTakesEffectAtTheInstantInTimedMode() throws {
        let d = TwoDevices(airTime: .timed)
        let (central, peripheral) = try #require(d.connect())
        d.loop.run(for: .milliseconds(100))
        _ = d.a.takeLEEvents(); _ = d.b.takeLEEvents()
        let start = d.loop.now
        #expect(d.a.status(LESetPHY(connectionHandle: central, allPHYs: 0, txPHYs: 0b010, rxPHYs: 0b010, phyOptions: 0)) == .success)
        // LL_PHY_REQ, LL_PHY_RSP, LL_PHY_UPDATE_IND take up to three events, then six to the instant.
        d.loop.run(for: .milliseconds(150))
        #expect(try #require(d.a.returning(LEReadPHY(connectionHandle: central))).txPHY == .le1M)
        let times = completionTimes(d, since: start) { if case .phyUpdateComplete = $0 { true } else { false } }
        #expect(times.count == 2)
        for t in times { #expect(t >= .milliseconds(180) && t <= .milliseconds(300), "\(t)") }
        #expect(try #require(d.b.returning(LEReadPHY(connectionHandle: peripheral))).rxPHY == .le2M)
    }

    @Test func dataLengthLimits() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        // TxOctets 0x001B–0x00FB, TxTime 0x0148–0x4290 (Vol 4 Part E §7.8.33).
        for (octets, time, expected) in [(26, 328, HCIStatus.invalidHCICommandParameters), (252, 328, .invalidHCICommandParameters),
                                         (27, 327, .invalidHCICommandParameters), (27, 0x4291, .invalidHCICommandParameters),
                                         (27, 328, .success), (251, 0x4290, .success)] as [(UInt16, UInt16, HCIStatus)] {
            #expect(d.a.status(LESetDataLength(connectionHandle: central, txOctets: octets, txTime: time)) == expected, "\(octets) \(time)")
            #expect(d.a.status(LEWriteSuggestedDefaultDataLength(suggestedMaxTXOctets: octets, suggestedMaxTXTime: time)) == expected)
        }
        #expect(d.a.status(LESetDataLength(connectionHandle: 0x0EEE, txOctets: 27, txTime: 328)) == .unknownConnectionIdentifier)
    }

    // MARK: ACL accounting

    @Test(arguments: [AirTimeMode.instant, .timed])
    func completedPacketsAddUpUnderLoad(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, _) = try #require(d.connect(intervalMin: 0x0006))
        var random = SeededGenerator(seed: 3)
        var sent: [UInt8] = [], completed = 0, packets = 0
        // A host that respects its 12 credits, sending 300 packets of 1–251 octets.
        while packets < 300 || completed < packets {
            completed += d.a.take { if case .numberOfCompletedPackets(let n) = $0 { n } else { nil } }
                .flatMap(\.entries).filter { $0.handle == central }.reduce(0) { $0 + Int($1.completedPackets) }
            while packets < 300 && packets - completed < 12 {
                let data = (0..<Int.random(in: 1...251, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                d.a.sendACL(handle: central, data)
                sent += data
                packets += 1
            }
            guard d.loop.run(until: { d.a.events.contains { if case .numberOfCompletedPackets = $0 { true } else { false } } },
                             timeout: .seconds(2)) || completed == packets else { break }
        }
        #expect(completed == 300)
        d.loop.run(for: .milliseconds(100))
        #expect(d.b.acl.flatMap(\.data) == sent)
        #expect(d.a.take { if case .dataBufferOverflow(let o) = $0 { o } else { nil } }.isEmpty)
        #expect(d.a.controller.freeACLBuffers == 12)
    }

    @Test func aclForAnUnknownHandleIsDropped() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        for _ in 0..<30 { d.a.sendACL(handle: 0x0123, [1, 0, 0x04, 0, 0x01]) }
        d.loop.run(for: .milliseconds(50))
        #expect(d.a.events.isEmpty)
        #expect(d.b.acl.isEmpty)
        // No buffer was taken: twelve packets still fit.
        for _ in 0..<12 { d.a.sendACL(handle: central, [1, 0, 0x04, 0, 0x02]) }
        d.loop.run(for: .milliseconds(50))
        #expect(d.b.acl.count == 12)
        #expect(d.a.take { if case .dataBufferOverflow(let o) = $0 { o } else { nil } }.isEmpty)
    }

    @Test func aclLongerThanTheBufferOverflows() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        d.a.sendACL(handle: central, [UInt8](repeating: 0x42, count: 252))
        d.loop.run(for: .milliseconds(50))
        let overflow = d.a.take { if case .dataBufferOverflow(let o) = $0 { o } else { nil } }
        #expect(overflow.map(\.linkType) == [DataBufferOverflow.aclLinkType])
        #expect(d.b.acl.isEmpty)
        #expect(d.a.controller.freeACLBuffers == 12)
        // 251 octets fit.
        d.a.sendACL(handle: central, [UInt8](repeating: 0x42, count: 251))
        d.loop.run(for: .milliseconds(50))
        #expect(d.b.acl.flatMap(\.data).count == 251)
    }

    // MARK: Leaving connections

    @Test func disconnectWhileThePeerIsOutOfRange() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        d.loop.run(for: .milliseconds(100))
        d.b.controller.position = RadioPosition(x: 5000)
        d.loop.run(for: .milliseconds(100))
        let start = d.loop.now
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .success)
        // LL_TERMINATE_IND is never acknowledged: the supervision timer (armed when the peer was
        // lost, 720 ms) ends both sides.
        d.loop.run(until: { !d.a.events.isEmpty }, timeout: .seconds(2))
        #expect(d.loop.now - start == .milliseconds(620))
        #expect(disconnections(d.a).map(\.reason) == [.connectionTimeout])
        d.loop.run(for: .milliseconds(10))
        #expect(disconnections(d.b).map(\.reason) == [.connectionTimeout])
    }

    @Test func disconnectOutOfRangeThenBack() throws {
        let d = TwoDevices()
        let (central, peripheral) = try #require(d.connect())
        d.b.controller.position = RadioPosition(x: 5000)
        d.loop.run(for: .milliseconds(100))
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .success)
        d.loop.run(for: .milliseconds(100))
        // The peer returns before the timeout: the LL_TERMINATE_IND goes out after all.
        d.b.controller.position = RadioPosition(x: 1)
        d.loop.run(for: .milliseconds(100))
        #expect(disconnections(d.a).map(\.reason) == [.connectionTerminatedByLocalHost])
        let remote = disconnections(d.b)
        #expect(remote.map(\.reason) == [.remoteUserTerminatedConnection])
        #expect(remote.first?.connectionHandle == peripheral)
    }

    @Test func resetDuringAConnection() throws {
        let d = TwoDevices()
        let (central, _) = try #require(d.connect())
        d.loop.run(for: .milliseconds(100))
        // Data in flight when the host resets: none of it is reported afterwards.
        d.b.controller.position = RadioPosition(x: 5000)
        d.loop.run(for: .milliseconds(1))
        for _ in 0..<4 { d.a.sendACL(handle: central, [1, 0, 0x04, 0, 0x09]) }
        d.loop.run(for: .milliseconds(1))
        d.b.controller.position = RadioPosition(x: 1)
        #expect(d.a.status(Reset()) == .success)
        d.loop.run(for: .seconds(1))
        #expect(d.a.events.isEmpty, "\(d.a.events.map(\.name))")
        #expect(d.a.controller.connections.isEmpty)
        #expect(d.a.controller.freeACLBuffers == 12)
        // The peer hears nothing more and times out.
        #expect(disconnections(d.b).map(\.reason) == [.connectionTimeout])
        #expect(d.a.status(Disconnect(connectionHandle: central, reason: .remoteUserTerminatedConnection)) == .unknownConnectionIdentifier)
    }
}
