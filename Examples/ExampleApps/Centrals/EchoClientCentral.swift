import CoreBluetooth
import Foundation

/// The book's ch. 12 "EchoClient" (book-apps.md §1.17): scans for 180C, connects to
/// "EchoServer", subscribes to the echo (2A56) and sends a message + "\n\0" to 2A57 in 20-byte
/// chunks, each after the previous one's echo (the echo is the flow control). With `message`
/// it sends it once ready, and is done when the whole echo is back.
public final class EchoClientCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    public static let characteristicLength = 20

    public let log: ExampleLog
    private let message: String?
    private let onDone: @Sendable (_ failure: String?) -> Void
    private(set) public var centralManager: CBCentralManager!
    private struct State {
        var peripheral: CBPeripheral?
        var readCharacteristic: CBCharacteristic?
        var writeCharacteristic: CBCharacteristic?
        var outbound: [UInt8] = []
        var packetOffset = 0
        var echoed = Data()
        var ready = false
        var done = false
    }
    private let state = Protected(State())

    /// Connected and subscribed: messages can go.
    public var isReady: Bool { state.value.ready }
    /// Every echoed byte, in order.
    public var echoed: Data { state.value.echoed }
    public var isDone: Bool { state.value.done }

    public init(message: String? = nil, queue: DispatchQueue? = nil, position: [Double]? = nil,
                log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.message = message
        self.log = log
        self.onDone = onDone
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn {
            central.scanForPeripherals(withServices: [EchoServerPeripheral.serviceUuid], options: nil)
        } else {
            log("Bluetooth unavailable")
        }
    }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard advertisementData[CBAdvertisementDataLocalNameKey] as? String == EchoServerPeripheral.advertisedName else { return }
        let isNew = state.update { state -> Bool in
            guard state.peripheral == nil else { return false }
            state.peripheral = peripheral
            return true
        }
        guard isNew else { return }
        log("connecting to peripheral...")
        central.stopScan()
        central.connect(peripheral, options: nil)
    }

    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        log("connected")
        peripheral.delegate = self
        peripheral.discoverServices([EchoServerPeripheral.serviceUuid])
    }

    public func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        log("failed to connect: \(error?.localizedDescription ?? "unknown error")")
    }

    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        log("disconnected")
        state.update { $0.ready = false }
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] where service.uuid == EchoServerPeripheral.serviceUuid {
            peripheral.discoverCharacteristics([EchoServerPeripheral.readCharacteristicUuid,
                                                EchoServerPeripheral.writeCharacteristicUuid], for: service)
        }
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        for characteristic in service.characteristics ?? [] {
            if characteristic.uuid == EchoServerPeripheral.writeCharacteristicUuid {
                state.update { $0.writeCharacteristic = characteristic }
            } else if characteristic.uuid == EchoServerPeripheral.readCharacteristicUuid {
                state.update { $0.readCharacteristic = characteristic }
                if characteristic.properties.contains(.notify) { peripheral.setNotifyValue(true, for: characteristic) }
            }
        }
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic,
                           error: Error?) {
        let writable = state.value.writeCharacteristic?.properties.contains(.write) == true
        guard characteristic.isNotifying, writable else { return }
        log("connected to characteristics")
        state.update { $0.ready = true }
        if let message { send(message) }
    }

    /// Sends `message` + "\n\0" in 20-byte chunks.
    public func send(_ message: String) {
        log("sending \(message.debugDescription)")
        state.update {
            $0.outbound = Array((message + "\n\0").utf8)
            $0.packetOffset = 0
        }
        writeNextChunk()
    }

    private func writeNextChunk() {
        let next = state.update { state -> (CBPeripheral, CBCharacteristic, Data)? in
            guard state.packetOffset < state.outbound.count, let peripheral = state.peripheral,
                  let characteristic = state.writeCharacteristic else { return nil }
            let end = min(state.packetOffset + Self.characteristicLength, state.outbound.count)
            return (peripheral, characteristic, Data(state.outbound[state.packetOffset..<end]))
        }
        guard case let (peripheral, characteristic, chunk)? = next else { return }
        peripheral.writeValue(chunk, for: characteristic, type: .withResponse)
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard error == nil, let value = characteristic.value else { return }
        // The echo is the flow control: the next chunk follows it.
        let finished = state.update { state -> Bool in
            state.echoed.append(value)
            state.packetOffset += Self.characteristicLength
            guard message != nil, !state.done, state.packetOffset >= state.outbound.count else { return false }
            state.done = true
            return true
        }
        log("message received: \(String(decoding: value, as: UTF8.self).debugDescription)")
        writeNextChunk()
        if finished {
            if let peripheral = state.value.peripheral { centralManager.cancelPeripheralConnection(peripheral) }
            onDone(nil)
        }
    }
}
