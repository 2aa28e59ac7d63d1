import CoreBluetooth
import Foundation

// The book's chapter 13 apps (book-apps.md §1.19–1.20), only Apple's API, with the code's byte
// values (on = 1, off = 2, footer = 1) and the name advertised as intended ("LedRemote").

/// RemoteLed: service 1815, 2A57 (read + notify: responses), 2A56 (write: commands). A command
/// `[state, 0x01]` switches the "LED" and is confirmed with `[state, 0x01]`.
final class RemoteLedPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    static let advertisedName = "LedRemote"
    static let serviceUuid = CBUUID(string: "1815")
    static let commandCharacteristicUuid = CBUUID(string: "2A56")
    static let responseCharacteristicUuid = CBUUID(string: "2A57")
    static let ledOn: UInt8 = 1
    static let ledOff: UInt8 = 2
    static let footer: UInt8 = 1

    private(set) var peripheralManager: CBPeripheralManager!
    let responseCharacteristic = CBMutableCharacteristic(type: responseCharacteristicUuid, properties: [.read, .notify],
                                                         value: nil, permissions: [.readable, .writeable])
    let commandCharacteristic = CBMutableCharacteristic(type: commandCharacteristicUuid, properties: [.write],
                                                        value: nil, permissions: [.writeable])
    private let lock = NSLock()
    private var ledStorage = false
    var ledIsOn: Bool { lock.withLock { ledStorage } }

    init(queue: DispatchQueue) {
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: [
            CBPeripheralManagerOptionShowPowerAlertKey: true,
            CBPeripheralManagerOptionRestoreIdentifierKey: "8f68d89b-448c-4b14-aa9a-f8de6d8a4753",
        ])
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: Self.serviceUuid, primary: true)
        service.characteristics = [responseCharacteristic, commandCharacteristic]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisedName,
                                     CBAdvertisementDataServiceUUIDsKey: [Self.serviceUuid]])
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        guard let first = requests.first else { return }
        peripheral.respond(to: first, withResult: .success)
        for request in requests { if let value = request.value { processCommand([UInt8](value)) } }
    }

    private func processCommand(_ command: [UInt8]) {
        guard command.count == 2, command[1] == Self.footer else { return }
        switch command[0] {
        case Self.ledOn: setLedState(on: true)
        case Self.ledOff: setLedState(on: false)
        default: break
        }
    }

    private func setLedState(on: Bool) {
        lock.withLock { ledStorage = on }
        let response = Data([on ? Self.ledOn : Self.ledOff, Self.footer])
        responseCharacteristic.value = response
        _ = peripheralManager.updateValue(response, for: responseCharacteristic, onSubscribedCentrals: nil)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        guard request.characteristic.uuid == responseCharacteristic.uuid else {
            return peripheral.respond(to: request, withResult: .attributeNotFound)
        }
        let value = responseCharacteristic.value ?? Data()
        guard request.offset <= value.count else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = value.subdata(in: request.offset..<value.count)
        peripheral.respond(to: request, withResult: .success)
    }
}

/// LedRemote: finds "LedRemote", subscribes to responses, turns the LED on as soon as it is
/// connected, and flips the switch only when the peripheral confirms.
final class LedRemoteCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    private(set) var centralManager: CBCentralManager!
    private let lock = NSLock()
    private var peripheralStorage: CBPeripheral?
    private var commandCharacteristic: CBCharacteristic?
    private var switchStorage = false
    private var confirmations: [UInt8] = []
    private var connectedStorage = false

    /// The UI switch: moves only on a confirmation.
    var switchIsOn: Bool { lock.withLock { switchStorage } }
    var confirmed: [UInt8] { lock.withLock { confirmations } }
    var isConnectedToCharacteristics: Bool { lock.withLock { connectedStorage } }

    init(queue: DispatchQueue) {
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue)
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [RemoteLedPeripheral.serviceUuid], options: nil) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard advertisementData[CBAdvertisementDataLocalNameKey] as? String == RemoteLedPeripheral.advertisedName,
              lock.withLock({ peripheralStorage == nil }) else { return }
        lock.withLock { peripheralStorage = peripheral }
        central.stopScan()
        central.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices([RemoteLedPeripheral.serviceUuid])
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] where service.uuid == RemoteLedPeripheral.serviceUuid {
            peripheral.discoverCharacteristics([RemoteLedPeripheral.commandCharacteristicUuid,
                                                RemoteLedPeripheral.responseCharacteristicUuid], for: service)
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        for characteristic in service.characteristics ?? [] {
            if characteristic.uuid == RemoteLedPeripheral.commandCharacteristicUuid {
                lock.withLock { commandCharacteristic = characteristic }
            } else if characteristic.uuid == RemoteLedPeripheral.responseCharacteristicUuid,
                      characteristic.properties.contains(.notify) {
                peripheral.setNotifyValue(true, for: characteristic)
            }
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        guard characteristic.isNotifying else { return }
        lock.withLock { connectedStorage = true }
        turnLed(on: true)
    }

    func turnLed(on: Bool) {
        let (peripheral, characteristic) = lock.withLock { (peripheralStorage, commandCharacteristic) }
        guard let peripheral, let characteristic else { return }
        var command = [UInt8](repeating: 0, count: 2)
        command[0] = on ? RemoteLedPeripheral.ledOn : RemoteLedPeripheral.ledOff
        command[1] = RemoteLedPeripheral.footer
        let type: CBCharacteristicWriteType = characteristic.properties.contains(.writeWithoutResponse) ? .withoutResponse : .withResponse
        peripheral.writeValue(Data(command), for: characteristic, type: type)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value else { return }
        let bytes = [UInt8](value)
        guard bytes.count == 2, bytes[1] == RemoteLedPeripheral.footer else { return }
        lock.withLock {
            confirmations.append(bytes[0])
            switchStorage = bytes[0] == RemoteLedPeripheral.ledOn
        }
    }
}
