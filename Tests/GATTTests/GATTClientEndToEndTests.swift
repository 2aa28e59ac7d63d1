import ATT
import AssignedNumbers
import Foundation
import GATT
import HCI
import HCITransport
import HostStack
import L2CAP
import Scheduling
import TestSupport
import Testing
import VirtualController

/// A peripheral with a GATT server and a central with a GATT client, connected on one virtual
/// radio, on virtual time. The server holds a heart-rate-like service and a custom one:
///
/// - Heart Rate 0x180D: Measurement 0x2A37 (notify), Body Sensor Location 0x2A38 (read),
///   Control Point 0x2A39 (write).
/// - Custom (128-bit), including Heart Rate: a 600-octet dynamic value (read), a write-only
///   value, an indicate-only value.
final class GATTOverRadio: LEHostDelegate, @unchecked Sendable {
    let loop = EventLoop(name: "radio", pacing: .manual)
    let central: LEHost
    let peripheral: LEHost
    let server = GATTServer(deviceName: "Sensor")
    let heartRate: GATTServiceHandles
    let custom: GATTServiceHandles
    let longValue = (0..<600).map { UInt8(truncatingIfNeeded: $0 * 7) }
    private var connected: [LERole: LEConnection] = [:]
    private(set) var serverBearer: ATTBearer?
    private(set) var clientBearer: ATTBearer?
    static let peripheralAddress = LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:03:01")!)
    static let customService = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
    static let longCharacteristic = BluetoothUUID("6E400002-B5A3-F393-E0A9-E50E24DCCA9E")!
    static let writeOnlyCharacteristic = BluetoothUUID("6E400003-B5A3-F393-E0A9-E50E24DCCA9E")!
    static let indicateOnlyCharacteristic = BluetoothUUID("6E400004-B5A3-F393-E0A9-E50E24DCCA9E")!

    init(snoop: BtsnoopWriter? = nil) throws {
        let radio = VirtualRadio(loop: loop, seed: 31)
        var centralTransport = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:03:02")!).makeHostTransport()
        if let snoop { centralTransport = SnoopingTransport(wrapping: centralTransport, writer: snoop) }
        central = LEHost(transport: centralTransport, loop: loop)
        peripheral = LEHost(transport: VirtualController(radio: radio, address: Self.peripheralAddress.address,
                                                         position: RadioPosition(x: 2)).makeHostTransport(), loop: loop)
        heartRate = try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180D), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A37), properties: .notify, permissions: [], value: .stored([0x00, 60])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: .read, permissions: .readable, value: .stored([0x01])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A39), properties: .write, permissions: .writeable, value: .stored([0x00])),
        ]))
        custom = try server.addService(GATTService(uuid: Self.customService, includedServices: [heartRate.id], characteristics: [
            GATTCharacteristic(uuid: Self.longCharacteristic, properties: .read, permissions: .readable, value: .dynamic),
            GATTCharacteristic(uuid: Self.writeOnlyCharacteristic, properties: [.write, .writeWithoutResponse],
                               permissions: .writeable, value: .stored([])),
            GATTCharacteristic(uuid: Self.indicateOnlyCharacteristic, properties: .indicate, permissions: [], value: .stored([])),
        ]))
        let long = longValue
        server.onRead = { request, respond in
            guard request.offset <= long.count else { return respond(.failure(.invalidOffset)) }
            respond(.success(Array(long[request.offset...])))
        }
        central.delegate = self
        peripheral.delegate = self
        for host in [central, peripheral] { _ = try run { host.start(completion: $0) } }
    }

    func host(_ host: LEHost, didConnect connection: LEConnection) { connected[connection.role] = connection }
    func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) {}

    /// Runs the loop until `body` completes and returns its result.
    @discardableResult
    func run<T, E: Error>(_ body: (@escaping (Result<T, E>) -> Void) -> Void) throws -> T {
        var result: Result<T, E>?
        body { result = $0 }
        loop.run(until: { result != nil }, timeout: .seconds(35))
        return try #require(result).get()
    }

    /// Connects and returns a client on the central's ATT bearer; the server serves the
    /// peripheral's.
    func connect() throws -> (client: GATTClient, link: LEConnection) {
        try run { peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06]), completion: $0) }
        try run { central.connect(to: Self.peripheralAddress, completion: $0) }
        loop.run(until: { self.connected.count == 2 }, timeout: .seconds(5))
        let c = try #require(connected[.central])
        let p = try #require(connected[.peripheral])
        loop.run(for: .milliseconds(100))
        let serverBearer = ATTBearer(channel: p.l2cap.att, loop: loop)
        server.attach(serverBearer)
        let clientBearer = ATTBearer(channel: c.l2cap.att, loop: loop)
        self.serverBearer = serverBearer
        self.clientBearer = clientBearer
        return (GATTClient(bearer: clientBearer), c)
    }
}

private func failure<T>(_ result: Result<T, GATTClientError>?) -> GATTClientError? {
    if case .failure(let error)? = result { return error }
    return nil
}

@Suite("GATT client against the GATT server on the virtual radio")
struct GATTClientEndToEndTests {
    /// Discovers everything, reads and writes long values, subscribes to notifications and
    /// indications, and hears Service Changed when the server adds a service.
    func everyProcedure(on pair: GATTOverRadio, exchangeMTU: Bool) throws {
        let (client, _) = try pair.connect()
        if exchangeMTU {
            #expect(try pair.run { client.exchangeMTU(completion: $0) } == ATTMTU.preferred)
        }

        // Discovery.
        let services = try pair.run { client.discoverPrimaryServices(completion: $0) }
        #expect(services.map(\.uuid) == [.genericAccessService, .genericAttributeService,
                                         BluetoothUUID(uuid16: 0x180D), GATTOverRadio.customService])
        #expect(services.map(\.handles) == [pair.server.gapService.range, pair.server.gattService.range,
                                            pair.heartRate.range, pair.custom.range])
        let byUUID = try pair.run { client.discoverPrimaryServices(uuid: GATTOverRadio.customService, completion: $0) }
        #expect(byUUID == [services[3]])
        let includes = try pair.run { client.discoverIncludedServices(of: services[3], completion: $0) }
        #expect(includes == [DiscoveredIncludedService(declarationHandle: pair.custom.includes[0],
                                                       uuid: BluetoothUUID(uuid16: 0x180D), handles: pair.heartRate.range)])

        var characteristics: [DiscoveredCharacteristic] = []
        for service in services { characteristics += try pair.run { client.discoverCharacteristics(of: service, completion: $0) } }
        let expectedHandles = [pair.server.gapService, pair.server.gattService, pair.heartRate, pair.custom]
            .flatMap(\.characteristics)
        #expect(characteristics.map(\.valueHandle) == expectedHandles.map(\.value))
        #expect(characteristics.map(\.declarationHandle) == expectedHandles.map(\.declaration))
        #expect(client.serviceChangedHandle == pair.server.gattService.characteristics[0].value)
        func characteristic(_ uuid: BluetoothUUID) throws -> DiscoveredCharacteristic {
            try #require(characteristics.first { $0.uuid == uuid })
        }
        let measurement = try characteristic(BluetoothUUID(uuid16: 0x2A37))
        #expect(measurement.properties == .notify)
        let descriptors = try pair.run { client.discoverDescriptors(of: measurement, completion: $0) }
        #expect(descriptors == [DiscoveredDescriptor(uuid: .clientCharacteristicConfiguration,
                                                     handle: try #require(pair.heartRate.characteristics[0].clientConfiguration))])

        // Reads, the long one through Read Blob.
        let location = try characteristic(BluetoothUUID(uuid16: 0x2A38))
        #expect(try pair.run { client.readValue(of: location.valueHandle, completion: $0) } == [0x01])
        let long = try characteristic(GATTOverRadio.longCharacteristic)
        #expect(try pair.run { client.readValue(of: long.valueHandle, completion: $0) } == pair.longValue)
        let deviceName = pair.server.gapService.characteristics[0].value
        #expect(try pair.run { client.readMultipleVariableValues(of: [location.valueHandle, deviceName], completion: $0) }
                == [[0x01], Array("Sensor".utf8)])

        #expect(try pair.run { client.readValues(ofType: BluetoothUUID(uuid16: 0x2A38), completion: $0) }.map(\.value) == [[0x01]])
        #expect(try pair.run { client.readMultipleValues(of: [location.valueHandle, deviceName], completion: $0) }
                == [0x01] + Array("Sensor".utf8))
        let byCharacteristicUUID = try pair.run {
            client.discoverCharacteristics(of: services[2], uuid: BluetoothUUID(uuid16: 0x2A38), completion: $0)
        }
        #expect(byCharacteristicUUID == [location])

        // Writes: a short one, a long one, a reliable one, and without response.
        let controlPoint = try characteristic(BluetoothUUID(uuid16: 0x2A39))
        try pair.run { client.writeValue([0x01], to: controlPoint.valueHandle, completion: $0) }
        #expect(pair.server.storedValue(for: controlPoint.valueHandle) == [0x01])
        let writeOnly = try characteristic(GATTOverRadio.writeOnlyCharacteristic)
        let written = (0..<300).map { UInt8(truncatingIfNeeded: $0 * 3 + 1) }
        try pair.run { client.writeLongValue(written, to: writeOnly.valueHandle, completion: $0) }
        #expect(pair.server.storedValue(for: writeOnly.valueHandle) == written)
        #expect(throws: GATTClientError.attributeError(.readNotPermitted, handle: writeOnly.valueHandle)) {
            try pair.run { client.readValue(of: writeOnly.valueHandle, completion: $0) }
        }
        try pair.run { client.reliableWrite([(controlPoint.valueHandle, [0x02]), (writeOnly.valueHandle, [0xAB, 0xCD])],
                                            completion: $0) }
        #expect(pair.server.storedValue(for: controlPoint.valueHandle) == [0x02])
        #expect(pair.server.storedValue(for: writeOnly.valueHandle) == [0xAB, 0xCD])
        #expect(client.writeWithoutResponse([0x11, 0x22], to: writeOnly.valueHandle))
        pair.loop.run(until: { pair.server.storedValue(for: writeOnly.valueHandle) == [0x11, 0x22] }, timeout: .seconds(1))
        #expect(pair.server.storedValue(for: writeOnly.valueHandle) == [0x11, 0x22])

        // Notifications and indications.
        var heartRates: [[UInt8]] = []
        #expect(try pair.run { client.subscribe(to: measurement, onValue: { heartRates.append($0) }, completion: $0) }
                == .notification)
        let indicateOnly = try characteristic(GATTOverRadio.indicateOnlyCharacteristic)
        var indicated: [[UInt8]] = []
        #expect(try pair.run { client.subscribe(to: indicateOnly, onValue: { indicated.append($0) }, completion: $0) }
                == .indication)
        for beat: UInt8 in 60...62 { #expect(pair.server.updateValue([0x00, beat], forCharacteristic: measurement.valueHandle)) }
        #expect(pair.server.updateValue([0x01], forCharacteristic: indicateOnly.valueHandle))
        // The second waits in the server for the first one's confirmation.
        #expect(!pair.server.updateValue([0x02], forCharacteristic: indicateOnly.valueHandle))
        pair.loop.run(until: { heartRates.count == 3 && indicated.count == 2 }, timeout: .seconds(2))
        #expect(heartRates == [[0x00, 60], [0x00, 61], [0x00, 62]])
        #expect(indicated == [[0x01], [0x02]])
        try pair.run { client.unsubscribe(from: measurement, completion: $0) }
        #expect(pair.server.subscribers(ofCharacteristic: measurement.valueHandle).isEmpty)

        // Service Changed: subscribed, then the server adds a service.
        let serviceChanged = try characteristic(.serviceChanged)
        var changed: [ClosedRange<ATTHandle>] = []
        client.onServiceChanged = { changed.append($0) }
        #expect(try pair.run { client.subscribe(to: serviceChanged, onValue: { _ in }, completion: $0) } == .indication)
        let added = try pair.server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180F), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A19), properties: .read, permissions: .readable, value: .stored([99])),
        ]))
        pair.loop.run(until: { !changed.isEmpty }, timeout: .seconds(2))
        #expect(changed.count == 1 && changed.first.map { $0.contains(added.range.lowerBound) && $0.contains(added.range.upperBound) } == true)
        let rediscovered = try pair.run { client.discoverPrimaryServices(uuid: BluetoothUUID(uuid16: 0x180F), completion: $0) }
        #expect(rediscovered.map(\.handles) == [added.range])
        #expect(client.pendingProcedures == 0)
    }

    @Test(arguments: [false, true])
    func discoverReadWriteAndSubscribe(exchangeMTU: Bool) throws {
        try everyProcedure(on: GATTOverRadio(), exchangeMTU: exchangeMTU)
    }

    @Test func aDisconnectionInTheMiddleOfALongReadFailsItAndEveryWaitingProcedure() throws {
        let pair = try GATTOverRadio()
        let (client, link) = try pair.connect()
        let services = try pair.run { client.discoverPrimaryServices(uuid: GATTOverRadio.customService, completion: $0) }
        let characteristics = try pair.run { client.discoverCharacteristics(of: services[0], completion: $0) }
        let long = try #require(characteristics.first { $0.uuid == GATTOverRadio.longCharacteristic })

        var blobsServed = 0
        let longValue = pair.longValue
        pair.server.onRead = { request, respond in
            if request.offset > 0 { blobsServed += 1 }
            respond(.success(Array(longValue[min(request.offset, longValue.count)...])))
        }
        var read: Result<[UInt8], GATTClientError>?
        var waiting: Result<Void, GATTClientError>?
        var closed: GATTClientError?
        client.onClose = { closed = $0 }
        client.readValue(of: long.valueHandle) { read = $0 }
        client.writeValue([0x01], to: characteristics[1].valueHandle) { waiting = $0 }
        pair.loop.run(until: { blobsServed >= 3 }, timeout: .seconds(2))
        #expect(read == nil && waiting == nil)
        pair.central.disconnect(link)
        pair.loop.run(until: { read != nil && waiting != nil }, timeout: .seconds(2))
        #expect(failure(read) == .disconnected && failure(waiting) == .disconnected)
        #expect(closed == .disconnected && client.pendingProcedures == 0)
        #expect(pair.clientBearer?.isOpen == false)
        #expect(blobsServed < 27, "the read stopped at the disconnection")
    }

    /// Each procedure (but Exchange MTU, which the server's bearer answers at once) with its
    /// first request held by the server, then the link dropped: it and the one waiting behind
    /// it fail with `.disconnected`, nothing stays queued, and every controller ACL buffer is
    /// free again on both sides.
    @Test(arguments: 0..<15)
    func aDisconnectionInTheMiddleOfAnyProcedureEndsItAndFreesEverything(procedure: Int) throws {
        let pair = try GATTOverRadio()
        let credits = (pair.central.driver.aclCredits, pair.peripheral.driver.aclCredits)
        let (client, link) = try pair.connect()
        var held: [ATTResponder] = []
        pair.serverBearer?.onRequest = { _, responder in held.append(responder) }
        var outcomes: [GATTClientError?] = []
        GATTClientTests.start(procedure, on: client) { outcomes.append($0) }
        GATTClientTests.start(procedure, on: client) { outcomes.append($0) }
        pair.loop.run(until: { held.count == 1 }, timeout: .seconds(1))
        #expect(held.count == 1 && outcomes.isEmpty)
        pair.central.disconnect(link)
        pair.loop.run(until: { outcomes.count == 2 }, timeout: .seconds(2))
        pair.loop.run(for: .milliseconds(100))
        #expect(outcomes == [.disconnected, .disconnected])
        #expect(client.pendingProcedures == 0)
        #expect(pair.central.connections.isEmpty && pair.peripheral.connections.isEmpty)
        #expect(pair.central.driver.aclCredits == credits.0 && pair.peripheral.driver.aclCredits == credits.1)
        #expect(pair.central.driver.queuedPDUs(handle: link.handle) == 0)
    }

    @Test func captureOfTheClientSessionDecodesInTshark() throws {
        let path = temporaryPath("gatt-client.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BtsnoopWriter(path: path)
        try everyProcedure(on: GATTOverRadio(snoop: writer), exchangeMTU: false)
        writer.close()
        let result = try Tshark.check(capture: path)
        #expect(result.frameProtocols.contains { $0.hasSuffix("btatt") })
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        #expect(result.expertErrors.isEmpty, "\(result.expertErrors)")
    }
}
