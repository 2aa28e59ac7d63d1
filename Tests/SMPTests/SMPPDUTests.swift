import HCI
import SMP
import Testing

/// Bytes from hex as written (spaces ignored): PDUs here are written in wire order.
func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace })
    precondition(digits.count % 2 == 0, "odd hex")
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

@Suite("SMP PDUs: one encoder and one decoder each")
struct SMPPDUTests {
    static let block = hex("00112233445566778899aabbccddeeff")

    /// Every command, as a value and as the octets the wire carries.
    static let vectors: [(SMPPDU, String)] = [
        // The c1 sample's Pairing Request and Response (Vol 3 Part H §2.2.3).
        (.pairingRequest(SMPPairingFeatures(ioCapability: .noInputNoOutput, oobDataPresent: false,
                                            authRequirements: [], maximumKeySize: 16,
                                            initiatorKeys: [.encryptionKey, .identityKey, .signingKey],
                                            responderKeys: [.encryptionKey, .identityKey, .signingKey])),
         "01 03 00 00 10 07 07"),
        (.pairingResponse(SMPPairingFeatures(ioCapability: .keyboardDisplay, oobDataPresent: true,
                                             authRequirements: [.bonding, .mitm, .secureConnections, .keypress, .ct2],
                                             maximumKeySize: 7, initiatorKeys: [],
                                             responderKeys: [.identityKey, .linkKey])),
         "02 04 01 3d 07 00 0a"),
        (.pairingConfirm(block), "03 00112233445566778899aabbccddeeff"),
        (.pairingRandom(block), "04 00112233445566778899aabbccddeeff"),
        (.pairingFailed(.dhKeyCheckFailed), "05 0b"),
        (.encryptionInformation(longTermKey: block), "06 00112233445566778899aabbccddeeff"),
        (.centralIdentification(ediv: 0x1234, rand: 0x0102_0304_0506_0708), "07 3412 0807060504030201"),
        (.identityInformation(identityResolvingKey: block), "08 00112233445566778899aabbccddeeff"),
        (.identityAddressInformation(LEAddress(.publicDevice, BluetoothAddress("A1:A2:A3:A4:A5:A6")!)),
         "09 00 a6a5a4a3a2a1"),
        (.identityAddressInformation(LEAddress(.randomDevice, BluetoothAddress("C0:11:22:33:44:55")!)),
         "09 01 5544332211c0"),
        (.signingInformation(signatureKey: block), "0a 00112233445566778899aabbccddeeff"),
        (.securityRequest([.bonding, .mitm]), "0b 05"),
        (.pairingPublicKey(Array(0..<64)),
         "0c" + (0..<64).map { String(format2($0)) }.joined()),
        (.pairingDHKeyCheck(block), "0d 00112233445566778899aabbccddeeff"),
        (.keypressNotification(.passkeyEntryCompleted), "0e 04"),
    ]

    @Test func everyCommandEncodesAndDecodesByteExact() throws {
        #expect(Set(Self.vectors.map(\.0.code)) == Set(SMPCommandCode.allCases))
        for (pdu, wire) in Self.vectors {
            #expect(pdu.encode() == hex(wire), "\(pdu.code)")
            #expect(try SMPPDU(decoding: hex(wire)) == pdu, "\(pdu.code)")
            #expect(hex(wire).count == pdu.code.pduLength)
        }
    }

    @Test func reservedAuthReqAndKeyDistributionBitsSurvive() throws {
        // f6 MACs the AuthReq octet as sent, so its reserved bits must round-trip.
        let wire = hex("01 04 00 c5 10 f0 ff")
        let pdu = try SMPPDU(decoding: wire)
        #expect(pdu.encode() == wire)
    }

    @Test func wrongLengthsAreRefusedForEveryCommand() {
        for code in SMPCommandCode.allCases {
            for length in [1, code.pduLength - 1, code.pduLength + 1] where length != code.pduLength && length > 0 {
                let pdu = [code.rawValue] + [UInt8](repeating: 0, count: length - 1)
                #expect(throws: SMPDecodeError.invalidLength(code, expected: code.pduLength, actual: length)) {
                    try SMPPDU(decoding: pdu)
                }
            }
        }
    }

    @Test func unknownCodesAndEmptyPDUs() {
        #expect(throws: SMPDecodeError.empty) { try SMPPDU(decoding: []) }
        for code: UInt8 in [0x00, 0x0F, 0x10, 0x7F, 0xFF] {
            #expect(throws: SMPDecodeError.unknownCommand(code)) { try SMPPDU(decoding: [code, 0, 0]) }
        }
    }

    @Test func reservedFieldValuesAreRefused() {
        let cases: [(String, SMPDecodeError)] = [
            ("01 05 00 00 10 00 00", .invalidValue(.pairingRequest, field: "IO capability", value: 5)),
            ("02 ff 00 00 10 00 00", .invalidValue(.pairingResponse, field: "IO capability", value: 0xff)),
            ("01 03 02 00 10 00 00", .invalidValue(.pairingRequest, field: "OOB data flag", value: 2)),
            ("05 00", .invalidValue(.pairingFailed, field: "reason", value: 0)),
            ("05 11", .invalidValue(.pairingFailed, field: "reason", value: 0x11)),
            ("09 02 010203040506", .invalidValue(.identityAddressInformation, field: "address type", value: 2)),
            ("0e 05", .invalidValue(.keypressNotification, field: "type", value: 5)),
        ]
        for (wire, error) in cases {
            #expect(throws: error) { try SMPPDU(decoding: hex(wire)) }
        }
    }

    @Test func everyPairingFailedReasonRoundTrips() throws {
        for reason in SMPPairingFailedReason.allCases {
            #expect(SMPPDU.pairingFailed(reason).encode() == [0x05, reason.rawValue])
            #expect(try SMPPDU(decoding: [0x05, reason.rawValue]) == .pairingFailed(reason))
        }
    }

    /// Every byte string of up to three octets, and random longer ones, decodes or throws.
    @Test func arbitraryBytesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for first in 0...255 {
            for length in 0...3 {
                let pdu = [UInt8(first)] + (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if let decoded = try? SMPPDU(decoding: pdu) { #expect(decoded.encode() == pdu) }
            }
        }
        for _ in 0..<2000 {
            let code = UInt8.random(in: 0...0x10, using: &generator)
            let length = Int.random(in: 0...70, using: &generator)
            let pdu = [code] + (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if let decoded = try? SMPPDU(decoding: pdu) { #expect(decoded.encode() == pdu) }
        }
    }
}

private func format2(_ value: Int) -> String {
    let digits = String(value, radix: 16)
    return digits.count == 1 ? "0" + digits : digits
}
