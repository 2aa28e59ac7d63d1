import CoreBluetooth
import Foundation

/// The book's ch. 8 Write peripheral (book-apps.md §1.11): service 180C, characteristic 2A56
/// (write + read + notify, the `.write` the book's code forgot), logging every written value in
/// lowercase hex: "Hello" arrives as `48656c6c6f`. All requests of a callback are logged and
/// answered once, with the first.
public final class WriteLoggerPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let advertisingName = "MyDevice"
    public static let serviceUuid = CBUUID(string: "180C")
    public static let characteristicUuid = CBUUID(string: "2A56")

    public let log: ExampleLog
    private let characteristic = CBMutableCharacteristic(type: characteristicUuid, properties: [.write, .read, .notify],
                                                         value: nil, permissions: [.readable, .writeable])
    private let state = Protected((advertising: false, value: Data(), written: [Data]()))
    private(set) public var peripheralManager: CBPeripheralManager!

    public var isAdvertising: Bool { state.value.advertising }
    /// Every value written, in order.
    public var written: [Data] { state.value.written }

    public init(queue: DispatchQueue? = nil, position: [Double]? = nil, log: ExampleLog = ExampleLog()) {
        self.log = log
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: Self.serviceUuid, primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error { return log("Problem adding service: \(error.localizedDescription)") }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisingName,
                                     CBAdvertisementDataServiceUUIDsKey: [Self.serviceUuid]])
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error { return log("Problem starting advertising: \(error.localizedDescription)") }
        state.update { $0.advertising = true }
        log("advertising started")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        // "More than one request may come in at a time": all are logged, the first is answered.
        for request in requests {
            let value = request.value ?? Data()
            state.update {
                $0.value = value
                $0.written.append(value)
            }
            log(hexString(value))
        }
        if let first = requests.first { peripheral.respond(to: first, withResult: .success) }
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        answerRead(request, with: state.value.value, on: peripheral)
    }
}
