import CoreBluetooth
import Foundation

/// A GATT server's delegate with misspellings and iOS 9 names.
final class SensorServer: NSObject, CBPeripheralManagerDelegate {
    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {}

    func peripheralManagerDidStartAdvertisting(_ peripheral: CBPeripheralManager, error: Error?) {}  // expect-lint: near-miss peripheralManagerDidStartAdvertising(_:error:)

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeToCharacteristic characteristic: CBCharacteristic) {}  // expect-lint: near-miss peripheralManager(_:central:didSubscribeTo:)

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWriteRequests requests: [CBATTRequest]) {}  // expect-lint: near-miss peripheralManager(_:didReceiveWrite:)

    func peripheralManagerIsReadyToUpdateSubscribers(_ peripheral: CBPeripheralManager) {}  // expect-lint: near-miss peripheralManagerIsReady(toUpdateSubscribers:)

    // Right, with the PSM typealias spelled out: silent.
    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: UInt16, error: Error?) {}
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {}
}
