import ByteCoding

// LE Meta subevents about connections (Core spec Vol 4 Part E §7.7.65).
//
// Units used below, as on the wire:
// - Connection_Interval: units of 1.25 ms (0x0006–0x0C80, 7.5 ms–4 s).
// - Peripheral_Latency: connection events the peripheral may skip (0x0000–0x01F3).
// - Supervision_Timeout: units of 10 ms (0x000A–0x0C80, 100 ms–32 s).

/// The local device's role on an LE connection.
public enum LERole: UInt8, Sendable, Hashable {
    case central = 0x00
    case peripheral = 0x01
}

/// HCI_LE_Connection_Complete (Vol 4 Part E §7.7.65.1).
public struct LEConnectionComplete: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x01
    public static let name = "LE Connection Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    public var role: LERole
    /// `.publicDevice` or `.randomDevice` here (identity types only appear in the enhanced event).
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    /// Units of 1.25 ms.
    public var connectionInterval: UInt16
    /// Connection events the peripheral may skip.
    public var peripheralLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeout: UInt16
    /// The central's sleep clock accuracy: 0x00 = 500 ppm … 0x07 = 20 ppm (only valid on a peripheral).
    public var centralClockAccuracy: UInt8

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, role: LERole,
                peerAddressType: LEAddressType, peerAddress: BluetoothAddress, connectionInterval: UInt16,
                peripheralLatency: UInt16, supervisionTimeout: UInt16, centralClockAccuracy: UInt8) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.role = role
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.connectionInterval = connectionInterval
        self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout
        self.centralClockAccuracy = centralClockAccuracy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(role.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        writer.u16(connectionInterval)
        writer.u16(peripheralLatency)
        writer.u16(supervisionTimeout)
        writer.u8(centralClockAccuracy)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        role = try reader.enumeration(LERole.self)
        peerAddressType = try reader.enumeration(LEAddressType.self)
        peerAddress = try reader.address()
        connectionInterval = try reader.u16()
        peripheralLatency = try reader.u16()
        supervisionTimeout = try reader.u16()
        centralClockAccuracy = try reader.u8()
    }
}

/// HCI_LE_Enhanced_Connection_Complete [v1] (Vol 4 Part E §7.7.65.10): LE Connection Complete plus
/// the resolvable private addresses in use, sent instead of it once address resolution or
/// extended advertising is in play.
public struct LEEnhancedConnectionComplete: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x0A
    public static let name = "LE Enhanced Connection Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    public var role: LERole
    /// 0x02/0x03 when the controller resolved the peer's RPA to this identity address.
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    /// The RPA the local device used, or zero if it used none.
    public var localResolvablePrivateAddress: BluetoothAddress
    /// The RPA the peer used, or zero if it used none (or the controller did not resolve it).
    public var peerResolvablePrivateAddress: BluetoothAddress
    /// Units of 1.25 ms.
    public var connectionInterval: UInt16
    /// Connection events the peripheral may skip.
    public var peripheralLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeout: UInt16
    /// 0x00 = 500 ppm … 0x07 = 20 ppm.
    public var centralClockAccuracy: UInt8

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, role: LERole,
                peerAddressType: LEAddressType, peerAddress: BluetoothAddress,
                localResolvablePrivateAddress: BluetoothAddress = .zero,
                peerResolvablePrivateAddress: BluetoothAddress = .zero, connectionInterval: UInt16,
                peripheralLatency: UInt16, supervisionTimeout: UInt16, centralClockAccuracy: UInt8) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.role = role
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.localResolvablePrivateAddress = localResolvablePrivateAddress
        self.peerResolvablePrivateAddress = peerResolvablePrivateAddress
        self.connectionInterval = connectionInterval
        self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout
        self.centralClockAccuracy = centralClockAccuracy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(role.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        writer.address(localResolvablePrivateAddress)
        writer.address(peerResolvablePrivateAddress)
        writer.u16(connectionInterval)
        writer.u16(peripheralLatency)
        writer.u16(supervisionTimeout)
        writer.u8(centralClockAccuracy)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        role = try reader.enumeration(LERole.self)
        peerAddressType = try reader.enumeration(LEAddressType.self)
        peerAddress = try reader.address()
        localResolvablePrivateAddress = try reader.address()
        peerResolvablePrivateAddress = try reader.address()
        connectionInterval = try reader.u16()
        peripheralLatency = try reader.u16()
        supervisionTimeout = try reader.u16()
        centralClockAccuracy = try reader.u8()
    }
}

/// HCI_LE_Enhanced_Connection_Complete [v2] (Vol 4 Part E §7.7.65.10): v1's parameters followed by
/// Advertising_Handle and Sync_Handle, sent when the host unmasked this subevent instead of v1.
public struct LEEnhancedConnectionCompleteV2: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x29
    public static let name = "LE Enhanced Connection Complete [v2]"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    public var role: LERole
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    public var localResolvablePrivateAddress: BluetoothAddress
    public var peerResolvablePrivateAddress: BluetoothAddress
    /// Units of 1.25 ms.
    public var connectionInterval: UInt16
    /// Connection events the peripheral may skip.
    public var peripheralLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeout: UInt16
    /// 0x00 = 500 ppm … 0x07 = 20 ppm.
    public var centralClockAccuracy: UInt8
    /// The advertising set that was connected to (peripheral); 0xFF if not from an advertising set.
    public var advertisingHandle: UInt8
    /// The periodic advertising train (PAwR) the connection came from; 0xFFFF if none.
    public var syncHandle: UInt16

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, role: LERole,
                peerAddressType: LEAddressType, peerAddress: BluetoothAddress,
                localResolvablePrivateAddress: BluetoothAddress = .zero,
                peerResolvablePrivateAddress: BluetoothAddress = .zero, connectionInterval: UInt16,
                peripheralLatency: UInt16, supervisionTimeout: UInt16, centralClockAccuracy: UInt8,
                advertisingHandle: UInt8 = 0xFF, syncHandle: UInt16 = 0xFFFF) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.role = role
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.localResolvablePrivateAddress = localResolvablePrivateAddress
        self.peerResolvablePrivateAddress = peerResolvablePrivateAddress
        self.connectionInterval = connectionInterval
        self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout
        self.centralClockAccuracy = centralClockAccuracy
        self.advertisingHandle = advertisingHandle
        self.syncHandle = syncHandle
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(role.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        writer.address(localResolvablePrivateAddress)
        writer.address(peerResolvablePrivateAddress)
        writer.u16(connectionInterval)
        writer.u16(peripheralLatency)
        writer.u16(supervisionTimeout)
        writer.u8(centralClockAccuracy)
        writer.u8(advertisingHandle)
        writer.u16(syncHandle)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        role = try reader.enumeration(LERole.self)
        peerAddressType = try reader.enumeration(LEAddressType.self)
        peerAddress = try reader.address()
        localResolvablePrivateAddress = try reader.address()
        peerResolvablePrivateAddress = try reader.address()
        connectionInterval = try reader.u16()
        peripheralLatency = try reader.u16()
        supervisionTimeout = try reader.u16()
        centralClockAccuracy = try reader.u8()
        advertisingHandle = try reader.u8()
        syncHandle = try reader.u16()
    }
}
