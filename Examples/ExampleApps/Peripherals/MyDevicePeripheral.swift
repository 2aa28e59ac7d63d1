import CoreBluetooth
import Foundation

/// The book's ch. 4 "ExampleBlePeripheral" (book-apps.md §1.4), and with `gattProfile` its ch. 6
/// "GattProfile" (§1.7): advertises its name ("MyDevice"); with the GATT profile it first
/// publishes service 180C with characteristic 2A56 (read + notify).
public final class MyDevicePeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let advertisingName = "MyDevice"
    public static let serviceUuid = CBUUID(string: "0000180c-0000-1000-8000-00805f9b34fb")
    public static let characteristicUuid = CBUUID(string: "00002a56-0000-1000-8000-00805f9b34fb")

    public let advertisingName: String
    public let log: ExampleLog
    private let gattProfile: Bool
    private let advertising = Protected(false)
    private(set) public var peripheralManager: CBPeripheralManager!

    public var isAdvertising: Bool { advertising.value }

    /// `advertisingName` nil advertises no name at all (only the service UUID, if any).
    public init(advertisingName: String? = MyDevicePeripheral.advertisingName, gattProfile: Bool = false,
                queue: DispatchQueue? = nil, position: [Double]? = nil, log: ExampleLog = ExampleLog()) {
        self.advertisingName = advertisingName ?? ""
        self.gattProfile = gattProfile
        self.log = log
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        switch peripheral.state {
        case .poweredOn:
            log("Bluetooth on")
            if gattProfile { buildGattProfile(on: peripheral) } else { startAdvertising(on: peripheral) }
        case .poweredOff:
            log("Bluetooth off")
        default:
            log("Bluetooth not ready yet...")
        }
    }

    // The manager comes from the callback: the first state callback may run on the delegate
    // queue before `init` has stored `peripheralManager`.
    private func buildGattProfile(on manager: CBPeripheralManager) {
        let service = CBMutableService(type: Self.serviceUuid, primary: true)
        let characteristic = CBMutableCharacteristic(type: Self.characteristicUuid, properties: [.read, .notify],
                                                     value: nil, permissions: [.readable, .writeable])
        service.characteristics = [characteristic]
        manager.add(service)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error { return log("Problem adding service: \(error.localizedDescription)") }
        log("added service to peripheral")
        startAdvertising(on: peripheral)
    }

    private func startAdvertising(on manager: CBPeripheralManager) {
        var data: [String: Any] = [:]
        if !advertisingName.isEmpty { data[CBAdvertisementDataLocalNameKey] = advertisingName }
        if gattProfile { data[CBAdvertisementDataServiceUUIDsKey] = [Self.serviceUuid] }
        manager.startAdvertising(data)
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error { return log("Problem starting advertising: \(error.localizedDescription)") }
        advertising.update { $0 = true }
        log("advertising started as \(advertisingName.isEmpty ? "(no name)" : advertisingName)")
    }

    /// The ch. 6 characteristic has no value and reads as empty.
    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        answerRead(request, with: Data(), on: peripheral)
    }

    public func stop() {
        peripheralManager.stopAdvertising()
        advertising.update { $0 = false }
    }
}
