/// The type octet of an AD structure: the SIG's "Common Data Types" assigned numbers
/// (Assigned Numbers §2.3, defined in the Core Specification Supplement Part A).
///
/// A struct rather than an enum so that types this module does not know (newer assignments,
/// vendor experiments) still decode and re-encode unchanged.
public struct AdvertisingDataType: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let flags = Self(0x01)
    public static let incompleteList16BitServiceUUIDs = Self(0x02)
    public static let completeList16BitServiceUUIDs = Self(0x03)
    public static let incompleteList32BitServiceUUIDs = Self(0x04)
    public static let completeList32BitServiceUUIDs = Self(0x05)
    public static let incompleteList128BitServiceUUIDs = Self(0x06)
    public static let completeList128BitServiceUUIDs = Self(0x07)
    public static let shortenedLocalName = Self(0x08)
    public static let completeLocalName = Self(0x09)
    public static let txPowerLevel = Self(0x0A)
    public static let classOfDevice = Self(0x0D)
    public static let simplePairingHashC192 = Self(0x0E)
    public static let simplePairingRandomizerR192 = Self(0x0F)
    /// Device ID and Security Manager TK Value share this number (the context tells them apart).
    public static let deviceID = Self(0x10)
    public static let securityManagerOOBFlags = Self(0x11)
    public static let peripheralConnectionIntervalRange = Self(0x12)
    public static let list16BitServiceSolicitationUUIDs = Self(0x14)
    public static let list128BitServiceSolicitationUUIDs = Self(0x15)
    public static let serviceData16BitUUID = Self(0x16)
    public static let publicTargetAddress = Self(0x17)
    public static let randomTargetAddress = Self(0x18)
    public static let appearance = Self(0x19)
    public static let advertisingInterval = Self(0x1A)
    public static let leBluetoothDeviceAddress = Self(0x1B)
    public static let leRole = Self(0x1C)
    public static let simplePairingHashC256 = Self(0x1D)
    public static let simplePairingRandomizerR256 = Self(0x1E)
    public static let list32BitServiceSolicitationUUIDs = Self(0x1F)
    public static let serviceData32BitUUID = Self(0x20)
    public static let serviceData128BitUUID = Self(0x21)
    public static let leSecureConnectionsConfirmationValue = Self(0x22)
    public static let leSecureConnectionsRandomValue = Self(0x23)
    public static let uri = Self(0x24)
    public static let indoorPositioning = Self(0x25)
    public static let transportDiscoveryData = Self(0x26)
    public static let leSupportedFeatures = Self(0x27)
    public static let channelMapUpdateIndication = Self(0x28)
    public static let pbADV = Self(0x29)
    public static let meshMessage = Self(0x2A)
    public static let meshBeacon = Self(0x2B)
    public static let bigInfo = Self(0x2C)
    public static let broadcastCode = Self(0x2D)
    public static let resolvableSetIdentifier = Self(0x2E)
    public static let advertisingIntervalLong = Self(0x2F)
    public static let broadcastName = Self(0x30)
    public static let encryptedAdvertisingData = Self(0x31)
    public static let periodicAdvertisingResponseTimingInformation = Self(0x32)
    public static let electronicShelfLabel = Self(0x34)
    public static let threeDInformationData = Self(0x3D)
    public static let manufacturerSpecificData = Self(0xFF)

    private static let names: [UInt8: String] = [
        0x01: "Flags",
        0x02: "Incomplete List of 16-bit Service UUIDs", 0x03: "Complete List of 16-bit Service UUIDs",
        0x04: "Incomplete List of 32-bit Service UUIDs", 0x05: "Complete List of 32-bit Service UUIDs",
        0x06: "Incomplete List of 128-bit Service UUIDs", 0x07: "Complete List of 128-bit Service UUIDs",
        0x08: "Shortened Local Name", 0x09: "Complete Local Name", 0x0A: "Tx Power Level",
        0x0D: "Class of Device", 0x0E: "Simple Pairing Hash C-192", 0x0F: "Simple Pairing Randomizer R-192",
        0x10: "Device ID / Security Manager TK Value", 0x11: "Security Manager Out of Band Flags",
        0x12: "Peripheral Connection Interval Range",
        0x14: "List of 16-bit Service Solicitation UUIDs", 0x15: "List of 128-bit Service Solicitation UUIDs",
        0x16: "Service Data - 16-bit UUID", 0x17: "Public Target Address", 0x18: "Random Target Address",
        0x19: "Appearance", 0x1A: "Advertising Interval", 0x1B: "LE Bluetooth Device Address", 0x1C: "LE Role",
        0x1D: "Simple Pairing Hash C-256", 0x1E: "Simple Pairing Randomizer R-256",
        0x1F: "List of 32-bit Service Solicitation UUIDs", 0x20: "Service Data - 32-bit UUID",
        0x21: "Service Data - 128-bit UUID", 0x22: "LE Secure Connections Confirmation Value",
        0x23: "LE Secure Connections Random Value", 0x24: "URI", 0x25: "Indoor Positioning",
        0x26: "Transport Discovery Data", 0x27: "LE Supported Features", 0x28: "Channel Map Update Indication",
        0x29: "PB-ADV", 0x2A: "Mesh Message", 0x2B: "Mesh Beacon", 0x2C: "BIGInfo", 0x2D: "Broadcast_Code",
        0x2E: "Resolvable Set Identifier", 0x2F: "Advertising Interval - long", 0x30: "Broadcast_Name",
        0x31: "Encrypted Advertising Data", 0x32: "Periodic Advertising Response Timing Information",
        0x34: "Electronic Shelf Label", 0x3D: "3D Information Data", 0xFF: "Manufacturer Specific Data",
    ]

    /// The assigned name, or nil for a number this module does not know.
    public var name: String? { Self.names[rawValue] }

    public var description: String {
        let hex = (rawValue < 16 ? "0x0" : "0x") + String(rawValue, radix: 16, uppercase: true)
        return name.map { "\($0) (\(hex))" } ?? hex
    }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}
