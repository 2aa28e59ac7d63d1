/// Appends little-endian fields to a byte buffer.
/// Inlinable, as `ByteReader`, for the encoders in other modules.
public struct ByteWriter: Sendable {
    @usableFromInline var _bytes: [UInt8]
    @inlinable
    public var bytes: [UInt8] { _bytes }

    @inlinable
    public init(capacity: Int = 32) {
        _bytes = []
        _bytes.reserveCapacity(capacity)
    }

    @inlinable @inline(__always) public mutating func u8(_ value: UInt8) { _bytes.append(value) }
    @inlinable @inline(__always) public mutating func i8(_ value: Int8) { _bytes.append(UInt8(bitPattern: value)) }

    @inlinable @inline(__always) public mutating func u16(_ value: UInt16) {
        _bytes.append(UInt8(truncatingIfNeeded: value))
        _bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    @inlinable
    public mutating func u24(_ value: UInt32) {
        precondition(value <= 0xFF_FFFF, "u24 out of range")
        for i in 0..<3 { _bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    @inlinable
    public mutating func u32(_ value: UInt32) {
        for i in 0..<4 { _bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    @inlinable
    public mutating func u64(_ value: UInt64) {
        for i in 0..<8 { _bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    @inlinable @inline(__always) public mutating func bytes<C: Collection>(_ data: C) where C.Element == UInt8 {
        _bytes.append(contentsOf: data)
    }

    /// Writes exactly `count` bytes: `data` then zero padding (fixed-size fields such as 31-byte AD).
    @inlinable
    public mutating func padded<C: Collection>(_ data: C, to count: Int) where C.Element == UInt8 {
        precondition(data.count <= count, "field longer than \(count) bytes")
        _bytes.append(contentsOf: data)
        _bytes.append(contentsOf: repeatElement(0, count: count - data.count))
    }
}
