import ByteCoding

/// A 48-bit device address (BD_ADDR). Stored in wire order (least significant byte first);
/// printed most significant byte first, as people write them: "C0:11:22:33:44:55".
public struct BluetoothAddress: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// Wire order: bytes.0 is the least significant byte.
    public var bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)

    public init(bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)) { self.bytes = bytes }

    /// From six bytes in wire order.
    public init?(wire: [UInt8]) {
        guard wire.count == 6 else { return nil }
        bytes = (wire[0], wire[1], wire[2], wire[3], wire[4], wire[5])
    }

    /// From "AA:BB:CC:DD:EE:FF" (most significant byte first).
    public init?(_ string: String) {
        let parts = string.split(separator: ":")
        guard parts.count == 6 else { return nil }
        var wire: [UInt8] = []
        for part in parts.reversed() {
            guard part.count == 2, let b = UInt8(part, radix: 16) else { return nil }
            wire.append(b)
        }
        self.init(wire: wire)
    }

    /// The address as a 48-bit integer.
    public init(value: UInt64) {
        bytes = (UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8),
                 UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 24),
                 UInt8(truncatingIfNeeded: value >> 32), UInt8(truncatingIfNeeded: value >> 40))
    }

    @inlinable
    public var value: UInt64 {
        UInt64(bytes.0) | UInt64(bytes.1) << 8 | UInt64(bytes.2) << 16 | UInt64(bytes.3) << 24
            | UInt64(bytes.4) << 32 | UInt64(bytes.5) << 40
    }

    public var wire: [UInt8] { [bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5] }

    public static let zero = BluetoothAddress(value: 0)

    public static func == (a: BluetoothAddress, b: BluetoothAddress) -> Bool { a.value == b.value }
    public func hash(into hasher: inout Hasher) { hasher.combine(value) }
    public static func < (a: BluetoothAddress, b: BluetoothAddress) -> Bool { a.value < b.value }

    public var description: String {
        [bytes.5, bytes.4, bytes.3, bytes.2, bytes.1, bytes.0]
            .map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }
            .joined(separator: ":")
    }

    /// For random addresses, the sub-type given by the two most significant bits (Vol 6 Part B §1.3.2).
    public var randomSubtype: RandomAddressSubtype {
        switch bytes.5 >> 6 {
        case 0b11: .staticAddress
        case 0b01: .resolvablePrivate
        case 0b00: .nonResolvablePrivate
        default: .reserved
        }
    }
}

public enum RandomAddressSubtype: Sendable {
    case staticAddress, resolvablePrivate, nonResolvablePrivate, reserved
}

/// Address types as LE commands and events carry them (Peer_Address_Type, Own_Address_Type…).
public enum LEAddressType: UInt8, Sendable, Hashable {
    case publicDevice = 0x00
    case randomDevice = 0x01
    /// Resolved from a resolvable private address, identity is public (events only).
    case publicIdentity = 0x02
    /// Resolved from a resolvable private address, identity is random static (events only).
    case randomIdentity = 0x03
}

/// An address with its type: what identifies an LE device on the air.
public struct LEAddress: Hashable, Sendable, CustomStringConvertible {
    public var type: LEAddressType
    public var address: BluetoothAddress
    public init(_ type: LEAddressType, _ address: BluetoothAddress) {
        self.type = type
        self.address = address
    }
    public var isRandom: Bool { type == .randomDevice || type == .randomIdentity }
    /// The same device with an identity type (0x02/0x03, "resolved by the controller") given
    /// as the plain public or random type: what the layers above an event compare and store.
    public var normalized: LEAddress {
        switch type {
        case .publicIdentity: LEAddress(.publicDevice, address)
        case .randomIdentity: LEAddress(.randomDevice, address)
        case .publicDevice, .randomDevice: self
        }
    }
    /// Whether this is a resolvable private address (random, top two bits 0b01).
    public var isResolvablePrivate: Bool { type == .randomDevice && address.value >> 46 == 0b01 }
    public var description: String { "\(address) (\(isRandom ? "random" : "public"))" }
    /// The type and the 48 bits as one word: one `Hasher` combine instead of two (every
    /// advertising report looks an address up in several tables).
    @inlinable
    public var packed: UInt64 { UInt64(type.rawValue) << 48 | address.value }
    public func hash(into hasher: inout Hasher) { hasher.combine(packed) }
}

extension ByteReader {
    public mutating func address() throws -> BluetoothAddress {
        let b = try slice(6)
        let i = b.startIndex
        return BluetoothAddress(bytes: (b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5]))
    }
}

extension ByteWriter {
    public mutating func address(_ a: BluetoothAddress) {
        u8(a.bytes.0); u8(a.bytes.1); u8(a.bytes.2); u8(a.bytes.3); u8(a.bytes.4); u8(a.bytes.5)
    }
}
