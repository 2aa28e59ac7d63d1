extension LECrypto {
    /// The random address hash function *ah* (Vol 3 Part H §2.2.2):
    /// `ah(k, r) = e(k, padding || r) mod 2^24`.
    ///
    /// - Parameters:
    ///   - irk: The 16-octet identity resolving key, MSO first.
    ///   - prand: 3 octets, MSO first.
    /// - Returns: The 3-octet hash, MSO first.
    public static func ah(irk: [UInt8], prand: [UInt8]) -> [UInt8] {
        require(irk, 16, "ah k"); require(prand, 3, "ah r")
        let block = e(key: irk, plaintext: [UInt8](repeating: 0, count: 13) + prand)
        // mod 2^24 keeps the three least significant octets: the last three, MSO first.
        return Array(block[13...])
    }

    /// A resolvable private address (Vol 6 Part B §1.3.2.2): `prand` in the 24 most
    /// significant bits, `ah(irk, prand)` in the 24 least significant bits.
    ///
    /// - Parameters:
    ///   - irk: The 16-octet identity resolving key, MSO first.
    ///   - prand: The 24-bit prand. Its two most significant bits must be 0b01, and the other
    ///     22 bits must be neither all 0 nor all 1.
    /// - Returns: The 48-bit address as an integer (`BluetoothAddress(value:)` makes the address).
    public static func makeResolvablePrivateAddress(irk: [UInt8], prand: UInt32) -> UInt64 {
        precondition(isValidPrand(prand), "prand must be 0b01 followed by 22 bits not all equal")
        let hash = ah(irk: irk, prand: bigEndian(prand, octets: 3))
        return UInt64(prand) << 24 | UInt64(hash.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
    }

    /// A resolvable private address with a fresh random prand.
    public static func makeResolvablePrivateAddress(irk: [UInt8]) -> UInt64 {
        var rng = SystemRandomNumberGenerator()
        while true {
            let prand = 0x40_0000 | UInt32.random(in: 0...0x3F_FFFF, using: &rng)
            if isValidPrand(prand) { return makeResolvablePrivateAddress(irk: irk, prand: prand) }
        }
    }

    /// Whether `address` is a resolvable private address generated with `irk`
    /// (Vol 6 Part B §1.3.2.3): its top bits are 0b01 and its hash part equals
    /// `ah(irk, prand)`.
    ///
    /// - Parameters:
    ///   - address: The 48-bit address as an integer (`BluetoothAddress.value`).
    ///   - irk: The 16-octet identity resolving key, MSO first.
    public static func resolves(address: UInt64, irk: [UInt8]) -> Bool {
        let prand = UInt32(truncatingIfNeeded: address >> 24) & 0xFF_FFFF
        guard address >> 48 == 0, prand >> 22 == 0b01 else { return false }
        let hash = ah(irk: irk, prand: bigEndian(prand, octets: 3))
        return hash == bigEndian(address, octets: 3)
    }

    static func isValidPrand(_ prand: UInt32) -> Bool {
        let random = prand & 0x3F_FFFF
        return prand >> 22 == 0b01 && random != 0 && random != 0x3F_FFFF
    }
}
