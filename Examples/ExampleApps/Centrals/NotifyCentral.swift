import CoreBluetooth
import Foundation

/// The book's ch. 9 Notifications central (book-apps.md §1.12): connects to `targetName`, finds
/// 2A56 in 180C and, if it can notify, subscribes; each notified value is appended as a line of
/// ASCII. After `count` values it unsubscribes and leaves.
public final class NotifyCentral: BookCentral, @unchecked Sendable {
    private let count: Int
    private let state = Protected((values: [String](), subscribed: false, unsubscribing: false))

    /// The notified values, in order.
    public var values: [String] { state.value.values }
    public var isSubscribed: Bool { state.value.subscribed }

    public init(targetName: String = RandomTextPeripheral.advertisingName, count: Int = 3, queue: DispatchQueue? = nil,
                position: [Double]? = nil, log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.count = max(1, count)
        super.init(targetName: targetName, serviceUuid: RandomTextPeripheral.serviceUuid,
                   characteristicUuid: RandomTextPeripheral.characteristicUuid, queue: queue, position: position,
                   log: log, onDone: onDone)
    }

    override func found(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral) {
        guard characteristic.properties.contains(.notify) else {
            return leave(failure: "\(characteristic.uuid.uuidString) cannot notify")
        }
        peripheral.setNotifyValue(true, for: characteristic)
    }

    override func notificationStateUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {
        if let error { return leave(failure: "error subscribing to notification: \(error.localizedDescription)") }
        log("Notification state updated for: \(characteristic.uuid.uuidString)")
        log("New state: \(characteristic.isNotifying)")
        state.update { $0.subscribed = characteristic.isNotifying }
        if !characteristic.isNotifying { leave() }
    }

    override func valueUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {
        guard error == nil, let value = characteristic.value else { return }
        let text = String(data: value, encoding: .ascii) ?? hexString(value)
        let enough = state.update { state -> Bool in
            guard state.subscribed, !state.unsubscribing else { return false }
            state.values.append(text)
            state.unsubscribing = state.values.count >= count
            return state.unsubscribing
        }
        log(text)
        if enough { peripheral.setNotifyValue(false, for: characteristic) }
    }
}
