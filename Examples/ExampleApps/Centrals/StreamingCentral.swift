import CoreBluetooth
import Foundation

/// The book's ch. 10 flow-controlled streaming central (book-apps.md §1.14): connects to
/// `targetName`, subscribes to 2A56 (or it would never hear "ready"), then writes the message +
/// NUL in 20-byte chunks, each after the peripheral's "ready" notification; then leaves.
/// "Hello" is one 6-byte write, a 45-character message writes of 20, 20 and 6 bytes.
public final class StreamingCentral: BookCentral, @unchecked Sendable {
    public static let characteristicLength = 20
    public static let flowControlMessage = "ready"
    private let message: String
    private let state = Protected((outbound: [UInt8](), packetOffset: 0, sent: [Data](), complete: false))

    /// Every chunk written, in order.
    public var sent: [Data] { state.value.sent }
    public var isComplete: Bool { state.value.complete }

    public init(targetName: String = FlowControlPeripheral.advertisingName, message: String, queue: DispatchQueue? = nil,
                position: [Double]? = nil, log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.message = message
        super.init(targetName: targetName, serviceUuid: FlowControlPeripheral.serviceUuid,
                   characteristicUuid: FlowControlPeripheral.characteristicUuid, queue: queue, position: position,
                   log: log, onDone: onDone)
    }

    override func found(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral) {
        guard characteristic.properties.contains(.notify),
              !characteristic.properties.isDisjoint(with: [.write, .writeWithoutResponse]) else {
            return leave(failure: "\(characteristic.uuid.uuidString) must be writable and notify")
        }
        peripheral.setNotifyValue(true, for: characteristic)
    }

    override func notificationStateUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {
        if let error { return leave(failure: "error subscribing to notification: \(error.localizedDescription)") }
        guard characteristic.isNotifying else { return }
        state.update {
            $0.outbound = Array((message + "\0").utf8)
            $0.packetOffset = 0
        }
        writePartialValue()
    }

    private func writePartialValue() {
        guard let peripheral, let characteristic else { return }
        let (chunk, range) = state.update { state -> (Data, Range<Int>) in
            let range = state.packetOffset..<min(state.packetOffset + Self.characteristicLength, state.outbound.count)
            let chunk = Data(state.outbound[range])
            state.sent.append(chunk)
            return (chunk, range)
        }
        log("writing partial value: (\(range.lowerBound)-\(range.upperBound - 1))")
        let type: CBCharacteristicWriteType = characteristic.properties.contains(.writeWithoutResponse) ? .withoutResponse : .withResponse
        peripheral.writeValue(chunk, for: characteristic, type: type)
    }

    override func valueUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {
        guard error == nil, let value = characteristic.value,
              String(data: value, encoding: .ascii) == Self.flowControlMessage else { return }
        let more = state.update { state -> Bool? in
            guard !state.complete, !state.outbound.isEmpty else { return nil }
            state.packetOffset += Self.characteristicLength
            if state.packetOffset < state.outbound.count { return true }
            state.complete = true
            return false
        }
        switch more {
        case true?: writePartialValue()
        case false?:
            log("value write complete")
            leave()
        case nil: break
        }
    }
}
