import AssignedNumbers
import ByteCoding

/// The body of one ATT PDU type: everything after the opcode, with one decoder and one encoder.
public protocol ATTPDUParameters: Hashable, Sendable {
    /// The opcode this body travels under.
    static var opcode: ATTOpcode { get }
    /// Decodes the parameters after the opcode. Throws `DecodeError` unless the reader holds
    /// exactly one well-formed body.
    init(parameters reader: inout ByteReader) throws
    /// Appends the parameters (not the opcode).
    func encodeParameters(into writer: inout ByteWriter)
}

extension ATTPDUParameters {
    /// The whole PDU: opcode, then parameters.
    public func encode() -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(Self.opcode.rawValue)
        encodeParameters(into: &writer)
        return writer.bytes
    }

    /// Decodes a whole PDU, which must carry this type's opcode.
    public init(decoding pdu: [UInt8]) throws {
        var reader = ByteReader(pdu, context: Self.opcode.name)
        let opcode = ATTOpcode(try reader.u8())
        guard opcode == Self.opcode else {
            throw DecodeError("\(Self.opcode.name): unexpected opcode \(opcode.name)")
        }
        try self.init(parameters: &reader)
    }
}

/// How a UUID travels in an ATT PDU: 2 or 16 octets, little-endian. 32-bit UUIDs are sent in
/// their 128-bit form (Vol 3 Part F §3.2.1). The raw values are those of the Find Information
/// Response's Format field (§3.4.3.2).
public enum ATTUUIDFormat: UInt8, Hashable, Sendable {
    case uuid16 = 0x01
    case uuid128 = 0x02

    /// Octets on the wire.
    public var byteCount: Int { self == .uuid16 ? 2 : 16 }

    /// 16-bit when the UUID has a 16-bit alias, else 128-bit.
    public static func shortest(for uuid: BluetoothUUID) -> ATTUUIDFormat {
        uuid.uuid16 == nil ? .uuid128 : .uuid16
    }

    /// `self`, unless the UUID has no 16-bit form; then 128-bit.
    func usable(for uuid: BluetoothUUID) -> ATTUUIDFormat {
        self == .uuid16 && uuid.uuid16 == nil ? .uuid128 : self
    }

    /// The format whose size is `count` octets.
    init?(byteCount count: Int) {
        switch count {
        case 2: self = .uuid16
        case 16: self = .uuid128
        default: return nil
        }
    }
}

/// Field codecs shared by the PDU types.
enum ATTCoding {
    static func handle(_ reader: inout ByteReader) throws -> ATTHandle {
        ATTHandle(try reader.u16())
    }

    static func write(_ handle: ATTHandle, _ writer: inout ByteWriter) {
        writer.u16(handle.rawValue)
    }

    /// Writes `uuid` in `format` (which callers keep usable for it).
    static func write(_ uuid: BluetoothUUID, _ format: ATTUUIDFormat, _ writer: inout ByteWriter) {
        writer.bytes(uuid.littleEndianBytes(length: format.usable(for: uuid).byteCount) ?? [])
    }

    /// Reads the rest of the parameters as a 2- or 16-octet UUID; any other size is malformed.
    static func trailingUUID(_ reader: inout ByteReader, _ field: String) throws -> (BluetoothUUID, ATTUUIDFormat) {
        guard let format = ATTUUIDFormat(byteCount: reader.remaining) else {
            throw DecodeError("\(reader.context): \(field) must be 2 or 16 octets, not \(reader.remaining)")
        }
        return (try reader.uuid(length: format.byteCount), format)
    }

    /// Reads the rest of the parameters as a list of `elementSize`-octet elements: at least
    /// `minimumCount` of them, and no partial element.
    static func list<Element>(
        _ reader: inout ByteReader, _ field: String, elementSize: Int, minimumCount: Int = 1,
        _ element: (inout ByteReader) throws -> Element
    ) throws -> [Element] {
        let count = reader.remaining
        guard elementSize > 0, count % elementSize == 0 else {
            throw DecodeError("\(reader.context): \(field) of \(count) octets is not a whole number of \(elementSize)-octet elements")
        }
        guard count / elementSize >= minimumCount else {
            throw DecodeError("\(reader.context): \(field) needs at least \(minimumCount) element(s), has \(count / elementSize)")
        }
        var elements: [Element] = []
        elements.reserveCapacity(count / elementSize)
        while !reader.isAtEnd { elements.append(try element(&reader)) }
        return elements
    }
}
