import CoreBluetooth
import Foundation

/// The book's ch. 8 "WriteCharacteristic" central (book-apps.md §1.10): connects to
/// `targetName`, finds 2A56 in 180C and, if it is writable, writes each message as UTF-8 cut to
/// 20 bytes — with response when the characteristic allows it, waiting for "data written"
/// before the next — then leaves.
public final class WriteCentral: BookCentral, @unchecked Sendable {
    public static let characteristicLength = 20
    private let messages: [String]
    private let state = Protected((next: 0, written: [Data]()))

    /// What was written (and confirmed, for writes with response), in order.
    public var written: [Data] { state.value.written }

    public init(targetName: String = WriteLoggerPeripheral.advertisingName, messages: [String] = ["Hello"],
                queue: DispatchQueue? = nil, position: [Double]? = nil, log: ExampleLog = ExampleLog(),
                onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.messages = messages
        super.init(targetName: targetName, serviceUuid: WriteLoggerPeripheral.serviceUuid,
                   characteristicUuid: WriteLoggerPeripheral.characteristicUuid, queue: queue, position: position,
                   log: log, onDone: onDone)
    }

    /// The bytes the book sends for `text`: its UTF-8, at most 20 bytes.
    public static func payload(_ text: String) -> Data {
        Data(Array(text.utf8).prefix(characteristicLength))
    }

    override func found(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral) {
        guard !characteristic.properties.isDisjoint(with: [.write, .writeWithoutResponse]) else {
            return leave(failure: "\(characteristic.uuid.uuidString) is not writable")
        }
        writeNext()
    }

    private func writeNext() {
        guard let peripheral, let characteristic else { return }
        let index = state.value.next
        guard index < messages.count else { return leave() }
        let data = Self.payload(messages[index])
        state.update { $0.next += 1 }
        log("write button pressed: \(messages[index].debugDescription)")
        if characteristic.properties.contains(.write) {
            peripheral.writeValue(data, for: characteristic, type: .withResponse)
        } else {
            // No confirmation comes for a write without response.
            peripheral.writeValue(data, for: characteristic, type: .withoutResponse)
            state.update { $0.written.append(data) }
            writeNext()
        }
    }

    override func valueWritten(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {
        if let error { return leave(failure: "write failed: \(error.localizedDescription)") }
        let index = state.value.next - 1
        state.update { $0.written.append(Self.payload(messages[index])) }
        log("data written")
        writeNext()
    }
}
