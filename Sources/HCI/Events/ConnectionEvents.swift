import ByteCoding

// Events about BR/EDR-or-LE connections in general and controller housekeeping
// (Core spec Vol 4 Part E §7.7).

extension ByteReader {
    /// A Connection_Handle field: the low 12 bits; the top 4 bits are not part of the handle.
    @inline(__always)
    mutating func handle12() throws -> ConnectionHandle { try u16() & 0x0FFF }

    /// Like `enumeration(_:)`, but visible to the optimizer in this module, so it is specialized
    /// per enum instead of going through generic metadata on every field (hot in advertising reports).
    @inline(__always)
    mutating func eventEnum<T: RawRepresentable>(_: T.Type) throws -> T where T.RawValue == UInt8 {
        let raw = try u8()
        guard let value = T(rawValue: raw) else {
            throw DecodeError("\(context): invalid \(T.self) value 0x\(String(raw, radix: 16))")
        }
        return value
    }
}

extension ByteWriter {
    @inline(__always)
    mutating func handle12(_ handle: ConnectionHandle) { u16(handle & 0x0FFF) }
}

/// HCI_Disconnection_Complete (Vol 4 Part E §7.7.5): a connection is gone; its handle is free.
public struct DisconnectionComplete: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x05
    public static let name = "Disconnection Complete"
    /// Whether the disconnection happened; a failed HCI_Disconnect leaves the link up.
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// Why the link ended, e.g. `.remoteUserTerminatedConnection`, `.connectionTimeout`.
    public var reason: HCIStatus

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, reason: HCIStatus) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.reason = reason
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(reason.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        reason = HCIStatus(try reader.u8())
    }
}

/// HCI_Read_Remote_Version_Information_Complete (Vol 4 Part E §7.7.12): the peer's LL/LMP version.
public struct ReadRemoteVersionInformationComplete: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x0C
    public static let name = "Read Remote Version Information Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// The peer's Link Layer / LMP version (Assigned Numbers, e.g. 0x0D = Core 5.4).
    public var version: UInt8
    /// The peer controller's manufacturer (Assigned Numbers company identifier).
    public var companyIdentifier: UInt16
    /// Manufacturer-specific revision.
    public var subversion: UInt16

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, version: UInt8,
                companyIdentifier: UInt16, subversion: UInt16) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.version = version
        self.companyIdentifier = companyIdentifier
        self.subversion = subversion
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(version)
        writer.u16(companyIdentifier)
        writer.u16(subversion)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        version = try reader.u8()
        companyIdentifier = try reader.u16()
        subversion = try reader.u16()
    }
}

/// HCI_Hardware_Error (Vol 4 Part E §7.7.16): the controller hit a fault; the host should reset it.
public struct HardwareError: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x10
    public static let name = "Hardware Error"
    /// Implementation-specific fault code.
    public var hardwareCode: UInt8

    public init(hardwareCode: UInt8) { self.hardwareCode = hardwareCode }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u8(hardwareCode) }

    public init(decodingParameters reader: inout ByteReader) throws { hardwareCode = try reader.u8() }
}

/// HCI_Number_Of_Completed_Packets (Vol 4 Part E §7.7.19): ACL buffer credits given back to the host.
///
/// Wire layout: Num_Handles, then per handle the pair Connection_Handle[i], Num_Completed_Packets[i]
/// (arrayed parameters are interleaved unless the spec says otherwise, Vol 4 Part E §5.2).
public struct NumberOfCompletedPackets: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x13
    public static let name = "Number Of Completed Packets"

    public struct Entry: Hashable, Sendable {
        public var handle: ConnectionHandle
        /// Packets sent (or flushed) on `handle` since the previous event: credits to return.
        public var completedPackets: UInt16
        public init(handle: ConnectionHandle, completedPackets: UInt16) {
            self.handle = handle & 0x0FFF
            self.completedPackets = completedPackets
        }
    }

    /// At most 255 (Num_Handles is one octet).
    public var entries: [Entry]

    public init(entries: [Entry]) {
        precondition(entries.count <= 255, "Num_Handles is one octet")
        self.entries = entries
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(UInt8(entries.count))
        for entry in entries {
            writer.handle12(entry.handle)
            writer.u16(entry.completedPackets)
        }
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        let count = Int(try reader.u8())
        // Check the whole array first so a lying count can't make us reserve memory.
        guard reader.remaining >= count * 4 else {
            throw DecodeError.truncated(reader.context, needed: count * 4, available: reader.remaining)
        }
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            entries.append(Entry(handle: try reader.handle12(), completedPackets: try reader.u16()))
        }
        self.entries = entries
        // The count defines the size: anything after the array is malformed.
        try reader.expectEnd()
    }
}

/// HCI_Data_Buffer_Overflow (Vol 4 Part E §7.7.26): the host sent more data than the controller had
/// buffers for (a host flow-control bug).
public struct DataBufferOverflow: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x1A
    public static let name = "Data Buffer Overflow"
    /// Link_Type: 0x00 synchronous (SCO/eSCO) buffers, 0x01 ACL buffers.
    public var linkType: UInt8

    public static let synchronousLinkType: UInt8 = 0x00
    public static let aclLinkType: UInt8 = 0x01

    public init(linkType: UInt8) { self.linkType = linkType }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u8(linkType) }

    public init(decodingParameters reader: inout ByteReader) throws { linkType = try reader.u8() }
}
