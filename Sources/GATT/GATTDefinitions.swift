import ATT
import AssignedNumbers
import ByteCoding
import HCI
import L2CAP

/// The Characteristic Properties octet of a characteristic declaration (Core spec Vol 3
/// Part G §3.3.1.1). `extendedProperties` is set by the database when the characteristic has
/// extended properties; callers need not set it.
public struct GATTCharacteristicProperties: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let broadcast = Self(rawValue: 0x01)
    public static let read = Self(rawValue: 0x02)
    public static let writeWithoutResponse = Self(rawValue: 0x04)
    public static let write = Self(rawValue: 0x08)
    public static let notify = Self(rawValue: 0x10)
    public static let indicate = Self(rawValue: 0x20)
    public static let authenticatedSignedWrites = Self(rawValue: 0x40)
    public static let extendedProperties = Self(rawValue: 0x80)
}

/// The Characteristic Extended Properties descriptor's bit field (§3.3.3.1).
public struct GATTCharacteristicExtendedProperties: OptionSet, Hashable, Sendable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let reliableWrite = Self(rawValue: 0x0001)
    public static let writableAuxiliaries = Self(rawValue: 0x0002)
}

/// Who may read or write an attribute's value, and over what kind of link (Vol 3 Part F
/// §3.2.5). The first four raw values are those of `CBAttributePermissions`. An encryption or
/// authentication flag alone grants the access it guards: `.readEncryptionRequired` is
/// "readable over an encrypted link".
public struct GATTPermissions: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let readable = Self(rawValue: 0x01)
    public static let writeable = Self(rawValue: 0x02)
    public static let readEncryptionRequired = Self(rawValue: 0x04)
    public static let writeEncryptionRequired = Self(rawValue: 0x08)
    public static let readAuthenticationRequired = Self(rawValue: 0x10)
    public static let writeAuthenticationRequired = Self(rawValue: 0x20)

    public var allowsRead: Bool { !isDisjoint(with: [.readable, .readEncryptionRequired, .readAuthenticationRequired]) }
    public var allowsWrite: Bool { !isDisjoint(with: [.writeable, .writeEncryptionRequired, .writeAuthenticationRequired]) }

    /// The lowest link security level reading (or writing) needs.
    func requiredLevel(forWrite write: Bool) -> LESecurityLevel {
        if contains(write ? .writeAuthenticationRequired : .readAuthenticationRequired) { return .authenticatedEncryption }
        if contains(write ? .writeEncryptionRequired : .readEncryptionRequired) { return .unauthenticatedEncryption }
        return .noSecurity
    }
}

/// The Client Characteristic Configuration descriptor's bits (§3.3.3.3): what one client asked
/// the server to send it.
public struct GATTClientConfiguration: OptionSet, Hashable, Sendable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let notification = Self(rawValue: 0x0001)
    public static let indication = Self(rawValue: 0x0002)
}

/// Where an attribute's value comes from.
public struct GATTValue: Hashable, Sendable {
    enum Source: Hashable, Sendable {
        case stored([UInt8])
        case dynamic
    }
    let source: Source

    /// Held by the database: reads answer it, permitted writes replace it, and
    /// `GATTServer.setValue(_:for:)` changes it.
    public static func stored(_ value: [UInt8]) -> GATTValue { GATTValue(source: .stored(value)) }
    /// Produced and consumed by the server's `onRead` / `onWrite` callbacks on every access.
    public static let dynamic = GATTValue(source: .dynamic)

    /// The bytes of a stored value; nil for a dynamic one (what a daemon's wire carries).
    public var storedBytes: [UInt8]? {
        if case .stored(let bytes) = source { return bytes }
        return nil
    }
}

/// A descriptor to put in the database. The Characteristic Extended Properties and Client
/// Characteristic Configuration descriptors are added by the database itself; do not list them.
public struct GATTDescriptor: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var permissions: GATTPermissions
    public var value: GATTValue

    public init(uuid: BluetoothUUID, permissions: GATTPermissions = .readable, value: GATTValue) {
        self.uuid = uuid
        self.permissions = permissions
        self.value = value
    }

    /// Characteristic User Description (0x2901): UTF-8 text, read-only.
    public static func userDescription(_ text: String) -> GATTDescriptor {
        GATTDescriptor(uuid: .characteristicUserDescription, value: .stored(Array(text.utf8)))
    }

    /// Characteristic Presentation Format (0x2904, §3.3.3.5): format, exponent, unit,
    /// namespace, description.
    public static func presentationFormat(format: UInt8, exponent: Int8 = 0, unit: UInt16,
                                          namespace: UInt8 = 0x01, description: UInt16 = 0) -> GATTDescriptor {
        var writer = ByteWriter(capacity: 7)
        writer.u8(format)
        writer.i8(exponent)
        writer.u16(unit)
        writer.u8(namespace)
        writer.u16(description)
        return GATTDescriptor(uuid: .characteristicPresentationFormat, value: .stored(writer.bytes))
    }
}

/// A characteristic to put in the database: its declaration, value and descriptors.
public struct GATTCharacteristic: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var properties: GATTCharacteristicProperties
    /// Non-empty adds the Characteristic Extended Properties descriptor and sets the
    /// declaration's Extended Properties bit.
    public var extendedProperties: GATTCharacteristicExtendedProperties
    public var permissions: GATTPermissions
    public var value: GATTValue
    /// In database order, after the automatic ones (extended properties, CCCD).
    public var descriptors: [GATTDescriptor]
    /// Of the automatic Client Characteristic Configuration descriptor: write-encryption
    /// flags here make subscribing need an encrypted link.
    public var clientConfigurationPermissions: GATTPermissions

    public init(uuid: BluetoothUUID, properties: GATTCharacteristicProperties,
                extendedProperties: GATTCharacteristicExtendedProperties = [],
                permissions: GATTPermissions, value: GATTValue, descriptors: [GATTDescriptor] = [],
                clientConfigurationPermissions: GATTPermissions = [.readable, .writeable]) {
        self.uuid = uuid
        self.properties = properties
        self.extendedProperties = extendedProperties
        self.permissions = permissions
        self.value = value
        self.descriptors = descriptors
        self.clientConfigurationPermissions = clientConfigurationPermissions
    }

    /// Whether the database gives it a Client Characteristic Configuration descriptor.
    var hasClientConfiguration: Bool { !properties.isDisjoint(with: [.notify, .indicate]) }

    /// The properties octet as declared.
    var declaredProperties: GATTCharacteristicProperties {
        extendedProperties.isEmpty ? properties.subtracting(.extendedProperties) : properties.union(.extendedProperties)
    }
}

/// A service to put in the database.
public struct GATTService: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    /// Services already in the database that this one includes (their include declarations
    /// come first, in this order).
    public var includedServices: [GATTServiceID]
    public var characteristics: [GATTCharacteristic]

    public init(uuid: BluetoothUUID, isPrimary: Bool = true, includedServices: [GATTServiceID] = [],
                characteristics: [GATTCharacteristic] = []) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.includedServices = includedServices
        self.characteristics = characteristics
    }

    /// Attributes the service takes: its declaration, includes, and per characteristic the
    /// declaration, value and descriptors.
    var attributeCount: Int {
        1 + includedServices.count + characteristics.reduce(0) {
            $0 + 2 + ($1.extendedProperties.isEmpty ? 0 : 1) + ($1.hasClientConfiguration ? 1 : 0) + $1.descriptors.count
        }
    }
}

/// Names a service while it is in the database; never reused by one server.
public struct GATTServiceID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    /// A database's id as a daemon's wire carries it; only the database makes new ones.
    public init(rawValue: Int) { self.rawValue = rawValue }
    public var description: String { "service #\(rawValue)" }
}

/// Where a characteristic landed in the database.
public struct GATTCharacteristicHandles: Hashable, Sendable {
    public let declaration: ATTHandle
    /// The handle notifications, reads and writes of the value use.
    public let value: ATTHandle
    /// The Client Characteristic Configuration descriptor, for notify or indicate.
    public let clientConfiguration: ATTHandle?
    /// The caller's descriptors, in the order given.
    public let descriptors: [ATTHandle]

    /// Handles as the database placed them (or as a daemon's wire carries them).
    public init(declaration: ATTHandle, value: ATTHandle, clientConfiguration: ATTHandle?, descriptors: [ATTHandle]) {
        self.declaration = declaration
        self.value = value
        self.clientConfiguration = clientConfiguration
        self.descriptors = descriptors
    }
}

/// Where a service landed in the database.
public struct GATTServiceHandles: Hashable, Sendable {
    public let id: GATTServiceID
    /// From the service declaration to the service's last attribute.
    public let range: ClosedRange<ATTHandle>
    public let includes: [ATTHandle]
    /// In the order the service listed them.
    public let characteristics: [GATTCharacteristicHandles]

    /// Handles as the database placed them (or as a daemon's wire carries them).
    public init(id: GATTServiceID, range: ClosedRange<ATTHandle>, includes: [ATTHandle], characteristics: [GATTCharacteristicHandles]) {
        self.id = id
        self.range = range
        self.includes = includes
        self.characteristics = characteristics
    }
}

/// Why the database refused a change.
public enum GATTDatabaseError: Error, Hashable, Sendable {
    /// No contiguous run of free handles is large enough.
    case outOfHandles
    /// An included service is not in the database.
    case unknownIncludedService(GATTServiceID)
    case unknownService(GATTServiceID)
    /// Another service includes it; remove that one first.
    case serviceIsIncluded(GATTServiceID)
    /// The GAP and GATT services belong to the server.
    case builtInService
    /// A stored value over 512 octets (Vol 3 Part F §3.2.9).
    case valueTooLong
    /// `setValue` on a handle without a stored value.
    case notStored(ATTHandle)
}
