import CoreBluetooth
import Foundation

// The book's chapter 12 apps (book-apps.md §1.17–1.18), written only against Apple's API as an
// iOS developer would, with the book's intended behaviour where its code has bugs: the write
// handler answers once, with requests[0].

/// EchoServer: service 180C, 2A56 (read + notify: the echo), 2A57 (write). Advertises its name
/// and service; echoes every write back as a notification.
final class EchoServerPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    static let advertisedName = "EchoServer"
    static let serviceUuid = CBUUID(string: "180C")
    static let readCharacteristicUuid = CBUUID(string: "2A56")
    static let writeCharacteristicUuid = CBUUID(string: "2A57")

    private(set) var peripheralManager: CBPeripheralManager!
    let readCharacteristic = CBMutableCharacteristic(type: readCharacteristicUuid, properties: [.read, .notify],
                                                     value: nil, permissions: [.readable, .writeable])
    let writeCharacteristic = CBMutableCharacteristic(type: writeCharacteristicUuid, properties: [.write],
                                                      value: nil, permissions: [.writeable])
    private let lock = NSLock()
    private var receivedStorage: [Data] = []
    private var advertisingStorage = false
    var received: [Data] { lock.withLock { receivedStorage } }
    var isAdvertising: Bool { lock.withLock { advertisingStorage } }

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
        service.characteristics = [readCharacteristic, writeCharacteristic]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any]) {}

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        guard error == nil else { return }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisedName,
                                     CBAdvertisementDataServiceUUIDsKey: [Self.serviceUuid]])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        lock.withLock { advertisingStorage = error == nil }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        guard let first = requests.first else { return }
        peripheral.respond(to: first, withResult: .success)
        for request in requests {
            guard let value = request.value else { continue }
            lock.withLock { receivedStorage.append(value) }
            readCharacteristic.value = value
            _ = peripheral.updateValue(value, for: readCharacteristic, onSubscribedCentrals: nil)
        }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        guard request.characteristic.uuid == readCharacteristic.uuid else {
            return peripheral.respond(to: request, withResult: .attributeNotFound)
        }
        let value = readCharacteristic.value ?? Data()
        guard request.offset <= value.count else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = value.subdata(in: request.offset..<value.count)
        peripheral.respond(to: request, withResult: .success)
    }
}

/// EchoClient: scans for 180C, connects to "EchoServer", subscribes to the echo, and sends a
/// message in 20-byte chunks, each after the previous one's echo.
final class EchoClient: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    static let characteristicLength = 20
    private(set) var centralManager: CBCentralManager!
    private let lock = NSLock()
    private var peripheralStorage: CBPeripheral?
    private var readCharacteristic: CBCharacteristic?
    private var writeCharacteristic: CBCharacteristic?
    private var outbound: [UInt8] = []
    private var packetOffset = 0
    private var echoedStorage = Data()
    private var readyStorage = false
    private var log: [String] = []

    var isReady: Bool { lock.withLock { readyStorage } }
    var echoed: Data { lock.withLock { echoedStorage } }
    var events: [String] { lock.withLock { log } }

    init(queue: DispatchQueue) {
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue)
    }

    private func note(_ line: String) { lock.withLock { log.append(line) } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn {
            central.scanForPeripherals(withServices: [EchoServerPeripheral.serviceUuid], options: nil)
        }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard advertisementData[CBAdvertisementDataLocalNameKey] as? String == EchoServerPeripheral.advertisedName,
              lock.withLock({ peripheralStorage == nil }) else { return }
        note("connecting to peripheral...")
        lock.withLock { peripheralStorage = peripheral }
        central.stopScan()
        central.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        note("connected")
        peripheral.delegate = self
        peripheral.discoverServices([EchoServerPeripheral.serviceUuid])
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        note("disconnected")
        lock.withLock { readyStorage = false }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] where service.uuid == EchoServerPeripheral.serviceUuid {
            peripheral.discoverCharacteristics([EchoServerPeripheral.readCharacteristicUuid,
                                                EchoServerPeripheral.writeCharacteristicUuid], for: service)
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        for characteristic in service.characteristics ?? [] {
            if characteristic.uuid == EchoServerPeripheral.writeCharacteristicUuid {
                lock.withLock { writeCharacteristic = characteristic }
            } else if characteristic.uuid == EchoServerPeripheral.readCharacteristicUuid {
                lock.withLock { readCharacteristic = characteristic }
                if characteristic.properties.contains(.notify) { peripheral.setNotifyValue(true, for: characteristic) }
            }
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        let writable = lock.withLock { writeCharacteristic?.properties.contains(.write) == true }
        if characteristic.isNotifying && writable {
            note("connected to characteristics")
            lock.withLock { readyStorage = true }
        }
    }

    /// Sends `message` + "\n\0" in 20-byte chunks.
    func send(_ message: String) {
        lock.withLock {
            outbound = Array((message + "\n\0").utf8)
            packetOffset = 0
        }
        writeNextChunk()
    }

    private func writeNextChunk() {
        let (peripheral, characteristic, chunk) = lock.withLock { () -> (CBPeripheral?, CBCharacteristic?, Data?) in
            guard packetOffset < outbound.count else { return (nil, nil, nil) }
            let end = min(packetOffset + Self.characteristicLength, outbound.count)
            return (peripheralStorage, writeCharacteristic, Data(outbound[packetOffset..<end]))
        }
        guard let peripheral, let characteristic, let chunk else { return }
        peripheral.writeValue(chunk, for: characteristic, type: .withResponse)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard error == nil, let value = characteristic.value else { return }
        // The echo is the flow control: the next chunk follows it.
        lock.withLock {
            echoedStorage.append(value)
            packetOffset += Self.characteristicLength
        }
        note("message received: \(String(decoding: value, as: UTF8.self))")
        writeNextChunk()
    }
}
