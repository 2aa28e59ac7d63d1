import Testing
@testable import LECrypto

/// P-256 sample data set 1 of the Core specification (Vol 2 Part G §7.1.2.1); key A is the
/// debug key pair of Vol 3 Part H §2.3.5.6.1.
enum P256Sample {
    static let privateA = hex("3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd")
    static let publicAX = hex("20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
    static let publicAY = hex("dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
    static let privateB = hex("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
    static let publicBX = hex("1ea1f0f0 1faf1d96 09592284 f19e4c00 47b58afd 8615a69f 559077b2 2faaa190")
    static let publicBY = hex("4c55f33e 429dad37 7356703a 9ab85160 472d1130 e28e3676 5f89aff9 15b1214a")
    static let dhKey = hex("ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698")
}

@Suite("P-256 key agreement")
struct P256Tests {
    @Test func debugKeyPairIsTheSpecificationsKey() {
        let debug = LECrypto.debugKeyPair
        #expect(debug.publicKey.x == P256Sample.publicAX)
        #expect(debug.publicKey.y == P256Sample.publicAY)
        #expect(debug.publicKey.isDebugKey)
        #expect(!LECrypto.P256KeyPair().publicKey.isDebugKey)
    }

    @Test func sampleKeysDerivePublicKeysAndDHKey() throws {
        let a = try LECrypto.P256KeyPair(privateKey: P256Sample.privateA)
        let b = try LECrypto.P256KeyPair(privateKey: P256Sample.privateB)
        #expect(b.publicKey.x == P256Sample.publicBX)
        #expect(b.publicKey.y == P256Sample.publicBY)
        #expect(a.dhKey(with: b.publicKey) == P256Sample.dhKey)
        #expect(b.dhKey(with: a.publicKey) == P256Sample.dhKey)
    }

    // The SMP Pairing Public Key PDU carries X then Y, each least significant octet first.
    @Test func smpEncodingIsLittleEndianXThenY() throws {
        let encoding = LECrypto.debugKeyPair.publicKey.smpEncoding
        #expect(encoding.count == 64)
        #expect(Array(encoding[0..<4]) == [0xe6, 0x9d, 0x35, 0x0e])   // X ends …0e359de6
        #expect(Array(encoding[32..<36]) == [0x8b, 0xd2, 0x89, 0x15])  // Y ends …1589d28b
        #expect(encoding == reversed(P256Sample.publicAX) + reversed(P256Sample.publicAY))
        let decoded = try LECrypto.P256PublicKey(smpEncoding: encoding)
        #expect(decoded == LECrypto.debugKeyPair.publicKey)
    }

    @Test func generatedPairsAgreeThroughTheSMPEncoding() throws {
        let central = LECrypto.P256KeyPair()
        let peripheral = LECrypto.P256KeyPair()
        let centralSeen = try LECrypto.P256PublicKey(smpEncoding: peripheral.publicKey.smpEncoding)
        let peripheralSeen = try LECrypto.P256PublicKey(smpEncoding: central.publicKey.smpEncoding)
        let k1 = central.dhKey(with: centralSeen)
        let k2 = peripheral.dhKey(with: peripheralSeen)
        #expect(k1.count == 32)
        #expect(k1 == k2)
        #expect(central.publicKey != peripheral.publicKey)
    }

    @Test func pointsOffTheCurveAreRejected() {
        var offCurve = LECrypto.debugKeyPair.publicKey.smpEncoding
        offCurve[32] ^= 0x01  // flip the least significant bit of Y
        #expect(throws: LECrypto.Error.invalidPublicKey) { try LECrypto.P256PublicKey(smpEncoding: offCurve) }
        #expect(throws: LECrypto.Error.invalidPublicKey) {
            try LECrypto.P256PublicKey(smpEncoding: [UInt8](repeating: 0, count: 64))
        }
        #expect(throws: LECrypto.Error.invalidPublicKey) {
            try LECrypto.P256PublicKey(smpEncoding: [UInt8](repeating: 0xff, count: 64))
        }
        #expect(throws: LECrypto.Error.invalidPublicKey) {
            try LECrypto.P256PublicKey(smpEncoding: Array(LECrypto.debugKeyPair.publicKey.smpEncoding.dropLast()))
        }
        #expect(throws: LECrypto.Error.invalidPublicKey) {
            try LECrypto.P256PublicKey(x: P256Sample.publicAX, y: P256Sample.publicBY)
        }
    }

    @Test func invalidPrivateKeysAreRejected() {
        #expect(throws: LECrypto.Error.invalidPrivateKey) {
            try LECrypto.P256KeyPair(privateKey: [UInt8](repeating: 0, count: 32))
        }
        #expect(throws: LECrypto.Error.invalidPrivateKey) {
            try LECrypto.P256KeyPair(privateKey: [UInt8](repeating: 0xff, count: 32))
        }
        #expect(throws: LECrypto.Error.invalidPrivateKey) {
            try LECrypto.P256KeyPair(privateKey: [1])
        }
    }

    // The sample DHKey is f5's W in Appendix D: the chain from key agreement to the LTK.
    @Test func dhKeyFeedsF5() throws {
        let b = try LECrypto.P256KeyPair(privateKey: P256Sample.privateB)
        let w = LECrypto.debugKeyPair.dhKey(with: b.publicKey)
        let keys = LECrypto.f5(w: w, n1: hex("d5cb8454 d177733e ffffb2ec 712baeab"),
                               n2: hex("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf"),
                               a1: hex("00561237 37bfce"), a2: hex("00a71370 2dcfc1"))
        #expect(keys.ltk == hex("69867911 69d7cd23 980522b5 94750a38"))
    }
}
