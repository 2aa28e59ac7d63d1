import HCI
import HCIDriver
import Testing
@testable import HostStack

@Suite("LE host: the controller's resolving list")
struct LEHostPrivacyTests {
    static let peerIRK: [UInt8] = Array(0x01...0x10)
    static let localIRK: [UInt8] = Array(0x11...0x20)

    /// Expects `body` to fail with `status` from the controller.
    func expectStatus(_ status: HCIStatus, _ pair: Pair, sourceLocation: SourceLocation = #_sourceLocation,
                      _ body: (@escaping (Result<Void, HCIError>) -> Void) -> Void) {
        do {
            try pair.run(body)
            Issue.record("succeeded; expected \(status)", sourceLocation: sourceLocation)
        } catch let HCIError.status(got, _) {
            #expect(got == status, sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(error); expected \(status)", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: [true, false])
    func resolvingListCommandsReachTheController(extended: Bool) throws {
        let pair = try Pair(extended: extended)
        let central = pair.central
        let peer = Pair.peripheralAddress
        #expect(central.supportsAddressResolution)
        try pair.run { central.addToResolvingList(peer, peerIRK: Self.peerIRK, localIRK: Self.localIRK, completion: $0) }
        // The same identity twice is Invalid HCI Command Parameters (§7.8.38).
        expectStatus(.invalidHCICommandParameters, pair) {
            central.addToResolvingList(peer, peerIRK: Self.peerIRK, localIRK: Self.localIRK, completion: $0)
        }
        try pair.run { central.setResolvablePrivateAddressTimeout(seconds: 60, completion: $0) }
        try pair.run { central.setAddressResolution(enabled: true, completion: $0) }

        // The peer, listed with an IRK, advertises under its identity address: in network
        // privacy mode the controller ignores it.
        try pair.run { pair.peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06]), completion: $0) }
        try pair.run { central.startScanning(active: false, filterDuplicates: true, completion: $0) }
        pair.loop.run(for: .seconds(1))
        #expect(pair.c.reports.isEmpty)
        // The list is fixed while resolution is used by scanning.
        expectStatus(.commandDisallowed, pair) { central.clearResolvingList(completion: $0) }
        try pair.run { central.stopScanning(completion: $0) }

        // Resolution off: heard again.
        try pair.run { central.setAddressResolution(enabled: false, completion: $0) }
        try pair.run { central.startScanning(active: false, filterDuplicates: true, completion: $0) }
        pair.loop.run(until: { !pair.c.reports.isEmpty }, timeout: .seconds(1))
        #expect(pair.c.reports.first?.address == peer)
        try pair.run { central.stopScanning(completion: $0) }

        try pair.run { central.removeFromResolvingList(peer, completion: $0) }
        expectStatus(.unknownConnectionIdentifier, pair) { central.removeFromResolvingList(peer, completion: $0) }
        try pair.run { central.clearResolvingList(completion: $0) }
    }

    @Test func argumentsCheckedBeforeSending() throws {
        let pair = try Pair()
        #expect(throws: HCIError.self) {
            try pair.run { pair.central.addToResolvingList(Pair.peripheralAddress, peerIRK: [1, 2, 3], localIRK: Self.localIRK,
                                                           completion: $0) }
        }
        #expect(throws: HCIError.self) { try pair.run { pair.central.setResolvablePrivateAddressTimeout(seconds: 0, completion: $0) } }
        #expect(throws: HCIError.self) {
            try pair.run { pair.central.setResolvablePrivateAddressTimeout(seconds: 3601, completion: $0) }
        }
    }
}
