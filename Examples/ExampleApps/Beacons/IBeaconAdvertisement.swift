import Foundation

/// An iBeacon as a central reads it from `CBAdvertisementDataManufacturerDataKey`: Apple's company
/// identifier `4C 00` (little-endian), type `02`, length `15`, then the proximity UUID, major and
/// minor (big-endian) and the measured power (RSSI at 1 m, signed): 25 bytes. On iOS CoreLocation
/// decodes this (`CLBeacon`); here the example does it itself.
public struct IBeaconAdvertisement: Sendable, Hashable {
    public var proximityUUID: UUID
    public var major: UInt16
    public var minor: UInt16
    /// RSSI in dBm at 1 m.
    public var measuredPower: Int8

    public init(proximityUUID: UUID, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// Nil unless `manufacturerData` is exactly an iBeacon.
    public init?(manufacturerData: Data) {
        let bytes = [UInt8](manufacturerData)
        guard bytes.count == 25, bytes[0] == 0x4C, bytes[1] == 0x00, bytes[2] == 0x02, bytes[3] == 0x15 else { return nil }
        let u = Array(bytes[4..<20])
        proximityUUID = UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7],
                                    u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]))
        major = UInt16(bytes[20]) << 8 | UInt16(bytes[21])
        minor = UInt16(bytes[22]) << 8 | UInt16(bytes[23])
        measuredPower = Int8(bitPattern: bytes[24])
    }

    /// The 25 bytes (the inverse of `init?(manufacturerData:)`).
    public var manufacturerData: Data {
        var bytes: [UInt8] = [0x4C, 0x00, 0x02, 0x15]
        withUnsafeBytes(of: proximityUUID.uuid) { bytes += $0 }
        bytes += [UInt8(major >> 8), UInt8(major & 0xFF), UInt8(minor >> 8), UInt8(minor & 0xFF)]
        bytes.append(UInt8(bitPattern: measuredPower))
        return Data(bytes)
    }
}
