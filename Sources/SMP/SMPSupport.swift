import LECrypto

/// This device's LE Secure Connections out-of-band data (Vol 3 Part H §2.3.5.6.4): a P-256 key
/// pair and a random value r, and the confirm value C = f4(PKx, PKx, r, 0) that proves the key
/// pair. Hand `peerData` to the peer over the OOB channel (NFC, a QR code…) and set this on the
/// link's `SecurityManager.localOutOfBandData`; the pairing that uses it clears it.
public struct SMPLocalOOBData: Sendable {
    let keyPair: LECrypto.P256KeyPair
    /// r, 16 octets as SMP carries values (least significant octet first).
    public let random: [UInt8]
    /// C, 16 octets least significant octet first.
    public let confirm: [UInt8]

    /// A fresh key pair and random value.
    public init() {
        keyPair = LECrypto.P256KeyPair()
        let r = randomBytes(16)
        random = reversed(r)
        confirm = reversed(LECrypto.f4(u: keyPair.publicKey.x, v: keyPair.publicKey.x, x: r, z: 0))
    }

    /// What the peer's agent answers `.outOfBandData` with.
    public var peerData: PairingOOBData { PairingOOBData(peerConfirm: confirm, peerRandom: random) }
}

func reversed(_ bytes: [UInt8]) -> [UInt8] { Array(bytes.reversed()) }

/// Octets from the system's cryptographically secure generator.
func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
}

/// Compares secrets (confirm values, DHKey checks) in time that does not depend on where they
/// differ.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}

/// A 128-bit key (most significant octet first) cut to `size` octets: the octets above
/// the key size are zero (Vol 3 Part H §2.3.4).
func masked(_ key: [UInt8], to size: Int) -> [UInt8] {
    var key = key
    for i in 0..<max(0, key.count - size) { key[i] = 0 }
    return key
}

/// A passkey as a 128-bit value, most significant octet first: legacy TK, and r of f6.
func passkeyBlock(_ passkey: UInt32) -> [UInt8] {
    [UInt8](repeating: 0, count: 12) + (0..<4).reversed().map { UInt8(truncatingIfNeeded: passkey >> (8 * $0)) }
}
