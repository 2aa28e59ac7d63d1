import CoreBluetooth
import Foundation

extension CBPeripheral {
    /// Starts a procedure and waits for the event that answers it. `start` runs once the taps
    /// are on and may answer at once (a non-nil value); a disconnection fails the wait with its
    /// error, cancelling the task with `CancellationError` (an ATT request cannot be withdrawn:
    /// its answer is dropped).
    private func perform<Value: Sendable>(_ start: (CBPeripheral) -> Value?,
                                          until answer: @escaping @Sendable (PeripheralEvent) -> Result<Value, any Error>?)
        async throws -> Value
    {
        try Task.checkCancellation()
        let outcome = Outcome<Value>()
        guard let watch = PeripheralWatch(self, onEvent: { event in if let result = answer(event) { outcome.finish(result) } },
                                          onEnd: { outcome.finish(.failure($0)) })
        else { throw CBError(.notConnected) }
        defer { watch.remove() }
        return try await outcome.value(after: { start(self) })
    }

    /// **Linux extension.** Discovers the services with these UUIDs (all when nil or empty)
    /// and returns them: `discoverServices(_:)`.
    public func services(_ serviceUUIDs: [CBUUID]?) async throws -> [CBService] {
        let wanted = serviceUUIDs.flatMap { $0.isEmpty ? nil : Set($0) }
        return try await perform({ $0.discoverServices(serviceUUIDs); return nil }, until: { [self] event in
            guard case .services(let error) = event else { return nil }
            if let error { return .failure(error) }
            return .success((services ?? []).filter { wanted?.contains($0.uuid) ?? true })
        })
    }

    /// **Linux extension.** Discovers characteristics of `service` (among these UUIDs, all
    /// when nil or empty) and returns them: `discoverCharacteristics(_:for:)`.
    public func characteristics(_ characteristicUUIDs: [CBUUID]?, for service: CBService) async throws -> [CBCharacteristic] {
        let wanted = characteristicUUIDs.flatMap { $0.isEmpty ? nil : Set($0) }
        return try await perform({ $0.discoverCharacteristics(characteristicUUIDs, for: service); return nil }, until: { event in
            guard case .characteristics(let found, let error) = event, found === service else { return nil }
            if let error { return .failure(error) }
            return .success((service.characteristics ?? []).filter { wanted?.contains($0.uuid) ?? true })
        })
    }

    /// **Linux extension.** Discovers the descriptors of `characteristic` and returns them:
    /// `discoverDescriptors(for:)`.
    public func descriptors(for characteristic: CBCharacteristic) async throws -> [CBDescriptor] {
        try await perform({ $0.discoverDescriptors(for: characteristic); return nil }, until: { event in
            guard case .descriptors(let found, let error) = event, found === characteristic else { return nil }
            if let error { return .failure(error) }
            return .success(characteristic.descriptors ?? [])
        })
    }

    /// **Linux extension.** Reads `characteristic`'s value: `readValue(for:)`. As with the
    /// delegate, a notification of the same characteristic arriving first answers the read.
    public func read(_ characteristic: CBCharacteristic) async throws -> Data {
        try await perform({ $0.readValue(for: characteristic); return nil }, until: { event in
            guard case .value(let read, let value, let error) = event, read === characteristic else { return nil }
            if let error { return .failure(error) }
            return .success(value ?? Data())
        })
    }

    /// **Linux extension.** Writes `data` to `characteristic`: `writeValue(_:for:type:)`.
    /// With `.withResponse` it returns once the peripheral confirmed the write (throwing its
    /// `CBATTError`); with `.withoutResponse` it waits while `canSendWriteWithoutResponse` is
    /// false (for `peripheralIsReady(toSendWriteWithoutResponse:)`) and returns once the write
    /// is queued.
    public func write(_ data: Data, to characteristic: CBCharacteristic, type: CBCharacteristicWriteType) async throws {
        guard type == .withoutResponse else {
            return try await perform({ $0.writeValue(data, for: characteristic, type: .withResponse); return nil }, until: { event in
                guard case .wrote(let written, let error) = event, written === characteristic else { return nil }
                return error.map { .failure($0) } ?? .success(())
            })
        }
        // Each round either sends (true) or waits for room and tries again.
        while try await !perform({ peripheral -> Bool? in
            guard peripheral.canSendWriteWithoutResponse else { return nil }
            peripheral.writeValue(data, for: characteristic, type: .withoutResponse)
            return true
        }, until: { event in
            guard case .readyToWrite = event else { return nil }
            return .success(false)
        }) {}
    }

    /// **Linux extension.** Reads the RSSI of the connection in dBm: `readRSSI()`.
    public func readRSSI() async throws -> Int {
        try await perform({ $0.readRSSI(); return nil }, until: { event in
            guard case .rssi(let rssi, let error) = event else { return nil }
            return error.map { .failure($0) } ?? .success(rssi)
        })
    }

    /// **Linux extension.** Opens an L2CAP channel to the peripheral's `PSM`
    /// (`openL2CAPChannel(_:)`) and returns it, pairing first if the peripheral asks for it;
    /// throws the error `peripheral(_:didOpen:error:)` reports. Keep the channel: releasing it
    /// closes it. A channel that opens after the task was cancelled is closed.
    public func openL2CAPChannel(_ PSM: CBL2CAPPSM) async throws -> CBL2CAPChannel {
        let start = { (peripheral: CBPeripheral) -> CBL2CAPChannel? in
            peripheral.openL2CAPChannel(PSM)
            return nil
        }
        return try await perform(start, until: { event in
            guard case .channel(let channel, let error) = event, channel == nil || channel?.psm == PSM else { return nil }
            if let channel { return .success(channel) }
            return .failure(error ?? CBError(.unknown))
        })
    }

    /// **Linux extension.** The values `characteristic` notifies or indicates while the
    /// sequence is iterated: `setNotifyValue(true, for:)` when iteration starts (a failure ends
    /// the sequence with its error), `setNotifyValue(false, for:)` when the iterating task ends
    /// or is cancelled. A disconnection ends the sequence with its error.
    ///
    /// One subscription per characteristic, as in Apple's API: the first of two sequences on
    /// one characteristic to end unsubscribes both.
    public func notifications(for characteristic: CBCharacteristic) -> CBThrowingEventSequence<Data> {
        CBThrowingEventSequence { [self] continuation in
            let watch = PeripheralWatch(self, onEvent: { event in
                switch event {
                case .value(let updated, let value, nil) where updated === characteristic:
                    continuation.yield(value ?? Data())
                case .notificationState(let updated, let error?) where updated === characteristic:
                    continuation.finish(throwing: error)
                default:
                    break
                }
            }, onEnd: { continuation.finish(throwing: $0) })
            guard let watch else { return continuation.finish(throwing: CBError(.notConnected)) }
            continuation.onTermination = { _ in
                watch.remove()
                // Not only when `isNotifying`: the subscription's answer may still be on its
                // way, and the unsubscription queues behind it.
                if watch.peripheral.state == .connected {
                    watch.peripheral.setNotifyValue(false, for: characteristic)
                }
            }
            setNotifyValue(true, for: characteristic)
        }
    }
}
