import CoreBluetooth
import Foundation
import Scheduling

/// **Linux extension.** What a central asked of a peripheral manager's services: the
/// delegate's requests and subscription changes, as one value. Answer reads and writes with
/// the manager's `respond(to:withResult:)`, as the delegate would.
public enum CBPeripheralManagerRequest: Sendable {
    /// `peripheralManager(_:didReceiveRead:)`: set the request's `value` (from its `offset`
    /// on) and respond.
    case read(CBATTRequest)
    /// `peripheralManager(_:didReceiveWrite:)`: one batch (a reliable write's batch applies
    /// all or nothing); respond once, with the first request.
    case write([CBATTRequest])
    /// `peripheralManager(_:central:didSubscribeTo:)`.
    case subscribe(CBCentral, CBCharacteristic)
    /// `peripheralManager(_:central:didUnsubscribeFrom:)`.
    case unsubscribe(CBCentral, CBCharacteristic)
}

/// A peripheral manager's delegate events, as values.
enum PeripheralManagerEvent: Sendable {
    case state(CBManagerState)
    case added(CBService, (any Error)?)
    case advertising((any Error)?)
    case request(CBPeripheralManagerRequest)
    case readyToUpdate
    case published(CBL2CAPPSM, (any Error)?)
    case opened(CBL2CAPChannel?, (any Error)?)
}

/// An observer on a peripheral manager's event tap.
final class PeripheralManagerTap: NSObject, CBPeripheralManagerDelegate {
    private let handler: @Sendable (PeripheralManagerEvent) -> Void

    init(_ handler: @escaping @Sendable (PeripheralManagerEvent) -> Void) { self.handler = handler }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { handler(.state(peripheral.state)) }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        handler(.added(service, error))
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) { handler(.advertising(error)) }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        handler(.request(.read(request)))
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        handler(.request(.write(requests)))
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        handler(.request(.subscribe(central, characteristic)))
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                           didUnsubscribeFrom characteristic: CBCharacteristic) {
        handler(.request(.unsubscribe(central, characteristic)))
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) { handler(.readyToUpdate) }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        handler(.published(PSM, error))
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        handler(.opened(channel, error))
    }
}

/// The error of an await that the manager's leaving `.poweredOn` ends.
private func poweredOff(_ state: CBManagerState) -> CBError {
    CBError(.unknown, userInfo: [NSLocalizedDescriptionKey: "the peripheral manager is not powered on (state \(state.rawValue))"])
}

/// Apple's advertisement dictionary holds `Any`: strings, UUID arrays and data, read-only and
/// handed on to the manager's call, so carrying it into a `@Sendable` closure is safe.
private struct AdvertisementData: @unchecked Sendable {
    let dictionary: [String: Any]?
}

extension CBPeripheralManager {
    /// **Linux extension.** The manager's state now, then each change: what
    /// `peripheralManagerDidUpdateState(_:)` reports, heard beside the delegate.
    public var stateUpdates: CBEventSequence<CBManagerState> {
        CBEventSequence { [self] continuation in
            let token = addEventTap(PeripheralManagerTap { event in
                if case .state(let state) = event { continuation.yield(state) }
            })
            continuation.yield(state)
            continuation.onTermination = { [self] _ in removeEventTap(token) }
        }
    }

    /// Waits for the first event `answer` maps to a result, with a tap on the manager; the
    /// manager's leaving `.poweredOn` fails the wait. `start` runs once the tap is on and may
    /// answer at once (a non-nil value).
    private func perform<Value: Sendable>(_ start: () -> Value?,
                                          onCancel: @escaping @Sendable () -> Void = {},
                                          until answer: @escaping @Sendable (PeripheralManagerEvent) -> Result<Value, any Error>?)
        async throws -> Value
    {
        try Task.checkCancellation()
        guard state == .poweredOn else { throw poweredOff(state) }
        let outcome = Outcome<Value>()
        let token = addEventTap(PeripheralManagerTap { event in
            if case .state(let state) = event, state != .poweredOn {
                outcome.finish(.failure(poweredOff(state)))
            } else if let result = answer(event) {
                outcome.finish(result)
            }
        })
        defer { removeEventTap(token) }
        return try await outcome.value(onCancel: onCancel, after: start)
    }

    /// **Linux extension.** Publishes `service` (`add(_:)`) and returns once it is in the
    /// database; throws the error `peripheralManager(_:didAdd:error:)` reports. Cancelling the
    /// task throws `CancellationError`, and the service is removed again if it was added.
    public func add(_ service: CBMutableService) async throws {
        try Task.checkCancellation()
        guard state == .poweredOn else { throw poweredOff(state) }
        // Whichever finishes the outcome first, the answer or the cancellation, decides; a
        // cancelled wait leaves its tap on until the answer, to remove a service added after all.
        let token = Locked<CBEventTapToken?>(nil)
        let outcome = Outcome<Void>()
        let tap = PeripheralManagerTap { [self] event in
            let result: Result<Void, any Error>
            switch event {
            case .added(let added, let error) where added === service:
                result = error.map { .failure($0) } ?? .success(())
            case .state(let state) where state != .poweredOn:
                result = .failure(poweredOff(state))
            default:
                return
            }
            guard !outcome.finish(result) else { return }
            if case .success = result { remove(service) }
            token.withLock { $0 }.map(removeEventTap)
        }
        token.withLock { $0 = addEventTap(tap) }
        var asked = false
        var keepTap = false
        defer { if !keepTap { token.withLock { $0 }.map(removeEventTap) } }
        do {
            // In a synchronous closure, so that the name means Apple's call and not this one.
            try await outcome.value(after: { [self] () -> Void? in
                asked = true
                add(service)
                return nil
            })
        } catch is CancellationError where asked {
            // The answer is still to come: the tap removes the service if it was added.
            keepTap = true
            throw CancellationError()
        }
    }

    /// **Linux extension.** Starts advertising (`startAdvertising(_:)`) and returns once the
    /// advertising is on; throws the error `peripheralManagerDidStartAdvertising(_:error:)`
    /// reports. Cancelling the task stops the advertising and throws `CancellationError`.
    public func startAdvertising(_ advertisementData: [String: Any]?) async throws {
        let data = AdvertisementData(dictionary: advertisementData)
        let start = { [self] () -> Void? in startAdvertising(data.dictionary); return nil }
        try await perform(start, onCancel: { [self] in stopAdvertising() }, until: { event in
            guard case .advertising(let error) = event else { return nil }
            return error.map { .failure($0) } ?? .success(())
        })
    }

    /// **Linux extension.** Reads, write batches and subscription changes from centrals while
    /// the sequence is iterated, heard beside the delegate (answer each read and write once:
    /// here or in the delegate, not both). The sequence ends if the manager leaves `.poweredOn`
    /// after it was on, as the published services are gone then.
    public var requests: CBEventSequence<CBPeripheralManagerRequest> {
        CBEventSequence { [self] continuation in
            let wasOn = Locked(state == .poweredOn)
            let token = addEventTap(PeripheralManagerTap { event in
                switch event {
                case .request(let request):
                    continuation.yield(request)
                case .state(.poweredOn):
                    wasOn.withLock { $0 = true }
                case .state(.unknown), .state(.resetting):
                    break
                case .state:
                    if wasOn.withLock({ $0 }) { continuation.finish() }
                default:
                    break
                }
            })
            continuation.onTermination = { [self] _ in removeEventTap(token) }
        }
    }

    /// **Linux extension.** Sends `value` to the subscribed centrals (all when `centrals` is
    /// nil), as `updateValue(_:for:onSubscribedCentrals:)` does, but where that returns false
    /// for a full transmit queue this waits for `peripheralManagerIsReady(toUpdateSubscribers:)`
    /// and tries again. Returns once the value is queued. Cancelling the task while it waits
    /// throws `CancellationError` and sends nothing.
    public func updateValue(_ value: Data, for characteristic: CBMutableCharacteristic,
                            onSubscribedCentrals centrals: [CBCentral]?) async throws {
        let send = { [self] () -> Bool in updateValue(value, for: characteristic, onSubscribedCentrals: centrals) }
        // Each round either sends (true) or waits for readiness and tries again; the tap is on
        // before the try, so a readiness between the two is not missed.
        while try await !perform({ send() ? true : nil }, until: { event in
            guard case .readyToUpdate = event else { return nil }
            return .success(false)
        }) {}
    }

    /// **Linux extension.** Publishes an L2CAP channel server (`publishL2CAPChannel(withEncryption:)`)
    /// and returns its PSM; channels centrals open arrive in ``openedChannels``.
    public func publishL2CAPChannel(withEncryption encryptionRequired: Bool) async throws -> CBL2CAPPSM {
        let start = { [self] () -> CBL2CAPPSM? in
            publishL2CAPChannel(withEncryption: encryptionRequired)
            return nil
        }
        return try await perform(start, until: { event in
            guard case .published(let psm, let error) = event else { return nil }
            return error.map { .failure($0) } ?? .success(psm)
        })
    }

    /// **Linux extension.** The channels centrals open to this manager's published PSMs while
    /// the sequence is iterated (`peripheralManager(_:didOpen:error:)`). Keep each channel:
    /// releasing it closes it.
    public var openedChannels: CBEventSequence<CBL2CAPChannel> {
        CBEventSequence { [self] continuation in
            let token = addEventTap(PeripheralManagerTap { event in
                if case .opened(let channel?, _) = event { continuation.yield(channel) }
            })
            continuation.onTermination = { [self] _ in removeEventTap(token) }
        }
    }
}
