import CoreBluetooth
import Foundation

/// A remote peripheral's delegate as written for iOS 9: Objective-C-style names and NSError.
final class LegacyPeripheralDelegate: NSObject {}

extension LegacyPeripheralDelegate: CBPeripheralDelegate {
    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {}

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsForService service: CBService, error: Error?) {}  // expect-lint: near-miss peripheral(_:didDiscoverCharacteristicsFor:error:)

    func peripheral(  // expect-lint: near-miss peripheral(_:didUpdateValueFor:error:)
        _ peripheral: CBPeripheral, didUpdateValueForCharacteristic characteristic: CBCharacteristic, error: NSError?
    ) {}

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error) {}  // expect-lint: near-miss peripheral(_:didWriteValueFor:error:)

    func peripheral(_ peripheral: CBPeripheral, didReadRssi RSSI: NSNumber, error: Error?) {}  // expect-lint: near-miss peripheral(_:didReadRSSI:error:)

    func peripheralIsReadyToSendWriteWithoutResponse(_ peripheral: CBPeripheral) {}  // expect-lint: near-miss peripheralIsReady(toSendWriteWithoutResponse:)

    func peripheralDidUpdateName(peripheral: CBPeripheral) {}  // expect-lint: near-miss peripheralDidUpdateName(_:)

    // The descriptor form is right: silent.
    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor descriptor: CBDescriptor, error: Error?) {}
}

/// More near misses: a missing parameter, a misspelt label, a method that throws.
final class NotifyingReader: NSObject, CBPeripheralDelegate {
    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic) {}  // expect-lint: near-miss peripheral(_:didUpdateNotificationStateFor:error:)

    func peripheral(_ peripheral: CBPeripheral, didDiscoverDescriptorFor characteristic: CBCharacteristic, error: Error?) {}  // expect-lint: near-miss peripheral(_:didDiscoverDescriptorsFor:error:)

    func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) throws {}  // expect-lint: near-miss peripheral(_:didModifyServices:)

    // Static and generic helpers are never witnesses: silent.
    static func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {}
    func describe<T>(_ value: T) -> String { "\(value)" }
}
