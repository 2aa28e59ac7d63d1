extension LECrypto {
    /// The confirm value generation function *c1* of LE legacy pairing (Vol 3 Part H §2.2.3):
    /// `c1 = e(k, e(k, r XOR p1) XOR p2)` with `p1 = pres || preq || rat' || iat'` and
    /// `p2 = padding || ia || ra`.
    ///
    /// Every byte array is most significant octet first. The pairing PDUs are 56-bit values
    /// whose least significant octet is the opcode, so pass the PDUs as sent, reversed
    /// (`Array(pairingRequestPDU.reversed())`); likewise addresses (`address.wire.reversed()`).
    ///
    /// - Parameters:
    ///   - k: The temporary key TK, 16 octets.
    ///   - r: The 16-octet random value (Mrand or Srand).
    ///   - preq: The 7-octet Pairing Request command, MSO first (the opcode 0x01 last).
    ///   - pres: The 7-octet Pairing Response command, MSO first (the opcode 0x02 last).
    ///   - iat: The initiating device's address type: 0 public, 1 random.
    ///   - ia: The initiating device's 6-octet address, MSO first.
    ///   - rat: The responding device's address type: 0 public, 1 random.
    ///   - ra: The responding device's 6-octet address, MSO first.
    /// - Returns: The 16-octet confirm value (Mconfirm or Sconfirm), MSO first.
    public static func c1(k: [UInt8], r: [UInt8], preq: [UInt8], pres: [UInt8],
                          iat: UInt8, ia: [UInt8], rat: UInt8, ra: [UInt8]) -> [UInt8] {
        require(k, 16, "c1 k"); require(r, 16, "c1 r")
        require(preq, 7, "c1 preq"); require(pres, 7, "c1 pres")
        require(ia, 6, "c1 ia"); require(ra, 6, "c1 ra")
        // iat' and rat' are the one-bit address types zero-extended to an octet.
        let p1 = pres + preq + [rat & 1, iat & 1]
        let p2 = [UInt8](repeating: 0, count: 4) + ia + ra
        return e(key: k, plaintext: xor(e(key: k, plaintext: xor(r, p1)), p2))
    }

    /// The key generation function *s1* of LE legacy pairing (Vol 3 Part H §2.2.4):
    /// `s1(k, r1, r2) = e(k, r1' || r2')`, where r1' and r2' are the least significant
    /// 64 bits of r1 and r2. The STK is `s1(TK, Srand, Mrand)`.
    ///
    /// - Parameters:
    ///   - k: 16 octets, MSO first.
    ///   - r1: 16 octets, MSO first (Srand for the STK).
    ///   - r2: 16 octets, MSO first (Mrand for the STK).
    /// - Returns: 16 octets, MSO first.
    public static func s1(k: [UInt8], r1: [UInt8], r2: [UInt8]) -> [UInt8] {
        require(k, 16, "s1 k"); require(r1, 16, "s1 r1"); require(r2, 16, "s1 r2")
        // MSO first, the least significant 64 bits are the last eight octets.
        return e(key: k, plaintext: Array(r1[8...]) + Array(r2[8...]))
    }
}
