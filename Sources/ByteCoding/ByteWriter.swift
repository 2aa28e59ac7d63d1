/// Appends little-endian fields to a byte buffer.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 32) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) public mutating func u8(_ value: UInt8) { bytes.append(value) }
    @inline(__always) public mutating func i8(_ value: Int8) { bytes.append(UInt8(bitPattern: value)) }

    @inline(__always) public mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    public mutating func u24(_ value: UInt32) {
        precondition(value <= 0xFF_FFFF, "u24 out of range")
        for i in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    public mutating func u32(_ value: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    public mutating func u64(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    @inline(__always) public mutating func bytes<C: Collection>(_ data: C) where C.Element == UInt8 {
        bytes.append(contentsOf: data)
    }

    /// Writes exactly `count` bytes: `data` then zero padding (fixed-size fields such as 31-byte AD).
    public mutating func padded<C: Collection>(_ data: C, to count: Int) where C.Element == UInt8 {
        precondition(data.count <= count, "field longer than \(count) bytes")
        bytes.append(contentsOf: data)
        bytes.append(contentsOf: repeatElement(0, count: count - data.count))
    }
}
