import Crypto

extension LECrypto {
    /// A P-256 public key of LE Secure Connections (Vol 3 Part H §2.3.5.6), validated to be a
    /// point on the curve.
    public struct P256PublicKey: Equatable, Sendable {
        let key: P256.KeyAgreement.PublicKey
        /// The X coordinate, 32 octets MSO first: what f4 and g2 take as U and V.
        public let x: [UInt8]
        /// The Y coordinate, 32 octets MSO first.
        public let y: [UInt8]

        /// From coordinates written MSO first, as the specification prints them.
        /// - Throws: `LECrypto.Error.invalidPublicKey` unless (x, y) is a point on P-256.
        public init(x: [UInt8], y: [UInt8]) throws {
            guard x.count == 32, y.count == 32,
                  let key = try? P256.KeyAgreement.PublicKey(rawRepresentation: x + y)
            else { throw Error.invalidPublicKey }
            self.init(key)
        }

        /// From the 64 octets of the SMP Pairing Public Key PDU (Vol 3 Part H §3.5.6): X then
        /// Y, each 32 octets least significant octet first.
        /// - Throws: `LECrypto.Error.invalidPublicKey` for a wrong length or a point not on
        ///   the curve; accepting such a point would leak the private key (invalid curve attack).
        public init(smpEncoding bytes: [UInt8]) throws {
            guard bytes.count == 64 else { throw Error.invalidPublicKey }
            try self.init(x: reversed(Array(bytes[0..<32])), y: reversed(Array(bytes[32..<64])))
        }

        init(_ key: P256.KeyAgreement.PublicKey) {
            self.key = key
            let raw = Array(key.rawRepresentation)  // X || Y, each MSO first
            x = Array(raw[0..<32])
            y = Array(raw[32..<64])
        }

        /// The 64 octets the SMP Pairing Public Key PDU carries: X then Y, each LSO first.
        public var smpEncoding: [UInt8] { reversed(x) + reversed(y) }

        /// Whether this is the debug public key (Vol 3 Part H §2.3.5.6.1), which a device not
        /// in debug mode must refuse.
        public var isDebugKey: Bool { self == LECrypto.debugKeyPair.publicKey }

        public static func == (a: P256PublicKey, b: P256PublicKey) -> Bool { a.x == b.x && a.y == b.y }
    }

    /// A P-256 private key and its public key, for the DHKey of LE Secure Connections.
    public struct P256KeyPair: Sendable {
        let privateKey: P256.KeyAgreement.PrivateKey
        /// The public key to send in the Pairing Public Key PDU (``P256PublicKey/smpEncoding``).
        public let publicKey: P256PublicKey

        /// A fresh random key pair.
        public init() {
            self.init(P256.KeyAgreement.PrivateKey())
        }

        /// From a 32-octet private key, MSO first (for test data and the debug key).
        /// - Throws: `LECrypto.Error.invalidPrivateKey` unless 0 < key < the group order.
        public init(privateKey: [UInt8]) throws {
            guard privateKey.count == 32,
                  let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: privateKey)
            else { throw Error.invalidPrivateKey }
            self.init(key)
        }

        init(_ privateKey: P256.KeyAgreement.PrivateKey) {
            self.privateKey = privateKey
            publicKey = P256PublicKey(privateKey.publicKey)
        }

        /// The DHKey shared with the owner of `peer` (Vol 3 Part H §2.3.5.6.1): the X
        /// coordinate of the product of our private key and their public key.
        ///
        /// - Returns: 32 octets, MSO first: f5's W as is. HCI's LE Generate DHKey Complete
        ///   event carries it LSO first.
        public func dhKey(with peer: P256PublicKey) -> [UInt8] {
            do {
                return try privateKey.sharedSecretFromKeyAgreement(with: peer.key).withUnsafeBytes { Array($0) }
            } catch {
                // Both keys are validated on creation and P-256 has prime order, so the
                // product is never the point at infinity.
                preconditionFailure("P-256 key agreement failed: \(error)")
            }
        }
    }

    /// The debug key pair of LE Secure Connections (Vol 3 Part H §2.3.5.6.1), which lets an
    /// air sniffer decrypt a link. Use it only in debug mode.
    public static let debugKeyPair: P256KeyPair = {
        let privateKey: [UInt8] = [
            0x3f, 0x49, 0xf6, 0xd4, 0xa3, 0xc5, 0x5f, 0x38, 0x74, 0xc9, 0xb3, 0xe3, 0xd2, 0x10, 0x3f, 0x50,
            0x4a, 0xff, 0x60, 0x7b, 0xeb, 0x40, 0xb7, 0x99, 0x58, 0x99, 0xb8, 0xa6, 0xcd, 0x3c, 0x1a, 0xbd,
        ]
        do { return try P256KeyPair(privateKey: privateKey) } catch {
            preconditionFailure("the debug private key is a valid scalar")
        }
    }()
}
