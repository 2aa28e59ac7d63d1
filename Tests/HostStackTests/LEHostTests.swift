import HCI
import HCIDriver
import HCITransport
import L2CAP
import Scheduling
import Testing
import VirtualController
@testable import HostStack

/// Records what an LEHost reports.
final class Recorder: LEHostDelegate, @unchecked Sendable {
    var reports: [AdvertisingReport] = []
    var connected: [LEConnection] = []
    var failed: [(LEAddress, HCIStatus)] = []
    var disconnected: [(LEConnection, HCIStatus)] = []
    var updated = 0
    var encryption: [HCIStatus] = []
    var key: [UInt8]?
    var stoppedAdvertising = 0

    func host(_ host: LEHost, didDiscover report: AdvertisingReport) { reports.append(report) }
    func host(_ host: LEHost, didConnect connection: LEConnection) { connected.append(connection) }
    func host(_ host: LEHost, didFailToConnectTo peer: LEAddress, status: HCIStatus) { failed.append((peer, status)) }
    func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) { disconnected.append((connection, reason)) }
    func host(_ host: LEHost, didUpdateParametersOf connection: LEConnection) { updated += 1 }
    func host(_ host: LEHost, encryptionChangedOn connection: LEConnection, status: HCIStatus) { encryption.append(status) }
    func host(_ host: LEHost, longTermKeyFor connection: LEConnection, rand: UInt64, ediv: UInt16) -> [UInt8]? { key }
    func host(_ host: LEHost, didStopAdvertisingSet set: UInt8) { stoppedAdvertising += 1 }
}

/// Two hosts on one virtual radio, driven on virtual time.
struct Pair {
    let loop = EventLoop(name: "radio", pacing: .manual)
    let radio: VirtualRadio
    let central: LEHost
    let peripheral: LEHost
    let c = Recorder()
    let p = Recorder()
    static let peripheralAddress = LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:01:01")!)

    /// `extended`: whether the controllers have the extended advertising commands (the host
    /// then uses them) or are legacy-only.
    init(extended: Bool = true) throws {
        radio = VirtualRadio(loop: loop, seed: 11)
        var configuration = VirtualController.Configuration()
        configuration.supportsExtendedAdvertising = extended
        central = LEHost(transport: VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:01:02")!,
                                                      configuration: configuration).makeHostTransport(), loop: loop)
        peripheral = LEHost(transport: VirtualController(radio: radio, address: Self.peripheralAddress.address,
                                                         configuration: configuration,
                                                         position: RadioPosition(x: 3)).makeHostTransport(), loop: loop)
        central.delegate = c
        peripheral.delegate = p
        for host in [central, peripheral] { _ = try run { host.start(completion: $0) } }
    }

    /// Runs the loop until `body`'s completion is called and returns its result.
    @discardableResult
    func run<T>(_ body: (@escaping (Result<T, HCIError>) -> Void) -> Void) throws -> T {
        var result: Result<T, HCIError>?
        body { result = $0 }
        loop.run(until: { result != nil }, timeout: .seconds(30))
        return try #require(result).get()
    }

    func advertiseAndConnect() throws -> (LEConnection, LEConnection) {
        try run { peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06]), completion: $0) }
        try run { central.connect(to: Self.peripheralAddress, completion: $0) }
        loop.run(until: { !c.connected.isEmpty && !p.connected.isEmpty }, timeout: .seconds(5))
        return (try #require(c.connected.first), try #require(p.connected.first))
    }
}

@Suite("LE host on the virtual radio")
struct LEHostTests {
    @Test(arguments: [true, false])
    func scanSeesAdvertisingAndScanResponse(extended: Bool) throws {
        let pair = try Pair(extended: extended)
        try pair.run { pair.peripheral.startAdvertising(AdvertisingParameters(
            data: [0x02, 0x01, 0x06, 0x05, 0x09, 0x45, 0x63, 0x68, 0x6F], scanResponse: [0x03, 0x03, 0x0D, 0x18]), completion: $0) }
        try pair.run { pair.central.startScanning(active: true, filterDuplicates: true, completion: $0) }
        pair.loop.run(for: .seconds(1))
        try pair.run { pair.central.stopScanning(completion: $0) }
        let reports = pair.c.reports
        #expect(reports.count == 2)
        #expect(reports.first?.address == Pair.peripheralAddress)
        #expect(reports.first?.isConnectable == true && reports.first?.isScanResponse == false)
        #expect(reports.first?.data == [0x02, 0x01, 0x06, 0x05, 0x09, 0x45, 0x63, 0x68, 0x6F])
        #expect(reports.last?.isScanResponse == true && reports.last?.data == [0x03, 0x03, 0x0D, 0x18])
        // −59 dBm at 1 m, exponent 2: 3 m → −68.5 → −69 (rounded half away from zero... −68.54 → −69).
        #expect(reports.first?.rssi == -69)
        #expect(throws: HCIError.self) {
            try pair.run { pair.peripheral.startAdvertising(AdvertisingParameters(data: [UInt8](repeating: 0, count: 32)), completion: $0) }
        }
    }

    @Test(arguments: [true, false])
    func connectExchangeOverL2CAPAndDisconnect(extended: Bool) throws {
        let pair = try Pair(extended: extended)
        let (central, peripheral) = try pair.advertiseAndConnect()
        #expect(central.role == .central && peripheral.role == .peripheral)
        #expect(central.peer == Pair.peripheralAddress)
        // The data length update the host asks for right after connecting; advertising stopped
        // (with extended advertising, LE Advertising Set Terminated follows the connection).
        pair.loop.run(for: .milliseconds(100))
        #expect(pair.p.stoppedAdvertising == 1)
        #expect(pair.central.usesExtendedCommands == extended && pair.peripheral.usesExtendedCommands == extended)
        #expect(central.maxTxOctets == 251)

        var atPeripheral: [[UInt8]] = []
        var atCentral: [[UInt8]] = []
        peripheral.l2cap.att.onReceive = { atPeripheral.append($0) }
        central.l2cap.att.onReceive = { atCentral.append($0) }
        var closed = 0
        peripheral.l2cap.att.onClose = { closed += 1 }
        let big = [UInt8](repeating: 0x5A, count: 600)
        #expect(central.l2cap.att.send([0x02, 0x05, 0x02]))
        #expect(peripheral.l2cap.att.send(big))
        pair.loop.run(until: { !atPeripheral.isEmpty && !atCentral.isEmpty }, timeout: .seconds(1))
        #expect(atPeripheral == [[0x02, 0x05, 0x02]])
        #expect(atCentral == [big])

        // Pairing is refused until SMP exists: the central's Pairing Request gets Pairing Failed.
        var smp: [[UInt8]] = []
        central.l2cap.securityManager.onReceive = { smp.append($0) }
        central.l2cap.securityManager.send([0x01, 0x03, 0x00, 0x01, 0x10, 0x07, 0x07])
        pair.loop.run(until: { !smp.isEmpty }, timeout: .seconds(1))
        #expect(smp == [[0x05, 0x05]])

        pair.central.disconnect(central)
        pair.loop.run(until: { !pair.p.disconnected.isEmpty && !pair.c.disconnected.isEmpty }, timeout: .seconds(1))
        #expect(pair.c.disconnected.map(\.1) == [.connectionTerminatedByLocalHost])
        #expect(pair.p.disconnected.map(\.1) == [.remoteUserTerminatedConnection])
        #expect(closed == 1)
        #expect(pair.central.connections.isEmpty && pair.peripheral.connections.isEmpty)
    }

    @Test(arguments: [true, false])
    func peripheralAsksForNewParameters(extended: Bool) throws {
        let pair = try Pair(extended: extended)
        let (central, peripheral) = try pair.advertiseAndConnect()
        let wanted = ConnectionParameters(intervalMin: 0x0030, intervalMax: 0x0030, latency: 2, timeout: 0x0200)
        try pair.run { pair.peripheral.updateParameters(peripheral, wanted, completion: $0) }
        pair.loop.run(until: { pair.c.updated > 0 && pair.p.updated > 0 }, timeout: .seconds(2))
        #expect(central.interval == 0x0030 && peripheral.interval == 0x0030)
        #expect(peripheral.latency == 2 && central.supervisionTimeout == 0x0200)
    }

    @Test func parameterUpdateThroughL2CAPSignalling() throws {
        let pair = try Pair()
        let (central, peripheral) = try pair.advertiseAndConnect()
        var accepted: Result<Bool, L2CAPError>?
        peripheral.l2cap.requestConnectionParameterUpdate(
            ConnectionParameters(intervalMin: 0x0040, intervalMax: 0x0040, latency: 0, timeout: 0x0200)) { accepted = $0 }
        pair.loop.run(until: { pair.c.updated > 0 && pair.p.updated > 0 && accepted != nil }, timeout: .seconds(2))
        #expect(accepted == .success(true))
        #expect(central.interval == 0x0040 && peripheral.interval == 0x0040)
    }

    @Test(arguments: [true, false])
    func encryptionWithTheRightAndWrongKey(extended: Bool) throws {
        let pair = try Pair(extended: extended)
        let (central, peripheral) = try pair.advertiseAndConnect()
        let key = (0..<16).map { UInt8($0) }
        pair.p.key = key
        try pair.run { pair.central.startEncryption(central, longTermKey: key, rand: 7, ediv: 9, completion: $0) }
        pair.loop.run(until: { !pair.c.encryption.isEmpty && !pair.p.encryption.isEmpty }, timeout: .seconds(1))
        #expect(pair.c.encryption == [.success] && pair.p.encryption == [.success])
        #expect(central.isEncrypted && peripheral.l2cap.securityLevel == .unauthenticatedEncryption)

        // A peripheral without the key refuses: PIN or Key Missing, and the link stays up.
        let other = try Pair(extended: extended)
        let (c2, _) = try other.advertiseAndConnect()
        try other.run { other.central.startEncryption(c2, longTermKey: key, rand: 7, ediv: 9, completion: $0) }
        other.loop.run(until: { !other.c.encryption.isEmpty }, timeout: .seconds(1))
        #expect(other.c.encryption == [.pinOrKeyMissing])
        #expect(other.c.disconnected.isEmpty)
    }

    @Test(arguments: [true, false])
    func connectingNeverTimesOutButCanBeCancelled(extended: Bool) throws {
        let pair = try Pair(extended: extended)
        let absent = LEAddress(.randomDevice, BluetoothAddress("C3:00:00:00:00:09")!)
        try pair.run { pair.central.connect(to: absent, completion: $0) }
        pair.loop.run(for: .seconds(120))
        #expect(pair.c.failed.isEmpty && pair.c.connected.isEmpty)
        try pair.run { pair.central.cancelConnecting(completion: $0) }
        pair.loop.run(until: { !pair.c.failed.isEmpty }, timeout: .seconds(1))
        #expect(pair.c.failed.first?.0 == absent)
        #expect(pair.c.failed.first?.1 == .unknownConnectionIdentifier)
    }

    @Test func transportClosingIsReported() throws {
        let pair = try Pair()
        _ = try pair.advertiseAndConnect()
        final class Closed: LEHostDelegate { var error: HCITransportError?? = nil
            func host(_ host: LEHost, didClose error: HCITransportError?) { self.error = .some(error) } }
        let closed = Closed()
        pair.peripheral.delegate = closed
        pair.peripheral.stop()
        pair.loop.run(for: .milliseconds(10))
        #expect(closed.error != nil)
        #expect(pair.peripheral.connections.isEmpty)
    }
}
