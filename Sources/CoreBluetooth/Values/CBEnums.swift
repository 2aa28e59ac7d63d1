/// The state of a central or peripheral manager.
public enum CBManagerState: Int, Sendable {
    /// Not known yet; an update follows.
    case unknown = 0
    /// The connection with the Bluetooth service was interrupted; an update follows.
    case resetting = 1
    /// This device has no Bluetooth LE.
    case unsupported = 2
    /// The app may not use Bluetooth LE.
    case unauthorized = 3
    /// Bluetooth is off.
    case poweredOff = 4
    /// Bluetooth is on and ready.
    case poweredOn = 5
}

/// The state of a central manager before iOS 10: the same cases and values as
/// `CBManagerState`, so one type serves both names.
@available(*, deprecated, message: "Use CBManagerState instead")
public typealias CBCentralManagerState = CBManagerState

/// The state of a peripheral manager before iOS 10: the same cases and values as
/// `CBManagerState`, so one type serves both names.
@available(*, deprecated, message: "Use CBManagerState instead")
public typealias CBPeripheralManagerState = CBManagerState

/// Whether the app may use Bluetooth.
public enum CBManagerAuthorization: Int, Sendable {
    /// The user has not chosen yet.
    case notDetermined = 0
    /// Restricted, for example by parental controls.
    case restricted = 1
    /// The user refused.
    case denied = 2
    /// The app may use Bluetooth at any time.
    case allowedAlways = 3
}

/// Whether the app may share data while in the background (deprecated by `CBManagerAuthorization`).
public enum CBPeripheralManagerAuthorizationStatus: Int, Sendable {
    /// The user has not chosen yet.
    case notDetermined = 0
    /// Restricted, for example by parental controls.
    case restricted = 1
    /// The user refused.
    case denied = 2
    /// Allowed.
    case authorized = 3
}

/// The connection state of a remote peripheral.
public enum CBPeripheralState: Int, Sendable {
    /// Not connected.
    case disconnected = 0
    /// A connection is pending.
    case connecting = 1
    /// Connected.
    case connected = 2
    /// A disconnection is under way.
    case disconnecting = 3
}

/// How a characteristic value is written.
public enum CBCharacteristicWriteType: Int, Sendable {
    /// An ATT Write Request: the peripheral confirms, and `didWriteValueFor` reports the result.
    case withResponse = 0
    /// An ATT Write Command: no confirmation.
    case withoutResponse = 1
}

/// The connection latency a peripheral manager asks a central for.
public enum CBPeripheralManagerConnectionLatency: Int, Sendable {
    /// Short connection interval: fast, more power.
    case low = 0
    /// A balance of speed and power.
    case medium = 1
    /// Long connection interval: slow, least power.
    case high = 2
}

/// A connection event reported to `centralManager(_:connectionEventDidOccur:for:)`.
public enum CBConnectionEvent: Int, Sendable {
    /// A matching peer disconnected.
    case peerDisconnected = 0
    /// A matching peer connected.
    case peerConnected = 1
}

/// The properties of a characteristic (the GATT characteristic properties, plus two
/// Core Bluetooth ones for encrypted notification and indication).
public struct CBCharacteristicProperties: OptionSet, Sendable, Hashable {
    /// The bits, with Apple's values.
    public let rawValue: UInt
    /// The set with these bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// May be broadcast (not allowed on local characteristics).
    public static let broadcast = CBCharacteristicProperties(rawValue: 0x01)
    /// May be read.
    public static let read = CBCharacteristicProperties(rawValue: 0x02)
    /// May be written without a response.
    public static let writeWithoutResponse = CBCharacteristicProperties(rawValue: 0x04)
    /// May be written with a response.
    public static let write = CBCharacteristicProperties(rawValue: 0x08)
    /// Notifies without acknowledgement.
    public static let notify = CBCharacteristicProperties(rawValue: 0x10)
    /// Indicates with acknowledgement.
    public static let indicate = CBCharacteristicProperties(rawValue: 0x20)
    /// May be written with a signed write command.
    public static let authenticatedSignedWrites = CBCharacteristicProperties(rawValue: 0x40)
    /// Has an Extended Properties descriptor (not allowed on local characteristics).
    public static let extendedProperties = CBCharacteristicProperties(rawValue: 0x80)
    /// Only trusted devices may subscribe to notifications.
    public static let notifyEncryptionRequired = CBCharacteristicProperties(rawValue: 0x100)
    /// Only trusted devices may subscribe to indications.
    public static let indicateEncryptionRequired = CBCharacteristicProperties(rawValue: 0x200)
}

/// Read and write permissions of a local attribute.
public struct CBAttributePermissions: OptionSet, Sendable, Hashable {
    /// The bits, with Apple's values.
    public let rawValue: UInt
    /// The set with these bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Readable.
    public static let readable = CBAttributePermissions(rawValue: 0x01)
    /// Writeable.
    public static let writeable = CBAttributePermissions(rawValue: 0x02)
    /// Readable by trusted devices only.
    public static let readEncryptionRequired = CBAttributePermissions(rawValue: 0x04)
    /// Writeable by trusted devices only.
    public static let writeEncryptionRequired = CBAttributePermissions(rawValue: 0x08)
}

/// An L2CAP Protocol/Service Multiplexer value.
public typealias CBL2CAPPSM = UInt16
