@testable import CoreBluetooth
import Foundation
import HCI
import Testing

// Test doubles as an app's own tests write them against Apple's API: subclasses overriding the
// `open` members of CBPeripheral, CBService and CBCharacteristic (issue 18). The initializers
// are internal, as Apple's are not public either; `@testable import` reaches them.

/// A peripheral whose name, state, services and identifier are set by the test, and which
/// records reads, writes and subscriptions instead of sending them.
final class FakePeripheral: CBPeripheral, @unchecked Sendable {
    var fakeIdentifier = UUID()
    var fakeName: String?
    var fakeState = CBPeripheralState.connected
    var fakeServices: [CBService]?
    var canSend = true
    private(set) var reads: [CBUUID] = []
    private(set) var writes: [(value: Data, uuid: CBUUID, type: CBCharacteristicWriteType)] = []
    private(set) var subscriptions: [(enabled: Bool, uuid: CBUUID)] = []

    init(name: String?, manager: CBCentralManager) {
        fakeName = name
        super.init(identifier: UUID(), address: LEAddress(.randomDevice, BluetoothAddress("C0:FF:EE:00:00:01")!),
                   name: "not the fake's name", manager: manager)
    }

    override var identifier: UUID { fakeIdentifier }
    override var name: String? { fakeName }
    override var state: CBPeripheralState { fakeState }
    override var services: [CBService]? { fakeServices }
    override var canSendWriteWithoutResponse: Bool { canSend }

    override func readValue(for characteristic: CBCharacteristic) {
        reads.append(characteristic.uuid)
    }

    override func writeValue(_ data: Data, for characteristic: CBCharacteristic, type: CBCharacteristicWriteType) {
        writes.append((data, characteristic.uuid, type))
    }

    override func setNotifyValue(_ enabled: Bool, for characteristic: CBCharacteristic) {
        subscriptions.append((enabled, characteristic.uuid))
    }
}

/// A service whose characteristics are set by the test.
final class FakeService: CBService, @unchecked Sendable {
    let fakeUUID: CBUUID
    let fakeCharacteristics: [CBCharacteristic]

    init(uuid: CBUUID, characteristics: [CBCharacteristic]) {
        fakeUUID = uuid
        fakeCharacteristics = characteristics
        super.init(uuid: CBUUID(string: "FFFF"), isPrimary: true, peripheral: nil, handles: nil)
    }

    override var uuid: CBUUID { fakeUUID }
    override var characteristics: [CBCharacteristic]? { fakeCharacteristics }
}

/// A characteristic whose UUID, properties, value and notifying state are set by the test.
final class FakeCharacteristic: CBCharacteristic, @unchecked Sendable {
    var fakeUUID: CBUUID
    var fakeProperties: CBCharacteristicProperties
    var fakeValue: Data?
    var fakeIsNotifying = false

    init(uuid: CBUUID, properties: CBCharacteristicProperties, value: Data? = nil) {
        fakeUUID = uuid
        fakeProperties = properties
        fakeValue = value
        // The stored values differ from the fake's: the test sees which ones the code reads.
        super.init(uuid: CBUUID(string: "FFFF"), properties: [], value: nil, service: nil)
    }

    override var uuid: CBUUID { fakeUUID }
    override var properties: CBCharacteristicProperties { fakeProperties }
    override var value: Data? { fakeValue }
    override var isNotifying: Bool { fakeIsNotifying }
}

/// An app's testable logic, written only against Apple's API: refresh a connected sensor's
/// readable characteristics, subscribe to those that notify, and report what it knows.
enum SensorLogic {
    /// Asks for every readable value and subscribes where not yet notifying; returns the
    /// peripheral's name, or nil when it is not connected (nothing is sent then).
    static func refresh(_ peripheral: CBPeripheral) -> String? {
        guard peripheral.state == .connected else { return nil }
        for service in peripheral.services ?? [] {
            for characteristic in service.characteristics ?? [] {
                if characteristic.properties.contains(.read) { peripheral.readValue(for: characteristic) }
                if characteristic.properties.contains(.notify) && !characteristic.isNotifying {
                    peripheral.setNotifyValue(true, for: characteristic)
                }
            }
        }
        return peripheral.name ?? peripheral.identifier.uuidString
    }

    /// Sends a command without response when the peripheral can take one, else with response.
    static func send(_ command: Data, to characteristic: CBCharacteristic, of peripheral: CBPeripheral) {
        let type: CBCharacteristicWriteType = peripheral.canSendWriteWithoutResponse
            && characteristic.properties.contains(.writeWithoutResponse) ? .withoutResponse : .withResponse
        peripheral.writeValue(command, for: characteristic, type: type)
    }

    /// The battery level (0x2A19), from the characteristic's last value.
    static func batteryLevel(of peripheral: CBPeripheral) -> Int? {
        let characteristics = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
        guard let battery = characteristics.first(where: { $0.uuid == CBUUID(string: "2A19") }),
              let byte = battery.value?.first else { return nil }
        return Int(byte)
    }
}

@Suite struct OpenMembersTests {
    let radio = CBVirtualRadio(clock: .virtual)
    let manager: CBCentralManager
    let battery = FakeCharacteristic(uuid: CBUUID(string: "2A19"), properties: [.read, .notify], value: Data([87]))
    let heartRate = FakeCharacteristic(uuid: CBUUID(string: "2A37"), properties: .notify)
    let control = FakeCharacteristic(uuid: CBUUID(string: "2A39"), properties: [.write, .writeWithoutResponse])
    let name = FakeCharacteristic(uuid: CBUUID(string: "2A00"), properties: .read, value: Data("Strap".utf8))
    let peripheral: FakePeripheral

    init() {
        let radio = radio
        manager = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: nil, queue: nil) }
        peripheral = FakePeripheral(name: "Fake HRM", manager: manager)
        peripheral.fakeServices = [
            FakeService(uuid: CBUUID(string: "180F"), characteristics: [battery]),
            FakeService(uuid: CBUUID(string: "180D"), characteristics: [heartRate, control, name]),
        ]
    }

    @Test func appLogicReadsAndSubscribesThroughTheOverrides() {
        heartRate.fakeIsNotifying = true
        #expect(SensorLogic.refresh(peripheral) == "Fake HRM")
        // Reads went to the fake (not the stack), for the characteristics the fake says are readable.
        #expect(peripheral.reads == [CBUUID(string: "2A19"), CBUUID(string: "2A00")])
        // The heart rate characteristic already notifies (the fake says so): only the battery is subscribed.
        #expect(peripheral.subscriptions.map { $0.uuid } == [CBUUID(string: "2A19")])
        #expect(peripheral.subscriptions.allSatisfy { $0.enabled })
        #expect(SensorLogic.batteryLevel(of: peripheral) == 87)
    }

    @Test func notConnectedSendsNothing() {
        peripheral.fakeState = .disconnected
        #expect(SensorLogic.refresh(peripheral) == nil)
        #expect(peripheral.reads.isEmpty && peripheral.subscriptions.isEmpty)
    }

    @Test func nameFallsBackToTheOverriddenIdentifier() {
        peripheral.fakeName = nil
        let identifier = UUID()
        peripheral.fakeIdentifier = identifier
        #expect(SensorLogic.refresh(peripheral) == identifier.uuidString)
        #expect(peripheral.identifier == identifier)
    }

    @Test func writesFollowTheOverriddenReadiness() {
        SensorLogic.send(Data([1]), to: control, of: peripheral)
        peripheral.canSend = false
        SensorLogic.send(Data([2]), to: control, of: peripheral)
        control.fakeProperties = .write
        peripheral.canSend = true
        SensorLogic.send(Data([3]), to: control, of: peripheral)
        #expect(peripheral.writes.map { $0.value } == [Data([1]), Data([2]), Data([3])])
        #expect(peripheral.writes.map { $0.type } == [.withoutResponse, .withResponse, .withResponse])
        #expect(peripheral.writes.allSatisfy { $0.uuid == CBUUID(string: "2A39") })
    }

    @Test func characteristicOverridesReplaceTheStoredValues() {
        let plain: CBCharacteristic = battery
        #expect(plain.uuid == CBUUID(string: "2A19"))
        #expect(plain.properties == [.read, .notify])
        #expect(plain.value == Data([87]))
        #expect(!plain.isNotifying)
        battery.fakeIsNotifying = true
        battery.fakeValue = Data([12])
        #expect(plain.isNotifying)
        #expect(plain.value == Data([12]))
        // The peripheral's own stored state is not what the app sees.
        let asPeripheral: CBPeripheral = peripheral
        #expect(asPeripheral.name == "Fake HRM")
        #expect(asPeripheral.state == .connected)
        #expect(asPeripheral.services?.count == 2)
    }
}
