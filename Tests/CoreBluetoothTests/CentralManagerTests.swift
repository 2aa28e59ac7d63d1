import AssignedNumbers
@testable import CoreBluetooth
import Foundation
import TestSupport
import GAP
import GATT
import HCI
import HostStack
import Testing
import Scheduling

/// A peripheral built straight on the host stack (an independent peer), advertising `data`
/// with a GATT server, and a central manager on the same virtual radio: the central role's
/// behaviour end to end, on virtual time, through Apple's API only.
final class CentralFixture: @unchecked Sendable {
    let radio: CBVirtualRadio
    let recorder = CentralRecorder()
    let central: CBCentralManager
    let device: RawDevice
    let server = GATTServer(deviceName: "Sensor GAP")
    let heartRate: GATTServiceHandles
    let custom: GATTServiceHandles
    let longValue = (0..<600).map { UInt8(truncatingIfNeeded: $0 * 7) }
    /// Writes the server took, in order: (handle, value).
    let writes = Locked<[(UInt16, [UInt8])]>([])

    static let customService = CBUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
    static let long = CBUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E")
    static let writable = CBUUID(string: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E")
    static let indicating = CBUUID(string: "6E400004-B5A3-F393-E0A9-E50E24DCCA9E")

    init(advertising: AdvertisingData? = nil, scanResponse: AdvertisingData = [], position: Double = 2,
         preferredMTU: Int? = nil, airTime: CBVirtualRadio.AirTime = .instant) throws {
        radio = CBVirtualRadio(clock: .virtual, airTime: airTime)
        device = try RawDevice(radio: radio, position: .init(x: position))
        device.preferredMTU = preferredMTU
        heartRate = try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180D), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A37), properties: .notify, permissions: [], value: .stored([0x00, 60])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: .read, permissions: .readable, value: .stored([0x01]),
                               descriptors: [.userDescription("Body location")]),
        ]))
        custom = try server.addService(GATTService(uuid: Self.customService.bluetoothUUID, includedServices: [heartRate.id], characteristics: [
            GATTCharacteristic(uuid: Self.long.bluetoothUUID, properties: .read, permissions: .readable, value: .dynamic),
            GATTCharacteristic(uuid: Self.writable.bluetoothUUID, properties: [.write, .writeWithoutResponse],
                               permissions: .writeable, value: .dynamic),
            GATTCharacteristic(uuid: Self.indicating.bluetoothUUID, properties: .indicate, permissions: [], value: .stored([])),
        ]))
        let long = longValue
        server.onRead = { request, respond in
            guard request.offset <= long.count else { return respond(.failure(.invalidOffset)) }
            respond(.success(Array(long[request.offset...])))
        }
        server.onWrite = { [writes, loop = radio.loop] requests, respond in
            writes.withLock { $0 += requests.map { ($0.handle.rawValue, $0.value) } }
            respond(nil)
            CallbackWaiters.shared.callbackFinished(clock: loop)
        }
        device.server = server
        let (radio, recorder) = (self.radio, self.recorder)
        central = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: recorder, queue: recorder.queue) }
        let data = advertising ?? [.flags(.leGeneralDiscoverableLEOnly), .localName("Sensor", complete: true),
                                   .serviceUUIDs([BluetoothUUID(uuid16: 0x180D)], width: .bits16, complete: true)]
        try device.await { device, done in
            device.host.startAdvertising(AdvertisingParameters(intervalMin: 0x20, intervalMax: 0x20, data: data.encoded,
                                                               scanResponse: scanResponse.encoded), completion: done)
        }
        try expectOn()
    }

    private func expectOn() throws {
        guard radio.run(until: { [recorder] in recorder.log.contains("state 5") }, timeout: .seconds(5)) else {
            throw RawDeviceError("central did not power on")
        }
    }

    @discardableResult
    func wait(for entry: String, timeout: Duration = .seconds(10)) -> Bool {
        radio.run(until: { [recorder] in recorder.log.contains(entry) }, timeout: timeout)
    }

    /// Not `@Sendable`, so that `#expect(fixture.wait { … })` compiles; the condition only
    /// reads thread-safe state.
    @discardableResult
    func wait(_ condition: @escaping () -> Bool, timeout: Duration = .seconds(10)) -> Bool {
        let condition = Unchecked(condition)
        return radio.run(until: { condition.value() }, timeout: timeout)
    }

    /// Scans, finds "Sensor", stops and connects; returns the connected peripheral.
    func connectedSensor() throws -> CBPeripheral {
        central.scanForPeripherals(withServices: nil)
        guard wait(for: "discover Sensor") || wait(for: "discover Sensor GAP"),
              let peripheral = recorder.discovered(named: "Sensor") ?? recorder.discovered(named: "Sensor GAP") else {
            throw RawDeviceError("no discovery")
        }
        central.stopScan()
        central.connect(peripheral)
        guard wait({ peripheral.state == .connected }) else { throw RawDeviceError("no connection") }
        wait { [recorder] in recorder.log.count(prefix: "connect") > 0 }
        return peripheral
    }

    /// Connects and discovers everything.
    func exploredSensor() throws -> CBPeripheral {
        let peripheral = try connectedSensor()
        peripheral.discoverServices(nil)
        guard wait({ [recorder] in recorder.log.count(prefix: "services") == 1 }) else { throw RawDeviceError("no services") }
        for service in peripheral.services ?? [] { peripheral.discoverCharacteristics(nil, for: service) }
        let count = peripheral.services?.count ?? 0
        guard wait({ [recorder] in recorder.log.count(prefix: "characteristics") == count }) else {
            throw RawDeviceError("no characteristics")
        }
        return peripheral
    }

    func characteristic(_ uuid: CBUUID, of peripheral: CBPeripheral) throws -> CBCharacteristic {
        for service in peripheral.services ?? [] {
            if let found = service.characteristics?.first(where: { $0.uuid == uuid }) { return found }
        }
        throw RawDeviceError("no characteristic \(uuid)")
    }
}

@Suite struct CentralScanningTests {
    @Test func theAdvertisementDictionaryHoldsEveryKeyParsedFromTheData() throws {
        let data: AdvertisingData = [
            .flags(.leGeneralDiscoverableLEOnly), .localName("Sensor", complete: true),
            .serviceUUIDs([BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid16: 0x180F)], width: .bits16, complete: false),
            .txPowerLevel(-8),
        ]
        let response: AdvertisingData = [
            .manufacturerData(ManufacturerData(companyIdentifier: 0x004C, data: [1, 2, 3])),
            .serviceData(ServiceData(uuid: BluetoothUUID(uuid16: 0x180F), data: [0x64])),
            .solicitationUUIDs([BluetoothUUID(uuid16: 0x1812)], width: .bits16),
        ]
        let fixture = try CentralFixture(advertising: data, scanResponse: response)
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.central.isScanning)
        // The scan response arrives as a change of what the device advertises: reported again.
        #expect(fixture.wait({ fixture.recorder.log.count(of: "discover Sensor") >= 2 }))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        let advertisement = try #require(fixture.recorder.advertisement(of: peripheral))
        #expect(advertisement[CBAdvertisementDataLocalNameKey] as? String == "Sensor")
        #expect(advertisement[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] == [CBUUID(string: "180D"), CBUUID(string: "180F")])
        #expect((advertisement[CBAdvertisementDataTxPowerLevelKey] as? NSNumber)?.intValue == -8)
        #expect((advertisement[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue == true)
        #expect(advertisement[CBAdvertisementDataIsConnectable] as? Bool == true)
        #expect(advertisement[CBAdvertisementDataManufacturerDataKey] as? Data == Data([0x4C, 0x00, 1, 2, 3]))
        #expect(advertisement[CBAdvertisementDataServiceDataKey] as? [CBUUID: Data] == [CBUUID(string: "180F"): Data([0x64])])
        #expect(advertisement[CBAdvertisementDataSolicitedServiceUUIDsKey] as? [CBUUID] == [CBUUID(string: "1812")])
        #expect(peripheral.name == "Sensor")
        #expect(peripheral.state == .disconnected)
        fixture.central.stopScan()
        #expect(!fixture.central.isScanning)
    }

    @Test func withoutDuplicatesADeviceIsReportedOnceUntilItsAdvertisementChanges() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        // Two seconds of advertising every 20 ms: still one report.
        fixture.radio.run(for: .seconds(2))
        #expect(fixture.recorder.log.count(of: "discover Sensor") == 1)
        try fixture.device.await { device, done in device.host.stopAdvertising(completion: done) }
        try fixture.device.await { device, done in
            device.host.startAdvertising(AdvertisingParameters(intervalMin: 0x20, intervalMax: 0x20,
                                                               data: AdvertisingData(elements: [.localName("Sensor 2", complete: true)]).encoded),
                                         completion: done)
        }
        #expect(fixture.wait(for: "discover Sensor 2"))
        fixture.radio.run(for: .seconds(1))
        #expect(fixture.recorder.log.count(of: "discover Sensor 2") == 1)
    }

    @Test func allowDuplicatesReportsEveryPacket() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        #expect(fixture.wait({ fixture.recorder.log.count(of: "discover Sensor") >= 10 }, timeout: .seconds(2)))
    }

    @Test func aScanningAppThatKeepsNoPeripheralIsGivenTheSameObjectForADevice() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        #expect(fixture.wait(for: "discover Sensor"))
        weak var first = fixture.recorder.discovered(named: "Sensor")
        fixture.recorder.forget()
        // Nothing of the app's holds it now: the next reports give the same object all the same.
        let seen = fixture.recorder.log.count(of: "discover Sensor")
        #expect(fixture.wait({ fixture.recorder.log.count(of: "discover Sensor") >= seen + 5 }, timeout: .seconds(2)))
        #expect(first != nil)
        #expect(fixture.recorder.discovered(named: "Sensor") === first)
        // Once connected it is the app's alone again: releasing it cancels the connection,
        // the scan going on meanwhile.
        weak var released: CBPeripheral?
        do {
            let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
            released = peripheral
            fixture.central.connect(peripheral)
            #expect(fixture.wait({ peripheral.state == .connected }))
        }
        for _ in 0..<20 where released != nil {
            fixture.recorder.queue.sync {}
            fixture.recorder.forget()
            fixture.radio.run(for: .milliseconds(100))
        }
        #expect(released == nil)
        #expect(fixture.wait({ fixture.device.snapshot { $0.connection == nil } }))
    }

    /// What one discovery said, as `cbtool record` reads it.
    struct Sighted: Sendable, Equatable {
        var advertising: Data?
        var scanResponse: Data?
        var name: String?
        var connectable: Bool?
    }

    @Test func aScanStartedAgainReportsNoScanResponseWithoutItsAdvertisement() throws {
        // `cbtool record`'s sequence: a device found by its advertisement, then the scan started
        // again (duplicates allowed) for its scan response. The scan response to the request the
        // first scan made comes after the new scan began: it answers an advertisement this scan
        // did not hear, and was reported alone, as a device advertising nothing (an empty
        // advertisement, no name, not connectable), which the tool kept.
        let data: AdvertisingData = [.flags(.leGeneralDiscoverableLEOnly), .localName("Sensor", complete: true),
                                     .serviceUUIDs([BluetoothUUID(uuid16: 0x180D)], width: .bits16, complete: true)]
        let response: AdvertisingData = [.manufacturerData(ManufacturerData(companyIdentifier: 0xFFFF, data: [0x52]))]
        let fixture = try CentralFixture(advertising: data, scanResponse: response, airTime: .timed)
        let sighted = Locked<[Sighted]>([])
        let restarted = Locked(false)
        fixture.recorder.onDiscover = { central, _, advertisement in
            let first = restarted.withLock { done in
                defer { done = true }
                return !done
            }
            if first {
                #expect(advertisement[CBAdvertisementDataLinuxScanResponseDataKey] == nil, "the advertisement comes first")
                central.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
                return
            }
            let seen = Sighted(advertising: advertisement[CBAdvertisementDataLinuxAdvertisingDataKey] as? Data,
                               scanResponse: advertisement[CBAdvertisementDataLinuxScanResponseDataKey] as? Data,
                               name: advertisement[CBAdvertisementDataLocalNameKey] as? String,
                               connectable: (advertisement[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue)
            sighted.withLock { $0.append(seen) }
        }
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait({ sighted.current.count >= 6 }, timeout: .seconds(2)))
        let reports = sighted.current
        let whole = Sighted(advertising: Data(data.encoded), scanResponse: Data(response.encoded), name: "Sensor", connectable: true)
        // Each report the advertisement as sent, with the scan response once one was heard.
        for report in reports {
            #expect(report == whole || report == Sighted(advertising: whole.advertising, name: "Sensor", connectable: true), "\(report)")
        }
        #expect(reports.contains(whole))
    }

    @Test func aServiceFilterKeepsOnlyDevicesAdvertisingThoseServices() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: [CBUUID(string: "180F")])
        fixture.radio.run(for: .seconds(2))
        #expect(fixture.recorder.log.count(prefix: "discover") == 0)
        fixture.central.scanForPeripherals(withServices: [CBUUID(string: "180F"), CBUUID(string: "180D")])
        #expect(fixture.wait(for: "discover Sensor"))
    }

    @Test func solicitedServiceUUIDsAlsoMatch() throws {
        let data: AdvertisingData = [.flags(.leGeneralDiscoverableLEOnly), .localName("Remote", complete: true),
                                     .solicitationUUIDs([BluetoothUUID(uuid16: 0x1812)], width: .bits16)]
        let fixture = try CentralFixture(advertising: data)
        fixture.central.scanForPeripherals(withServices: [CBUUID(string: "1812")])
        fixture.radio.run(for: .seconds(1))
        #expect(fixture.recorder.log.count(prefix: "discover") == 0)
        fixture.central.scanForPeripherals(withServices: [CBUUID(string: "180A")],
                                           options: [CBCentralManagerScanOptionSolicitedServiceUUIDsKey: [CBUUID(string: "1812")]])
        #expect(fixture.wait(for: "discover Remote"))
    }

    @Test func identifiersAreStablePerDeviceAndRetrievable() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        let retrieved = fixture.central.retrievePeripherals(withIdentifiers: [peripheral.identifier, UUID()])
        #expect(retrieved.count == 1)
        #expect(retrieved.first === peripheral)
        // A second central on the same radio sees the same identifier for the same device.
        let other = CentralRecorder()
        let second = CBVirtualRadio.withCurrent(fixture.radio) { CBCentralManager(delegate: other, queue: other.queue) }
        #expect(fixture.wait({ other.log.contains("state 5") }))
        second.scanForPeripherals(withServices: nil)
        #expect(fixture.wait({ other.log.contains("discover Sensor") }))
        #expect(other.discovered(named: "Sensor")?.identifier == peripheral.identifier)
    }
}

@Suite struct CentralConnectionTests {
    @Test func connectingGivesConnectedStateAndTheNegotiatedWriteLength() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.connectedSensor()
        #expect(peripheral.state == .connected)
        #expect(peripheral.delegate === fixture.recorder)
        // Both sides offer more than 23: the exchange sets ATT_MTU for the write-command limit.
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) > 20)
        #expect(peripheral.maximumWriteValueLength(for: .withResponse) == 512)
        #expect(peripheral.canSendWriteWithoutResponse)
        // The GAP Device Name replaces the advertised one.
        #expect(fixture.wait(for: "name Sensor GAP"))
        #expect(peripheral.name == "Sensor GAP")
        #expect(fixture.central.retrieveConnectedPeripherals(withServices: [CBUUID(string: "180D")]).first === peripheral)
        #expect(fixture.central.retrieveConnectedPeripherals(withServices: [CBUUID(string: "1800")]).isEmpty)
    }

    @Test func aConnectionNeverTimesOutAndCompletesWhenTheDeviceAppears() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        fixture.central.stopScan()
        try fixture.device.await { device, done in device.host.stopAdvertising(completion: done) }
        fixture.central.connect(peripheral)
        #expect(peripheral.state == .connecting)
        fixture.radio.run(for: .seconds(120))
        #expect(peripheral.state == .connecting)
        #expect(fixture.recorder.log.count(prefix: "fail") == 0)
        try fixture.device.await { device, done in
            device.host.startAdvertising(AdvertisingParameters(intervalMin: 0x20, intervalMax: 0x20, data: [2, 1, 6]), completion: done)
        }
        #expect(fixture.wait { fixture.recorder.log.count(prefix: "connect") == 1 })
        #expect(peripheral.state == .connected)
    }

    @Test func cancellingAPendingConnectionReportsADisconnectionWithoutError() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        try fixture.device.await { device, done in device.host.stopAdvertising(completion: done) }
        fixture.central.connect(peripheral)
        fixture.radio.run(for: .seconds(3))
        fixture.central.cancelPeripheralConnection(peripheral)
        #expect(fixture.wait(for: "disconnect"))
        #expect(peripheral.state == .disconnected)
        // The attempt really stopped: advertising again brings no connection.
        try fixture.device.await { device, done in
            device.host.startAdvertising(AdvertisingParameters(intervalMin: 0x20, intervalMax: 0x20, data: [2, 1, 6]), completion: done)
        }
        fixture.radio.run(for: .seconds(2))
        #expect(peripheral.state == .disconnected)
        #expect(fixture.device.snapshot { $0.connection == nil })
    }

    @Test func cancellingAConnectionDisconnectsWithoutError() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.connectedSensor()
        fixture.central.cancelPeripheralConnection(peripheral)
        // The radio's threads may finish the disconnection before this line runs.
        #expect(peripheral.state == .disconnecting || peripheral.state == .disconnected)
        #expect(fixture.wait(for: "disconnect"))
        #expect(fixture.recorder.error("disconnect") as? CBError == nil)
        #expect(peripheral.state == .disconnected)
        #expect(fixture.wait({ fixture.device.snapshot { $0.connection == nil } }))
    }

    @Test func aDisconnectionByThePeripheralCarriesAnError() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.connectedSensor()
        fixture.device.onLoop { device in device.host.disconnect(device.connection!) }
        #expect(fixture.wait(for: "disconnect error cb 7"))
        #expect(peripheral.state == .disconnected)
        let error = try #require(fixture.recorder.error("disconnect") as? CBError)
        #expect(error.code == .peripheralDisconnected)
    }

    @Test func autoReconnectComesBackAfterThePeripheralLeavesUntilCancelled() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        fixture.central.stopScan()
        fixture.central.connect(peripheral, options: [CBConnectPeripheralOptionEnableAutoReconnect: true])
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "connect") == 1 }))
        // The peripheral ends the link: the app hears it with isReconnecting, and the central
        // goes on connecting by itself.
        fixture.device.onLoop { device in device.host.disconnect(device.connection!) }
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "disconnect reconnecting") == 1 }))
        #expect(peripheral.state == .connecting)
        #expect((fixture.recorder.error("disconnect") as? CBError)?.code == .peripheralDisconnected)
        // The peripheral advertises again: the connection comes back with no call from the app.
        let data: AdvertisingData = [.flags(.leGeneralDiscoverableLEOnly), .localName("Sensor", complete: true)]
        try fixture.device.await { device, done in
            device.host.startAdvertising(AdvertisingParameters(intervalMin: 0x20, intervalMax: 0x20, data: data.encoded),
                                         completion: done)
        }
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "connect") == 2 }))
        #expect(peripheral.state == .connected)
        // Cancelling stops it: the app hears a plain disconnection, and nothing reconnects.
        fixture.central.cancelPeripheralConnection(peripheral)
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "disconnect") == 2 }))
        #expect(fixture.recorder.log.count(prefix: "disconnect reconnecting") == 1)
        #expect(peripheral.state == .disconnected)
        fixture.radio.run(for: .seconds(5))
        #expect(fixture.recorder.log.count(prefix: "connect") == 2 && peripheral.state == .disconnected)
    }

    @Test func aDeviceOutOfRangeTimesTheConnectionOut() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.connectedSensor()
        fixture.device.onLoop { device in device.controller.position = .init(x: 10_000) }
        #expect(fixture.wait(for: "disconnect error cb 6", timeout: .seconds(30)))
        #expect(peripheral.state == .disconnected)
    }

    @Test func aConnectionThatFailsToBeEstablishedReportsDidFailToConnect() throws {
        // Timed air: the link layer needs the peripheral's first packets to establish the link.
        let fixture = try CentralFixture(airTime: .timed)
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        fixture.central.stopScan()
        fixture.central.connect(peripheral)
        // Time stops as the peripheral's controller reports the connection: it walks away
        // before the first connection event.
        #expect(fixture.wait { fixture.device.snapshot { $0.connection != nil } })
        fixture.device.onLoop { device in device.controller.position = .init(x: 10_000) }
        #expect(fixture.wait(for: "fail error cb 10"))
        #expect(peripheral.state == .disconnected)
        #expect(fixture.recorder.log.count(prefix: "connect") == 0)
        #expect(fixture.recorder.log.count(prefix: "disconnect") == 0)
    }

    @Test func releasingThePeripheralCancelsItsConnection() throws {
        let fixture = try CentralFixture()
        weak var released: CBPeripheral?
        do {
            let peripheral = try fixture.connectedSensor()
            released = peripheral
            fixture.recorder.forget()
        }
        // Blocks and timers that captured it (callbacks, the waits' deadlines) let go as the
        // queues and the loop move on: a few steps of virtual time at most.
        for _ in 0..<20 where released != nil {
            fixture.recorder.queue.sync {}
            fixture.radio.run(for: .milliseconds(100))
        }
        #expect(released == nil)
        #expect(fixture.wait({ fixture.device.snapshot { $0.connection == nil } }))
        #expect(fixture.recorder.log.count(prefix: "disconnect") == 0)
    }

    @Test func readRSSIReportsTheLinksSignal() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.connectedSensor()
        peripheral.readRSSI()
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "rssi") == 1 }))
        let line = try #require(fixture.recorder.log.all.first { $0.hasPrefix("rssi") })
        let value = try #require(Int(line.split(separator: " ")[1]))
        #expect((-100 ... -20).contains(value))
    }

    @Test func linuxSetConnectionIntervalMovesTheLinkAndRefusesWhatTheLinkLayerCannotDo() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.connectedSensor()
        // 7.5 ms: six 1.25 ms steps, below the 15 ms floor of the peripheral manager's latency.
        // No delegate callback follows a parameter update: time runs, then the peer's link is read.
        peripheral.linuxSetConnectionInterval(0.0075)
        fixture.radio.run(for: .seconds(1))
        #expect(fixture.device.snapshot { $0.connection?.interval } == 6)
        peripheral.linuxSetConnectionInterval(0.1)
        fixture.radio.run(for: .seconds(2))
        #expect(fixture.device.snapshot { $0.connection?.interval } == 80)
        peripheral.linuxSetConnectionInterval(0.005)
        peripheral.linuxSetConnectionInterval(.nan)
        #expect(APIMisuse.reports.contains { $0.contains("linuxSetConnectionInterval(_:) with 0.005 s") })
        fixture.radio.run(for: .seconds(1))
        #expect(fixture.device.snapshot { $0.connection?.interval } == 80)
    }

    @Test func callsNeedAConnection() throws {
        let fixture = try CentralFixture()
        fixture.central.scanForPeripherals(withServices: nil)
        #expect(fixture.wait(for: "discover Sensor"))
        let peripheral = try #require(fixture.recorder.discovered(named: "Sensor"))
        peripheral.delegate = fixture.recorder
        peripheral.discoverServices(nil)
        peripheral.readRSSI()
        fixture.radio.run(for: .seconds(1))
        #expect(fixture.recorder.log.count(prefix: "services") == 0)
        #expect(APIMisuse.reports.contains { $0.contains("can only accept discoverServices(_:) while connected") })
    }
}

@Suite struct CentralGATTTests {
    @Test func discoveryFillsTheObjectTreeAndKeepsIdentityWhenRepeated() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let services = try #require(peripheral.services)
        #expect(services.map(\.uuid) == [CBUUID(string: "1800"), CBUUID(string: "1801"), CBUUID(string: "180D"), CentralFixture.customService])
        #expect(services.allSatisfy { $0.peripheral === peripheral && $0.isPrimary })
        let heartRate = services[2]
        #expect(heartRate.characteristics?.map(\.uuid) == [CBUUID(string: "2A37"), CBUUID(string: "2A38")])
        let measurement = try fixture.characteristic(CBUUID(string: "2A37"), of: peripheral)
        #expect(measurement.properties == .notify)
        #expect(measurement.service === heartRate)
        // Again, all and by UUID: the same objects.
        peripheral.discoverServices([CBUUID(string: "180D")])
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "services") == 2 }))
        #expect(peripheral.services?[2] === heartRate)
        #expect(peripheral.services?.count == 4)
        peripheral.discoverCharacteristics([CBUUID(string: "2A37")], for: heartRate)
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "characteristics 180D") == 2 }))
        #expect(heartRate.characteristics?.first === measurement)
        #expect(heartRate.characteristics?.count == 2)
        // Included services: the heart rate service object itself.
        let custom = services[3]
        peripheral.discoverIncludedServices(nil, for: custom)
        #expect(fixture.wait(for: "included \(CentralFixture.customService.uuidString) 180D"))
        #expect(custom.includedServices?.first === heartRate)
        // Descriptors, with Apple's value types.
        let location = try fixture.characteristic(CBUUID(string: "2A38"), of: peripheral)
        peripheral.discoverDescriptors(for: location)
        #expect(fixture.wait(for: "descriptors 2A38 2901"))
        let description = try #require(location.descriptors?.first)
        #expect(description.characteristic === location)
        peripheral.readValue(for: description)
        #expect(fixture.wait(for: "descriptor 2901 Body location"))
        #expect(description.value as? String == "Body location")
    }

    @Test func readsLongValuesAndReportsErrors() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let location = try fixture.characteristic(CBUUID(string: "2A38"), of: peripheral)
        peripheral.readValue(for: location)
        #expect(fixture.wait(for: "value 2A38 01"))
        #expect(location.value == Data([1]))
        let long = try fixture.characteristic(CentralFixture.long, of: peripheral)
        peripheral.readValue(for: long)
        #expect(fixture.wait(for: "value \(CentralFixture.long.uuidString) 600 bytes"))
        #expect(long.value == Data(fixture.longValue))
        // A characteristic that cannot be read: Apple's error, nothing sent.
        let writable = try fixture.characteristic(CentralFixture.writable, of: peripheral)
        peripheral.readValue(for: writable)
        #expect(fixture.wait(for: "value \(CentralFixture.writable.uuidString) error att 2"))
        let error = try #require(fixture.recorder.error("value \(CentralFixture.writable.uuidString)") as? CBATTError)
        #expect(error.code == .readNotPermitted)
    }

    @Test func writesWithResponseIncludingLongOnes() throws {
        let fixture = try CentralFixture(preferredMTU: 100)
        let peripheral = try fixture.exploredSensor()
        let writable = try fixture.characteristic(CentralFixture.writable, of: peripheral)
        peripheral.writeValue(Data([1, 2, 3]), for: writable, type: .withResponse)
        #expect(fixture.wait(for: "wrote \(CentralFixture.writable.uuidString)"))
        let long = Data((0..<300).map { UInt8(truncatingIfNeeded: $0) })
        peripheral.writeValue(long, for: writable, type: .withResponse)
        #expect(fixture.wait({ fixture.recorder.log.count(of: "wrote \(CentralFixture.writable.uuidString)") == 2 }))
        // The long write arrives as one batch of prepared parts that rebuild the value.
        let parts = fixture.writes.current.dropFirst().map(\.1)
        #expect(parts.count > 1)
        #expect(parts.reduce([], +) == [UInt8](long))
        // Writing a read-only characteristic: an error, no write.
        let location = try fixture.characteristic(CBUUID(string: "2A38"), of: peripheral)
        peripheral.writeValue(Data([9]), for: location, type: .withResponse)
        #expect(fixture.wait(for: "wrote 2A38 error att 3"))
    }

    @Test func writesWithoutResponseFollowTheLinksBackPressure() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let writable = try fixture.characteristic(CentralFixture.writable, of: peripheral)
        let total = 500
        let sent = Locked(0)
        let pump: @Sendable (CBPeripheral) -> Void = { peripheral in
            while sent.current < total, peripheral.canSendWriteWithoutResponse {
                let n = sent.withLock { n -> Int in n += 1; return n }
                peripheral.writeValue(Data([UInt8(truncatingIfNeeded: n), UInt8(n >> 8)]), for: writable, type: .withoutResponse)
            }
        }
        fixture.recorder.onReadyToWrite = pump
        // From this thread, which holds the radio's clock: the first writes are on their way
        // before time may move (work on other queues outside callbacks does not hold it).
        pump(peripheral)
        #expect(fixture.wait({ fixture.writes.current.count == total }, timeout: .seconds(60)))
        // Every write arrived, in order, and the app had to wait for readiness on the way.
        let values = fixture.writes.current.map { Int($0.1[0]) | Int($0.1[1]) << 8 }
        #expect(values == Array(1...total))
        #expect(fixture.recorder.log.count(of: "ready to write") > 0)
        #expect(fixture.recorder.log.count(prefix: "wrote") == 0)
    }

    /// A write with response (or a read) after writes without response that still wait for
    /// the link's buffers goes after them, not past them: a stream's commit (a firmware
    /// update's last control write) must not arrive before the stream's last chunks.
    @Test func aRequestWaitsForTheWritesWithoutResponseQueuedBeforeIt() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let writable = try fixture.characteristic(CentralFixture.writable, of: peripheral)
        // All at once, from this thread (which holds the radio's clock): more than the link's
        // buffers take, so most wait in the link's queue when the write with response comes.
        let total = 32
        #expect(peripheral.canSendWriteWithoutResponse)
        for n in 1...total where peripheral.canSendWriteWithoutResponse {
            peripheral.writeValue(Data([UInt8(n)]), for: writable, type: .withoutResponse)
        }
        peripheral.writeValue(Data([0xFF, 0xFF]), for: writable, type: .withResponse)
        #expect(fixture.wait(for: "wrote \(CentralFixture.writable.uuidString)"))
        let values = fixture.writes.current.map(\.1)
        #expect(values.count == total + 1)
        #expect(values.last == [0xFF, 0xFF])
        #expect(values.dropLast() == ArraySlice((1...total).map { [UInt8($0)] }))
    }

    @Test func notificationsAndIndicationsArriveAsValueUpdates() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let measurement = try fixture.characteristic(CBUUID(string: "2A37"), of: peripheral)
        peripheral.setNotifyValue(true, for: measurement)
        #expect(fixture.wait(for: "notifying 2A37 true"))
        #expect(measurement.isNotifying)
        let handle = fixture.heartRate.characteristics[0].value
        fixture.device.onLoop { [server = fixture.server] _ in
            for beat in 61...65 { server.updateValue([0, UInt8(beat)], forCharacteristic: handle) }
        }
        #expect(fixture.wait(for: "value 2A37 0041"))
        #expect(fixture.recorder.values.suffix(5) == (61...65).map { Data([0, UInt8($0)]) })
        // Indicate-only: subscribing enables indications.
        let indicating = try fixture.characteristic(CentralFixture.indicating, of: peripheral)
        peripheral.setNotifyValue(true, for: indicating)
        #expect(fixture.wait(for: "notifying \(CentralFixture.indicating.uuidString) true"))
        let indicationHandle = fixture.custom.characteristics[2].value
        _ = fixture.device.onLoop { [server = fixture.server] _ in server.updateValue([7, 7], forCharacteristic: indicationHandle) }
        #expect(fixture.wait(for: "value \(CentralFixture.indicating.uuidString) 0707"))
        // Off again.
        peripheral.setNotifyValue(false, for: measurement)
        #expect(fixture.wait(for: "notifying 2A37 false"))
        #expect(!measurement.isNotifying)
        // A characteristic that cannot notify.
        let location = try fixture.characteristic(CBUUID(string: "2A38"), of: peripheral)
        peripheral.setNotifyValue(true, for: location)
        #expect(fixture.wait(for: "notifying 2A38 false error att 6"))
    }

    /// A notified value goes over the old value's bytes only when nobody else holds them: a
    /// value the app kept stays as it was (`Data` is copy-on-write), one it let go of is reused.
    @Test func aNotifiedValueNeverChangesAValueTheAppKept() {
        let characteristic = CBCharacteristic(uuid: CBUUID(string: "2A37"), properties: [.notify], value: nil, service: nil)
        let first = [UInt8](repeating: 1, count: 20)
        characteristic.synchronized { characteristic.takeNotifiedValue(first) }
        let kept = characteristic.value
        characteristic.synchronized { characteristic.takeNotifiedValue([UInt8](repeating: 2, count: 20)) }
        #expect(kept == Data(first))
        #expect(characteristic.value == Data(repeating: 2, count: 20))
        // Nobody holds the second now: the third is written over its bytes.
        let storage = characteristic.value?.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        characteristic.synchronized { characteristic.takeNotifiedValue([UInt8](repeating: 3, count: 20)) }
        #expect(characteristic.value?.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) } == storage)
        #expect(characteristic.value == Data(repeating: 3, count: 20))
        // Another length, short (inline) values and an empty one each become the value.
        for bytes: [UInt8] in [[4, 4, 4], [5, 5, 5], Array(0..<40), []] {
            characteristic.synchronized { characteristic.takeNotifiedValue(bytes) }
            #expect(characteristic.value == Data(bytes))
        }
    }

    @Test func serviceChangedInvalidatesTheServicesInItsRange() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        #expect(peripheral.services?.count == 4)
        let custom = fixture.custom.id
        fixture.device.onLoop { [server = fixture.server] _ in try? server.removeService(custom) }
        #expect(fixture.wait(for: "modified \(CentralFixture.customService.uuidString)"))
        #expect(peripheral.services?.map(\.uuid) == [CBUUID(string: "1800"), CBUUID(string: "1801"), CBUUID(string: "180D")])
        peripheral.discoverServices(nil)
        #expect(fixture.wait({ fixture.recorder.log.count(prefix: "services") == 2 }))
        #expect(peripheral.services?.count == 3)
    }

    @Test func theCCCDCannotBeWrittenDirectly() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let measurement = try fixture.characteristic(CBUUID(string: "2A37"), of: peripheral)
        peripheral.discoverDescriptors(for: measurement)
        #expect(fixture.wait(for: "descriptors 2A37 2902"))
        let cccd = try #require(measurement.descriptors?.first)
        peripheral.writeValue(Data([1, 0]), for: cccd)
        peripheral.readValue(for: cccd)
        #expect(fixture.wait(for: "descriptor 2902 0"))
        #expect(fixture.recorder.log.count(prefix: "wrote descriptor") == 0)
        #expect(cccd.value as? NSNumber == 0)
    }

    @Test func anUnansweredRequestTimesOutAndEndsTheConnection() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        // A server that takes the read and never answers.
        let held = Locked<[Any]>([])
        fixture.device.onLoop { [server = fixture.server] _ in server.onRead = { _, respond in held.withLock { $0.append(respond) } } }
        let long = try fixture.characteristic(CentralFixture.long, of: peripheral)
        peripheral.readValue(for: long)
        #expect(fixture.wait(for: "value \(CentralFixture.long.uuidString) error cb 6", timeout: .seconds(40)))
        #expect(fixture.wait(for: "disconnect error cb 6"))
        #expect(peripheral.state == .disconnected)
    }
}
