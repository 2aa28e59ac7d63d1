import ByteCoding

/// A Bluetooth UUID: 16-, 32- or 128-bit. The short forms are aliases on the Bluetooth Base
/// UUID 00000000-0000-1000-8000-00805F9B34FB (Core spec Vol 3 Part B §2.5.1): 0x180D is
/// 0000180D-0000-1000-8000-00805F9B34FB. Equal UUIDs compare equal whatever form they came in.
public struct BluetoothUUID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The 128-bit value, most significant half first.
    public let high: UInt64
    public let low: UInt64

    @usableFromInline static let baseHigh: UInt64 = 0x0000_0000_0000_1000
    @usableFromInline static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB

    @inlinable
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    public init(uuid16: UInt16) { self.init(uuid32: UInt32(uuid16)) }

    @inlinable
    public init(uuid32: UInt32) {
        high = UInt64(uuid32) << 32 | Self.baseHigh
        low = Self.baseLow
    }

    /// From 16 bytes, most significant first (the order UUID strings are written in).
    /// Inlinable, like `init?(littleEndian:)`: unspecialised, each call from another module
    /// looked up the metadata of its collection's iterator types (~17,000 instructions a
    /// connection's GATT discovery).
    @inlinable
    public init?(bigEndian bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var h: UInt64 = 0, l: UInt64 = 0
        for (i, b) in bytes.enumerated() {
            if i < 8 { h = h << 8 | UInt64(b) } else { l = l << 8 | UInt64(b) }
        }
        self.init(high: h, low: l)
    }

    /// From 2, 4 or 16 bytes in little-endian order, as ATT, AD structures and SMP carry them.
    @inlinable
    public init?(littleEndian bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 2, 4:
            var value: UInt32 = 0
            for (i, b) in bytes.enumerated() { value |= UInt32(b) << (8 * UInt32(i)) }
            self.init(uuid32: value)
        case 16:
            self.init(bigEndian: Array(bytes.reversed()))
        default:
            return nil
        }
    }

    /// From "180D", "0000180D" or "0000180D-0000-1000-8000-00805F9B34FB" (any case).
    public init?(_ string: String) {
        let hex = string.filter { $0 != "-" }
        let dashes = string.filter { $0 == "-" }.count
        switch (hex.count, dashes) {
        case (4, 0):
            guard let v = UInt16(hex, radix: 16) else { return nil }
            self.init(uuid16: v)
        case (8, 0):
            guard let v = UInt32(hex, radix: 16) else { return nil }
            self.init(uuid32: v)
        case (32, 4):
            let parts = string.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
            guard parts == [8, 4, 4, 4, 12],
                  let h = UInt64(hex.prefix(16), radix: 16), let l = UInt64(hex.suffix(16), radix: 16) else { return nil }
            self.init(high: h, low: l)
        default:
            return nil
        }
    }

    /// Whether this UUID is an alias on the Bluetooth Base UUID.
    public var isBluetoothBase: Bool { low == Self.baseLow && high & 0xFFFF_FFFF == Self.baseHigh }

    /// The 16-bit alias, if there is one.
    public var uuid16: UInt16? {
        guard isBluetoothBase, high >> 32 <= 0xFFFF else { return nil }
        return UInt16(high >> 32)
    }

    /// The 32-bit alias, if there is one (every 16-bit alias is also a 32-bit one).
    public var uuid32: UInt32? { isBluetoothBase ? UInt32(high >> 32) : nil }

    /// 16 bytes, most significant first.
    public var bigEndianBytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64($0))) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64($0))) }
    }

    /// The shortest little-endian form: 2 bytes for a 16-bit alias, else 16. (32-bit forms are
    /// not allowed in ATT; AD structures and SMP use `littleEndianBytes(length:)`.)
    public var littleEndianBytes: [UInt8] {
        if let short = uuid16 { return [UInt8(truncatingIfNeeded: short), UInt8(short >> 8)] }
        return bigEndianBytes.reversed()
    }

    /// Little-endian bytes of exactly `length` (2, 4 or 16), or nil if this UUID has no such form.
    public func littleEndianBytes(length: Int) -> [UInt8]? {
        switch length {
        case 2: return uuid16.map { [UInt8(truncatingIfNeeded: $0), UInt8($0 >> 8)] }
        case 4: return uuid32.map { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }
        case 16: return bigEndianBytes.reversed()
        default: return nil
        }
    }

    /// "180D" for 16-bit aliases, "0000180D-0000-1000-8000-00805F9B34FB" otherwise (upper case),
    /// as Core Bluetooth's `uuidString` prints them.
    public var description: String {
        if let short = uuid16 { return Self.hex(UInt64(short), digits: 4) }
        let h = Self.hex(high, digits: 16), l = Self.hex(low, digits: 16)
        return "\(h.prefix(8))-\(h.dropFirst(8).prefix(4))-\(h.suffix(4))-\(l.prefix(4))-\(l.suffix(12))"
    }

    /// The full 128-bit string, even for aliases.
    public var fullString: String {
        let h = Self.hex(high, digits: 16), l = Self.hex(low, digits: 16)
        return "\(h.prefix(8))-\(h.dropFirst(8).prefix(4))-\(h.suffix(4))-\(l.prefix(4))-\(l.suffix(12))"
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        let s = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }

    public static func < (a: BluetoothUUID, b: BluetoothUUID) -> Bool { (a.high, a.low) < (b.high, b.low) }
}

extension ByteReader {
    /// A UUID of `length` bytes (2, 4 or 16), little-endian.
    public mutating func uuid(length: Int) throws -> BluetoothUUID {
        let bytes = try slice(length)
        guard let uuid = BluetoothUUID(littleEndian: bytes) else { throw DecodeError("\(context): a UUID cannot be \(length) bytes") }
        return uuid
    }
}
