import CoreBluetooth
import Foundation

/// The book's ch. 11 "iBeacon" peripheral (book-apps.md §1.16): advertises proximity UUID
/// E20A39F4-73F5-4BC4-A12F-17D1AD07A961, major 1122, minor 3344. iOS builds that advertisement
/// with CoreLocation (`CLBeaconRegion.peripheralData(withMeasuredPower:)`); on Linux the
/// `CBPeripheralManager.linuxIBeaconAdvertisementData` extension does, and `startAdvertising`
/// takes it (`CBAdvertisementDataLinuxManufacturerDataKey`): a non-connectable advertisement.
///
/// The measured power is the RSSI at 1 m: −59 dBm on the virtual radio (its path-loss model's
/// reference), where the book's phone used −56.
public final class IBeaconPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let beaconUuid = UUID(uuidString: "e20a39f4-73f5-4bc4-a12f-17d1ad07a961")!
    public static let majorNumber: UInt16 = 1122
    public static let minorNumber: UInt16 = 3344
    /// The virtual radio's RSSI at 1 m.
    public static let measuredPower: Int8 = -59

    public let beacon: IBeaconAdvertisement
    public let log: ExampleLog
    private let advertising = Protected(false)
    private(set) public var peripheralManager: CBPeripheralManager!

    public var isAdvertising: Bool { advertising.value }

    public init(proximityUUID: UUID = IBeaconPeripheral.beaconUuid, major: UInt16 = IBeaconPeripheral.majorNumber,
                minor: UInt16 = IBeaconPeripheral.minorNumber, measuredPower: Int8 = IBeaconPeripheral.measuredPower,
                queue: DispatchQueue? = nil, position: [Double]? = nil, log: ExampleLog = ExampleLog()) {
        beacon = IBeaconAdvertisement(proximityUUID: proximityUUID, major: major, minor: minor, measuredPower: measuredPower)
        self.log = log
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        switch peripheral.state {
        case .poweredOn: startAdvertising(on: peripheral)
        case .poweredOff: stopAdvertising()
        default: break
        }
    }

    // The manager comes from the callback: the first state callback may run on the delegate
    // queue before `init` has stored `peripheralManager`.
    private func startAdvertising(on manager: CBPeripheralManager) {
        let data = CBPeripheralManager.linuxIBeaconAdvertisementData(
            proximityUUID: beacon.proximityUUID, major: beacon.major, minor: beacon.minor, measuredPower: beacon.measuredPower)
        manager.startAdvertising(data)
    }

    public func stopAdvertising() {
        peripheralManager.stopAdvertising()
        advertising.update { $0 = false }
        log("iBeacon stopped advertising")
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error { return log("Problem starting advertising: \(error.localizedDescription)") }
        advertising.update { $0 = true }
        log("iBeacon \(beacon.proximityUUID.uuidString) major \(beacon.major) minor \(beacon.minor) "
            + "measured power \(beacon.measuredPower) dBm advertising")
    }
}
