import CoreBluetooth
import Foundation
import Scheduling

/// Labels of things that happened, and tasks waiting for one to happen (no sleeping, no
/// polling: each append wakes the waiters whose label arrived).
final class Happenings: Sendable {
    private struct State {
        var seen: [String] = []
        var waiters: [(label: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        func count(_ label: String) -> Int { seen.count { $0 == label } }
    }

    private let state = Locked(State())

    var all: [String] { state.withLock { $0.seen } }

    func append(_ label: String) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.seen.append(label)
            let count = state.count(label)
            let ready = state.waiters.filter { $0.label == label && $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.label == label && $0.count <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once `label` was appended `count` times (at once if it already was).
    func wait(for label: String, count: Int = 1) async {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Bool in
                if state.count(label) >= count { return true }
                state.waiters.append((label, count, continuation))
                return false
            }
            if already { continuation.resume() }
        }
    }
}

/// A peripheral manager serving one service: a readable characteristic (answered from
/// `readValue`, or held unanswered while `holdReads` is set), a writable one (with and without
/// response) and a notifying one. It advertises as "Async" once its service is added.
final class TestPeripheral: NSObject, CBPeripheralManagerDelegate, Sendable {
    static let service = CBUUID(string: "5A1E0001-0000-1000-8000-00805F9B34FB")
    static let readable = CBUUID(string: "5A1E0002-0000-1000-8000-00805F9B34FB")
    static let writable = CBUUID(string: "5A1E0003-0000-1000-8000-00805F9B34FB")
    static let notifying = CBUUID(string: "5A1E0004-0000-1000-8000-00805F9B34FB")
    static let marker = CBUUID(string: "5A1E00FF-0000-1000-8000-00805F9B34FB")
    static let readValue = Data("hello async".utf8)

    let happenings = Happenings()
    let writes = Locked<[Data]>([])
    let holdReads = Locked(false)
    let notifyingCharacteristic = CBMutableCharacteristic(type: notifying, properties: [.notify], value: nil, permissions: [])
    private let manager = Locked<CBPeripheralManager?>(nil)

    func start(on radio: CBVirtualRadio) {
        let made = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: self, queue: DispatchQueue(label: "test peripheral"))
        }
        manager.withLock { $0 = made }
    }

    /// Sends `value` to the subscribed central.
    func notify(_ value: Data) -> Bool {
        manager.withLock { $0 }?.updateValue(value, for: notifyingCharacteristic, onSubscribedCentrals: nil) ?? false
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: Self.service, primary: true)
        service.characteristics = [
            CBMutableCharacteristic(type: Self.readable, properties: [.read], value: nil, permissions: [.readable]),
            CBMutableCharacteristic(type: Self.writable, properties: [.write, .writeWithoutResponse], value: nil,
                                    permissions: [.writeable]),
            notifyingCharacteristic,
        ]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        guard service.uuid == Self.service else { return happenings.append("stopped") }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Async", CBAdvertisementDataServiceUUIDsKey: [Self.service]])
    }

    /// Stops advertising, so that a connection to it stays pending; "stopped" follows once the
    /// manager's loop is past the stop (a service added after it was added).
    func stopAdvertising() {
        let manager = manager.withLock { $0 }
        manager?.stopAdvertising()
        manager?.add(CBMutableService(type: Self.marker, primary: true))
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        happenings.append("advertising")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        happenings.append("read")
        guard !holdReads.withLock({ $0 }) else { return }
        request.value = Self.readValue.subdata(in: request.offset ..< Self.readValue.count)
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        writes.withLock { $0 += requests.compactMap(\.value) }
        peripheral.respond(to: requests[0], withResult: .success)
        happenings.append("write")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        happenings.append("subscribed")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        happenings.append("unsubscribed")
    }
}

/// The app's own delegate on the central: the async calls must leave it in place and it must
/// still hear everything.
final class AppDelegate: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, Sendable {
    let happenings = Happenings()

    func centralManagerDidUpdateState(_ central: CBCentralManager) { happenings.append("state \(central.state.rawValue)") }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) { happenings.append("connected") }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        happenings.append("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        happenings.append("value \(characteristic.uuid)")
    }
}
