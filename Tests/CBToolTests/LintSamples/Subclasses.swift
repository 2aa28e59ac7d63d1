import CoreBluetooth
import Foundation

/// The conforming class implements a few methods; subclasses add others.
class BaseCentral: NSObject, CBCentralManagerDelegate {
    func centralManagerDidUpdateState(_ central: CBCentralManager) {}
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}
}

class LoggingCentral: BaseCentral {
    // Overrides what the conforming class implements: called.
    override func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}

    // Not in the conforming class: the protocol's default is called instead.
    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {}  // expect-lint: subclass-only centralManager(_:didDisconnectPeripheral:error:)

    // A near miss in a subclass is a near miss.
    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,  // expect-lint: near-miss centralManager(_:didDiscover:advertisementData:rssi:)
                        advertisementData: [String: Any], RSSI: NSNumber) {}
}

/// Two levels down, in an extension.
final class AuditingCentral: LoggingCentral {}

extension AuditingCentral {
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {}  // expect-lint: subclass-only centralManager(_:didFailToConnect:error:)
}

/// A subclass that declares the conformance itself: its methods are the witnesses.
class PlainObject: NSObject {}

final class ConformingSubclass: PlainObject, CBPeripheralDelegate {
    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {}
}
