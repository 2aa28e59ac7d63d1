import CoreBluetooth
import Foundation

/// The book's ch. 13 "RemoteLed" peripheral (book-apps.md §1.20), only Apple's API, with the
/// code's byte values (on = 1, off = 2, footer = 1) and the name advertised as intended
/// ("LedRemote"): service 1815, 2A57 (read + notify: responses), 2A56 (write: commands). A
/// command `[state, 0x01]` switches the "LED" and is confirmed with `[state, 0x01]`; anything
/// else (a wrong length, footer or state) is logged and ignored.
public final class RemoteLedPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let advertisedName = "LedRemote"
    public static let serviceUuid = CBUUID(string: "1815")
    public static let commandCharacteristicUuid = CBUUID(string: "2A56")
    public static let responseCharacteristicUuid = CBUUID(string: "2A57")
    public static let ledOn: UInt8 = 1
    public static let ledOff: UInt8 = 2
    public static let footer: UInt8 = 1

    public let log: ExampleLog
    private(set) public var peripheralManager: CBPeripheralManager!
    let responseCharacteristic = CBMutableCharacteristic(type: responseCharacteristicUuid, properties: [.read, .notify],
                                                         value: nil, permissions: [.readable, .writeable])
    let commandCharacteristic = CBMutableCharacteristic(type: commandCharacteristicUuid, properties: [.write],
                                                        value: nil, permissions: [.writeable])
    private let state = Protected((led: false, advertising: false, response: Data()))

    /// The "LED" (the book's torch).
    public var ledIsOn: Bool { state.value.led }
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
        service.characteristics = [responseCharacteristic, commandCharacteristic]
        peripheral.add(service)
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
        for request in requests { processCommand([UInt8](request.value ?? Data())) }
    }

    private func processCommand(_ command: [UInt8]) {
        guard command.count == 2, command[1] == Self.footer else { return log("ble command unknown: \(hexString(Data(command)))") }
        switch command[0] {
        case Self.ledOn:
            log("Turning LED on")
            setLedState(on: true)
        case Self.ledOff:
            log("Turning LED off")
            setLedState(on: false)
        default:
            log("Unknown command value \(command[0])")
        }
    }

    private func setLedState(on: Bool) {
        let response = Data([on ? Self.ledOn : Self.ledOff, Self.footer])
        state.update {
            $0.led = on
            $0.response = response
        }
        responseCharacteristic.value = response
        _ = peripheralManager.updateValue(response, for: responseCharacteristic, onSubscribedCentrals: nil)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        guard request.characteristic.uuid == responseCharacteristic.uuid else {
            return peripheral.respond(to: request, withResult: .attributeNotFound)
        }
        answerRead(request, with: state.value.response, on: peripheral)
    }
}
