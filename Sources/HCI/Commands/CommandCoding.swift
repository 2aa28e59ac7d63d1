import ByteCoding

/// Field codecs shared by the command types. Kept in a namespace (not ByteReader/ByteWriter
/// extensions) so they cannot clash with helpers other files of the module add.
enum CommandCoding {
    /// A Connection_Handle: 12 significant bits; the top four are not part of the handle.
    static func handle(_ reader: inout ByteReader) throws -> ConnectionHandle {
        try reader.u16() & 0x0FFF
    }

    static func writeHandle(_ handle: ConnectionHandle, _ writer: inout ByteWriter) {
        writer.u16(handle & 0x0FFF)
    }

    /// An enable/disable octet: 0x00 or 0x01, anything else is invalid.
    static func bool(_ reader: inout ByteReader, _ field: String) throws -> Bool {
        let raw = try reader.u8()
        guard raw <= 1 else {
            throw DecodeError("\(reader.context): invalid \(field) 0x\(String(raw, radix: 16))")
        }
        return raw == 1
    }

    static func writeBool(_ value: Bool, _ writer: inout ByteWriter) {
        writer.u8(value ? 1 : 0)
    }

    /// A 128-bit key or AES block, kept in wire order.
    static func block16(_ reader: inout ByteReader) throws -> [UInt8] {
        try reader.bytes(16)
    }

    /// Writes exactly 16 octets: a shorter value is zero padded, a longer one cut (callers are
    /// expected to pass 16 bytes; this keeps a caller mistake from trapping).
    static func writeBlock16(_ value: [UInt8], _ writer: inout ByteWriter) {
        writer.padded(value.prefix(16), to: 16)
    }

    /// An address type that may only be public (0) or random (1): identity addresses, and the
    /// peer of a directed advertisement or connection.
    static func publicOrRandom(_ reader: inout ByteReader, _ field: String) throws -> LEAddressType {
        let raw = try reader.u8()
        guard raw <= 1, let type = LEAddressType(rawValue: raw) else {
            throw DecodeError("\(reader.context): invalid \(field) 0x\(String(raw, radix: 16))")
        }
        return type
    }

    /// A legacy 31-octet advertising or scan response data field: length octet, then data
    /// zero padded to 31 octets. Only the significant part is kept.
    static func legacyData(_ reader: inout ByteReader) throws -> [UInt8] {
        let length = Int(try reader.u8())
        guard length <= 31 else {
            throw DecodeError("\(reader.context): data length \(length) exceeds 31")
        }
        let field = try reader.bytes(31)
        return Array(field.prefix(length))
    }

    /// Writes the length octet and the data padded to 31 octets; data past 31 octets (a caller
    /// error) is cut rather than trapping.
    static func writeLegacyData(_ data: [UInt8], _ writer: inout ByteWriter) {
        let significant = data.prefix(31)
        writer.u8(UInt8(significant.count))
        writer.padded(significant, to: 31)
    }
}
