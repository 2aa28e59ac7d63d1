import Crypto
import CryptoExtras

/// The LE security toolbox: the cryptographic functions of the Core specification
/// (Vol 3 Part H §2.2), the link-layer session key, resolvable private addresses and the
/// P-256 key agreement of LE Secure Connections. Stateless; every function is thread-safe.
///
/// ## Byte order
///
/// The specification defines its toolbox functions on numbers and prints them most
/// significant octet first (`0xd5cb8454…ab`). Every function here that takes or returns a
/// `[UInt8]` value uses that order unless its name or documentation says otherwise:
/// element 0 is the **most significant octet** (MSO), so the sample data of Vol 3 Part H
/// Appendix D can be pasted as hex. It is also the order AES itself uses: the MSO of a key
/// or block is AES byte 0 (FIPS-197).
///
/// HCI parameters (LE Encrypt, LE Enable Encryption, LE Long Term Key Request Reply,
/// LE Generate DHKey) and SMP PDUs carry the same values **least significant octet
/// first**. Reverse such values (`Array(value.reversed())`) on the way in and out, or use
/// the functions made for the wire form: ``hciEncrypt(keyLSB:plaintextLSB:)`` and the
/// 64-byte SMP encoding of ``P256PublicKey``.
///
/// Sizes are preconditions: passing 15 octets where a 128-bit key belongs is a programming
/// error and traps. Values from a peer that can be invalid (a public key) go through
/// throwing initializers instead.
public enum LECrypto {
    /// Errors for values that come from outside: a peer, or keys read back from storage.
    public enum Error: Swift.Error, Equatable, Sendable {
        /// Not a point on the P-256 curve, or not 64 octets.
        case invalidPublicKey
        /// Not a valid P-256 private scalar (zero, not below the group order, or not 32 octets).
        case invalidPrivateKey
    }

    // MARK: - AES-128

    /// The security function *e* (Vol 3 Part H §2.2.1): AES-128 encryption of one block.
    ///
    /// - Parameters:
    ///   - key: 16 octets, most significant octet first.
    ///   - plaintext: 16 octets, most significant octet first.
    /// - Returns: The 16-octet ciphertext, most significant octet first.
    public static func e(key: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        require(key, 16, "e: key")
        require(plaintext, 16, "e: plaintext")
        var block = plaintext
        do {
            try AES.permute(&block, key: SymmetricKey(data: key))
        } catch {
            // AES.permute throws only for wrong sizes, which are checked above.
            preconditionFailure("AES-128 failed: \(error)")
        }
        return block
    }

    /// What HCI LE Encrypt (Vol 4 Part E §7.8.22) computes: ``e(key:plaintext:)`` on
    /// parameters that HCI carries least significant octet first.
    ///
    /// - Parameters:
    ///   - keyLSB: The command's Key parameter, 16 octets as on the wire (LSO first).
    ///   - plaintextLSB: The command's Plaintext_Data, 16 octets as on the wire (LSO first).
    /// - Returns: Encrypted_Data as the Command Complete event carries it (LSO first).
    public static func hciEncrypt(keyLSB: [UInt8], plaintextLSB: [UInt8]) -> [UInt8] {
        reversed(e(key: reversed(keyLSB), plaintext: reversed(plaintextLSB)))
    }

    // MARK: - AES-CMAC

    /// AES-CMAC with a 128-bit key and a 128-bit MAC (RFC 4493), which every LE Secure
    /// Connections function is built on (Vol 3 Part H §2.2.5).
    ///
    /// - Parameters:
    ///   - key: 16 octets, most significant octet first (the byte order RFC 4493 prints).
    ///   - message: Any length, in the order it is MACed; the toolbox functions pass their
    ///     concatenated inputs most significant octet first.
    /// - Returns: The 16-octet MAC, most significant octet first.
    public static func aesCMAC(key: [UInt8], message: [UInt8]) -> [UInt8] {
        require(key, 16, "AES-CMAC: key")
        do {
            var cmac = try AES.CMAC(key: SymmetricKey(data: key))
            cmac.update(data: message)
            return cmac.finalize().withUnsafeBytes { Array($0) }
        } catch {
            // AES.CMAC throws only for a wrong key size, which is checked above.
            preconditionFailure("AES-CMAC failed: \(error)")
        }
    }

    // MARK: - Helpers

    static func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        precondition(a.count == b.count, "xor of different lengths")
        return zip(a, b).map { $0 ^ $1 }
    }

    static func reversed(_ bytes: [UInt8]) -> [UInt8] { Array(bytes.reversed()) }

    static func require(_ value: [UInt8], _ count: Int, _ what: @autoclosure () -> String) {
        precondition(value.count == count, "\(what()) must be \(count) octets, got \(value.count)")
    }

    /// The low `count` octets of `value`, most significant first.
    static func bigEndian<T: FixedWidthInteger>(_ value: T, octets count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
}
