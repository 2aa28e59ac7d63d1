import HCI
import LECrypto
import Scheduling
import Testing
@testable import VirtualController

/// Link-layer privacy between two virtual controllers driven with HCI bytes: local RPAs from the
/// resolving list, peers' RPAs resolved to their identities, rotation on the virtual clock.
@Suite("Virtual controller: privacy (resolvable private addresses)")
struct PrivacyTests {
    /// IRKs as HCI carries them (least significant octet first).
    static let irkA: [UInt8] = Array(0x21...0x30)
    static let irkB: [UInt8] = Array(0x01...0x10)
    static let addressA = TwoDevices.addressA
    static let addressB = TwoDevices.addressB

    /// Whether `address` is an RPA made from `irk` (HCI order), as a peer holding the IRK checks.
    static func resolves(_ address: BluetoothAddress, _ irk: [UInt8]) -> Bool {
        address.randomSubtype == .resolvablePrivate && LECrypto.resolves(address: address.value, irk: irk.reversed())
    }

    func addToList(_ host: RawHost, peer: BluetoothAddress, peerIRK: [UInt8], localIRK: [UInt8],
                   enable: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(host.status(LEAddDeviceToResolvingList(peerIdentityAddressType: .publicDevice, peerIdentityAddress: peer,
                                                       peerIRK: peerIRK, localIRK: localIRK)) == .success,
                sourceLocation: sourceLocation)
        if enable {
            #expect(host.status(LESetAddressResolutionEnable(addressResolutionEnable: true)) == .success,
                    sourceLocation: sourceLocation)
        }
    }

    /// B lists A (its peer) with B's local IRK, and advertises connectably with own address type
    /// 0x02: an RPA from its local IRK for A.
    func advertiseWithRPA(_ d: TwoDevices, timeout: UInt16? = nil, type: LESetAdvertisingParameters.AdvertisingType = .advInd,
                          sourceLocation: SourceLocation = #_sourceLocation) {
        addToList(d.b, peer: Self.addressA, peerIRK: Self.irkA, localIRK: Self.irkB, sourceLocation: sourceLocation)
        if let timeout {
            #expect(d.b.status(LESetResolvablePrivateAddressTimeout(rpaTimeout: timeout)) == .success, sourceLocation: sourceLocation)
        }
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: type, ownAddressType: .publicIdentity,
            peerAddressType: .publicDevice, peerAddress: Self.addressA, advertisingChannelMap: 7,
            advertisingFilterPolicy: .acceptAll)) == .success, sourceLocation: sourceLocation)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success, sourceLocation: sourceLocation)
    }

    func scan(_ host: RawHost, active: Bool = false, filterDuplicates: Bool = true, ownAddressType: LEAddressType = .publicDevice,
              policy: LEScanningFilterPolicy = .basicUnfiltered, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(host.status(LESetScanParameters(leScanType: active ? .active : .passive, leScanInterval: 0x10, leScanWindow: 0x10,
                                                ownAddressType: ownAddressType, scanningFilterPolicy: policy)) == .success,
                sourceLocation: sourceLocation)
        #expect(host.status(LESetScanEnable(leScanEnable: true, filterDuplicates: filterDuplicates)) == .success,
                sourceLocation: sourceLocation)
    }

    func reports(_ host: RawHost) -> [LEAdvertisingReport.Report] {
        host.takeLEEvents().flatMap { e -> [LEAdvertisingReport.Report] in
            if case .advertisingReport(let r) = e { return r.reports }
            return []
        }
    }

    /// Runs the loop until `host` reports an advertisement; returns the first report.
    func firstReport(_ d: TwoDevices, _ host: RawHost, for duration: Duration = .seconds(1)) -> LEAdvertisingReport.Report? {
        var found: LEAdvertisingReport.Report?
        d.loop.run(until: {
            found = found ?? reports(host).first
            return found != nil
        }, timeout: duration)
        return found
    }

    func localRPA(_ host: RawHost, peer: BluetoothAddress) -> LEReadLocalResolvableAddress.ReturnParameters? {
        host.returning(LEReadLocalResolvableAddress(peerIdentityAddressType: .publicDevice, peerIdentityAddress: peer))
    }

    func peerRPA(_ host: RawHost, peer: BluetoothAddress) -> LEReadPeerResolvableAddress.ReturnParameters? {
        host.returning(LEReadPeerResolvableAddress(peerIdentityAddressType: .publicDevice, peerIdentityAddress: peer))
    }

    // MARK: Advertising and scanning

    @Test func scannerWithThePeersIRKReportsItsIdentity() throws {
        let d = TwoDevices()
        advertiseWithRPA(d)
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        scan(d.a)
        let report = try #require(firstReport(d, d.a))
        #expect(report.addressType == .publicIdentity && report.address == Self.addressB)
        // Both ends read the RPA B advertised with: B's local, A's peer address for the other.
        let local = try #require(localRPA(d.b, peer: Self.addressA))
        #expect(local.status == .success && Self.resolves(local.localResolvableAddress, Self.irkB))
        let peer = try #require(peerRPA(d.a, peer: Self.addressB))
        #expect(peer.status == .success && peer.peerResolvableAddress == local.localResolvableAddress)
    }

    @Test func scannerWithoutTheIRKSeesAResolvablePrivateAddress() throws {
        let d = TwoDevices()
        advertiseWithRPA(d)
        scan(d.a)
        let report = try #require(firstReport(d, d.a))
        #expect(report.addressType == .randomDevice && report.address != Self.addressB)
        #expect(Self.resolves(report.address, Self.irkB))
        #expect(!Self.resolves(report.address, Self.irkA))
    }

    @Test func resolutionDisabledFallsBackToThePublicAddress() throws {
        let d = TwoDevices()
        addToList(d.b, peer: Self.addressA, peerIRK: Self.irkA, localIRK: Self.irkB, enable: false)
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advInd, ownAddressType: .publicIdentity,
            peerAddressType: .publicDevice, peerAddress: Self.addressA, advertisingChannelMap: 7,
            advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        scan(d.a)
        let report = try #require(firstReport(d, d.a))
        #expect(report.addressType == .publicDevice && report.address == Self.addressB)
        #expect(localRPA(d.b, peer: Self.addressA)?.status == .unknownConnectionIdentifier)
    }

    @Test func peerWithoutALocalIRKGetsTheFallbackAddress() throws {
        let d = TwoDevices()
        // Listed, resolution on, but no local IRK for A: 0x03 falls back to the random address.
        let random = BluetoothAddress("C5:00:00:00:00:0B")!
        #expect(d.b.status(LESetRandomAddress(randomAddress: random)) == .success)
        addToList(d.b, peer: Self.addressA, peerIRK: Self.irkA, localIRK: [UInt8](repeating: 0, count: 16))
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advInd, ownAddressType: .randomIdentity,
            peerAddressType: .publicDevice, peerAddress: Self.addressA, advertisingChannelMap: 7,
            advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        scan(d.a)
        let report = try #require(firstReport(d, d.a))
        #expect(report.addressType == .randomDevice && report.address == random)
    }

    @Test func rpaRenewedEveryTimeoutOnTheVirtualClock() throws {
        let d = TwoDevices()
        advertiseWithRPA(d, timeout: 2)
        scan(d.a, filterDuplicates: false)
        let first = try #require(firstReport(d, d.a)).address
        #expect(localRPA(d.b, peer: Self.addressA)?.localResolvableAddress == first)
        // Just before the timeout: still the same address.
        d.loop.run(for: .milliseconds(1800))
        #expect(reports(d.a).allSatisfy { $0.address == first })
        // After it: a new RPA, from the same IRK, on the air and in Read Local Resolvable Address.
        d.loop.run(for: .milliseconds(400))
        _ = reports(d.a)
        d.loop.run(for: .milliseconds(200))
        let later = reports(d.a).map(\.address)
        let second = try #require(later.last)
        #expect(second != first && later.allSatisfy { $0 == second })
        #expect(Self.resolves(second, Self.irkB))
        #expect(localRPA(d.b, peer: Self.addressA)?.localResolvableAddress == second)
    }

    @Test func filterAcceptListMatchesTheResolvedIdentity() throws {
        let d = TwoDevices()
        advertiseWithRPA(d)
        #expect(d.a.status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: Self.addressB)) == .success)
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        scan(d.a, policy: .basicFiltered)
        let report = try #require(firstReport(d, d.a))
        #expect(report.addressType == .publicIdentity && report.address == Self.addressB)
    }

    @Test func activeScannerSendsScanRequestsFromItsRPA() throws {
        let d = TwoDevices()
        // B only answers scan requests from its filter accept list: A's identity.
        addToList(d.b, peer: Self.addressA, peerIRK: Self.irkA, localIRK: Self.irkB)
        #expect(d.b.status(LEAddDeviceToFilterAcceptList(addressType: .publicDevice, address: Self.addressA)) == .success)
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advScanInd, ownAddressType: .publicIdentity,
            peerAddressType: .publicDevice, peerAddress: Self.addressA, advertisingChannelMap: 7,
            advertisingFilterPolicy: .filterScanRequests)) == .success)
        #expect(d.b.status(LESetScanResponseData(scanResponseData: [0x02, 0x0A, 0x00])) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        scan(d.a, active: true, ownAddressType: .publicIdentity)
        var response: LEAdvertisingReport.Report?
        d.loop.run(until: {
            response = response ?? reports(d.a).first { $0.eventType == .scanRsp }
            return response != nil
        }, timeout: .seconds(1))
        #expect(response?.addressType == .publicIdentity && response?.address == Self.addressB)
        // B heard A's scan request from an RPA that resolved to A.
        let peer = try #require(peerRPA(d.b, peer: Self.addressA))
        #expect(peer.status == .success && Self.resolves(peer.peerResolvableAddress, Self.irkA))
        #expect(localRPA(d.a, peer: Self.addressB)?.localResolvableAddress == peer.peerResolvableAddress)
    }

    @Test func networkPrivacyModeIgnoresAnIdentityAddressDeviceModeAcceptsIt() throws {
        let d = TwoDevices()
        // B advertises under its public address although A holds its IRK.
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advInd, ownAddressType: .publicDevice,
            peerAddressType: .publicDevice, peerAddress: .zero, advertisingChannelMap: 7, advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        scan(d.a)
        #expect(firstReport(d, d.a, for: .milliseconds(300)) == nil)
        #expect(d.a.status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success)
        #expect(d.a.status(LESetPrivacyMode(peerIdentityAddressType: .publicDevice, peerIdentityAddress: Self.addressB,
                                            privacyMode: .device)) == .success)
        scan(d.a)
        let report = try #require(firstReport(d, d.a))
        #expect(report.addressType == .publicDevice && report.address == Self.addressB)
        // Not while scanning with resolution on; an unlisted peer is unknown.
        #expect(d.a.status(LESetPrivacyMode(peerIdentityAddressType: .publicDevice, peerIdentityAddress: Self.addressB,
                                            privacyMode: .network)) == .commandDisallowed)
        #expect(d.b.status(LESetPrivacyMode(peerIdentityAddressType: .publicDevice, peerIdentityAddress: Self.addressA,
                                            privacyMode: .device)) == .unknownConnectionIdentifier)
    }

    // MARK: Connections

    /// A connects by B's identity (Peer_Address_Type 0x02) to B advertising from an RPA, both
    /// with own address type 0x02. Returns (central, peripheral) connection complete events.
    func connectByIdentity(_ d: TwoDevices, extended: Bool = false)
        -> (central: LEEnhancedConnectionComplete?, peripheral: LEEnhancedConnectionComplete?) {
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        if extended {
            addToList(d.b, peer: Self.addressA, peerIRK: Self.irkA, localIRK: Self.irkB)
            #expect(d.b.returning(LESetExtendedAdvertisingParameters(
                advertisingHandle: 1, advertisingEventProperties: [.connectable], primaryAdvertisingIntervalMin: 0x20,
                primaryAdvertisingIntervalMax: 0x20, ownAddressType: .publicIdentity, peerAddressType: .publicDevice,
                peerAddress: Self.addressA))?.status == .success)
            #expect(d.b.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 1)])) == .success)
            #expect(d.a.status(LEExtendedCreateConnection(
                ownAddressType: .publicIdentity, peerAddressType: .publicIdentity, peerAddress: Self.addressB,
                initiatingPHYs: [.init(phy: .le1M, connectionIntervalMin: 0x18, connectionIntervalMax: 0x18,
                                       supervisionTimeout: 0x48)])) == .success)
        } else {
            advertiseWithRPA(d)
            #expect(d.a.status(LECreateConnection(
                leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicIdentity,
                peerAddress: Self.addressB, ownAddressType: .publicIdentity, connectionIntervalMin: 0x18,
                connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)) == .success)
        }
        var central: LEEnhancedConnectionComplete?
        var peripheral: LEEnhancedConnectionComplete?
        d.loop.run(until: {
            for e in d.a.takeLEEvents() { if case .enhancedConnectionComplete(let c) = e { central = c } }
            for e in d.b.takeLEEvents() { if case .enhancedConnectionComplete(let c) = e { peripheral = c } }
            return central != nil && peripheral != nil
        }, timeout: .seconds(2))
        return (central, peripheral)
    }

    @Test(arguments: [false, true])
    func connectionByIdentityToAnRPAAdvertiser(extended: Bool) throws {
        let d = TwoDevices()
        let (c, p) = connectByIdentity(d, extended: extended)
        let central = try #require(c)
        let peripheral = try #require(p)
        let advertised = try #require(localRPA(d.b, peer: Self.addressA)).localResolvableAddress
        let initiated = try #require(localRPA(d.a, peer: Self.addressB)).localResolvableAddress
        #expect(Self.resolves(advertised, Self.irkB) && Self.resolves(initiated, Self.irkA))
        // Each side: the peer's identity (type 0x02), and the RPAs on the air.
        #expect(central.status == .success && central.role == .central)
        #expect(central.peerAddressType == .publicIdentity && central.peerAddress == Self.addressB)
        #expect(central.peerResolvablePrivateAddress == advertised && central.localResolvablePrivateAddress == initiated)
        #expect(peripheral.status == .success && peripheral.role == .peripheral)
        #expect(peripheral.peerAddressType == .publicIdentity && peripheral.peerAddress == Self.addressA)
        #expect(peripheral.peerResolvablePrivateAddress == initiated && peripheral.localResolvablePrivateAddress == advertised)
        #expect(peerRPA(d.a, peer: Self.addressB)?.peerResolvableAddress == advertised)
        #expect(peerRPA(d.b, peer: Self.addressA)?.peerResolvableAddress == initiated)
        // The link works.
        #expect(d.a.status(Disconnect(connectionHandle: central.connectionHandle, reason: .remoteUserTerminatedConnection)) == .success)
        d.loop.run(until: { d.b.events.contains { if case .disconnectionComplete = $0 { true } else { false } } }, timeout: .seconds(2))
        #expect(d.b.events.contains { if case .disconnectionComplete = $0 { true } else { false } })
    }

    @Test func withoutPrivacyTheEnhancedEventCarriesZeroRPAs() throws {
        // Own address type 0x02 with an empty list and resolution off: the public address.
        let e = TwoDevices()
        #expect(e.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advInd, ownAddressType: .publicIdentity,
            peerAddressType: .publicDevice, peerAddress: .zero, advertisingChannelMap: 7, advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(e.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        #expect(e.a.status(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicDevice,
            peerAddress: Self.addressB, ownAddressType: .publicDevice, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)) == .success)
        var central: LEEnhancedConnectionComplete?
        e.loop.run(until: {
            for ev in e.a.takeLEEvents() { if case .enhancedConnectionComplete(let c) = ev { central = c } }
            return central != nil
        }, timeout: .seconds(2))
        let c = try #require(central)
        #expect(c.peerAddressType == .publicDevice && c.peerAddress == Self.addressB)
        #expect(c.localResolvablePrivateAddress == .zero && c.peerResolvablePrivateAddress == .zero)
    }

    @Test func directedAdvertisingTargetsThePeersRPA() throws {
        let d = TwoDevices()
        // B directs to A; A's IRK in B's list makes TargetA an RPA only A resolves.
        advertiseWithRPA(d, type: .advDirectIndLowDuty)
        let target = try #require(peerRPA(d.b, peer: Self.addressA)).peerResolvableAddress
        #expect(Self.resolves(target, Self.irkA))
        // A (with B listed, so it can resolve the target with its local IRK) connects.
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        #expect(d.a.status(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicIdentity,
            peerAddress: Self.addressB, ownAddressType: .publicIdentity, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)) == .success)
        var central: LEEnhancedConnectionComplete?
        d.loop.run(until: {
            for e in d.a.takeLEEvents() { if case .enhancedConnectionComplete(let c) = e { central = c } }
            return central != nil
        }, timeout: .seconds(2))
        #expect(central?.status == .success && central?.peerAddressType == .publicIdentity)
    }

    // MARK: Extended scanning

    @Test func extendedScannerReportsTheIdentityOfAnExtendedRPAAdvertiser() throws {
        let d = TwoDevices()
        addToList(d.b, peer: Self.addressA, peerIRK: Self.irkA, localIRK: Self.irkB)
        #expect(d.b.returning(LESetExtendedAdvertisingParameters(
            advertisingHandle: 0, advertisingEventProperties: [], primaryAdvertisingIntervalMin: 0x20,
            primaryAdvertisingIntervalMax: 0x20, ownAddressType: .publicIdentity, peerAddressType: .publicDevice,
            peerAddress: Self.addressA))?.status == .success)
        #expect(d.b.status(LESetExtendedAdvertisingData(advertisingHandle: 0, advertisingData: [0x02, 0x01, 0x06])) == .success)
        #expect(d.b.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 0)])) == .success)
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        #expect(d.a.status(LESetExtendedScanParameters(scanningPHYs: [.init(phy: .le1M)])) == .success)
        #expect(d.a.status(LESetExtendedScanEnable(enable: true, filterDuplicates: .enabled)) == .success)
        var report: LEExtendedAdvertisingReport.Report?
        d.loop.run(until: {
            for e in d.a.takeLEEvents() { if case .extendedAdvertisingReport(let r) = e { report = report ?? r.reports.first } }
            return report != nil
        }, timeout: .seconds(1))
        #expect(report?.addressType == .publicIdentity && report?.address == Self.addressB)
        #expect(peerRPA(d.a, peer: Self.addressB)?.peerResolvableAddress == localRPA(d.b, peer: Self.addressA)?.localResolvableAddress)
    }

    // MARK: Commands

    @Test func resolvableAddressReadsForUnknownPeersAndTheSupportedCommands() throws {
        let d = TwoDevices()
        #expect(localRPA(d.a, peer: Self.addressB)?.status == .unknownConnectionIdentifier)
        #expect(peerRPA(d.a, peer: Self.addressB)?.status == .unknownConnectionIdentifier)
        // Listed, but no RPA made or heard yet.
        addToList(d.a, peer: Self.addressB, peerIRK: Self.irkB, localIRK: Self.irkA)
        #expect(peerRPA(d.a, peer: Self.addressB)?.status == .unknownConnectionIdentifier)
        let commands = try #require(d.a.returning(ReadLocalSupportedCommands())).supportedCommands
        for opcode in [LEReadPeerResolvableAddress.opcode, LEReadLocalResolvableAddress.opcode, LESetPrivacyMode.opcode] {
            #expect(SupportedCommandsTable.isSupported(opcode, in: commands))
        }
    }
}
