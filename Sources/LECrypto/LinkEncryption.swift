extension LECrypto {
    /// The link-layer session key (Vol 6 Part E §1, Vol 6 Part B §5.1.3.1):
    /// `SK = e(LTK, SKD)`.
    ///
    /// - Parameters:
    ///   - ltk: The 16-octet long term key, MSO first (HCI's LE Enable Encryption and
    ///     LE Long Term Key Request Reply carry it LSO first: reverse it).
    ///   - skd: The 16-octet session key diversifier, MSO first. SKD = SKDm || SKDs with
    ///     SKDm in the least significant 64 bits, so MSO first it is SKDs's eight octets
    ///     (MSO first) followed by SKDm's. ``sessionKey(ltk:skdm:skds:)`` builds it.
    /// - Returns: The 16-octet session key, MSO first: the AES key for the link's AES-CCM.
    public static func sessionKey(ltk: [UInt8], skd: [UInt8]) -> [UInt8] {
        require(ltk, 16, "LTK"); require(skd, 16, "SKD")
        return e(key: ltk, plaintext: skd)
    }

    /// The session key from the two diversifier halves of LL_ENC_REQ (SKDm, from the
    /// central) and LL_ENC_RSP (SKDs, from the peripheral), read as little-endian integers.
    ///
    /// - Parameter ltk: The 16-octet long term key, MSO first.
    /// - Returns: The 16-octet session key, MSO first.
    public static func sessionKey(ltk: [UInt8], skdm: UInt64, skds: UInt64) -> [UInt8] {
        sessionKey(ltk: ltk, skd: bigEndian(skds, octets: 8) + bigEndian(skdm, octets: 8))
    }
}
