import CoreBluetooth
import Foundation

/// The book's ch. 5 "Connecting" (book-apps.md §1.5): connects to the peripheral advertising
/// `targetName` ("MyDevice"), reads the connection's RSSI (`readRSSI()`), and leaves,
/// disconnecting.
public final class ConnectCentral: BookCentral, @unchecked Sendable {
    private let rssiStorage = Protected<Int?>(nil)

    /// The RSSI read over the connection, in dBm.
    public var rssi: Int? { rssiStorage.value }

    public init(targetName: String = MyDevicePeripheral.advertisingName, queue: DispatchQueue? = nil,
                position: [Double]? = nil, log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        super.init(targetName: targetName, serviceUuid: nil, characteristicUuid: nil, queue: queue, position: position,
                   log: log, onDone: onDone)
    }

    override func connected(_ peripheral: CBPeripheral) {
        log("identifier: \(peripheral.identifier.uuidString)")
        peripheral.readRSSI()
    }

    override func rssiRead(_ rssi: NSNumber, on peripheral: CBPeripheral, error: Error?) {
        if let error { return leave(failure: "could not read the RSSI: \(error.localizedDescription)") }
        rssiStorage.update { $0 = rssi.intValue }
        log("RSSI: \(rssi.intValue)")
        leave()
    }
}
