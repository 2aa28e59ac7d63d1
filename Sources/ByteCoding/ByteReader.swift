/// Why a packet could not be decoded. Decoders throw this instead of trapping, so bad input
/// from a peer, a controller or a caller never crashes the process.
public struct DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }

    public static func truncated(_ what: String, needed: Int, available: Int) -> DecodeError {
        DecodeError("\(what): truncated (needed \(needed) bytes, \(available) left)")
    }
}

/// Reads little-endian fields from a byte buffer, throwing `DecodeError` past the end.
///
/// All Bluetooth multi-octet fields are little-endian (Core spec Vol 1 Part E §2.2).
///
/// Inlinable, so every decoder in another module reads its fields in place: a call per field,
/// each passing the reader's state, cost more than the reads on the per-packet paths.
public struct ByteReader: Sendable {
    public let bytes: ArraySlice<UInt8>
    @usableFromInline var _index: Int
    @inlinable
    public var index: Int { _index }
    /// Names what is being decoded, for error messages.
    public var context: String

    @inlinable
    public init(_ bytes: [UInt8], context: String = "packet") {
        self.init(bytes[...], context: context)
    }

    @inlinable
    public init(_ bytes: ArraySlice<UInt8>, context: String = "packet") {
        self.bytes = bytes
        self._index = bytes.startIndex
        self.context = context
    }

    @inlinable
    public var remaining: Int { bytes.endIndex - index }
    @inlinable
    public var isAtEnd: Bool { index >= bytes.endIndex }
    /// Offset from the start of the buffer (for error messages).
    @inlinable
    public var offset: Int { index - bytes.startIndex }

    @inlinable @inline(__always)
    mutating func need(_ count: Int) throws {
        if count < 0 || remaining < count {
            throw DecodeError.truncated(context, needed: count, available: remaining)
        }
    }

    @inlinable
    public mutating func u8() throws -> UInt8 {
        try need(1)
        defer { _index += 1 }
        return bytes[index]
    }

    @inlinable
    public mutating func i8() throws -> Int8 { Int8(bitPattern: try u8()) }

    @inlinable
    public mutating func u16() throws -> UInt16 {
        try need(2)
        defer { _index += 2 }
        return UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
    }

    @inlinable
    public mutating func u24() throws -> UInt32 {
        try need(3)
        defer { _index += 3 }
        return UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]) << 16
    }

    @inlinable
    public mutating func u32() throws -> UInt32 {
        try need(4)
        var value: UInt32 = 0
        for i in 0..<4 { value |= UInt32(bytes[index + i]) << (8 * UInt32(i)) }
        _index += 4
        return value
    }

    @inlinable
    public mutating func u64() throws -> UInt64 {
        try need(8)
        var value: UInt64 = 0
        for i in 0..<8 { value |= UInt64(bytes[index + i]) << (8 * UInt64(i)) }
        _index += 8
        return value
    }

    /// The next `count` bytes, as they are on the wire.
    @inlinable
    public mutating func bytes(_ count: Int) throws -> [UInt8] {
        try need(count)
        defer { _index += count }
        return Array(bytes[index..<index + count])
    }

    /// Like `bytes(_:)` but without copying.
    @inlinable
    public mutating func slice(_ count: Int) throws -> ArraySlice<UInt8> {
        try need(count)
        defer { _index += count }
        return bytes[index..<index + count]
    }

    /// Everything left.
    @inlinable
    public mutating func rest() -> [UInt8] {
        defer { _index = bytes.endIndex }
        return Array(bytes[index...])
    }

    @inlinable
    public mutating func skip(_ count: Int) throws {
        try need(count)
        _index += count
    }

    /// Throws if bytes are left over: a parameter block longer than its definition is malformed.
    @inlinable
    public func expectEnd() throws {
        if !isAtEnd { throw DecodeError("\(context): \(remaining) unexpected trailing bytes") }
    }

    /// Reads a value `T` whose raw value is `UInt8`, throwing for values the enum doesn't define.
    @inlinable
    public mutating func enumeration<T: RawRepresentable>(_: T.Type) throws -> T where T.RawValue == UInt8 {
        let raw = try u8()
        guard let value = T(rawValue: raw) else {
            throw DecodeError("\(context): invalid \(T.self) value 0x\(String(raw, radix: 16))")
        }
        return value
    }
}
