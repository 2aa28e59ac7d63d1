import CoreBluetooth
import CoreBluetoothAsync
import ExampleApps
import Foundation

/// A heart-rate monitor central in the async style (the Linux extension, `CoreBluetoothAsync`):
/// finds a sensor advertising the Heart Rate service (180D), connects, reads where it is worn
/// (2A38) and prints the measurements it notifies (2A37). The same code with a delegate would
/// be a class with seven callbacks and a state machine between them.
public struct HeartRateMonitor: Sendable {
    public static let service = CBUUID(string: "180D")
    public static let measurement = CBUUID(string: "2A37")
    public static let bodySensorLocation = CBUUID(string: "2A38")

    public let central: CBCentralManager
    public let log: ExampleLog

    public init(central: CBCentralManager, log: ExampleLog = ExampleLog()) {
        self.central = central
        self.log = log
    }

    /// Monitors the first sensor found until it sent `count` measurements, then disconnects
    /// and returns them.
    public func run(measurements count: Int) async throws -> [HeartRateMeasurement] {
        for await state in central.stateUpdates where state != .unknown && state != .resetting {
            guard state == .poweredOn else { throw CBError(.unknown) }
            break
        }
        log("scanning for heart rate sensors")
        var found: CBDiscovery?
        for await discovery in central.discoveries(withServices: [Self.service]) {
            found = discovery
            break  // the scan stops here
        }
        guard let sensor = found?.peripheral else { throw CBError(.unknown) }
        log("connecting to \(sensor.name ?? "a sensor") (RSSI \(found?.rssi ?? 0) dBm)")
        try await central.connect(sensor)
        do {
            let measurements = try await monitor(sensor, count: count)
            try await central.cancelConnection(sensor)
            log("disconnected")
            return measurements
        } catch {
            try? await central.cancelConnection(sensor)
            throw error
        }
    }

    private func monitor(_ sensor: CBPeripheral, count: Int) async throws -> [HeartRateMeasurement] {
        guard let service = try await sensor.services([Self.service]).first else { throw CBError(.unknown) }
        let characteristics = try await sensor.characteristics([Self.measurement, Self.bodySensorLocation], for: service)
        if let location = characteristics.first(where: { $0.uuid == Self.bodySensorLocation }),
           let place = try await sensor.read(location).first.flatMap(BodySensorLocation.init(rawValue:)) {
            log("sensor worn on the \(place)")
        }
        guard let measurement = characteristics.first(where: { $0.uuid == Self.measurement }) else {
            throw CBError(.unknown)
        }
        var measurements: [HeartRateMeasurement] = []
        // Subscribed while the loop runs; leaving it unsubscribes.
        for try await value in sensor.notifications(for: measurement) {
            guard let decoded = HeartRateMeasurement(value) else {
                log("malformed measurement \(value.map { String(format: "%02X", $0) }.joined())")
                continue
            }
            measurements.append(decoded)
            log("\(decoded.bpm) bpm\(decoded.sensorContact == false ? " (no skin contact)" : "")")
            if measurements.count == count { break }
        }
        return measurements
    }
}

/// A heart-rate sensor peripheral in the async style, for the monitor to find: Heart Rate
/// service (180D) with Body Sensor Location (2A38, "chest") and a measurement (2A37) notified
/// every `interval` while a central is subscribed.
public struct HeartRateSensor: Sendable {
    public static let advertisedName = "HeartRate"

    public let manager: CBPeripheralManager
    public let log: ExampleLog

    public init(manager: CBPeripheralManager, log: ExampleLog = ExampleLog()) {
        self.manager = manager
        self.log = log
    }

    /// The measurement sent `index`-th: a rate that drifts between 60 and 79 bpm, with its
    /// beat-to-beat interval.
    public static func measurement(_ index: Int) -> HeartRateMeasurement {
        let bpm = 60 + (index * 7) % 20
        return HeartRateMeasurement(bpm: bpm, sensorContact: true, rrIntervals: [60 * 1024 / bpm])
    }

    /// Publishes, advertises and serves until the task is cancelled.
    public func run(interval: Duration = .seconds(1)) async throws {
        for await state in manager.stateUpdates where state != .unknown && state != .resetting {
            guard state == .poweredOn else { throw CBError(.unknown) }
            break
        }
        let measurement = CBMutableCharacteristic(type: HeartRateMonitor.measurement, properties: [.notify], value: nil,
                                                  permissions: [])
        let location = CBMutableCharacteristic(type: HeartRateMonitor.bodySensorLocation, properties: [.read],
                                               value: Data([BodySensorLocation.chest.rawValue]), permissions: [.readable])
        let service = CBMutableService(type: HeartRateMonitor.service, primary: true)
        service.characteristics = [measurement, location]
        try await manager.add(service)
        // Listening before advertising, so that no subscription is missed.
        var requests = manager.requests.makeAsyncIterator()
        try await manager.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisedName,
                                            CBAdvertisementDataServiceUUIDsKey: [HeartRateMonitor.service]])
        log("advertising as \(Self.advertisedName)")
        var beating: Task<Void, any Error>?
        defer { beating?.cancel() }
        while let request = await requests.next() {
            switch request {
            case .subscribe where beating == nil:
                log("a monitor subscribed")
                let (manager, log) = (manager, log)
                beating = Task {
                    var index = 0
                    while true {
                        try await manager.updateValue(Self.measurement(index).encoded, for: measurement, onSubscribedCentrals: nil)
                        index += 1
                        try await Task.sleep(for: interval)
                        if measurement.subscribedCentrals?.isEmpty ?? true {
                            log("no monitor left")
                            return
                        }
                    }
                }
            case .unsubscribe where measurement.subscribedCentrals?.isEmpty ?? true:
                beating?.cancel()
                beating = nil
            default:
                break
            }
        }
    }
}
