import CoreBluetooth
import Foundation

/// A central ported from an old iOS code base: it compiles on Linux, and all but the state
/// callback are near misses.
final class PortedCentral: NSObject, CBCentralManagerDelegate {
    func centralManagerDidUpdateState(_ central: CBCentralManager) {}

    // `RSSI:` is the Objective-C parameter name; Swift's label is `rssi`.
    func centralManager(  // expect-lint: near-miss centralManager(_:didDiscover:advertisementData:rssi:)
        _ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
        advertisementData: [String: Any], RSSI: NSNumber
    ) {}

    // Objective-C-style label.
    func centralManager(_ central: CBCentralManager, didConnectPeripheral peripheral: CBPeripheral) {}  // expect-lint: near-miss centralManager(_:didConnect:)

    // NSError? instead of Error?.
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: NSError?) {}  // expect-lint: near-miss centralManager(_:didFailToConnect:error:)

    // Swift 2 style: the first parameter has a label.
    func centralManager(central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {}  // expect-lint: near-miss centralManager(_:didDisconnectPeripheral:error:)

    // Helpers with names near the delegate's, but not near a requirement: silent.
    func centralManager(_ central: CBCentralManager, shouldRetry attempts: Int) -> Bool { attempts < 3 }
    func peripheral(named name: String) -> CBPeripheral? { nil }
    func scan(_ central: CBCentralManager) {}
}

/// A central with the right methods, spelled in other ways the compiler accepts: silent.
final class CarefulCentral: NSObject, CoreBluetooth.CBCentralManagerDelegate, @unchecked Sendable {
    func centralManagerDidUpdateState(_ manager: CBCentralManager) {}
    // swift-format-ignore: UseShorthandTypeNames
    func centralManager(_ manager: CBCentralManager, didDiscover found: CBPeripheral,
                        advertisementData data: Dictionary<String, Any>, rssi value: NSNumber) {}
    func centralManager(_ manager: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: (any Error)?) {}
    // swift-format-ignore: UseShorthandTypeNames
    func centralManager(_ manager: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
                        timestamp: Double, isReconnecting: Bool, error: Optional<Error>) {}
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}
    // An overload next to the witness is taken as deliberate.
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral, attempt: Int) {}
}

/// Not a delegate: its methods are its own business.
final class ConnectionLog {
    func centralManager(_ central: CBCentralManager, didConnectPeripheral peripheral: CBPeripheral) {}
}

/// A refinement of the delegate protocol: conforming to it is conforming to the delegate.
protocol ScannerDelegate: CBCentralManagerDelegate {}

final class RefinedScanner: NSObject, ScannerDelegate {
    func centralManagerDidUpdateState(_ central: CBCentralManager) {}
    // A wrong parameter type.
    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,  // expect-lint: near-miss centralManager(_:didDiscover:advertisementData:rssi:)
                        advertisementData: [String: AnyObject], rssi RSSI: NSNumber) {}
}
