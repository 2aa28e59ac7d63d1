import CoreBluetooth
import Foundation

/// Which beacon: major and minor within one proximity UUID.
public struct BeaconID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var major: UInt16
    public var minor: UInt16
    public init(major: UInt16, minor: UInt16) { self.major = major; self.minor = minor }
    public static func < (a: BeaconID, b: BeaconID) -> Bool { (a.major, a.minor) < (b.major, b.minor) }
    public var description: String { "\(major)/\(minor)" }
}

/// A beacon as ranged so far.
public struct RangedBeacon: Sendable, Equatable {
    public var id: BeaconID
    public var measuredPower: Int
    /// Mean RSSI over the samples, dBm.
    public var rssi: Double
    public var samples: Int
    /// Metres, by log-distance path loss.
    public var distance: Double
}

/// The book's ch. 11 "BeaconLocator" (book-apps.md §1.15), without CoreLocation: scans with
/// duplicates, reads iBeacons of `proximityUUID` from the manufacturer data, ranges each beacon
/// (major/minor, de-duplicated) from its mean RSSI and advertised measured power, and once three
/// beacons whose places are known (`beaconPositions`; the book never set them) have `samples`
/// readings each, trilaterates the central's position from the first three (by major, minor) and
/// stops.
public final class BeaconLocatorCentral: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    public let log: ExampleLog
    private let proximityUUID: UUID
    private let beaconPositions: [BeaconID: Point]
    private let propagationConstant: Double
    private let samplesPerBeacon: Int
    private let onDone: @Sendable (_ failure: String?) -> Void
    private(set) public var centralManager: CBCentralManager!
    private struct State {
        var samples: [BeaconID: (power: Int, rssi: [Int])] = [:]
        var estimate: Point?
        var done = false
    }
    private let state = Protected(State())

    /// The beacons heard, by major and minor.
    public var beacons: [RangedBeacon] {
        state.value.samples.keys.sorted().compactMap { ranged($0, state.value.samples[$0]!) }
    }
    /// The central's estimated position, once located.
    public var estimatedPosition: Point? { state.value.estimate }
    public var isDone: Bool { state.value.done }

    public init(proximityUUID: UUID = IBeaconPeripheral.beaconUuid, beaconPositions: [BeaconID: Point],
                propagationConstant: Double = 2, samples: Int = 3, queue: DispatchQueue? = nil, position: [Double]? = nil,
                log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        self.proximityUUID = proximityUUID
        self.beaconPositions = beaconPositions
        self.propagationConstant = propagationConstant
        samplesPerBeacon = max(1, samples)
        self.log = log
        self.onDone = onDone
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    private func ranged(_ id: BeaconID, _ entry: (power: Int, rssi: [Int])) -> RangedBeacon? {
        guard !entry.rssi.isEmpty else { return nil }
        let mean = Double(entry.rssi.reduce(0, +)) / Double(entry.rssi.count)
        guard let distance = Ranging.distance(rssi: mean, measuredPower: Double(entry.power),
                                              propagationConstant: propagationConstant) else { return nil }
        return RangedBeacon(id: id, measuredPower: entry.power, rssi: mean, samples: entry.rssi.count, distance: distance)
    }

    public func centralManagerDidUpdateState(_ central: CBCentralManager) {
        guard central.state == .poweredOn else { return log("ranging unavailable") }
        log("starting scan")
        central.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
    }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard let data = advertisementData[CBAdvertisementDataManufacturerDataKey] as? Data,
              let beacon = IBeaconAdvertisement(manufacturerData: data), beacon.proximityUUID == proximityUUID,
              RSSI.intValue < 0 else { return }  // 127: not measured
        let id = BeaconID(major: beacon.major, minor: beacon.minor)
        let (isNew, ready) = state.update { state -> (Bool, [RangedBeacon]?) in
            guard !state.done else { return (false, nil) }
            let isNew = state.samples[id] == nil
            var entry = state.samples[id] ?? (Int(beacon.measuredPower), [])
            entry.power = Int(beacon.measuredPower)
            if entry.rssi.count < samplesPerBeacon { entry.rssi.append(RSSI.intValue) }
            state.samples[id] = entry
            let placed = state.samples.keys.sorted().filter { beaconPositions[$0] != nil
                && state.samples[$0]!.rssi.count >= samplesPerBeacon }
            guard placed.count >= 3 else { return (isNew, nil) }
            state.done = true
            return (isNew, placed.prefix(3).compactMap { ranged($0, state.samples[$0]!) })
        }
        if isNew { log("found beacon \(id) (measured power \(beacon.measuredPower) dBm)") }
        guard let ready else { return }
        central.stopScan()
        for beacon in ready {
            log("beacon \(beacon.id) at \(beaconPositions[beacon.id]!): RSSI \(String(format: "%.1f", beacon.rssi)) dBm"
                + " -> \(String(format: "%.2f", beacon.distance)) m")
        }
        if ready.count == 3,
           let estimate = Ranging.trilaterate(beaconPositions[ready[0].id]!, ready[0].distance,
                                              beaconPositions[ready[1].id]!, ready[1].distance,
                                              beaconPositions[ready[2].id]!, ready[2].distance) {
            state.update { $0.estimate = estimate }
            log("central position: \(estimate)")
        } else {
            log("cannot locate: the beacons are on one line")
        }
        onDone(nil)
    }
}
