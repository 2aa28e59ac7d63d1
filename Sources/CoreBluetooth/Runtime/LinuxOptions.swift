import AssignedNumbers
import Foundation
import GAP

// Linux extensions to the managers' init options. Apple's keys start with "CB…OptionKey"; these
// are marked "Linux" in their names so that code using them is plainly not iOS code.

/// **Linux extension.** The controller this manager's device uses, in the form `CB_TRANSPORT`
/// takes (`String`): `virtual`, `virtual:PATH` (the radio `cbtool radio --listen PATH` hosts for
/// several processes), `tcp:HOST:PORT`, `unix:PATH`, `serial:DEVICE[:BAUD]`, `hci:N`.
/// Overrides `CB_TRANSPORT` for this manager.
public let CBManagerOptionLinuxTransportKey = "kCBLinuxOptionTransport"

/// **Linux extension.** The ``CBVirtualRadio`` this manager's device joins (instead of
/// ``CBVirtualRadio/shared``).
public let CBManagerOptionLinuxRadioKey = "kCBLinuxOptionRadio"

/// **Linux extension.** Where this manager's device stands on its virtual radio, in metres
/// (`[Double]`: x, y and optionally z); RSSI follows from the distances.
public let CBManagerOptionLinuxPositionKey = "kCBLinuxOptionPosition"

/// **Linux extension.** A btsnoop file to capture this manager's HCI traffic in (`String`),
/// instead of `CB_SNOOP`.
public let CBManagerOptionLinuxSnoopPathKey = "kCBLinuxOptionSnoopPath"

/// **Linux extension.** The directory this manager's controller keeps its bonds in (`String`),
/// instead of `CB_BOND_DIR` or `~/.local/state/corebluetooth-linux`. Managers sharing a
/// controller share its bonds: the first one that names a directory chooses it. A virtual
/// controller keeps bonds in memory unless a directory is named.
public let CBManagerOptionLinuxBondDirectoryKey = "kCBLinuxOptionBondDirectory"

/// **Linux extension.** Advertise and connect from resolvable private addresses (`Bool`, or
/// the rotation period in seconds as a number; true rotates every 15 minutes, as iOS does):
/// only bonded peers, which hold this device's IRK, recognise it. Off by default on Linux, so
/// that tools can reach a device at its fixed address; needs a controller with a resolving
/// list (the virtual one has it). Managers sharing a controller share the setting: the first
/// one that asks turns it on. Peers' private addresses are resolved whatever this says.
public let CBManagerOptionLinuxPrivacyKey = "kCBLinuxOptionPrivacy"

/// **Linux extension.** The smallest encryption key size pairing accepts, 7–16 bytes
/// (`Int`). 16 by default, against key-size downgrades; lower it only for old devices that
/// cannot do 16. Managers sharing a controller share it: the first one that names it sets it.
public let CBManagerOptionLinuxMinimumKeySizeKey = "kCBLinuxOptionMinimumKeySize"

/// **Linux extension.** Whether a read, write or subscription the peer refuses for want of
/// encryption or authentication makes the stack pair (or encrypt) and try again, as iOS does
/// (`Bool`, default true). False: the refusal is the answer (`CBATTError.insufficientEncryption`
/// or `.insufficientAuthentication`), and `linuxPair(_:completion:)` pairs when the app chooses:
/// how a tool finds out what a device protects. Managers sharing a controller share it: the
/// first one that names it sets it.
public let CBManagerOptionLinuxPairOnRefusalKey = "kCBLinuxOptionPairOnRefusal"

// MARK: Advertising manufacturer data (beacons)

/// **Linux extension.** Manufacturer-specific data for `CBPeripheralManager.startAdvertising(_:)`
/// to advertise (`Data`: the company identifier, little-endian, then the payload — the same form
/// `CBAdvertisementDataManufacturerDataKey` has in a central's `advertisementData`), accepted in
/// addition to Apple's two keys. On iOS the only way to advertise manufacturer data is an
/// iBeacon through CoreLocation (`CLBeaconRegion.peripheralData(withMeasuredPower:)`);
/// ``CBPeripheralManager/linuxIBeaconAdvertisementData(proximityUUID:major:minor:measuredPower:)``
/// builds that dictionary here.
///
/// It must hold at least the 2-octet company identifier and fit: at most 26 octets in the
/// advertisement beside the flags (29 in the scan response, next to no name); otherwise
/// `peripheralManagerDidStartAdvertising(_:error:)` reports `CBError.invalidParameters`.
/// With manufacturer data alone (no local name, no service UUIDs) the device advertises as a
/// beacon does: non-connectable and non-scannable (ADV_NONCONN_IND) every 100 ms, flags then the
/// manufacturer data in one advertisement. With a name or UUIDs too it stays connectable and
/// scannable; the manufacturer data goes in the advertisement after the UUIDs and name when it
/// fits there, else in the scan response.
public let CBAdvertisementDataLinuxManufacturerDataKey = "kCBLinuxAdvDataManufacturerData"

/// **Linux extension.** The advertising data bytes as they went on the air (`Data`, the AD
/// structures of the advertising PDU). A central finds it in `advertisementData` beside Apple's
/// keys; given to `startAdvertising(_:)` (at most 31 octets) it is advertised as it is, connectable
/// and scannable, instead of data packed from the other keys (the local name still becomes the
/// GAP Device Name): how `cbtool simulate` replays a recorded device's advertisement.
public let CBAdvertisementDataLinuxAdvertisingDataKey = "kCBLinuxAdvDataAdvertisingData"

/// **Linux extension.** The scan response bytes as they went on the air (`Data`), in a central's
/// `advertisementData` once a scan response came; for `startAdvertising(_:)`, with
/// ``CBAdvertisementDataLinuxAdvertisingDataKey`` (at most 31 octets).
public let CBAdvertisementDataLinuxScanResponseDataKey = "kCBLinuxAdvDataScanResponseData"

extension CBPeripheralManager {
    /// **Linux extension.** The advertisement data of an iBeacon, for
    /// `startAdvertising(_:)`: what CoreLocation's `CLBeaconRegion.peripheralData(withMeasuredPower:)`
    /// gives on iOS. One ``CBAdvertisementDataLinuxManufacturerDataKey`` entry: Apple's company
    /// identifier `4C 00`, beacon type `02`, length `15`, then the proximity UUID, major and minor
    /// (big-endian, unlike the rest of Bluetooth) and `measuredPower`, the RSSI in dBm at 1 m
    /// (signed). 25 octets, so the device advertises non-connectable, as iBeacons do.
    public static func linuxIBeaconAdvertisementData(proximityUUID: UUID, major: UInt16, minor: UInt16,
                                                     measuredPower: Int8) -> [String: Any] {
        let uuid = withUnsafeBytes(of: proximityUUID.uuid) { BluetoothUUID(bigEndian: Array($0))! }
        let beacon = IBeacon(proximityUUID: uuid, major: major, minor: minor, measuredPower: measuredPower)
        return [CBAdvertisementDataLinuxManufacturerDataKey: Data(beacon.manufacturerData.bytes)]
    }
}
