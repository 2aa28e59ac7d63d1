import CoreBluetooth
import Foundation

/// A subclass in another file than its conforming base (`Subclasses.swift`).
final class ReconnectingCentral: BaseCentral {
    func centralManager(  // expect-lint: subclass-only centralManager(_:didDisconnectPeripheral:timestamp:isReconnecting:error:)
        _ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
        timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?
    ) {}
}
