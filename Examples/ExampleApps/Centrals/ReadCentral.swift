import CoreBluetooth
import Foundation

/// The book's ch. 7 Read central (book-apps.md §1.8): connects to `targetName`, finds 2A56 in
/// 180C and, if it is readable, reads it `reads` times, `interval` seconds apart (the book's
/// Read button, disabled until each result), appending each value as a line of ASCII; then
/// leaves. A value that is not ASCII is shown in hex.
public final class ReadCentral: BookCentral, @unchecked Sendable {
    private let reads: Int
    private let interval: Double
    private let timers: ExampleTimers
    private struct State {
        var values: [String] = []
        var inFlight = false
        var timer: ExampleTimer?
    }
    private let state = Protected(State())

    /// The values read, in order.
    public var values: [String] { state.value.values }

    public init(targetName: String = RandomTextPeripheral.advertisingName, reads: Int = 3, interval: Double = 5,
                queue: DispatchQueue? = nil, position: [Double]? = nil, timers: ExampleTimers = DispatchTimers(),
                log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.reads = max(1, reads)
        self.interval = interval
        self.timers = timers
        super.init(targetName: targetName, serviceUuid: RandomTextPeripheral.serviceUuid,
                   characteristicUuid: RandomTextPeripheral.characteristicUuid, queue: queue, position: position,
                   log: log, onDone: onDone)
    }

    override func found(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral) {
        guard characteristic.properties.rawValue & CBCharacteristicProperties.read.rawValue != 0 else {
            return leave(failure: "\(characteristic.uuid.uuidString) is not readable")
        }
        read()
        if reads > 1 {
            let timer = timers.every(interval, on: queue) { [weak self] in self?.read() }
            state.update { $0.timer = timer }
        }
    }

    /// The Read button: one read unless one is under way.
    public func read() {
        guard let peripheral, let characteristic else { return }
        let go = state.update { state -> Bool in
            guard !state.inFlight, state.values.count < reads else { return false }
            state.inFlight = true
            return true
        }
        guard go else { return }
        log("pressed button")
        peripheral.readValue(for: characteristic)
    }

    override func valueUpdated(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral, error: Error?) {
        if let error { return leave(failure: "read failed: \(error.localizedDescription)") }
        let value = characteristic.value ?? Data()
        let text = String(data: value, encoding: .ascii) ?? hexString(value)
        let finished = state.update { state -> Bool in
            state.inFlight = false
            state.values.append(text)
            guard state.values.count >= reads else { return false }
            state.timer?.cancel()
            state.timer = nil
            return true
        }
        log(text)
        if finished { leave() }
    }
}
