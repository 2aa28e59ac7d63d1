import AssignedNumbers
import ByteCoding

/// Apple's iBeacon advertisement: Manufacturer Specific Data from Apple (company 0x004C) with
/// beacon type 0x02 and length 0x15, then the proximity UUID, major and minor — all three
/// big-endian, unlike the rest of Bluetooth — and the measured power (RSSI at 1 m) as a signed
/// octet. On the air, with flags 0x06: `02 01 06 1A FF 4C 00 02 15 <uuid×16> <major×2> <minor×2> <power>`.
public struct IBeacon: Hashable, Sendable {
    public static let appleCompanyIdentifier: UInt16 = 0x004C
    static let beaconType: UInt8 = 0x02
    /// Octets after the type and length octets: UUID, major, minor, measured power.
    static let payloadLength: UInt8 = 0x15

    public var proximityUUID: BluetoothUUID
    public var major: UInt16
    public var minor: UInt16
    /// RSSI in dBm measured at 1 m from the beacon.
    public var measuredPower: Int8

    public init(proximityUUID: BluetoothUUID, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// The manufacturer data (encoder).
    public var manufacturerData: ManufacturerData {
        var payload: [UInt8] = [Self.beaconType, Self.payloadLength] + proximityUUID.bigEndianBytes
        payload += [UInt8(major >> 8), UInt8(truncatingIfNeeded: major), UInt8(minor >> 8), UInt8(truncatingIfNeeded: minor)]
        payload.append(UInt8(bitPattern: measuredPower))
        return ManufacturerData(companyIdentifier: Self.appleCompanyIdentifier, data: payload)
    }

    /// From manufacturer data (decoder); nil unless it is exactly an iBeacon payload from Apple.
    public init?(manufacturerData: ManufacturerData) {
        guard manufacturerData.companyIdentifier == Self.appleCompanyIdentifier else { return nil }
        var reader = ByteReader(manufacturerData.data, context: "iBeacon")
        guard (try? reader.u8()) == Self.beaconType, (try? reader.u8()) == Self.payloadLength,
              reader.remaining == Int(Self.payloadLength),
              let uuid = (try? reader.bytes(16)).flatMap({ BluetoothUUID(bigEndian: $0) }),
              let major = try? reader.bytes(2), let minor = try? reader.bytes(2), let power = try? reader.i8()
        else { return nil }
        self.init(proximityUUID: uuid, major: UInt16(major[0]) << 8 | UInt16(major[1]),
                  minor: UInt16(minor[0]) << 8 | UInt16(minor[1]), measuredPower: power)
    }

    /// The whole advertising data: flags 0x06 (LE General Discoverable, BR/EDR Not Supported)
    /// and the manufacturer data, 30 octets.
    public var advertisingData: AdvertisingData {
        [.flags(.leGeneralDiscoverableLEOnly), .manufacturerData(manufacturerData)]
    }

    /// The first iBeacon in `advertisingData`, if any.
    public init?(advertisingData: AdvertisingData) {
        guard let beacon = advertisingData.manufacturerData.lazy.compactMap(IBeacon.init(manufacturerData:)).first else { return nil }
        self = beacon
    }
}
