import CoreBluetooth
import Foundation

/// What the book's ch. 5–10 centrals share (book-apps.md §1.5): scan, connect to the peripheral
/// advertising `targetName`, discover one service's characteristic (or everything), and leave by
/// disconnecting. The examples subclass it and override the hooks (`found`, `valueUpdated`, …);
/// the delegate methods themselves stay here, so Swift's dispatch reaches the overrides.
public class BookCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    public let log: ExampleLog
    let targetName: String
    /// The service to discover; nil for every service.
    let serviceUuid: CBUUID?
    /// The characteristic to find in it; nil for every characteristic.
    let characteristicUuid: CBUUID?
    let queue: DispatchQueue?
    private let onDone: @Sendable (_ failure: String?) -> Void
    private(set) public var centralManager: CBCentralManager!

    private struct Connection {
        var peripheral: CBPeripheral?
        var characteristic: CBCharacteristic?
        var connected = false
        var leaving = false
        var done = false
        var failure: String?
    }
    private let connection = Protected(Connection())

    public var isConnected: Bool { connection.value.connected }
    /// Finished: what it came for is done (or failed) and it has disconnected.
    public var isDone: Bool { connection.value.done }
    /// Why it gave up, if it did.
    public var failure: String? { connection.value.failure }
    var peripheral: CBPeripheral? { connection.value.peripheral }
    var characteristic: CBCharacteristic? { connection.value.characteristic }

    init(targetName: String, serviceUuid: CBUUID?, characteristicUuid: CBUUID?, queue: DispatchQueue?,
         position: [Double]?, log: ExampleLog, onDone: @escaping @Sendable (_ failure: String?) -> Void) {
        self.targetName = targetName
        self.serviceUuid = serviceUuid
        self.characteristicUuid = characteristicUuid
        self.queue = queue
        self.log = log
        self.onDone = onDone
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    // MARK: Hooks

    /// The characteristic is found (connected, services and characteristics discovered).
    func found(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral) {}
    /// Characteristics of `service` are discovered (by default: look for `characteristicUuid`).
    func characteristicsDiscovered(for service: CBService, on peripheral: CBPeripheral) {
        guard let target = service.characteristics?.first(where: { $0.uuid == characteristicUuid }) else {
            return leave(failure: "no characteristic \(characteristicUuid?.uuidString ?? "?") in service \(service.uuid.uuidString)")
        }
        connection.update { $0.characteristic = target }
        found(target, on: peripheral)
    }
    /// Connected: by default, discover the service.
    func connected(_ peripheral: CBPeripheral) {
        peripheral.discoverServices(serviceUuid.map { [$0] })
    }
    func valueUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {}
    func valueWritten(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {}
    func notificationStateUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {}
    func rssiRead(_ rssi: NSNumber, on peripheral: CBPeripheral, error: Error?) {}

    /// Disconnects ("leaving view - disconnecting from peripheral"); done once disconnected.
    func leave(failure: String? = nil) {
        if let failure { log("error: \(failure)") }
        let peripheral = connection.update { state -> CBPeripheral? in
            state.failure = state.failure ?? failure
            state.leaving = true
            return state.connected ? state.peripheral : nil
        }
        if let peripheral {
            log("leaving view - disconnecting from peripheral")
            centralManager.cancelPeripheralConnection(peripheral)
        } else {
            centralManager.stopScan()
            finish()
        }
    }

    private func finish() {
        let first = connection.update { state -> Bool in
            defer { state.done = true }
            return !state.done
        }
        if first { onDone(failure) }
    }

    // MARK: CBCentralManagerDelegate

    public func centralManagerDidUpdateState(_ central: CBCentralManager) {
        switch central.state {
        case .poweredOn:
            log("scanning for \(targetName)")
            central.scanForPeripherals(withServices: nil, options: nil)
        case .unsupported, .unauthorized:
            leave(failure: "Bluetooth unavailable")
        default:
            log("Bluetooth unavailable")
        }
    }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard advertisementData[CBAdvertisementDataLocalNameKey] as? String == targetName else { return }
        let isNew = connection.update { state -> Bool in
            guard state.peripheral == nil, !state.leaving else { return false }
            state.peripheral = peripheral
            return true
        }
        guard isNew else { return }
        central.stopScan()
        log("will connect to \(peripheral.identifier.uuidString)")
        central.connect(peripheral, options: nil)
    }

    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        connection.update { $0.connected = true }
        log("Connected Peripheral: \(peripheral.name ?? targetName)")
        peripheral.delegate = self
        connected(peripheral)
    }

    public func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        log("failed to connect")
        connection.update { $0.failure = $0.failure ?? "failed to connect: \(error?.localizedDescription ?? "unknown error")" }
        finish()
    }

    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        log("Disconnected Peripheral: \(peripheral.identifier.uuidString)")
        connection.update {
            $0.connected = false
            if !$0.leaving { $0.failure = $0.failure ?? "disconnected: \(error?.localizedDescription ?? "by the peripheral")" }
        }
        finish()
    }

    // MARK: CBPeripheralDelegate

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        if let error { return leave(failure: "service discovery failed: \(error.localizedDescription)") }
        let services = (peripheral.services ?? []).filter { serviceUuid == nil || $0.uuid == serviceUuid }
        guard !services.isEmpty else { return leave(failure: "no service \(serviceUuid?.uuidString ?? "")") }
        for service in services {
            peripheral.discoverCharacteristics(characteristicUuid.map { [$0] }, for: service)
        }
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        if let error { return leave(failure: "characteristic discovery failed: \(error.localizedDescription)") }
        characteristicsDiscovered(for: service, on: peripheral)
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        valueUpdated(characteristic, on: peripheral, error: error)
    }

    public func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        valueWritten(characteristic, on: peripheral, error: error)
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic,
                           error: Error?) {
        notificationStateUpdated(characteristic, on: peripheral, error: error)
    }

    public func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) {
        rssiRead(RSSI, on: peripheral, error: error)
    }
}

/// The characteristic's abilities as the book's GATT cells show them.
public func propertyNames(_ properties: CBCharacteristicProperties) -> [String] {
    var names: [String] = []
    if properties.contains(.read) { names.append("readable") }
    if properties.contains(.write) || properties.contains(.writeWithoutResponse) { names.append("writeable") }
    if properties.contains(.notify) { names.append("notifiable") }
    if properties.contains(.indicate) { names.append("indicatable") }
    return names.isEmpty ? ["no access"] : names
}
