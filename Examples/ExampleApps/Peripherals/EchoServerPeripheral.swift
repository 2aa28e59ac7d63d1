import CoreBluetooth
import Foundation

/// The book's ch. 12 "EchoServer" peripheral (book-apps.md §1.18), written only against Apple's
/// API: service 180C, 2A56 (read + notify: the echo), 2A57 (write). Advertises its name and
/// service, and echoes every write back as a notification. Unlike the book's code it answers a
/// write callback once, with the first request.
public final class EchoServerPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let advertisedName = "EchoServer"
    public static let serviceUuid = CBUUID(string: "180C")
    public static let readCharacteristicUuid = CBUUID(string: "2A56")
    public static let writeCharacteristicUuid = CBUUID(string: "2A57")

    public let log: ExampleLog
    private(set) public var peripheralManager: CBPeripheralManager!
    let readCharacteristic = CBMutableCharacteristic(type: readCharacteristicUuid, properties: [.read, .notify],
                                                     value: nil, permissions: [.readable, .writeable])
    let writeCharacteristic = CBMutableCharacteristic(type: writeCharacteristicUuid, properties: [.write],
                                                      value: nil, permissions: [.writeable])
    private let state = Protected((advertising: false, received: [Data](), value: Data()))

    /// Every value written, in order.
    public var received: [Data] { state.value.received }
    public var isAdvertising: Bool { state.value.advertising }

    public init(queue: DispatchQueue? = nil, position: [Double]? = nil, log: ExampleLog = ExampleLog()) {
        self.log = log
        super.init()
        var options: [String: Any] = [
            CBPeripheralManagerOptionShowPowerAlertKey: true,
            CBPeripheralManagerOptionRestoreIdentifierKey: "8f68d89b-448c-4b14-aa9a-f8de6d8a4753",
        ]
        options.merge(ManagerOptions.position(position) ?? [:]) { $1 }
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: options)
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: Self.serviceUuid, primary: true)
        service.characteristics = [readCharacteristic, writeCharacteristic]
        peripheral.add(service)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any]) {
        log("restoring peripheral state")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error { return log("Problem adding service: \(error.localizedDescription)") }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisedName,
                                     CBAdvertisementDataServiceUUIDsKey: [Self.serviceUuid]])
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error { return log("Problem starting advertising: \(error.localizedDescription)") }
        state.update { $0.advertising = true }
        log("advertising as \(Self.advertisedName)")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        guard let first = requests.first else { return }
        peripheral.respond(to: first, withResult: .success)
        for request in requests {
            guard let value = request.value else { continue }
            state.update {
                $0.received.append(value)
                $0.value = value
            }
            log("echoing \(value.count) bytes: \(String(decoding: value, as: UTF8.self).debugDescription)")
            readCharacteristic.value = value
            _ = peripheral.updateValue(value, for: readCharacteristic, onSubscribedCentrals: nil)
        }
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        guard request.characteristic.uuid == readCharacteristic.uuid else {
            return peripheral.respond(to: request, withResult: .attributeNotFound)
        }
        answerRead(request, with: state.value.value, on: peripheral)
    }
}
