import HCI

/// The four kinds of LE device address (Core spec Vol 6 Part B §1.3, Vol 3 Part C §10.8).
public enum LEAddressKind: Hashable, Sendable {
    /// An IEEE-assigned public address.
    case publicAddress
    /// A random static address: fixed for a power cycle; top bits 0b11.
    case randomStatic
    /// A resolvable private address: prand (top bits 0b01) and a hash of it under an IRK.
    /// `LECrypto.makeResolvablePrivateAddress` makes one and `LECrypto.resolves` checks one.
    case resolvablePrivate
    /// A non-resolvable private address: top bits 0b00.
    case nonResolvablePrivate
    /// A random address with the reserved top bits 0b10.
    case reservedRandom

    /// Public and random static addresses identify a device; private ones hide it.
    public var isIdentity: Bool { self == .publicAddress || self == .randomStatic }
}

extension LEAddress {
    /// The address's kind. The identity types that controllers report after resolving a
    /// private address are classified by the identity address they carry.
    public var kind: LEAddressKind {
        switch type {
        case .publicDevice, .publicIdentity:
            return .publicAddress
        case .randomDevice, .randomIdentity:
            switch address.randomSubtype {
            case .staticAddress: return .randomStatic
            case .resolvablePrivate: return .resolvablePrivate
            case .nonResolvablePrivate: return .nonResolvablePrivate
            case .reserved: return .reservedRandom
            }
        }
    }

    /// Whether the address obeys the rules for its kind (Vol 6 Part B §1.3.2): the random part
    /// of a random address (46 bits; 22 for the prand of a resolvable private address) must
    /// have at least one bit 0 and one bit 1. Public addresses and reserved kinds are not checked
    /// (a non-resolvable address must also differ from the device's public address, which only
    /// the device knows; `nonResolvablePrivate(differentFrom:using:)` honours that).
    public var isWellFormed: Bool {
        let value = address.value
        switch kind {
        case .publicAddress: return true
        case .randomStatic, .nonResolvablePrivate: return Self.hasZeroAndOne(value & Self.randomPartMask, bits: 46)
        case .resolvablePrivate: return Self.hasZeroAndOne((value >> 24) & 0x3F_FFFF, bits: 22)
        case .reservedRandom: return false
        }
    }

    /// A new random static address from `generator` (seed it for repeatable tests).
    public static func randomStatic(using generator: inout some RandomNumberGenerator) -> LEAddress {
        LEAddress(.randomDevice, randomAddress(topBits: 0b11, using: &generator))
    }

    /// A new non-resolvable private address from `generator`, never equal to `publicAddress`.
    public static func nonResolvablePrivate(differentFrom publicAddress: BluetoothAddress? = nil,
                                            using generator: inout some RandomNumberGenerator) -> LEAddress {
        while true {
            let address = randomAddress(topBits: 0b00, using: &generator)
            if address != publicAddress { return LEAddress(.randomDevice, address) }
        }
    }

    private static let randomPartMask: UInt64 = (1 << 46) - 1

    private static func randomAddress(topBits: UInt64, using generator: inout some RandomNumberGenerator) -> BluetoothAddress {
        while true {
            let random = generator.next() & randomPartMask
            if hasZeroAndOne(random, bits: 46) { return BluetoothAddress(value: topBits << 46 | random) }
        }
    }

    private static func hasZeroAndOne(_ value: UInt64, bits: Int) -> Bool {
        value != 0 && value != (1 << UInt64(bits)) - 1
    }
}
