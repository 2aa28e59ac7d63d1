import CoreBluetooth
import Foundation

/// One row of the scan list.
public struct ScanListEntry: Sendable, Equatable {
    /// The advertised local name, else the peripheral's name, else its identifier.
    public var name: String
    public var identifier: UUID
    public var rssi: Int
}

/// The book's ch. 4 "Scanner" (book-apps.md §1.3): once powered on, scans for everything for
/// 5 seconds (a 1-second countdown timer), listing each peripheral once, by identifier, with
/// its advertised local name — or, fixing the book, its `name` when it advertises none, and its
/// identifier when it has no name at all — and the RSSI it was first seen with.
public final class ScannerCentral: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    public let log: ExampleLog
    private let scanSeconds: Int
    private let queue: DispatchQueue?
    private let timers: ExampleTimers
    private let onDone: @Sendable (_ failure: String?) -> Void
    private(set) public var centralManager: CBCentralManager!
    private struct State {
        var entries: [ScanListEntry] = []
        var countdown = 0
        var timer: ExampleTimer?
        var scanning = false
        var done = false
    }
    private let state = Protected(State())

    /// The list, in discovery order.
    public var entries: [ScanListEntry] { state.value.entries }
    public var isScanning: Bool { state.value.scanning }
    public var isDone: Bool { state.value.done }

    public init(scanSeconds: Int = 5, queue: DispatchQueue? = nil, position: [Double]? = nil,
                timers: ExampleTimers = DispatchTimers(), log: ExampleLog = ExampleLog(),
                onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.scanSeconds = max(1, scanSeconds)
        self.queue = queue
        self.timers = timers
        self.log = log
        self.onDone = onDone
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn {
            // The manager handed in: this first callback may come before `init` stored it.
            startBleScan(on: central)
        } else {
            log("Bluetooth unavailable")
        }
    }

    /// Clears the list and scans for `scanSeconds`.
    public func startBleScan(on central: CBCentralManager? = nil) {
        log("discovering devices")
        let timer = timers.every(1, on: queue) { [weak self] in self?.tick() }
        state.update {
            $0.entries = []
            $0.countdown = scanSeconds
            $0.timer?.cancel()
            $0.timer = timer
            $0.scanning = true
        }
        (central ?? centralManager).scanForPeripherals(withServices: nil, options: nil)
    }

    private func tick() {
        let remaining = state.update { state -> Int in
            guard state.scanning else { return -1 }
            state.countdown -= 1
            return state.countdown
        }
        if remaining > 0 {
            log("\(remaining) seconds until BLE Scan ends")
        } else if remaining == 0 {
            stopBleScan()
        }
    }

    public func stopBleScan() {
        centralManager.stopScan()
        let entries = state.update { state -> [ScanListEntry] in
            state.timer?.cancel()
            state.timer = nil
            state.countdown = 0
            state.scanning = false
            state.done = true
            return state.entries
        }
        log("scan stopped: \(entries.count) peripheral\(entries.count == 1 ? "" : "s")")
        for entry in entries {
            log("  \(entry.name.padding(toLength: 36, withPad: " ", startingAt: 0))  \(entry.identifier.uuidString)  \(entry.rssi) dBm")
        }
        onDone(nil)
    }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {
        let advertisedName = (advertisementData[CBAdvertisementDataLocalNameKey] as? String).flatMap { $0.isEmpty ? nil : $0 }
        let name = advertisedName ?? peripheral.name.flatMap { $0.isEmpty ? nil : $0 } ?? peripheral.identifier.uuidString
        let entry = ScanListEntry(name: name, identifier: peripheral.identifier, rssi: RSSI.intValue)
        let isNew = state.update { state -> Bool in
            guard state.scanning, !state.entries.contains(where: { $0.identifier == entry.identifier }) else { return false }
            state.entries.append(entry)
            return true
        }
        if isNew { log("Discovered \(entry.identifier.uuidString) (\(name)) RSSI \(entry.rssi)") }
    }
}
