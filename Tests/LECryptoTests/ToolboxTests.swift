import Testing
@testable import LECrypto

/// Bytes from hex written most significant octet first, as the specification prints values;
/// spaces are ignored.
func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace })
    precondition(digits.count % 2 == 0, "odd hex")
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

func reversed(_ bytes: [UInt8]) -> [UInt8] { Array(bytes.reversed()) }

@Suite("AES-128 (e) and HCI LE Encrypt")
struct AESTests {
    // FIPS-197 Appendix C.1 (AES-128), in AES byte order = MSO first.
    @Test func fips197Example() {
        #expect(LECrypto.e(key: hex("000102030405060708090a0b0c0d0e0f"),
                           plaintext: hex("00112233445566778899aabbccddeeff"))
                == hex("69c4e0d86a7b0430d8cdb78070b4c55a"))
    }

    // RFC 4493 §4: AES-128(K, 0^128), the step before its subkeys.
    @Test func rfc4493SubkeyStep() {
        #expect(LECrypto.e(key: hex("2b7e1516 28aed2a6 abf71588 09cf4f3c"), plaintext: [UInt8](repeating: 0, count: 16))
                == hex("7df76b0c 1ab899b3 3e42f047 b91b546f"))
    }

    // Core spec Vol 6 Part C §1 (encryption sample data): the HCI LE Encrypt command and its
    // Command Complete, with the parameter bytes exactly as they are on the wire.
    @Test func hciLEEncryptSample() {
        let keyWire = hex("bf 01 fb 9d 4e f3 bc 36 d8 74 f5 39 41 38 68 4c")
        let plaintextWire = hex("13 02 f1 e0 df ce bd ac 79 68 57 46 35 24 13 02")
        #expect(LECrypto.hciEncrypt(keyLSB: keyWire, plaintextLSB: plaintextWire)
                == hex("66 c6 c2 27 8e 3b 8e 05 3e 7e a3 26 52 1b ad 99"))
    }

    // FIPS-197 C.1 through HCI: every parameter reversed.
    @Test func hciEncryptReversesAllThreeValues() {
        #expect(LECrypto.hciEncrypt(keyLSB: reversed(hex("000102030405060708090a0b0c0d0e0f")),
                                    plaintextLSB: reversed(hex("00112233445566778899aabbccddeeff")))
                == reversed(hex("69c4e0d86a7b0430d8cdb78070b4c55a")))
    }
}

@Suite("AES-CMAC (RFC 4493 §4)")
struct CMACTests {
    let key = hex("2b7e1516 28aed2a6 abf71588 09cf4f3c")
    let message64 = hex("""
        6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51
        30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710
        """)

    @Test func example1EmptyMessage() {
        #expect(LECrypto.aesCMAC(key: key, message: []) == hex("bb1d6929 e9593728 7fa37d12 9b756746"))
    }

    @Test func example2OneBlock() {
        #expect(LECrypto.aesCMAC(key: key, message: Array(message64[0..<16]))
                == hex("070a16b4 6b4d4144 f79bdd9d d04a287c"))
    }

    @Test func example3PartialLastBlock() {
        #expect(LECrypto.aesCMAC(key: key, message: Array(message64[0..<40]))
                == hex("dfa66747 de9ae630 30ca3261 1497c827"))
    }

    @Test func example4FourBlocks() {
        #expect(LECrypto.aesCMAC(key: key, message: message64) == hex("51f0bebf 7e3b9d92 fc497417 79363cfe"))
    }
}

@Suite("Legacy pairing: c1 and s1 (Vol 3 Part H §2.2.3, §2.2.4)")
struct LegacyPairingTests {
    @Test func c1Sample() {
        let confirm = LECrypto.c1(
            k: [UInt8](repeating: 0, count: 16), r: hex("5783D52156AD6F0E6388274EC6702EE0"),
            preq: hex("07071000000101"), pres: hex("05000800000302"),
            iat: 1, ia: hex("A1A2A3A4A5A6"), rat: 0, ra: hex("B1B2B3B4B5B6"))
        #expect(confirm == hex("1e1e3fef878988ead2a74dc5bef13b86"))
    }

    // The same sample fed from PDUs as sent: Pairing Request 01 01 00 00 10 07 07 and
    // Pairing Response 02 03 00 00 08 00 05 (opcode first) reversed into the formula's order.
    @Test func c1FromWirePDUs() {
        let request = hex("01 01 00 00 10 07 07"), response = hex("02 03 00 00 08 00 05")
        let confirm = LECrypto.c1(
            k: [UInt8](repeating: 0, count: 16), r: hex("5783D52156AD6F0E6388274EC6702EE0"),
            preq: reversed(request), pres: reversed(response),
            iat: 1, ia: reversed(hex("a6 a5 a4 a3 a2 a1")), rat: 0, ra: reversed(hex("b6 b5 b4 b3 b2 b1")))
        #expect(confirm == hex("1e1e3fef878988ead2a74dc5bef13b86"))
    }

    @Test func s1Sample() {
        let stk = LECrypto.s1(k: [UInt8](repeating: 0, count: 16),
                              r1: hex("000F0E0D0C0B0A091122334455667788"),
                              r2: hex("010203040506070899AABBCCDDEEFF00"))
        #expect(stk == hex("9a1fe1f0e8b0f49b5b4216ae796da062"))
    }
}

/// Vol 3 Part H Appendix D (LE Secure Connections sample data).
@Suite("LE Secure Connections: f4, f5, f6, g2, h6, h7")
struct SecureConnectionsTests {
    static let u = hex("20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
    static let v = hex("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
    static let n1 = hex("d5cb8454 d177733e ffffb2ec 712baeab")
    static let n2 = hex("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf")
    static let dhKey = hex("ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698")
    static let a1 = hex("00561237 37bfce")
    static let a2 = hex("00a71370 2dcfc1")
    static let macKey = hex("2965f176 a1084a02 fd3f6a20 ce636e20")

    @Test func f4Sample() {
        #expect(LECrypto.f4(u: Self.u, v: Self.v, x: Self.n1, z: 0x00) == hex("f2c916f1 07a9bd1c f1eda1be a974872d"))
    }

    @Test func f5Sample() {
        let keys = LECrypto.f5(w: Self.dhKey, n1: Self.n1, n2: Self.n2, a1: Self.a1, a2: Self.a2)
        #expect(keys.macKey == Self.macKey)
        #expect(keys.ltk == hex("69867911 69d7cd23 980522b5 94750a38"))
    }

    // f5's intermediate key T = AES-CMAC_SALT(W), printed in the sample data.
    @Test func f5IntermediateT() {
        let salt = hex("6C888391 AAF5A538 60370BDB 5A6083BE")
        #expect(LECrypto.aesCMAC(key: salt, message: Self.dhKey) == hex("3c128f20 de883288 97624bdb 8dac6989"))
    }

    @Test func f6Sample() {
        let check = LECrypto.f6(w: Self.macKey, n1: Self.n1, n2: Self.n2, r: hex("12a3343b b453bb54 08da42d2 0c2d0fc8"),
                                ioCap: hex("010102"), a1: Self.a1, a2: Self.a2)
        #expect(check == hex("e3c47398 9cd0e8c5 d26c0b09 da958f61"))
    }

    @Test func g2Sample() {
        let value = LECrypto.g2(u: Self.u, v: Self.v, x: Self.n1, y: Self.n2)
        #expect(value == 0x2f9e_d5ba)
        // The six digits shown to the user: 0x2f9ed5ba = 798938554.
        #expect(value % 1_000_000 == 938554)
    }

    @Test func h6Sample() {
        #expect(LECrypto.h6(w: hex("ec0234a3 57c8ad05 341010a6 0a397d9b"), keyID: Array("lebr".utf8))
                == hex("2d9ae102 e76dc91c e8d3a9e2 80b16399"))
        #expect(Array("lebr".utf8) == hex("6c656272"))
    }

    @Test func h7Sample() {
        let salt = [UInt8](repeating: 0, count: 12) + Array("tmp1".utf8)
        #expect(salt == hex("00000000 00000000 00000000 746D7031"))
        #expect(LECrypto.h7(salt: salt, w: hex("ec0234a3 57c8ad05 341010a6 0a397d9b"))
                == hex("fb173597 c6a3c0ec d2998c2a 75a57011"))
    }

    // A1 of the sample is a public address 56:12:37:37:BF:CE.
    @Test func addressField() {
        #expect(LECrypto.addressField(type: 0, address: 0x56_12_37_37_BF_CE) == Self.a1)
        #expect(LECrypto.addressField(type: 1, address: 0xC0_00_00_00_00_01) == hex("01 c00000000001"))
    }
}

@Suite("Privacy: ah and resolvable private addresses")
struct PrivacyTests {
    static let irk = hex("ec0234a3 57c8ad05 341010a6 0a397d9b")

    // Vol 3 Part H Appendix D.7.
    @Test func ahSample() {
        #expect(LECrypto.ah(irk: Self.irk, prand: hex("708194")) == hex("0dfbaa"))
    }

    // prand 0x708194 in the top 24 bits (0b01 on top), hash 0x0dfbaa below.
    @Test func addressFromSample() {
        #expect(LECrypto.makeResolvablePrivateAddress(irk: Self.irk, prand: 0x708194) == 0x708194_0dfbaa)
    }

    @Test func resolvesOnlyTheRightAddressAndKey() {
        #expect(LECrypto.resolves(address: 0x708194_0dfbaa, irk: Self.irk))
        #expect(!LECrypto.resolves(address: 0x708194_0dfbab, irk: Self.irk))
        #expect(!LECrypto.resolves(address: 0x708195_0dfbaa, irk: Self.irk))
        var otherIRK = Self.irk
        otherIRK[15] ^= 1
        #expect(!LECrypto.resolves(address: 0x708194_0dfbaa, irk: otherIRK))
        // Same low 46 bits, but 0b11 on top: a static address, never resolvable.
        #expect(!LECrypto.resolves(address: 0xF08194_0dfbaa, irk: Self.irk))
    }

    @Test func generatedAddressesResolve() {
        for _ in 0..<20 {
            let address = LECrypto.makeResolvablePrivateAddress(irk: Self.irk)
            #expect(address >> 46 == 0b01)
            #expect(LECrypto.resolves(address: address, irk: Self.irk))
        }
    }
}

/// Vol 6 Part C §1 (encryption sample data).
@Suite("Link-layer session key")
struct SessionKeyTests {
    static let ltk = hex("4C68384139F574D836BCF34E9DFB01BF")
    static let sessionKey = hex("99AD1B5226A37E3E058E3B8E27C2C666")

    @Test func fromSKD() {
        // SKD = SKDm || SKDs with SKDm least significant: SKDs's octets come first MSO first.
        let skd = hex("0213243546576879 ACBDCEDFE0F10213")
        #expect(LECrypto.sessionKey(ltk: Self.ltk, skd: skd) == Self.sessionKey)
    }

    @Test func fromHalves() {
        #expect(LECrypto.sessionKey(ltk: Self.ltk, skdm: 0xACBD_CEDF_E0F1_0213, skds: 0x0213_2435_4657_6879)
                == Self.sessionKey)
    }
}
