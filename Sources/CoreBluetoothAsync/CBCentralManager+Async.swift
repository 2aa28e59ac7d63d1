import CoreBluetooth
import Foundation
import Scheduling

extension CBCentralManager {
    /// **Linux extension.** The manager's state now, then each change: what
    /// `centralManagerDidUpdateState(_:)` reports, heard beside the delegate.
    public var stateUpdates: CBEventSequence<CBManagerState> {
        CBEventSequence { [self] continuation in
            let token = addEventTap(CentralTap { event in
                if case .state(let state) = event { continuation.yield(state) }
            })
            continuation.yield(state)
            continuation.onTermination = { [self] _ in removeEventTap(token) }
        }
    }

    /// **Linux extension.** Scans for peripherals advertising any of `serviceUUIDs` (all when
    /// nil) while the sequence is iterated: `scanForPeripherals(withServices:options:)` when
    /// iteration starts (or once the manager is powered on), `stopScan()` when the iterating
    /// task ends or is cancelled. The sequence ends if the manager leaves `.poweredOn`.
    ///
    /// A manager has one scan, as in Apple's API: a second scan replaces this one's services
    /// and options, and the first sequence to end stops it.
    public func discoveries(withServices serviceUUIDs: [CBUUID]?, options: [String: Any]? = nil)
        -> CBEventSequence<CBDiscovery>
    {
        let options = ScanOptions(options)
        return CBEventSequence { [self] continuation in
            let started = Locked(false)
            let scanIfOn: @Sendable (CBManagerState) -> Void = { [self] state in
                switch state {
                case .poweredOn:
                    guard started.withLock({ let was = $0; $0 = true; return !was }) else { return }
                    scanForPeripherals(withServices: serviceUUIDs, options: options.dictionary)
                case .unknown, .resetting:
                    break
                default:
                    if started.withLock({ $0 }) { continuation.finish() }
                }
            }
            let token = addEventTap(CentralTap { event in
                switch event {
                case .discovered(let discovery): continuation.yield(discovery)
                case .state(let state): scanIfOn(state)
                default: break
                }
            })
            scanIfOn(state)
            continuation.onTermination = { [self] _ in
                removeEventTap(token)
                if started.withLock({ $0 }), state == .poweredOn { stopScan() }
            }
        }
    }

    /// **Linux extension.** Connects to `peripheral` (`connect(_:options:)`) and returns once
    /// it is connected; throws the `CBError` of a failed attempt. Cancelling the task cancels
    /// the pending connection and throws `CancellationError`. Keep a strong reference to
    /// `peripheral`, as with Apple's call.
    public func connect(_ peripheral: CBPeripheral, options: [String: Any]? = nil) async throws {
        try Task.checkCancellation()
        if peripheral.state == .connected { return }
        guard state == .poweredOn else { throw CBError(.notConnected) }
        let outcome = Outcome<Void>()
        let token = addEventTap(CentralTap { event in
            switch event {
            case .connected(let connected) where connected === peripheral:
                outcome.finish(.success(()))
            case .failedToConnect(let failed, let error) where failed === peripheral:
                outcome.finish(.failure(error ?? CBError(.connectionFailed)))
            case .disconnected(let gone, let error) where gone === peripheral:
                // A cancellation by someone else (the app, or a released object).
                outcome.finish(.failure(error ?? CBError(.operationCancelled)))
            case .state(let state) where state != .poweredOn:
                outcome.finish(.failure(CBError(.connectionFailed)))
            default:
                break
            }
        })
        defer { removeEventTap(token) }
        // In a synchronous closure, so that the name means Apple's call and not this one.
        let start = { [self] () -> Void? in connect(peripheral, options: options); return nil }
        try await outcome.value(onCancel: { [self] in cancelPeripheralConnection(peripheral) }, after: start)
    }

    /// **Linux extension.** Disconnects from `peripheral`, or cancels its pending connection
    /// (`cancelPeripheralConnection(_:)`), and returns once it is disconnected. Cancelling the
    /// task stops the wait (throwing `CancellationError`), not the disconnection.
    public func cancelConnection(_ peripheral: CBPeripheral) async throws {
        guard peripheral.state != .disconnected else { return }
        let outcome = Outcome<Void>()
        let token = addEventTap(CentralTap { event in
            switch event {
            case .disconnected(let gone, _) where gone === peripheral, .failedToConnect(let gone, _) where gone === peripheral:
                outcome.finish(.success(()))
            case .state(let state) where state != .poweredOn:
                outcome.finish(.success(()))
            default:
                break
            }
        })
        defer { removeEventTap(token) }
        // Gone between the check and the tap: nothing more will be reported.
        guard peripheral.state != .disconnected else { return }
        try await outcome.value(after: { [self] () -> Void? in cancelPeripheralConnection(peripheral); return nil })
    }
}

/// Apple's option dictionaries hold `Any`; these are read-only values (numbers, UUID arrays)
/// handed on to the manager's call, so carrying them into a `@Sendable` closure is safe.
struct ScanOptions: @unchecked Sendable {
    let dictionary: [String: Any]?
    init(_ dictionary: [String: Any]?) { self.dictionary = dictionary }
}
