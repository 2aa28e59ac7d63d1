import CoreBluetooth
import Foundation

/// The book's ch. 13 "LedRemote" central (book-apps.md §1.19): finds "LedRemote" (service 1815),
/// subscribes to the responses (2A57), turns the LED on as soon as it is connected, and moves its
/// switch only when the peripheral confirms: command `01 01` (on) or `02 01` (off) to 2A56, the
/// confirmation `[state, 01]` back. With `toggles`, it then switches the LED that many more times,
/// each after the previous confirmation, and is done.
public final class LedRemoteCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    public let log: ExampleLog
    private let toggles: Int?
    private let onDone: @Sendable (_ failure: String?) -> Void
    private(set) public var centralManager: CBCentralManager!
    private struct State {
        var peripheral: CBPeripheral?
        var commandCharacteristic: CBCharacteristic?
        var switchIsOn = false
        var confirmations: [UInt8] = []
        var connected = false
        var done = false
    }
    private let state = Protected(State())

    /// The UI switch: moves only on a confirmation.
    public var switchIsOn: Bool { state.value.switchIsOn }
    /// The confirmed states (1 on, 2 off), in order.
    public var confirmed: [UInt8] { state.value.confirmations }
    public var isConnectedToCharacteristics: Bool { state.value.connected }
    public var isDone: Bool { state.value.done }

    public init(toggles: Int? = nil, queue: DispatchQueue? = nil, position: [Double]? = nil,
                log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.toggles = toggles.map { max(0, $0) }
        self.log = log
        self.onDone = onDone
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn {
            central.scanForPeripherals(withServices: [RemoteLedPeripheral.serviceUuid], options: nil)
        } else {
            log("Bluetooth unavailable")
        }
    }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard advertisementData[CBAdvertisementDataLocalNameKey] as? String == RemoteLedPeripheral.advertisedName else { return }
        let isNew = state.update { state -> Bool in
            guard state.peripheral == nil else { return false }
            state.peripheral = peripheral
            return true
        }
        guard isNew else { return }
        log("connecting to \(RemoteLedPeripheral.advertisedName) \(peripheral.identifier.uuidString)")
        central.stopScan()
        central.connect(peripheral, options: nil)
    }

    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices([RemoteLedPeripheral.serviceUuid])
    }

    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        log("disconnected")
        state.update { $0.connected = false }
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] where service.uuid == RemoteLedPeripheral.serviceUuid {
            peripheral.discoverCharacteristics([RemoteLedPeripheral.commandCharacteristicUuid,
                                                RemoteLedPeripheral.responseCharacteristicUuid], for: service)
        }
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        for characteristic in service.characteristics ?? [] {
            if characteristic.uuid == RemoteLedPeripheral.commandCharacteristicUuid {
                state.update { $0.commandCharacteristic = characteristic }
            } else if characteristic.uuid == RemoteLedPeripheral.responseCharacteristicUuid,
                      characteristic.properties.contains(.notify) {
                peripheral.setNotifyValue(true, for: characteristic)
            }
        }
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic,
                           error: Error?) {
        guard characteristic.isNotifying else { return }
        state.update { $0.connected = true }
        turnLed(on: true)
    }

    /// Sends the command; the switch moves when the confirmation arrives.
    public func turnLed(on: Bool) {
        let (peripheral, characteristic) = state.update { ($0.peripheral, $0.commandCharacteristic) }
        guard let peripheral, let characteristic else { return }
        var command = [UInt8](repeating: 0, count: 2)
        command[0] = on ? RemoteLedPeripheral.ledOn : RemoteLedPeripheral.ledOff
        command[1] = RemoteLedPeripheral.footer
        let type: CBCharacteristicWriteType = characteristic.properties.contains(.writeWithoutResponse) ? .withoutResponse : .withResponse
        log("turning LED \(on ? "on" : "off"): \(hexString(Data(command)))")
        peripheral.writeValue(Data(command), for: characteristic, type: type)
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value else { return }
        let bytes = [UInt8](value)
        guard bytes.count == 2, bytes[1] == RemoteLedPeripheral.footer,
              bytes[0] == RemoteLedPeripheral.ledOn || bytes[0] == RemoteLedPeripheral.ledOff else {
            return log("ble response unknown: \(hexString(value))")
        }
        let isOn = bytes[0] == RemoteLedPeripheral.ledOn
        log("ble device responded: LED \(isOn ? "on" : "off")")
        let (next, finished) = state.update { state -> (Bool?, Bool) in
            state.confirmations.append(bytes[0])
            state.switchIsOn = isOn
            guard let toggles, !state.done else { return (nil, false) }
            if state.confirmations.count > toggles {
                state.done = true
                return (nil, true)
            }
            return (!isOn, false)
        }
        if let next { turnLed(on: next) }
        if finished {
            if let peripheral = state.value.peripheral { centralManager.cancelPeripheralConnection(peripheral) }
            onDone(nil)
        }
    }
}
