import Foundation
import CoreBluetooth

/// A central manager's and its peripherals' delegate that writes down every callback as a
/// line ("discover Sensor", "value 2A38 01", …) and keeps the objects it was given, for tests
/// written against Apple's API. Callbacks arrive on `queue`; tests read through the lock.
public final class CentralRecorder: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    public let log = EventLog()
    public let queue = DispatchQueue(label: "central-recorder")
    private let lock = NSLock()
    private var discoveredStorage: [UUID: CBPeripheral] = [:]
    private var advertisementsStorage: [UUID: [String: Any]] = [:]
    private var errorsStorage: [String: any Error] = [:]
    private var valuesStorage: [Data] = []
    /// Called for every discovery on the delegate queue (after recording it).
    public var onDiscover: ((CBCentralManager, CBPeripheral, [String: Any]) -> Void)?
    /// Called when a peripheral is ready for more writes without response.
    public var onReadyToWrite: ((CBPeripheral) -> Void)?

    public override init() { super.init() }

    public func discovered(named name: String) -> CBPeripheral? {
        lock.withLock { discoveredStorage.values.first { $0.name == name } }
    }
    public func advertisement(of peripheral: CBPeripheral) -> [String: Any]? {
        lock.withLock { advertisementsStorage[peripheral.identifier] }
    }
    /// Drops the peripheral objects the recorder holds.
    public func forget() { lock.withLock { discoveredStorage = [:] } }
    /// The last error a callback named `key` ("read 2A38", "disconnect", …) carried.
    public func error(_ key: String) -> (any Error)? { lock.withLock { errorsStorage[key] } }
    /// Every characteristic value delivered, in order.
    public var values: [Data] { lock.withLock { valuesStorage } }

    private func record(_ key: String, _ error: (any Error)?, detail: String = "") {
        if let error { lock.withLock { errorsStorage[key] = error } }
        let suffix = error.map { " error \(($0 as NSError).domain == CBATTErrorDomain ? "att" : "cb") \(($0 as NSError).code)" } ?? ""
        log.append(detail.isEmpty ? key + suffix : "\(key) \(detail)\(suffix)")
    }

    // MARK: CBCentralManagerDelegate

    public func centralManagerDidUpdateState(_ central: CBCentralManager) { log.append("state \(central.state.rawValue)") }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        lock.withLock {
            discoveredStorage[peripheral.identifier] = peripheral
            advertisementsStorage[peripheral.identifier] = advertisementData
        }
        log.append("discover \(peripheral.name ?? "?")")
        onDiscover?(central, peripheral, advertisementData)
    }

    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        log.append("connect \(peripheral.name ?? "?")")
    }

    public func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        record("fail", error)
    }

    /// The iOS 17 form: a disconnection with auto-reconnect under way is written down as
    /// "disconnect reconnecting …"; the others go to the older form, as Apple's default does.
    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
                               timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?) {
        guard isReconnecting else { return centralManager(central, didDisconnectPeripheral: peripheral, error: error) }
        record("disconnect", error, detail: "reconnecting \(peripheral.name ?? "?")")
    }

    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        record("disconnect", error)
    }

    // MARK: CBPeripheralDelegate

    public func peripheralDidUpdateName(_ peripheral: CBPeripheral) { log.append("name \(peripheral.name ?? "?")") }

    public func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) {
        log.append("modified \(invalidatedServices.map(\.uuid.uuidString).joined(separator: ","))")
    }

    public func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) {
        record("rssi", error, detail: "\(RSSI.intValue)")
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        record("services", error, detail: (peripheral.services ?? []).map(\.uuid.uuidString).joined(separator: ","))
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverIncludedServicesFor service: CBService, error: Error?) {
        record("included \(service.uuid.uuidString)", error,
               detail: (service.includedServices ?? []).map(\.uuid.uuidString).joined(separator: ","))
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        record("characteristics \(service.uuid.uuidString)", error,
               detail: (service.characteristics ?? []).map(\.uuid.uuidString).joined(separator: ","))
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverDescriptorsFor characteristic: CBCharacteristic, error: Error?) {
        record("descriptors \(characteristic.uuid.uuidString)", error,
               detail: (characteristic.descriptors ?? []).map(\.uuid.uuidString).joined(separator: ","))
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        if error == nil, let value = characteristic.value { lock.withLock { valuesStorage.append(value) } }
        let value = characteristic.value.map { $0.count > 16 ? "\($0.count) bytes" : $0.map { String(format: "%02x", $0) }.joined() } ?? "nil"
        record("value \(characteristic.uuid.uuidString)", error, detail: error == nil ? value : "")
    }

    public func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        record("wrote \(characteristic.uuid.uuidString)", error)
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        record("notifying \(characteristic.uuid.uuidString)", error, detail: "\(characteristic.isNotifying)")
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor descriptor: CBDescriptor, error: Error?) {
        record("descriptor \(descriptor.uuid.uuidString)", error, detail: descriptor.value.map { "\($0)" } ?? "nil")
    }

    public func peripheral(_ peripheral: CBPeripheral, didWriteValueFor descriptor: CBDescriptor, error: Error?) {
        record("wrote descriptor \(descriptor.uuid.uuidString)", error)
    }

    public func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) {
        log.append("ready to write")
        onReadyToWrite?(peripheral)
    }

    public func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        record("l2cap", error)
    }
}
