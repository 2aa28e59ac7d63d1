import CoreBluetooth
import Foundation
import Scheduling

/// A central manager's delegate events, as values the async layer can hand across threads.
enum CentralEvent: Sendable {
    case state(CBManagerState)
    case discovered(CBDiscovery)
    case connected(CBPeripheral)
    case failedToConnect(CBPeripheral, (any Error)?)
    case disconnected(CBPeripheral, (any Error)?)
}

/// A peripheral's delegate events, as values; a read's value is taken when it arrives, before
/// a later notification can replace it.
enum PeripheralEvent: Sendable {
    case services((any Error)?)
    case characteristics(CBService, (any Error)?)
    case descriptors(CBCharacteristic, (any Error)?)
    case value(CBCharacteristic, Data?, (any Error)?)
    case wrote(CBCharacteristic, (any Error)?)
    case notificationState(CBCharacteristic, (any Error)?)
    case rssi(Int, (any Error)?)
    case readyToWrite
    case channel(CBL2CAPChannel?, (any Error)?)
}

/// An observer on a manager's event tap: hears what its delegate hears, on its queue.
final class CentralTap: NSObject, CBCentralManagerDelegate {
    private let handler: @Sendable (CentralEvent) -> Void

    init(_ handler: @escaping @Sendable (CentralEvent) -> Void) { self.handler = handler }

    func centralManagerDidUpdateState(_ central: CBCentralManager) { handler(.state(central.state)) }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        handler(.discovered(CBDiscovery(peripheral: peripheral, advertisementData: advertisementData, rssi: RSSI.intValue)))
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) { handler(.connected(peripheral)) }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        handler(.failedToConnect(peripheral, error))
    }

    // The iOS 17 form only: its default calls the older one, which would report twice.
    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
                        timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?) {
        handler(.disconnected(peripheral, error))
    }
}

/// An observer on a peripheral's event tap.
final class PeripheralTap: NSObject, CBPeripheralDelegate {
    private let handler: @Sendable (PeripheralEvent) -> Void

    init(_ handler: @escaping @Sendable (PeripheralEvent) -> Void) { self.handler = handler }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) { handler(.services(error)) }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        handler(.characteristics(service, error))
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverDescriptorsFor characteristic: CBCharacteristic, error: Error?) {
        handler(.descriptors(characteristic, error))
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        handler(.value(characteristic, characteristic.value, error))
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        handler(.wrote(characteristic, error))
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        handler(.notificationState(characteristic, error))
    }

    func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) { handler(.rssi(RSSI.intValue, error)) }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) { handler(.readyToWrite) }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        handler(.channel(channel, error))
    }
}

/// What one await or sequence holds on a connected peripheral: a tap on the peripheral for its
/// events, and one on its manager for its end (a disconnection, or the manager leaving
/// `.poweredOn`), reported with the disconnection's error.
struct PeripheralWatch: Sendable {
    let peripheral: CBPeripheral
    let manager: CBCentralManager
    private let peripheralToken: CBEventTapToken
    private let managerToken: CBEventTapToken

    /// Nil when the peripheral is not connected (checked after the taps are on, so no
    /// disconnection falls between the check and the taps).
    init?(_ peripheral: CBPeripheral, onEvent: @escaping @Sendable (PeripheralEvent) -> Void,
          onEnd: @escaping @Sendable (any Error) -> Void) {
        guard let manager = peripheral.centralManager else { return nil }
        self.peripheral = peripheral
        self.manager = manager
        peripheralToken = peripheral.addEventTap(PeripheralTap(onEvent))
        managerToken = manager.addEventTap(CentralTap { event in
            switch event {
            case .disconnected(let gone, let error) where gone === peripheral:
                // The app's own cancelPeripheralConnection has no error; the awaits still fail.
                onEnd(error ?? CBError(.peripheralDisconnected))
            case .state(let state) where state != .poweredOn:
                onEnd(CBError(.peripheralDisconnected))
            default:
                break
            }
        })
        guard peripheral.state == .connected else {
            remove()
            return nil
        }
    }

    func remove() {
        peripheral.removeEventTap(peripheralToken)
        manager.removeEventTap(managerToken)
    }
}

/// The one result of an await, from whichever comes first: the answer, a disconnection or
/// the task's cancellation. Later results are dropped.
final class Outcome<Value: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Value, any Error>?)
        case done(Result<Value, any Error>)
    }

    private let state = Locked<State>(.waiting(nil))

    func finish(_ result: Result<Value, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .done(result)
            return continuation
        }
        continuation?.resume(with: result)
    }

    /// Waits for the result; cancelling the task finishes it with `CancellationError`.
    func value(onCancel: @escaping @Sendable () -> Void = {}) async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let early = state.withLock { state -> Result<Value, any Error>? in
                    switch state {
                    case .done(let result): return result
                    case .waiting: state = .waiting(continuation); return nil
                    }
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            // Finished first: what `onCancel` starts (a cancelled connection's disconnection)
            // must not finish the wait with its own outcome before the cancellation does.
            self.finish(.failure(CancellationError()))
            onCancel()
        }
    }
}
