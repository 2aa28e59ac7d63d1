import ATT
import AssignedNumbers
@testable import CoreBluetooth
import Dispatch
import Foundation
import GAP
import GATT
import HCI
import HostStack
import Testing
import TestSupport
import Scheduling

/// Records what a peripheral manager's delegate hears, and answers requests with handlers the
/// test sets (they run on the delegate queue).
private final class Recorder: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    private let lock = NSLock()
    private var errorsStorage: [String: Error] = [:]
    private var centralsStorage: [CBCentral] = []
    private var writesStorage: [[CBATTRequest]] = []
    private var readsStorage: [CBATTRequest] = []
    private var publishedStorage: [CBL2CAPPSM] = []
    private var unpublishedStorage: [(psm: CBL2CAPPSM, failed: Bool)] = []
    var publishedPSMs: [CBL2CAPPSM] { locked { publishedStorage } }
    var unpublished: [(psm: CBL2CAPPSM, failed: Bool)] { locked { unpublishedStorage } }
    private var onReadStorage: (@Sendable (CBPeripheralManager, CBATTRequest) -> Void)?
    private var onWriteStorage: (@Sendable (CBPeripheralManager, [CBATTRequest]) -> Void)?
    private var onReadyStorage: (@Sendable (CBPeripheralManager) -> Void)?

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    var onRead: (@Sendable (CBPeripheralManager, CBATTRequest) -> Void)? {
        get { locked { onReadStorage } }
        set { locked { onReadStorage = newValue } }
    }
    var onWrite: (@Sendable (CBPeripheralManager, [CBATTRequest]) -> Void)? {
        get { locked { onWriteStorage } }
        set { locked { onWriteStorage = newValue } }
    }
    var onReady: (@Sendable (CBPeripheralManager) -> Void)? {
        get { locked { onReadyStorage } }
        set { locked { onReadyStorage = newValue } }
    }
    func error(_ key: String) -> Error? { locked { errorsStorage[key] } }
    var centrals: [CBCentral] { locked { centralsStorage } }
    var writes: [[CBATTRequest]] { locked { writesStorage } }
    var reads: [CBATTRequest] { locked { readsStorage } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        log.append("state \(peripheral.state.rawValue)")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        locked { errorsStorage["add \(service.uuid)"] = error }
        log.append("added \(service.uuid) \(error == nil ? "ok" : "error")")
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        locked { errorsStorage["advertising"] = error }
        log.append("advertising \(error == nil ? "ok" : "error")")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        locked { if !centralsStorage.contains(where: { $0 === central }) { centralsStorage.append(central) } }
        log.append("subscribe \(characteristic.uuid)")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        log.append("unsubscribe \(characteristic.uuid)")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        locked { readsStorage.append(request) }
        log.append("read \(request.characteristic.uuid) \(request.offset)")
        onRead?(peripheral, request)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        locked { writesStorage.append(requests) }
        log.append("write \(requests.count)")
        onWrite?(peripheral, requests)
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {
        log.append("ready")
        onReady?(peripheral)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        locked {
            if let error { errorsStorage["l2cap"] = error } else { publishedStorage.append(PSM) }
        }
        log.append("l2cap published")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        locked { unpublishedStorage.append((PSM, error != nil)) }
    }
}

/// Values a raw client received for one characteristic, in order.
private final class Received: @unchecked Sendable {
    private let values = Locked<[[UInt8]]>([])
    func append(_ value: [UInt8]) {
        values.withLock { $0.append(value) }
        CallbackWaiters.shared.callbackFinished()
    }
    var all: [[UInt8]] { values.current }
    var count: Int { values.withLock { $0.count } }
}

/// A powered-on peripheral manager on a virtual radio of its own.
/// Every advertisement a central scanning for everything reports (with duplicates).
private final class AdvertisementCollector: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var seenStorage: [[String: Any]] = []
    var seen: [[String: Any]] { lock.withLock { seenStorage } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn {
            central.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        lock.withLock { seenStorage.append(advertisementData) }
    }
}

private struct Rig {
    let radio = CBVirtualRadio(clock: .virtual)
    let recorder = Recorder()
    let manager: CBPeripheralManager

    init() throws {
        let (radio, recorder) = (radio, recorder)
        manager = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: recorder, queue: DispatchQueue(label: "peripheral manager delegate"))
        }
        guard radio.run(until: { recorder.log.contains("state 5") }, timeout: .seconds(5)) else {
            throw RawDeviceError("the peripheral manager did not power on")
        }
    }

    /// Adds `service` and waits for `didAdd`; returns its error.
    @discardableResult
    func add(_ service: CBMutableService) -> Error? {
        let recorder = recorder
        let before = recorder.log.count(prefix: "added \(service.uuid)")
        manager.add(service)
        let done = radio.run(until: { recorder.log.count(prefix: "added \(service.uuid)") > before }, timeout: .seconds(5))
        #expect(done, "no didAdd for \(service.uuid)")
        return recorder.error("add \(service.uuid)")
    }

    @discardableResult
    func advertise(_ data: [String: Any]) -> Error? {
        let recorder = recorder
        let before = recorder.log.count(prefix: "advertising")
        manager.startAdvertising(data)
        let done = radio.run(until: { recorder.log.count(prefix: "advertising") > before }, timeout: .seconds(5))
        #expect(done, "no didStartAdvertising")
        return recorder.log.all.last { $0.hasPrefix("advertising") } == "advertising ok" ? nil : recorder.error("advertising")
    }

    /// Lets time pass in small steps until `condition` holds, checking it on this thread. For
    /// conditions that read a raw device's loop-confined state: `radio.run(until:)` may check
    /// its condition on a delegate thread while holding the waiter's lock, and a hop to a loop
    /// that is itself reporting a callback then deadlocks.
    func poll(timeout: Duration = .seconds(5), _ condition: () -> Bool) -> Bool {
        var waited = Duration.zero
        while !condition() {
            guard waited < timeout else { return false }
            radio.run(for: .milliseconds(5))
            waited += .milliseconds(5)
        }
        return true
    }

    var address: LEAddress {
        // The manager advertises from its static random address.
        LEAddress(.randomDevice, BluetoothAddress(manager.linuxDeviceAddress!)!)
    }

    /// A raw central connected to the manager (which starts advertising if it is not).
    func connectCentral(x: Double = 1) throws -> RawDevice {
        if !manager.isAdvertising { advertise([CBAdvertisementDataLocalNameKey: "PMTest"]) }
        let central = try RawDevice(radio: radio, position: .init(x: x))
        let address = self.address
        try central.await { device, done in device.host.connect(to: address, completion: done) }
        guard poll({ central.snapshot { $0.client != nil } }) else {
            throw RawDeviceError("the raw central did not connect")
        }
        return central
    }
}

/// What a raw client found of one service.
private struct Found: Sendable {
    var service: DiscoveredService
    var characteristics: [DiscoveredCharacteristic]

    func characteristic(_ uuid: String) -> DiscoveredCharacteristic {
        characteristics.first { $0.uuid == BluetoothUUID(uuid)! }!
    }
}

extension RawDevice {
    fileprivate func find(_ uuid: String) throws -> Found {
        let services = try self.await { device, done in device.client!.discoverPrimaryServices(completion: done) }
        guard let service = services.first(where: { $0.uuid == BluetoothUUID(uuid)! }) else {
            throw RawDeviceError("service \(uuid) not found among \(services.map(\.uuid))")
        }
        let characteristics = try self.await { device, done in device.client!.discoverCharacteristics(of: service, completion: done) }
        return Found(service: service, characteristics: characteristics)
    }

    fileprivate func read(_ handle: ATTHandle) throws -> [UInt8] {
        try self.await { device, done in device.client!.readValue(of: handle, completion: done) }
    }

    fileprivate func readResult(_ handle: ATTHandle) -> Result<[UInt8], GATTClientError> {
        do { return .success(try read(handle)) } catch let error as GATTClientError { return .failure(error) } catch {
            return .failure(.protocolViolation("\(error)"))
        }
    }

    /// Nil when the write succeeded, else why it failed.
    fileprivate func write(_ value: [UInt8], to handle: ATTHandle) -> GATTClientError? {
        do {
            try self.await { device, done in device.client!.writeValue(value, to: handle, completion: done) }
            return nil
        } catch let error as GATTClientError { return error } catch {
            return .protocolViolation("\(error)")
        }
    }

    fileprivate func subscribe(_ characteristic: DiscoveredCharacteristic, into received: Received) throws -> GATTClientConfiguration {
        try self.await { device, done in
            device.client!.subscribe(to: characteristic, onValue: { received.append($0) }, completion: done)
        }
    }
}

/// Answers reads the way Apple's guide does: Invalid Offset past the end, else the bytes
/// from the offset on.
@Sendable private func answerRead(with value: Data) -> @Sendable (CBPeripheralManager, CBATTRequest) -> Void {
    { manager, request in
        guard request.offset <= value.count else {
            manager.respond(to: request, withResult: .invalidOffset)
            return
        }
        request.value = value.subdata(in: request.offset..<value.count)
        manager.respond(to: request, withResult: .success)
    }
}

private let serviceUUID = CBUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
private let dynamicUUID = CBUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E")
private let notifyUUID = CBUUID(string: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E")
private let indicateUUID = CBUUID(string: "6E400004-B5A3-F393-E0A9-E50E24DCCA9E")
private let cachedUUID = CBUUID(string: "2A29")

/// A primary service with a dynamic read/write characteristic, a notifying one, an indicating
/// one and a cached one.
private func makeService() -> CBMutableService {
    let service = CBMutableService(type: serviceUUID, primary: true)
    service.characteristics = [
        CBMutableCharacteristic(type: dynamicUUID, properties: [.read, .write, .writeWithoutResponse], value: nil,
                                permissions: [.readable, .writeable]),
        CBMutableCharacteristic(type: notifyUUID, properties: [.read, .notify], value: nil, permissions: [.readable]),
        CBMutableCharacteristic(type: indicateUUID, properties: [.indicate], value: nil, permissions: []),
        CBMutableCharacteristic(type: cachedUUID, properties: [.read], value: Data("Acme".utf8), permissions: [.readable]),
    ]
    return service
}

@Suite struct PeripheralManagerTests {
    // MARK: Publishing

    @Test func aServiceWithAnIncludedServiceIsDiscoveredWhole() throws {
        let rig = try Rig()
        let battery = CBMutableService(type: CBUUID(string: "180F"), primary: false)
        battery.characteristics = [CBMutableCharacteristic(type: CBUUID(string: "2A19"), properties: [.read],
                                                           value: Data([99]), permissions: [.readable])]
        let main = makeService()
        main.includedServices = [battery]
        let described = CBMutableCharacteristic(type: CBUUID(string: "2A6E"), properties: [.read, .notify], value: nil,
                                                permissions: [.readable])
        described.descriptors = [
            CBMutableDescriptor(type: CBUUID(string: CBUUIDCharacteristicUserDescriptionString), value: "Temperature"),
            CBMutableDescriptor(type: CBUUID(string: CBUUIDCharacteristicFormatString), value: Data([0x0E, 0xFE, 0x2F, 0x27, 0x01, 0, 0])),
        ]
        main.characteristics = (main.characteristics ?? []) + [described]

        // Included before it is published: an error.
        let early = rig.add(main)
        #expect((early as? CBError)?.code == .invalidParameters)

        #expect(rig.add(battery) == nil)
        #expect(rig.add(main) == nil)
        #expect(main.characteristics?.count == 5)

        let central = try rig.connectCentral()
        let services = try central.await { device, done in device.client!.discoverPrimaryServices(completion: done) }
        #expect(services.map(\.uuid) == [.genericAccessService, .genericAttributeService, serviceUUID.bluetoothUUID])
        let found = try central.find(serviceUUID.uuidString)
        let included = try central.await { device, done in device.client!.discoverIncludedServices(of: found.service, completion: done) }
        #expect(included.map(\.uuid) == [BluetoothUUID("180F")!])
        #expect(found.characteristics.map(\.uuid) == [dynamicUUID, notifyUUID, indicateUUID, cachedUUID,
                                                      CBUUID(string: "2A6E")].map(\.bluetoothUUID))
        #expect(found.characteristic(dynamicUUID.uuidString).properties == [.read, .write, .writeWithoutResponse])
        #expect(found.characteristic(indicateUUID.uuidString).properties == [.indicate])

        let temperature = found.characteristic("2A6E")
        let descriptors = try central.await { device, done in device.client!.discoverDescriptors(of: temperature, completion: done) }
        #expect(descriptors.map(\.uuid) == [.clientCharacteristicConfiguration, .characteristicUserDescription,
                                            .characteristicPresentationFormat])
        #expect(try central.read(descriptors[1].handle) == Array("Temperature".utf8))
        #expect(try central.read(descriptors[2].handle) == [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0, 0])

        // The secondary service's cached value, found through the include.
        let batteryService = DiscoveredService(uuid: included[0].uuid, handles: included[0].handles, isPrimary: false)
        let level = try central.await { device, done in device.client!.discoverCharacteristics(of: batteryService, completion: done) }
        #expect(try central.read(level[0].valueHandle) == [99])

        // The GAP Device Name is the advertised name.
        let gap = try central.find("1800")
        #expect(try central.read(gap.characteristic("2A00").valueHandle) == Array("PMTest".utf8))

        // Edits after publishing do not reach the database.
        main.characteristics = []
        #expect(try central.find(serviceUUID.uuidString).characteristics.count == 5)
    }

    @Test func aCachedCharacteristicMustBeReadOnly() throws {
        let rig = try Rig()
        let service = CBMutableService(type: CBUUID(string: "1234"), primary: true)
        service.characteristics = [CBMutableCharacteristic(type: CBUUID(string: "2A00"), properties: [.read, .write],
                                                           value: Data([1]), permissions: [.readable, .writeable])]
        #expect((rig.add(service) as? CBError)?.code == .invalidParameters)

        let notifying = CBMutableService(type: CBUUID(string: "1235"), primary: true)
        notifying.characteristics = [CBMutableCharacteristic(type: CBUUID(string: "2A01"), properties: [.read, .notify],
                                                             value: Data([1]), permissions: [.readable])]
        #expect((rig.add(notifying) as? CBError)?.code == .invalidParameters)
    }

    @Test func onlyUserDescriptionAndPresentationFormatDescriptorsMayBeAdded() throws {
        let rig = try Rig()
        for type in [CBUUIDCharacteristicValidRangeString, CBUUIDClientCharacteristicConfigurationString,
                     CBUUIDCharacteristicExtendedPropertiesString] {
            let characteristic = CBMutableCharacteristic(type: CBUUID(string: "2A6E"), properties: [.read], value: nil,
                                                         permissions: [.readable])
            characteristic.descriptors = [CBMutableDescriptor(type: CBUUID(string: type), value: Data([0, 1]))]
            let service = CBMutableService(type: CBUUID(string: "181A"), primary: true)
            service.characteristics = [characteristic]
            #expect((rig.add(service) as? CBError)?.code == .invalidParameters, "descriptor \(type)")
        }
        // A User Description must be a String.
        let characteristic = CBMutableCharacteristic(type: CBUUID(string: "2A6E"), properties: [.read], value: nil,
                                                     permissions: [.readable])
        characteristic.descriptors = [CBMutableDescriptor(type: CBUUID(string: CBUUIDCharacteristicUserDescriptionString),
                                                          value: Data([1]))]
        let service = CBMutableService(type: CBUUID(string: "181A"), primary: true)
        service.characteristics = [characteristic]
        #expect((rig.add(service) as? CBError)?.code == .invalidParameters)
        // Nothing failed half-way: the service can still be published once fixed.
        characteristic.descriptors = [CBMutableDescriptor(type: CBUUID(string: CBUUIDCharacteristicUserDescriptionString),
                                                          value: "ok")]
        #expect(rig.add(service) == nil)
    }

    @Test func removingServices() throws {
        let rig = try Rig()
        let inner = CBMutableService(type: CBUUID(string: "180F"), primary: true)
        let outer = CBMutableService(type: CBUUID(string: "180A"), primary: true)
        outer.includedServices = [inner]
        rig.add(inner)
        rig.add(outer)
        // Included by a published service: refused.
        rig.manager.remove(inner)
        let central = try rig.connectCentral()
        #expect(try central.await { device, done in device.client!.discoverPrimaryServices(completion: done) }.count == 4)
        #expect(APIMisuse.reports.contains { $0.contains("remove(_:) of service 180F") })
        rig.manager.remove(outer)
        rig.manager.remove(inner)
        // Removing has no callback, and through a daemon it reaches the database a message
        // later (as through bluetoothd): let the calls land before the central looks.
        rig.radio.run(for: .milliseconds(1))
        let left = try central.await { device, done in device.client!.discoverPrimaryServices(completion: done) }
        #expect(left.map(\.uuid) == [.genericAccessService, .genericAttributeService])
        rig.add(inner)
        rig.add(makeService())
        rig.manager.removeAllServices()
        rig.radio.run(for: .milliseconds(1))
        let none = try central.await { device, done in device.client!.discoverPrimaryServices(completion: done) }
        #expect(none.count == 2)
    }

    // MARK: Reads

    @Test func aCachedValueIsReadWithoutTheDelegate() throws {
        let rig = try Rig()
        rig.add(makeService())
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        #expect(try central.read(found.characteristic(cachedUUID.uuidString).valueHandle) == Array("Acme".utf8))
        #expect(rig.recorder.log.count(prefix: "read") == 0)
    }

    @Test func dynamicReadsReachTheDelegateWithTheirOffsets() throws {
        let rig = try Rig()
        rig.add(makeService())
        let value = Data((0..<50).map { UInt8($0) })
        rig.recorder.onRead = answerRead(with: value)
        let central = try rig.connectCentral()
        let handle = try central.find(serviceUUID.uuidString).characteristic(dynamicUUID.uuidString).valueHandle

        // ATT_MTU 23: a Read of 22 bytes, then Read Blobs at 22 and 44.
        #expect(try central.read(handle) == [UInt8](value))
        #expect(rig.recorder.reads.map(\.offset) == [0, 22, 44])
        #expect(rig.recorder.reads.allSatisfy { $0.characteristic.uuid == dynamicUUID })
        #expect(rig.recorder.reads.allSatisfy { $0.central === rig.recorder.reads[0].central })

        // Past the end: the app's Invalid Offset goes on the wire.
        #expect(throws: ATTBearerError.errorResponse(.init(requestOpcode: .readBlobRequest, attributeHandle: handle,
                                                           errorCode: .invalidOffset))) {
            try central.await { device, done in
                device.bearer!.request(.readBlobRequest(.init(attributeHandle: handle, valueOffset: 60))) { done($0) }
            }
        }
    }

    @Test func readErrorsAndDoubleAnswers() throws {
        let rig = try Rig()
        rig.add(makeService())
        let central = try rig.connectCentral()
        let handle = try central.find(serviceUUID.uuidString).characteristic(dynamicUUID.uuidString).valueHandle

        rig.recorder.onRead = { manager, request in manager.respond(to: request, withResult: .insufficientAuthorization) }
        #expect(central.readResult(handle) == .failure(.attributeError(.insufficientAuthorization, handle: handle)))

        // Answered twice: the first answer counts, the second is misuse and ignored.
        rig.recorder.onRead = { manager, request in
            request.value = Data([7])
            manager.respond(to: request, withResult: .success)
            manager.respond(to: request, withResult: .unlikelyError)
        }
        #expect(try central.read(handle) == [7])
        // The second answer comes after the first reached the central: wait for the callback.
        #expect(rig.radio.run(until: { APIMisuse.reports.contains { $0.contains("already answered") } }, timeout: .seconds(1)))

        // Never answered: the client's transaction times out (30 s of virtual time), nothing breaks.
        rig.recorder.onRead = { _, _ in }
        #expect(central.readResult(handle) == .failure(.timeout))
        // An answer after the central is gone is ignored.
        let late = rig.recorder.reads.last!
        try central.await { device, done in device.host.disconnect(device.connection!) { done($0) } }
        _ = rig.poll { central.snapshot { $0.connection == nil } }
        rig.radio.run(for: .milliseconds(100))
        rig.manager.respond(to: late, withResult: .success)
    }

    // MARK: Writes

    @Test func writesReachTheDelegate() throws {
        let rig = try Rig()
        rig.add(makeService())
        rig.recorder.onWrite = { manager, requests in manager.respond(to: requests[0], withResult: .success) }
        let central = try rig.connectCentral()
        let handle = try central.find(serviceUUID.uuidString).characteristic(dynamicUUID.uuidString).valueHandle

        // A Write Request: one request.
        #expect(central.write([1, 2, 3], to: handle) == nil)
        #expect(rig.recorder.writes.count == 1)
        #expect(rig.recorder.writes[0].map(\.value) == [Data([1, 2, 3])])
        #expect(rig.recorder.writes[0][0].offset == 0)
        #expect(rig.recorder.writes[0][0].characteristic.uuid == dynamicUUID)

        // A Write Command: delivered too.
        #expect(central.onLoop { $0.client!.writeWithoutResponse([9], to: handle) })
        rig.radio.run(until: { rig.recorder.writes.count == 2 }, timeout: .seconds(5))
        #expect(rig.recorder.writes.last?.map(\.value) == [Data([9])])

        // A long write (prepared parts of ATT_MTU − 5 = 18 bytes): one batch, answered once.
        let long = (0..<60).map { UInt8($0) }
        #expect(central.write(long, to: handle) == nil)
        #expect(rig.recorder.writes.count == 3)
        let batch = rig.recorder.writes[2]
        #expect(batch.map(\.offset) == [0, 18, 36, 54])
        #expect(batch.reduce(Data()) { $0 + $1.value! } == Data(long))

        // An error result reaches the client as its ATT error, for a request and a batch.
        rig.recorder.onWrite = { manager, requests in manager.respond(to: requests[0], withResult: .invalidAttributeValueLength) }
        #expect(central.write([1], to: handle) == .attributeError(.invalidAttributeValueLength, handle: handle))
        #expect(central.write(long, to: handle) == .attributeError(.invalidAttributeValueLength, handle: handle))

        // Writing a read-only characteristic never reaches the delegate.
        let count = rig.recorder.writes.count
        let cached = try central.find(serviceUUID.uuidString).characteristic(cachedUUID.uuidString).valueHandle
        #expect(central.write([1], to: cached) == .attributeError(.writeNotPermitted, handle: cached))
        // An unknown handle: Invalid Handle.
        #expect(central.write([1], to: 0x0F00) == .attributeError(.invalidHandle, handle: 0x0F00))
        #expect(rig.recorder.writes.count == count)
    }

    @Test func malformedRequestsAreAnsweredAndTheServerGoesOn() throws {
        let rig = try Rig()
        rig.add(makeService())
        rig.recorder.onRead = answerRead(with: Data([42]))
        let central = try rig.connectCentral()
        let handle = try central.find(serviceUUID.uuidString).characteristic(dynamicUUID.uuidString).valueHandle
        // A Write Request cut short, a Read Request with a stray octet, an unknown opcode, a
        // Write Command to no attribute: straight onto the ATT channel.
        for pdu: [UInt8] in [[0x12, 0x03], [0x0A, 0x03, 0x00, 0x00], [0x3F, 1, 2], [0x52, 0x00, 0x0F, 1]] {
            #expect(central.onLoop { $0.connection!.l2cap.att.send(pdu) })
            rig.radio.run(for: .milliseconds(100))
        }
        #expect(rig.recorder.writes.isEmpty)
        #expect(try central.read(handle) == [42])
    }

    // MARK: Advertising

    @Test func advertisingAcceptsOnlyTheNameAndServiceUUIDs() throws {
        let rig = try Rig()
        let error = rig.advertise([CBAdvertisementDataLocalNameKey: "X",
                                   CBAdvertisementDataManufacturerDataKey: Data([0x4C, 0, 1])])
        #expect((error as? CBError)?.code == .invalidParameters)
        #expect(!rig.manager.isAdvertising)
        let wrongType = rig.advertise([CBAdvertisementDataServiceUUIDsKey: ["180D"]])
        #expect((wrongType as? CBError)?.code == .invalidParameters)
        #expect(!rig.manager.isAdvertising)
    }

    @Test func advertisingDataAsAScannerSeesIt() throws {
        let rig = try Rig()
        let uuids = [CBUUID(string: "180D"), serviceUUID]
        let name = "A rather long peripheral name"
        #expect(rig.advertise([CBAdvertisementDataLocalNameKey: name, CBAdvertisementDataServiceUUIDsKey: uuids]) == nil)
        #expect(rig.manager.isAdvertising)
        // Already advertising.
        #expect((rig.advertise([CBAdvertisementDataLocalNameKey: "Other"]) as? CBError)?.code == .alreadyAdvertising)
        #expect(rig.manager.isAdvertising)

        let scanner = try RawDevice(radio: rig.radio, position: .init(x: 2))
        let address = rig.address
        try scanner.await { device, done in device.host.startScanning(active: true, filterDuplicates: false, completion: done) }
        let seen = rig.poll {
            let reports = scanner.snapshot { $0.reports.filter { $0.address == address } }
            return reports.contains { $0.isScanResponse } && reports.contains { !$0.isScanResponse }
        }
        #expect(seen)
        let reports = scanner.snapshot { $0.reports.filter { $0.address == address } }
        let adv = AdvertisingData(bytes: reports.first { !$0.isScanResponse }!.data)
        let scanResponse = AdvertisingData(bytes: reports.first { $0.isScanResponse }!.data)
        #expect(reports.first { !$0.isScanResponse }!.isConnectable)
        #expect(adv.flags == [.leGeneralDiscoverableMode, .brEdrNotSupported])
        #expect(adv.serviceUUIDs == uuids.map(\.bluetoothUUID))
        #expect(adv.localName == nil)
        #expect(scanResponse.localName == name)
        #expect(scanResponse.hasCompleteLocalName)

        rig.manager.stopAdvertising()
        #expect(!rig.manager.isAdvertising)
        rig.radio.run(for: .milliseconds(50))
        let before = scanner.snapshot { $0.reports.count }
        rig.radio.run(for: .seconds(1))
        #expect(scanner.snapshot { $0.reports.filter { $0.address == address }.count } <= before)
        #expect(rig.advertise([CBAdvertisementDataLocalNameKey: "Again"]) == nil)
    }

    @Test func linuxManufacturerDataReachesACentralAndAloneMakesABeacon() throws {
        let rig = try Rig()
        let key = CBAdvertisementDataLinuxManufacturerDataKey
        // Not Data, shorter than a company identifier, longer than fits beside the flags.
        for bad: Any in ["4c00", Data([0x4C]), Data(repeating: 0xFF, count: 27)] {
            #expect((rig.advertise([key: bad]) as? CBError)?.code == .invalidParameters)
        }
        #expect(!rig.manager.isAdvertising)
        let beacon = CBPeripheralManager.linuxIBeaconAdvertisementData(
            proximityUUID: UUID(uuidString: "E20A39F4-73F5-4BC4-A12F-17D1AD07A961")!, major: 1122, minor: 3344, measuredPower: -56)
        let expected = Data([0x4C, 0x00, 0x02, 0x15, 0xE2, 0x0A, 0x39, 0xF4, 0x73, 0xF5, 0x4B, 0xC4, 0xA1, 0x2F, 0x17, 0xD1,
                             0xAD, 0x07, 0xA9, 0x61, 0x04, 0x62, 0x0D, 0x10, 0xC8])
        #expect(beacon[key] as? Data == expected)
        #expect(rig.advertise(beacon) == nil)
        #expect(rig.manager.isAdvertising)

        let scanner = AdvertisementCollector()
        let central = CBVirtualRadio.withCurrent(rig.radio) {
            CBCentralManager(delegate: scanner, queue: DispatchQueue(label: "scanner"))
        }
        #expect(rig.radio.run(until: { !scanner.seen.isEmpty }, timeout: .seconds(5)))
        let first = try #require(scanner.seen.first)
        #expect(first[CBAdvertisementDataManufacturerDataKey] as? Data == expected)
        #expect((first[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue == false)
        #expect(first[CBAdvertisementDataLocalNameKey] == nil)

        // With a name and a service it stays connectable, the data still advertised.
        rig.manager.stopAdvertising()
        let company = Data([0xFF, 0xFF, 0x48, 0x42])
        #expect(rig.advertise([CBAdvertisementDataLocalNameKey: "HeartRate", CBAdvertisementDataServiceUUIDsKey: [CBUUID(string: "180D")],
                               key: company]) == nil)
        #expect(rig.radio.run(until: { scanner.seen.contains { $0[CBAdvertisementDataLocalNameKey] as? String == "HeartRate" } },
                              timeout: .seconds(5)))
        let named = try #require(scanner.seen.last { $0[CBAdvertisementDataLocalNameKey] as? String == "HeartRate" })
        #expect(named[CBAdvertisementDataManufacturerDataKey] as? Data == company)
        #expect((named[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue == true)
        #expect((named[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID]) == [CBUUID(string: "180D")])
        _ = central
    }

    @Test func advertisingGoesOnWhileACentralIsConnected() throws {
        let rig = try Rig()
        rig.add(makeService())
        _ = try rig.connectCentral()
        rig.radio.run(for: .milliseconds(100))
        #expect(rig.manager.isAdvertising)
        let scanner = try RawDevice(radio: rig.radio, position: .init(x: 3))
        let address = rig.address
        try scanner.await { device, done in device.host.startScanning(active: false, filterDuplicates: false, completion: done) }
        let seen = rig.poll(timeout: .seconds(3)) { scanner.snapshot { $0.reports.contains { $0.address == address } } }
        #expect(seen)
    }

    // MARK: Subscriptions and updates

    @Test func subscriptionsAreReportedAndEndWithTheConnection() throws {
        let rig = try Rig()
        let service = makeService()
        rig.add(service)
        let notifying = service.characteristics![1] as! CBMutableCharacteristic
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        let received = Received()

        #expect(try central.subscribe(found.characteristic(notifyUUID.uuidString), into: received) == .notification)
        let ok1 = rig.radio.run(until: { rig.recorder.log.contains("subscribe \(notifyUUID)") }, timeout: .seconds(5))
        #expect(ok1)
        let subscriber = try #require(rig.recorder.centrals.first)
        #expect(notifying.subscribedCentrals?.count == 1)
        #expect(notifying.subscribedCentrals?.first === subscriber)
        #expect(subscriber.maximumUpdateValueLength == 20)

        try central.await { device, done in
            device.client!.unsubscribe(from: found.characteristic(notifyUUID.uuidString), completion: done)
        }
        let ok2 = rig.radio.run(until: { rig.recorder.log.count(of: "unsubscribe \(notifyUUID)") == 1 }, timeout: .seconds(5))
        #expect(ok2)
        #expect(notifying.subscribedCentrals?.isEmpty != false)

        // Subscribed again, then gone: unsubscribed from everything it had.
        _ = try central.subscribe(found.characteristic(notifyUUID.uuidString), into: received)
        _ = try central.subscribe(found.characteristic(indicateUUID.uuidString), into: received)
        let ok3 = rig.radio.run(until: { rig.recorder.log.count(prefix: "subscribe") == 3 }, timeout: .seconds(5))
        #expect(ok3)
        // Same CBCentral object for all of one central's callbacks.
        #expect(rig.recorder.centrals.count == 1)
        try central.await { device, done in device.host.disconnect(device.connection!) { done($0) } }
        let ok4 = rig.radio.run(until: {
            rig.recorder.log.count(of: "unsubscribe \(notifyUUID)") == 2 && rig.recorder.log.count(of: "unsubscribe \(indicateUUID)") == 1
        }, timeout: .seconds(5))
        #expect(ok4)
        #expect(notifying.subscribedCentrals?.isEmpty != false)
    }

    @Test func updateValueNotifiesAndIndicates() throws {
        let rig = try Rig()
        let service = makeService()
        rig.add(service)
        let notifying = service.characteristics![1] as! CBMutableCharacteristic
        let indicating = service.characteristics![2] as! CBMutableCharacteristic
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        let notifications = Received()
        let indications = Received()
        _ = try central.subscribe(found.characteristic(notifyUUID.uuidString), into: notifications)
        #expect(try central.subscribe(found.characteristic(indicateUUID.uuidString), into: indications) == .indication)
        let ok5 = rig.radio.run(until: { rig.recorder.log.count(prefix: "subscribe") == 2 }, timeout: .seconds(5))
        #expect(ok5)

        #expect(rig.manager.updateValue(Data([1, 2]), for: notifying, onSubscribedCentrals: nil))
        #expect(rig.manager.updateValue(Data([3]), for: indicating, onSubscribedCentrals: nil))
        #expect(rig.manager.updateValue(Data([4]), for: indicating, onSubscribedCentrals: rig.recorder.centrals))
        // Longer than maximumUpdateValueLength (20): cut.
        #expect(rig.manager.updateValue(Data(repeating: 5, count: 40), for: notifying, onSubscribedCentrals: nil))
        let ok6 = rig.radio.run(until: { notifications.count == 2 && indications.count == 2 }, timeout: .seconds(5))
        #expect(ok6)
        #expect(notifications.all == [[1, 2], [UInt8](repeating: 5, count: 20)])
        #expect(indications.all == [[3], [4]])

        // A characteristic nobody subscribed to: accepted, sent to nobody.
        let cached = service.characteristics![0] as! CBMutableCharacteristic
        #expect(rig.manager.updateValue(Data([1]), for: cached, onSubscribedCentrals: nil))
    }

    @Test func updateValueRefusesUnderLoadAndEveryAcceptedValueArrivesInOrder() throws {
        let rig = try Rig()
        let service = makeService()
        rig.add(service)
        let notifying = service.characteristics![1] as! CBMutableCharacteristic
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        let received = Received()
        _ = try central.subscribe(found.characteristic(notifyUUID.uuidString), into: received)
        let ok7 = rig.radio.run(until: { rig.recorder.log.contains("subscribe \(notifyUUID)") }, timeout: .seconds(5))
        #expect(ok7)

        // The classic sender: send until refused, go on when ready.
        let total = 2000
        let next = Locked(0)
        let refusals = Locked(0)
        let send: @Sendable (CBPeripheralManager) -> Void = { manager in
            while true {
                let n = next.current
                guard n < total else { return }
                let value = withUnsafeBytes(of: UInt32(n).littleEndian) { Data($0) }
                guard manager.updateValue(value, for: notifying, onSubscribedCentrals: nil) else {
                    refusals.withLock { $0 += 1 }
                    return
                }
                next.withLock { $0 += 1 }
            }
        }
        rig.recorder.onReady = send
        let queue = DispatchQueue(label: "sender")
        queue.sync { send(rig.manager) }
        #expect(refusals.current >= 1)
        let ok8 = rig.radio.run(until: { received.count == total }, timeout: .seconds(120))
        #expect(ok8)
        let values = received.all.map { Int(UInt32($0[0]) | UInt32($0[1]) << 8 | UInt32($0[2]) << 16 | UInt32($0[3]) << 24) }
        #expect(values == Array(0..<total))
        #expect(rig.recorder.log.count(of: "ready") >= refusals.current)
    }

    @Test func maximumUpdateValueLengthFollowsTheMTUExchange() throws {
        let rig = try Rig()
        let service = makeService()
        rig.add(service)
        let notifying = service.characteristics![1] as! CBMutableCharacteristic
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        let received = Received()
        _ = try central.subscribe(found.characteristic(notifyUUID.uuidString), into: received)
        let ok9 = rig.radio.run(until: { rig.recorder.log.contains("subscribe \(notifyUUID)") }, timeout: .seconds(5))
        #expect(ok9)
        let subscriber = try #require(rig.recorder.centrals.first)
        #expect(subscriber.maximumUpdateValueLength == 20)

        let mtu = try central.await { device, done in device.client!.exchangeMTU(completion: done) }
        #expect(mtu == 517)
        rig.radio.run(for: .milliseconds(10))
        #expect(subscriber.maximumUpdateValueLength == 514)
        #expect(rig.manager.updateValue(Data(repeating: 0xAB, count: 600), for: notifying, onSubscribedCentrals: nil))
        let ok10 = rig.radio.run(until: { received.count == 1 }, timeout: .seconds(5))
        #expect(ok10)
        #expect(received.all.first?.count == 514)
    }

    @Test func serviceChangedReachesASubscribedClientAfterAdd() throws {
        let rig = try Rig()
        rig.add(makeService())
        let central = try rig.connectCentral()
        let gattService = try central.find("1801")
        let changes = Received()
        #expect(try central.subscribe(gattService.characteristic("2A05"), into: changes) == .indication)

        let added = CBMutableService(type: CBUUID(string: "180F"), primary: true)
        added.characteristics = [CBMutableCharacteristic(type: CBUUID(string: "2A19"), properties: [.read, .notify],
                                                         value: nil, permissions: [.readable])]
        #expect(rig.add(added) == nil)
        let ok11 = rig.radio.run(until: { changes.count == 1 }, timeout: .seconds(5))
        #expect(ok11)
        let range = try #require(changes.all.first)
        let start = UInt16(range[0]) | UInt16(range[1]) << 8
        let end = UInt16(range[2]) | UInt16(range[3]) << 8
        let services = try central.await { device, done in device.client!.discoverPrimaryServices(completion: done) }
        let battery = try #require(services.first { $0.uuid == BluetoothUUID("180F")! })
        #expect(battery.handles == ATTHandle(start)...ATTHandle(end))
    }

    @Test func setDesiredConnectionLatencyUpdatesTheConnection() throws {
        let rig = try Rig()
        rig.add(makeService())
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        _ = try central.subscribe(found.characteristic(notifyUUID.uuidString), into: Received())
        let ok12 = rig.radio.run(until: { rig.recorder.log.contains("subscribe \(notifyUUID)") }, timeout: .seconds(5))
        #expect(ok12)
        let subscriber = try #require(rig.recorder.centrals.first)
        rig.manager.setDesiredConnectionLatency(.high, for: subscriber)
        let updated = rig.poll(timeout: .seconds(10)) {
            central.snapshot { ($0.connection?.interval).map { (0x0048...0x0078).contains($0) } ?? false }
        }
        #expect(updated)
        rig.manager.setDesiredConnectionLatency(.low, for: subscriber)
        let ok13 = rig.poll(timeout: .seconds(10)) {
            central.snapshot { ($0.connection?.interval).map { (0x000C...0x0018).contains($0) } ?? false }
        }
        #expect(ok13)
    }

    // MARK: State

    @Test(.disabled(if: DaemonMode.isOn, "blocks the radio's loop while the manager is made (a test daemon starts its controller on that loop first), then uses linuxSetVirtualPower, which toggles an in-process controller only"))
    func callsBeforePoweredOnAreIgnored() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        // The radio's loop is kept busy, so the device cannot power on before the calls.
        let gate = DispatchSemaphore(value: 0)
        radio.loop.execute { gate.wait() }
        let recorder = Recorder()
        let manager = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: recorder, queue: DispatchQueue(label: "early"))
        }
        let service = makeService()
        manager.add(service)
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Early"])
        #expect(!manager.updateValue(Data([1]), for: service.characteristics![1] as! CBMutableCharacteristic,
                                     onSubscribedCentrals: nil))
        manager.removeAllServices()
        gate.signal()
        #expect(APIMisuse.reports.contains { $0.contains("add(_:)") && $0.contains("powered on") })
        #expect(APIMisuse.reports.contains { $0.contains("startAdvertising(_:)") && $0.contains("powered on") })
        #expect(APIMisuse.reports.contains { $0.contains("updateValue") && $0.contains("powered on") })
        let on = radio.run(until: { recorder.log.contains("state 5") }, timeout: .seconds(5))
        #expect(on)
        radio.run(for: .milliseconds(200))
        #expect(recorder.log.all == ["state 5"])
        #expect(!manager.isAdvertising)

        // Powered off: ignored as well.
        manager.linuxSetVirtualPower(false)
        let off = radio.run(until: { recorder.log.contains("state 4") }, timeout: .seconds(5))
        #expect(off)
        manager.add(service)
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Off"])
        radio.run(for: .milliseconds(200))
        #expect(recorder.log.all == ["state 5", "state 4"])
    }

    @Test(.disabled(if: DaemonMode.isOn, "linuxSetVirtualPower toggles an in-process virtual controller; a daemon's controller is the daemon's (no power cycling through the protocol)"))
    func powerOffEndsConnectionsAdvertisingAndTheDatabase() throws {
        let rig = try Rig()
        let service = makeService()
        rig.add(service)
        let central = try rig.connectCentral()
        let found = try central.find(serviceUUID.uuidString)
        _ = try central.subscribe(found.characteristic(notifyUUID.uuidString), into: Received())
        let ok15 = rig.radio.run(until: { rig.recorder.log.contains("subscribe \(notifyUUID)") }, timeout: .seconds(5))
        #expect(ok15)

        rig.manager.linuxSetVirtualPower(false)
        let ok16 = rig.radio.run(until: { rig.recorder.log.contains("state 4") }, timeout: .seconds(5))
        #expect(ok16)
        #expect(rig.recorder.log.contains("unsubscribe \(notifyUUID)"))
        #expect(!rig.manager.isAdvertising)

        rig.manager.linuxSetVirtualPower(true)
        let ok17 = rig.radio.run(until: { rig.recorder.log.count(of: "state 5") == 2 }, timeout: .seconds(5))
        #expect(ok17)
        // The database was cleared: the same service can be published again.
        #expect(rig.add(service) == nil)
    }

    @Test
    func publishingL2CAPChannelsAllocatesDynamicPSMsAndUnpublishingFreesThem() throws {
        let rig = try Rig()
        rig.manager.publishL2CAPChannel(withEncryption: false)
        rig.manager.publishL2CAPChannel(withEncryption: true)
        #expect(rig.radio.run(until: { rig.recorder.log.count(of: "l2cap published") == 2 }, timeout: .seconds(5)))
        #expect(rig.recorder.error("l2cap") == nil)
        // The lowest free dynamic PSMs, in order (Vol 3 Part A §4.22: 0x0080–0x00FF).
        #expect(rig.recorder.publishedPSMs == [0x80, 0x81])
        rig.manager.unpublishL2CAPChannel(0x80)
        rig.manager.unpublishL2CAPChannel(0x80)
        #expect(rig.radio.run(until: { rig.recorder.unpublished.count == 2 }, timeout: .seconds(5)))
        // The second unpublish names a PSM no longer published: an error, nothing else happens.
        #expect(rig.recorder.unpublished.map(\.psm) == [0x80, 0x80])
        #expect(rig.recorder.unpublished.map(\.failed) == [false, true])
        rig.manager.publishL2CAPChannel(withEncryption: false)
        #expect(rig.radio.run(until: { rig.recorder.log.count(of: "l2cap published") == 3 }, timeout: .seconds(5)))
        #expect(rig.recorder.publishedPSMs == [0x80, 0x81, 0x80])

        // A PSM the program names (Linux extension): an SPSM, once; not twice, not outside LE's.
        rig.manager.linuxPublishL2CAPChannel(0x0027, withEncryption: false)
        rig.manager.linuxPublishL2CAPChannel(0x0027, withEncryption: false)
        rig.manager.linuxPublishL2CAPChannel(0x0100, withEncryption: false)
        #expect(rig.radio.run(until: { rig.recorder.log.count(of: "l2cap published") == 6 }, timeout: .seconds(5)))
        #expect(rig.recorder.publishedPSMs == [0x80, 0x81, 0x80, 0x27])
        #expect((rig.recorder.error("l2cap") as? CBError)?.code == .invalidParameters)
    }
}
