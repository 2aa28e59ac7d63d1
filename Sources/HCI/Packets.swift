import ByteCoding

/// The H4 packet indicator that precedes each packet on a UART, socket or btsnoop record
/// (Core spec Vol 4 Part A §2).
public enum HCIPacketType: UInt8, Sendable {
    case command = 0x01
    case acl = 0x02
    case sco = 0x03
    case event = 0x04
    case iso = 0x05
}

/// A command's 16-bit opcode: OGF in the top 6 bits, OCF in the low 10 (Vol 4 Part E §5.4.1).
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(ogf: UInt8, ocf: UInt16) {
        precondition(ogf < 0x40 && ocf < 0x400)
        rawValue = UInt16(ogf) << 10 | ocf
    }
    public var ogf: UInt8 { UInt8(rawValue >> 10) }
    public var ocf: UInt16 { rawValue & 0x3FF }
    public var description: String {
        "0x" + String(rawValue, radix: 16) + " (OGF 0x\(String(ogf, radix: 16)), OCF 0x\(String(ocf, radix: 16)))"
    }

    public static let linkControl: UInt8 = 0x01
    public static let controllerBaseband: UInt8 = 0x03
    public static let informational: UInt8 = 0x04
    public static let statusParameters: UInt8 = 0x05
    public static let leController: UInt8 = 0x08
}

/// A connection handle: 12 bits (0x0000–0x0EFF valid).
public typealias ConnectionHandle = UInt16

/// An HCI command as it crosses the transport: opcode and raw parameters.
public struct HCICommandPacket: Hashable, Sendable {
    public var opcode: HCIOpcode
    public var parameters: [UInt8]
    public init(opcode: HCIOpcode, parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }

    /// Opcode (LE16), parameter length, parameters — without the H4 indicator.
    public func encode(into writer: inout ByteWriter) {
        writer.u16(opcode.rawValue)
        writer.u8(UInt8(parameters.count))
        writer.bytes(parameters)
    }

    public init(decoding reader: inout ByteReader) throws {
        opcode = HCIOpcode(rawValue: try reader.u16())
        let length = Int(try reader.u8())
        parameters = try reader.bytes(length)
    }
}

/// An HCI event as it crosses the transport: event code and raw parameters.
public struct HCIEventPacket: Hashable, Sendable {
    public var code: UInt8
    public var parameters: [UInt8]
    public init(code: UInt8, parameters: [UInt8] = []) {
        self.code = code
        self.parameters = parameters
    }

    public func encode(into writer: inout ByteWriter) {
        writer.u8(code)
        writer.u8(UInt8(parameters.count))
        writer.bytes(parameters)
    }

    public init(decoding reader: inout ByteReader) throws {
        code = try reader.u8()
        let length = Int(try reader.u8())
        parameters = try reader.bytes(length)
    }
}

/// ACL data (Vol 4 Part E §5.4.2): a 12-bit handle, Packet_Boundary and Broadcast flags, data.
public struct ACLDataPacket: Hashable, Sendable {
    /// Packet_Boundary_Flag values used on LE-U.
    public enum Boundary: UInt8, Sendable {
        /// First non-automatically-flushable fragment (host to controller).
        case firstNonFlushable = 0b00
        /// Continuing fragment of a higher-layer PDU.
        case continuing = 0b01
        /// First automatically-flushable fragment (controller to host on LE).
        case firstFlushable = 0b10
        /// A complete L2CAP PDU (deprecated, BR/EDR only, but seen on the wire).
        case complete = 0b11
    }

    public var handle: ConnectionHandle
    public var boundary: Boundary
    public var broadcast: UInt8
    public var data: [UInt8]

    public init(handle: ConnectionHandle, boundary: Boundary, broadcast: UInt8 = 0, data: [UInt8]) {
        self.handle = handle & 0x0FFF
        self.boundary = boundary
        self.broadcast = broadcast & 0b11
        self.data = data
    }

    public func encode(into writer: inout ByteWriter) {
        writer.u16(handle & 0x0FFF | UInt16(boundary.rawValue) << 12 | UInt16(broadcast) << 14)
        writer.u16(UInt16(data.count))
        writer.bytes(data)
    }

    public init(decoding reader: inout ByteReader) throws {
        let header = try reader.u16()
        handle = header & 0x0FFF
        boundary = Boundary(rawValue: UInt8((header >> 12) & 0b11))!
        broadcast = UInt8(header >> 14)
        let length = Int(try reader.u16())
        data = try reader.bytes(length)
    }
}

/// Any packet on an H4 transport.
public enum HCIPacket: Hashable, Sendable {
    case command(HCICommandPacket)
    case acl(ACLDataPacket)
    case event(HCIEventPacket)
    /// SCO and ISO are carried (a real controller may send them) but not interpreted.
    case other(type: UInt8, body: [UInt8])

    public var type: UInt8 {
        switch self {
        case .command: HCIPacketType.command.rawValue
        case .acl: HCIPacketType.acl.rawValue
        case .event: HCIPacketType.event.rawValue
        case .other(let type, _): type
        }
    }

    /// The packet without its H4 indicator.
    public var body: [UInt8] {
        var writer = ByteWriter(capacity: 64)
        switch self {
        case .command(let c): c.encode(into: &writer)
        case .acl(let a): a.encode(into: &writer)
        case .event(let e): e.encode(into: &writer)
        case .other(_, let body): return body
        }
        return writer.bytes
    }

    /// The H4 indicator byte followed by the packet.
    public var h4Bytes: [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.u8(type)
        switch self {
        case .command(let c): c.encode(into: &writer)
        case .acl(let a): a.encode(into: &writer)
        case .event(let e): e.encode(into: &writer)
        case .other(_, let body): writer.bytes(body)
        }
        return writer.bytes
    }

    /// Decodes one packet body (no H4 indicator) of the given type. The body must hold exactly
    /// one packet: a length field that disagrees with the body is a decode error.
    public init(type: UInt8, body: ArraySlice<UInt8>) throws {
        var reader = ByteReader(body, context: "HCI packet")
        switch HCIPacketType(rawValue: type) {
        case .command:
            reader.context = "HCI command"
            self = .command(try HCICommandPacket(decoding: &reader))
        case .acl:
            reader.context = "ACL data"
            self = .acl(try ACLDataPacket(decoding: &reader))
        case .event:
            reader.context = "HCI event"
            self = .event(try HCIEventPacket(decoding: &reader))
        case .sco, .iso:
            self = .other(type: type, body: Array(body))
            return
        case nil:
            throw DecodeError("unknown H4 packet type 0x\(String(type, radix: 16))")
        }
        try reader.expectEnd()
    }

    /// Decodes an H4 frame: indicator byte then packet.
    public init(h4 bytes: [UInt8]) throws {
        guard let type = bytes.first else { throw DecodeError("empty H4 frame") }
        try self.init(type: type, body: bytes[1...])
    }
}
