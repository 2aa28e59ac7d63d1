extension LECrypto {
    /// The two keys f5 derives from the DHKey.
    public struct SecureConnectionsKeys: Equatable, Sendable {
        /// Keys f6 when it computes the DHKey checks Ea and Eb. 16 octets, MSO first.
        public var macKey: [UInt8]
        /// The long term key. 16 octets, MSO first; HCI and SMP carry it reversed.
        public var ltk: [UInt8]

        public init(macKey: [UInt8], ltk: [UInt8]) {
            self.macKey = macKey
            self.ltk = ltk
        }
    }

    /// The 56-bit address input (A1, A2) of f5 and f6: the address type as the most
    /// significant octet, then the 48-bit address. 7 octets, MSO first.
    ///
    /// - Parameters:
    ///   - type: 0 for a public address, 1 for a random address.
    ///   - address: The 48-bit device address as an integer (`BluetoothAddress.value`).
    public static func addressField(type: UInt8, address: UInt64) -> [UInt8] {
        precondition(address >> 48 == 0, "a device address has 48 bits")
        return [type] + bigEndian(address, octets: 6)
    }

    /// The LE Secure Connections confirm value function *f4* (Vol 3 Part H §2.2.6):
    /// `f4(U, V, X, Z) = AES-CMAC_X(U || V || Z)`.
    ///
    /// - Parameters:
    ///   - u: 32 octets, MSO first (a public key's X coordinate, e.g. PKax).
    ///   - v: 32 octets, MSO first (the other public key's X coordinate).
    ///   - x: The 16-octet key (a nonce), MSO first.
    ///   - z: 0 in Just Works and numeric comparison; 0x80 | the passkey bit in passkey entry.
    /// - Returns: The 16-octet confirm value, MSO first.
    public static func f4(u: [UInt8], v: [UInt8], x: [UInt8], z: UInt8) -> [UInt8] {
        require(u, 32, "f4 U"); require(v, 32, "f4 V"); require(x, 16, "f4 X")
        return aesCMAC(key: x, message: u + v + [z])
    }

    /// The LE Secure Connections key generation function *f5* (Vol 3 Part H §2.2.7):
    /// `T = AES-CMAC_SALT(W)`, then MacKey and LTK are
    /// `AES-CMAC_T(Counter || keyID || N1 || N2 || A1 || A2 || Length)` for Counter 0 and 1,
    /// with keyID "btle" and Length 256.
    ///
    /// - Parameters:
    ///   - w: The 32-octet DHKey, MSO first (as ``P256KeyPair/dhKey(with:)`` returns it).
    ///   - n1: 16 octets, MSO first (Na, the initiator's nonce).
    ///   - n2: 16 octets, MSO first (Nb).
    ///   - a1: 7 octets, MSO first (the initiator's ``addressField(type:address:)``).
    ///   - a2: 7 octets, MSO first (the responder's).
    public static func f5(w: [UInt8], n1: [UInt8], n2: [UInt8], a1: [UInt8], a2: [UInt8]) -> SecureConnectionsKeys {
        require(w, 32, "f5 W"); require(n1, 16, "f5 N1"); require(n2, 16, "f5 N2")
        require(a1, 7, "f5 A1"); require(a2, 7, "f5 A2")
        let salt: [UInt8] = [0x6c, 0x88, 0x83, 0x91, 0xaa, 0xf5, 0xa5, 0x38,
                             0x60, 0x37, 0x0b, 0xdb, 0x5a, 0x60, 0x83, 0xbe]
        let t = aesCMAC(key: salt, message: w)
        let keyID = Array("btle".utf8)
        let length: [UInt8] = [0x01, 0x00]  // 256 bits, MSO first
        let tail = keyID + n1 + n2 + a1 + a2 + length
        return SecureConnectionsKeys(macKey: aesCMAC(key: t, message: [0] + tail),
                                     ltk: aesCMAC(key: t, message: [1] + tail))
    }

    /// The LE Secure Connections check value function *f6* (Vol 3 Part H §2.2.8):
    /// `f6(W, N1, N2, R, IOcap, A1, A2) = AES-CMAC_W(N1 || N2 || R || IOcap || A1 || A2)`.
    ///
    /// - Parameters:
    ///   - w: The 16-octet MacKey from f5, MSO first.
    ///   - n1: 16 octets, MSO first.
    ///   - n2: 16 octets, MSO first.
    ///   - r: 16 octets, MSO first (zero, the passkey, or the peer's OOB random value).
    ///   - ioCap: 3 octets, MSO first: AuthReq, OOB data flag, IO capability — the three
    ///     fields of the Pairing Request/Response in reverse PDU order.
    ///   - a1: 7 octets, MSO first (see ``addressField(type:address:)``).
    ///   - a2: 7 octets, MSO first.
    /// - Returns: The 16-octet DHKey check value, MSO first.
    public static func f6(w: [UInt8], n1: [UInt8], n2: [UInt8], r: [UInt8], ioCap: [UInt8],
                          a1: [UInt8], a2: [UInt8]) -> [UInt8] {
        require(w, 16, "f6 W"); require(n1, 16, "f6 N1"); require(n2, 16, "f6 N2")
        require(r, 16, "f6 R"); require(ioCap, 3, "f6 IOcap")
        require(a1, 7, "f6 A1"); require(a2, 7, "f6 A2")
        return aesCMAC(key: w, message: n1 + n2 + r + ioCap + a1 + a2)
    }

    /// The numeric comparison value function *g2* (Vol 3 Part H §2.2.9):
    /// `g2(U, V, X, Y) = AES-CMAC_X(U || V || Y) mod 2^32`. The six-digit number users
    /// compare is `g2(…) % 1_000_000`.
    ///
    /// - Parameters:
    ///   - u: 32 octets, MSO first (PKax).
    ///   - v: 32 octets, MSO first (PKbx).
    ///   - x: 16 octets, MSO first (Na).
    ///   - y: 16 octets, MSO first (Nb).
    public static func g2(u: [UInt8], v: [UInt8], x: [UInt8], y: [UInt8]) -> UInt32 {
        require(u, 32, "g2 U"); require(v, 32, "g2 V"); require(x, 16, "g2 X"); require(y, 16, "g2 Y")
        let mac = aesCMAC(key: x, message: u + v + y)
        // mod 2^32 keeps the four least significant octets: the last four, MSO first.
        return mac[12...].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The link key conversion function *h6* (Vol 3 Part H §2.2.10):
    /// `h6(W, keyID) = AES-CMAC_W(keyID)`.
    ///
    /// - Parameters:
    ///   - w: 16 octets, MSO first.
    ///   - keyID: 4 octets, MSO first. The specification's key IDs are four ASCII
    ///     characters written MSO first, so `Array("lebr".utf8)` is keyID 0x6c656272.
    public static func h6(w: [UInt8], keyID: [UInt8]) -> [UInt8] {
        require(w, 16, "h6 W"); require(keyID, 4, "h6 keyID")
        return aesCMAC(key: w, message: keyID)
    }

    /// The link key conversion function *h7* (Vol 3 Part H §2.2.11):
    /// `h7(SALT, W) = AES-CMAC_SALT(W)`.
    ///
    /// - Parameters:
    ///   - salt: 16 octets, MSO first. The specification's salts are four ASCII characters
    ///     in the least significant octets, e.g. "tmp1": `Array(repeating: 0, count: 12) + Array("tmp1".utf8)`.
    ///   - w: 16 octets, MSO first.
    public static func h7(salt: [UInt8], w: [UInt8]) -> [UInt8] {
        require(salt, 16, "h7 SALT"); require(w, 16, "h7 W")
        return aesCMAC(key: salt, message: w)
    }
}
