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
        role = try reader.eventEnum(LERole.self)
        peerAddressType = try reader.eventEnum(LEAddressType.self)
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
        role = try reader.eventEnum(LERole.self)
        peerAddressType = try reader.eventEnum(LEAddressType.self)
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

    /// The v1 event with the same fields: v2 is v1 followed by two parameters.
    var v1: LEEnhancedConnectionComplete {
        LEEnhancedConnectionComplete(
            status: status, connectionHandle: connectionHandle, role: role, peerAddressType: peerAddressType,
            peerAddress: peerAddress, localResolvablePrivateAddress: localResolvablePrivateAddress,
            peerResolvablePrivateAddress: peerResolvablePrivateAddress, connectionInterval: connectionInterval,
            peripheralLatency: peripheralLatency, supervisionTimeout: supervisionTimeout,
            centralClockAccuracy: centralClockAccuracy)
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        v1.encodeParameters(into: &writer)
        writer.u8(advertisingHandle)
        writer.u16(syncHandle)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        let v1 = try LEEnhancedConnectionComplete(decodingParameters: &reader)
        self.init(status: v1.status, connectionHandle: v1.connectionHandle, role: v1.role,
                  peerAddressType: v1.peerAddressType, peerAddress: v1.peerAddress,
                  localResolvablePrivateAddress: v1.localResolvablePrivateAddress,
                  peerResolvablePrivateAddress: v1.peerResolvablePrivateAddress,
                  connectionInterval: v1.connectionInterval, peripheralLatency: v1.peripheralLatency,
                  supervisionTimeout: v1.supervisionTimeout, centralClockAccuracy: v1.centralClockAccuracy,
                  advertisingHandle: try reader.u8(), syncHandle: try reader.u16())
    }
}

/// HCI_LE_Connection_Update_Complete (Vol 4 Part E §7.7.65.3): new connection parameters are in
/// effect (or the update failed).
public struct LEConnectionUpdateComplete: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x03
    public static let name = "LE Connection Update Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// Units of 1.25 ms.
    public var connectionInterval: UInt16
    /// Connection events the peripheral may skip.
    public var peripheralLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeout: UInt16

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, connectionInterval: UInt16,
                peripheralLatency: UInt16, supervisionTimeout: UInt16) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.connectionInterval = connectionInterval
        self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u16(connectionInterval)
        writer.u16(peripheralLatency)
        writer.u16(supervisionTimeout)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        connectionInterval = try reader.u16()
        peripheralLatency = try reader.u16()
        supervisionTimeout = try reader.u16()
    }
}

/// HCI_LE_Read_Remote_Features_Complete (Vol 4 Part E §7.7.65.4): the peer's LE feature bits
/// (page 0), after HCI_LE_Read_Remote_Features.
public struct LEReadRemoteFeaturesComplete: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x04
    public static let name = "LE Read Remote Features Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// LE feature bit mask (Vol 6 Part B §4.6); bit n is bit n of the 64-bit little-endian field.
    public var leFeatures: UInt64

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, leFeatures: UInt64) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.leFeatures = leFeatures
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u64(leFeatures)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        leFeatures = try reader.u64()
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request (Vol 4 Part E §7.7.65.6): the peer asked for new
/// connection parameters; the host accepts or rejects with the matching reply commands.
public struct LERemoteConnectionParameterRequest: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x06
    public static let name = "LE Remote Connection Parameter Request"
    public var connectionHandle: ConnectionHandle
    /// Units of 1.25 ms.
    public var intervalMin: UInt16
    /// Units of 1.25 ms.
    public var intervalMax: UInt16
    /// Connection events the peripheral may skip.
    public var maxLatency: UInt16
    /// Supervision timeout, units of 10 ms.
    public var timeout: UInt16

    public init(connectionHandle: ConnectionHandle, intervalMin: UInt16, intervalMax: UInt16,
                maxLatency: UInt16, timeout: UInt16) {
        self.connectionHandle = connectionHandle & 0x0FFF
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.timeout = timeout
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.handle12(connectionHandle)
        writer.u16(intervalMin)
        writer.u16(intervalMax)
        writer.u16(maxLatency)
        writer.u16(timeout)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try reader.handle12()
        intervalMin = try reader.u16()
        intervalMax = try reader.u16()
        maxLatency = try reader.u16()
        timeout = try reader.u16()
    }
}

/// HCI_LE_Data_Length_Change (Vol 4 Part E §7.7.65.7): the maximum LL payload sizes and times in
/// use on a connection changed.
public struct LEDataLengthChange: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x07
    public static let name = "LE Data Length Change"
    public var connectionHandle: ConnectionHandle
    /// Octets of LL payload we may send per packet (27–251).
    public var maxTxOctets: UInt16
    /// Microseconds a packet we send may take on air (328–17040).
    public var maxTxTime: UInt16
    /// Octets of LL payload the peer may send per packet (27–251).
    public var maxRxOctets: UInt16
    /// Microseconds a packet the peer sends may take on air (328–17040).
    public var maxRxTime: UInt16

    public init(connectionHandle: ConnectionHandle, maxTxOctets: UInt16, maxTxTime: UInt16,
                maxRxOctets: UInt16, maxRxTime: UInt16) {
        self.connectionHandle = connectionHandle & 0x0FFF
        self.maxTxOctets = maxTxOctets
        self.maxTxTime = maxTxTime
        self.maxRxOctets = maxRxOctets
        self.maxRxTime = maxRxTime
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.handle12(connectionHandle)
        writer.u16(maxTxOctets)
        writer.u16(maxTxTime)
        writer.u16(maxRxOctets)
        writer.u16(maxRxTime)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try reader.handle12()
        maxTxOctets = try reader.u16()
        maxTxTime = try reader.u16()
        maxRxOctets = try reader.u16()
        maxRxTime = try reader.u16()
    }
}

/// HCI_LE_PHY_Update_Complete (Vol 4 Part E §7.7.65.12): the PHYs in use on a connection changed
/// (or the update failed).
public struct LEPHYUpdateComplete: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x0C
    public static let name = "LE PHY Update Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// 0x01 LE 1M, 0x02 LE 2M, 0x03 LE Coded.
    public var txPhy: UInt8
    /// 0x01 LE 1M, 0x02 LE 2M, 0x03 LE Coded.
    public var rxPhy: UInt8

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, txPhy: UInt8, rxPhy: UInt8) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.txPhy = txPhy
        self.rxPhy = rxPhy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(txPhy)
        writer.u8(rxPhy)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        txPhy = try reader.u8()
        rxPhy = try reader.u8()
    }
}

/// What every version of LE Connection Complete reports, so a host handles them alike.
public protocol LEConnectionCompleteParameters: Sendable {
    var status: HCIStatus { get }
    var connectionHandle: ConnectionHandle { get }
    var role: LERole { get }
    var peerAddressType: LEAddressType { get }
    var peerAddress: BluetoothAddress { get }
    var connectionInterval: UInt16 { get }
    var peripheralLatency: UInt16 { get }
    var supervisionTimeout: UInt16 { get }
}

extension LEConnectionComplete: LEConnectionCompleteParameters {}
extension LEEnhancedConnectionComplete: LEConnectionCompleteParameters {}
extension LEEnhancedConnectionCompleteV2: LEConnectionCompleteParameters {}

extension LEMetaEvent {
    /// LE Connection Complete in whichever version the controller sent, or nil.
    public var connectionComplete: (any LEConnectionCompleteParameters)? {
        switch self {
        case .connectionComplete(let e): e
        case .enhancedConnectionComplete(let e): e
        case .enhancedConnectionCompleteV2(let e): e
        default: nil
        }
    }
}
