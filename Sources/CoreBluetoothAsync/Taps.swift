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

    /// Whether the request is out and whether a cancellation that won waits for it to be.
    private enum Request { case notStarted, started, cancelledBeforeStart }

    private let state = Locked<State>(.waiting(nil))
    private let request = Locked(Request.notStarted)

    /// Finishes the await with `result` unless something finished it first; true when this
    /// result is the one the await returns (the caller undoes what a losing answer did).
    @discardableResult
    func finish(_ result: Result<Value, any Error>) -> Bool {
        let (won, continuation) = state.withLock { state -> (Bool, CheckedContinuation<Value, any Error>?) in
            guard case .waiting(let continuation) = state else { return (false, nil) }
            state = .done(result)
            return (true, continuation)
        }
        continuation?.resume(with: result)
        return won
    }

    /// Sends the request (`start`, which may answer at once with a non-nil value) and waits
    /// for the result. The task's cancellation is heard from before `start` runs, so a
    /// `cancel()` that comes before the answer always wins (throwing `CancellationError`), and
    /// `onCancel` runs only then, once the request is out: an answer that won is not undone,
    /// and nothing is undone before it was done.
    func value(onCancel: @escaping @Sendable () -> Void = {}, after start: () -> Value?) async throws -> Value {
        try await withTaskCancellationHandler {
            // Cancelled before anything was asked: nothing to ask, nothing to undo.
            guard !Task.isCancelled else { throw CancellationError() }
            if let value = start() { finish(.success(value)) }
            let undo = request.withLock { request -> Bool in
                defer { request = .started }
                return request == .cancelledBeforeStart
            }
            if undo { onCancel() }
            return try await withCheckedThrowingContinuation { continuation in
                let early = state.withLock { state -> Result<Value, any Error>? in
                    switch state {
                    case .done(let result): return result
                    case .waiting: state = .waiting(continuation); return nil
                    }
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            guard self.finish(.failure(CancellationError())) else { return }
            let started = self.request.withLock { request -> Bool in
                if request == .started { return true }
                request = .cancelledBeforeStart
                return false
            }
            if started { onCancel() }
        }
    }
}
