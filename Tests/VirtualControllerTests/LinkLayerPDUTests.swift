import ByteCoding
import HCI
import Testing
@testable import VirtualController

/// Byte vectors for the link-layer PDUs the virtual radio carries (Core spec Vol 6 Part B §2.3
/// advertising physical channel PDUs, §2.4 data physical channel PDUs). The spec gives no
/// sample data for these, so every vector is derived by hand in its comment: multi-octet fields
/// are little-endian, addresses least significant octet first (Vol 6 Part B §1.2).
@Suite("Link-layer PDUs: byte vectors")
struct LinkLayerPDUTests {
    // C0:11:22:33:44:55 on the air: 55 44 33 22 11 C0.
    static let randomA = LEAddress(.randomDevice, BluetoothAddress("C0:11:22:33:44:55")!)
    // 00:A1:B2:C3:D4:E5 on the air: E5 D4 C3 B2 A1 00.
    static let publicB = LEAddress(.publicDevice, BluetoothAddress("00:A1:B2:C3:D4:E5")!)
    static let wireA = "55 44 33 22 11 c0"
    static let wireB = "e5 d4 c3 b2 a1 00"

    func bytes(_ hex: String) -> [UInt8] { [UInt8](hex: hex)! }

    /// Encodes, compares with the vector, and decodes the vector back to the same value.
    func check(_ pdu: AdvertisingPDU, _ hex: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(pdu.encode() == bytes(hex), sourceLocation: sourceLocation)
        #expect(try AdvertisingPDU(decoding: bytes(hex)) == pdu, sourceLocation: sourceLocation)
        #expect(pdu.airOctets == bytes(hex).count, sourceLocation: sourceLocation)
    }

    // MARK: Advertising channel (§2.3)

    @Test func advInd() throws {
        // Header: PDU type 0b0000, TxAdd (bit 6) = 1 for the random AdvA → 0x40; length 6 + 3.
        try check(.advInd(advA: Self.randomA, data: [0x02, 0x01, 0x06]), "40 09 \(Self.wireA) 02 01 06")
        // Public AdvA, no data: TxAdd 0, length 6.
        try check(.advInd(advA: Self.publicB, data: []), "00 06 \(Self.wireB)")
    }

    @Test func advDirectInd() throws {
        // Type 0b0001; TxAdd 0 (public AdvA), RxAdd (bit 7) = 1 (random TargetA) → 0x81; length 12.
        try check(.advDirectInd(advA: Self.publicB, targetA: Self.randomA), "81 0c \(Self.wireB) \(Self.wireA)")
        // Both random: 0x01 | 0x40 | 0x80 = 0xC1.
        try check(.advDirectInd(advA: Self.randomA, targetA: Self.randomA), "c1 0c \(Self.wireA) \(Self.wireA)")
    }

    @Test func advNonconnAndScanInd() throws {
        // ADV_NONCONN_IND type 0b0010, public → 0x02; 31 data octets: length 37 = 0x25.
        let data = [UInt8](repeating: 0xAB, count: 31)
        let dataHex = data.map { _ in "ab" }.joined(separator: " ")
        try check(.advNonconnInd(advA: Self.publicB, data: data), "02 25 \(Self.wireB) \(dataHex)")
        // ADV_SCAN_IND type 0b0110, random → 0x46.
        try check(.advScanInd(advA: Self.randomA, data: [0x05]), "46 07 \(Self.wireA) 05")
    }

    @Test func scanRequestAndResponse() throws {
        // SCAN_REQ type 0b0011: ScanA random (TxAdd), AdvA public (RxAdd 0) → 0x43; length 12.
        try check(.scanReq(scanA: Self.randomA, advA: Self.publicB), "43 0c \(Self.wireA) \(Self.wireB)")
        // Both random: 0x03 | 0xC0 = 0xC3.
        try check(.scanReq(scanA: Self.randomA, advA: Self.randomA), "c3 0c \(Self.wireA) \(Self.wireA)")
        // SCAN_RSP type 0b0100, random AdvA → 0x44; ScanRspData 03 03 0D 18.
        try check(.scanRsp(advA: Self.randomA, data: [0x03, 0x03, 0x0D, 0x18]), "44 0a \(Self.wireA) 03 03 0d 18")
    }

    @Test func connectIndWithLLData() throws {
        let ll = ConnectLLData(accessAddress: 0x5065_4C84, crcInit: 0x1A2B3C, windowSize: 2, windowOffset: 3,
                               interval: 0x0018, latency: 1, timeout: 0x0048, channelMap: 0x1E_0F0F_00FF,
                               hop: 15, sca: 5)
        // Type 0b0101; InitA public (TxAdd 0), AdvA random (RxAdd 1) → 0x85; length 6 + 6 + 22 = 34.
        // LLData (§2.3.3.1): AA 84 4C 65 50 · CRCInit 3C 2B 1A · WinSize 02 · WinOffset 03 00 ·
        // Interval 18 00 · Latency 01 00 · Timeout 48 00 · ChM (37 bits, 5 octets) FF 00 0F 0F 1E ·
        // Hop (5 bits) 15 = 0b01111 | SCA (3 bits) 5 << 5 = 0b101_00000 → 0xAF.
        let hex = "85 22 \(Self.wireB) \(Self.wireA) 84 4c 65 50 3c 2b 1a 02 03 00 18 00 01 00 48 00 ff 00 0f 0f 1e af"
        try check(.connectInd(initA: Self.publicB, advA: Self.randomA, llData: ll), hex)
        // Hop and SCA at their limits share the last octet without spilling: 16 | 7 << 5 = 0xF0.
        var edge = ll
        edge.hop = 16
        edge.sca = 7
        let encoded = AdvertisingPDU.connectInd(initA: Self.publicB, advA: Self.randomA, llData: edge).encode()
        #expect(encoded.last == 0xF0)
        guard case .connectInd(_, _, let decoded) = try AdvertisingPDU(decoding: encoded) else { Issue.record("not CONNECT_IND"); return }
        #expect(decoded.hop == 16 && decoded.sca == 7)
    }

    @Test func advAOfEveryType() {
        #expect(AdvertisingPDU.scanReq(scanA: Self.randomA, advA: Self.publicB).advA == Self.publicB)
        #expect(AdvertisingPDU.connectInd(initA: Self.randomA, advA: Self.publicB,
                                          llData: ConnectLLData(accessAddress: 1, interval: 6, latency: 0, timeout: 10)).advA == Self.publicB)
        #expect(AdvertisingPDU.advDirectInd(advA: Self.randomA, targetA: Self.publicB).advA == Self.randomA)
    }

    @Test(arguments: [
        "",                                   // no header
        "00",                                 // header without length
        "00 07 \(wireA)",                     // length 7, 6 octets follow
        "00 05 55 44 33 22 11",               // ADV_IND without a whole AdvA
        "00 06 \(wireA) 01",                  // a trailing octet beyond the length
        "01 0b \(wireA) 01 02 03 04 05",      // ADV_DIRECT_IND one octet short
        "01 0d \(wireA) \(wireB) 00",         // ADV_DIRECT_IND one octet long
        "03 06 \(wireA)",                     // SCAN_REQ without AdvA
        "05 21 \(wireA) \(wireB)" + String(repeating: " 00", count: 21),  // CONNECT_IND, LLData 21 octets
        "05 23 \(wireA) \(wireB)" + String(repeating: " 00", count: 23),  // CONNECT_IND, LLData 23 octets
        "00 26 \(wireA)" + String(repeating: " 00", count: 32),           // 32 octets of AdvData
        "0f 06 \(wireA)",                     // reserved PDU type
    ])
    func malformedAdvertisingPDUsThrow(hex: String) {
        #expect(throws: DecodeError.self) { try AdvertisingPDU(decoding: [UInt8](hex: hex)!) }
    }

    @Test func reservedHeaderBitsAreIgnored() throws {
        // Bit 4 (RFU) and bit 5 (ChSel) do not change the PDU; RxAdd is reserved for ADV_IND.
        let pdu = try AdvertisingPDU(decoding: bytes("f0 06 \(Self.wireA)"))
        #expect(pdu == .advInd(advA: Self.randomA, data: []))
    }

    // MARK: LL control PDUs (§2.4.2)

    static let controlVectors: [(LLControlPDU, String)] = [
        // Opcode 0x00; WinSize 02, WinOffset 0x0004, Interval 0x0028, Latency 0, Timeout 0x0100, Instant 0x1234.
        (.connectionUpdateInd(windowSize: 2, windowOffset: 4, interval: 0x28, latency: 0, timeout: 0x100, instant: 0x1234),
         "00 02 04 00 28 00 00 00 00 01 34 12"),
        // 0x02 ErrorCode 0x13 (Remote User Terminated Connection).
        (.terminateInd(errorCode: 0x13), "02 13"),
        // 0x03 Rand (8) · EDIV (2) · SKDm (8) · IVm (4): 23 octets in all.
        (.encReq(rand: 0x0102_0304_0506_0708, ediv: 0xBEEF, skdm: 0x1122_3344_5566_7788, ivm: 0xDEAD_BEEF),
         "03 08 07 06 05 04 03 02 01 ef be 88 77 66 55 44 33 22 11 ef be ad de"),
        // 0x04 SKDs (8) · IVs (4).
        (.encRsp(skds: 0x8877_6655_4433_2211, ivs: 0x0102_0304), "04 11 22 33 44 55 66 77 88 04 03 02 01"),
        (.startEncReq, "05"),
        (.startEncRsp, "06"),
        // 0x07 UnknownType: the opcode that was not understood.
        (.unknownRsp(unknownType: 0x19), "07 19"),
        // 0x08/0x09/0x0E FeatureSet, 8 octets: bits 0 (encryption) and 8–13 → 01 3F.
        (.featureReq(features: 0x3F01), "08 01 3f 00 00 00 00 00 00"),
        (.featureRsp(features: 0x3F01), "09 01 3f 00 00 00 00 00 00"),
        (.pauseEncReq, "0a"),
        (.pauseEncRsp, "0b"),
        // 0x0C VersNr 0x0D (5.4) · CompId 0x000F · SubVersNr 0x1234.
        (.versionInd(version: 0x0D, companyID: 0x000F, subversion: 0x1234), "0c 0d 0f 00 34 12"),
        // 0x0D ErrorCode 0x06 (PIN or Key Missing).
        (.rejectInd(errorCode: 0x06), "0d 06"),
        (.peripheralFeatureReq(features: 0x01), "0e 01 00 00 00 00 00 00 00"),
        // 0x0F CtrData, 23 octets: Interval_Min 0x0006 · Interval_Max 0x0C80 · Latency 0x01F3 ·
        // Timeout 0x0C80 · PreferredPeriodicity 00 · ReferenceConnEventCount 0000 ·
        // Offset0–5 FFFF (none valid).
        (.connectionParamReq(.init(intervalMin: 6, intervalMax: 0x0C80, latency: 0x01F3, timeout: 0x0C80)),
         "0f 06 00 80 0c f3 01 80 0c 00 00 00 ff ff ff ff ff ff ff ff ff ff ff ff"),
        // 0x10, the same layout, here with a periodicity, reference event and two offsets.
        (.connectionParamRsp(.init(intervalMin: 0x18, intervalMax: 0x28, latency: 0, timeout: 0x100, preferredPeriodicity: 4,
                                   referenceConnEventCount: 0x0102, offsets: [0, 8, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF])),
         "10 18 00 28 00 00 00 00 01 04 02 01 00 00 08 00 ff ff ff ff ff ff ff ff"),
        // 0x11 RejectOpcode 0x0F · ErrorCode 0x3B (Unacceptable Connection Parameters).
        (.rejectExtInd(rejectOpcode: 0x0F, errorCode: 0x3B), "11 0f 3b"),
        (.pingReq, "12"),
        (.pingRsp, "13"),
        // 0x14/0x15 MaxRxOctets 251 · MaxRxTime 2120 · MaxTxOctets 27 · MaxTxTime 328.
        (.lengthReq(.init(maxRxOctets: 251, maxRxTime: 2120, maxTxOctets: 27, maxTxTime: 328)), "14 fb 00 48 08 1b 00 48 01"),
        (.lengthRsp(.init(maxRxOctets: 27, maxRxTime: 328, maxTxOctets: 251, maxTxTime: 2120)), "15 1b 00 48 01 fb 00 48 08"),
        // 0x16/0x17 TX_PHYS · RX_PHYS bit fields (bit 0 1M, bit 1 2M, bit 2 Coded).
        (.phyReq(txPhys: 0b010, rxPhys: 0b011), "16 02 03"),
        (.phyRsp(txPhys: 0b101, rxPhys: 0b001), "17 05 01"),
        // 0x18 PHY_C_TO_P 2M · PHY_P_TO_C unchanged · Instant 0x0010.
        (.phyUpdateInd(centralToPeripheral: 0b010, peripheralToCentral: 0, instant: 0x10), "18 02 00 10 00"),
    ]

    @Test func everyControlPDU() throws {
        var opcodes: Set<UInt8> = []
        for (pdu, hex) in Self.controlVectors {
            let expected = bytes(hex)
            #expect(pdu.encode() == expected, "\(pdu)")
            #expect(try LLControlPDU(decoding: expected[...]) == pdu, "\(hex)")
            #expect(pdu.opcode == expected[0])
            opcodes.insert(pdu.opcode)
        }
        // Every opcode 0x00–0x18 except LL_CHANNEL_MAP_IND (0x01), which needs channel selection.
        #expect(opcodes == Set((0x00...0x18).filter { $0 != 0x01 }))
        // LL_CONNECTION_PARAM_REQ/RSP CtrData is 23 octets.
        #expect(LLControlPDU.connectionParamReq(.init(intervalMin: 6, intervalMax: 6, latency: 0, timeout: 10)).encode().count == 24)
    }

    @Test func controlPDUsTruncatedOrExtendedThrow() {
        for (_, hex) in Self.controlVectors {
            let good = bytes(hex)
            if good.count > 1 {
                #expect(throws: DecodeError.self, "\(hex) without its last octet") { try LLControlPDU(decoding: good.dropLast()) }
            }
            #expect(throws: DecodeError.self, "\(hex) with an extra octet") { try LLControlPDU(decoding: (good + [0])[...]) }
        }
        #expect(throws: DecodeError.self) { try LLControlPDU(decoding: [][...]) }
        // Opcodes this link layer does not implement: the controller answers LL_UNKNOWN_RSP.
        for opcode: UInt8 in [0x01, 0x19, 0x1F, 0xFF] {
            #expect(throws: DecodeError.self) { try LLControlPDU(decoding: [opcode, 0, 0, 0, 0, 0, 0, 0][...]) }
        }
    }

    @Test func controlPDUFromASliceOfALargerBuffer() throws {
        // A data PDU's payload is decoded in place: indices do not start at zero.
        let buffer = bytes("aa bb 02 13")
        #expect(try LLControlPDU(decoding: buffer[2...]) == .terminateInd(errorCode: 0x13))
    }

    // MARK: Data channel PDUs (§2.4)

    @Test func dataPDUHeaderBits() throws {
        // Header octet 0: LLID bits 0–1, NESN bit 2, SN bit 3, MD bit 4; octet 1: length.
        let cases: [(DataPDU, String)] = [
            // Empty PDU: LLID 0b01, SN 1 → 0x09, length 0.
            (DataPDU(llid: .continuation, sn: true, payload: []), "09 00"),
            // Start of an L2CAP message, NESN 1, MD 1: 0b10 | 0x04 | 0x10 = 0x16.
            (DataPDU(llid: .start, nesn: true, moreData: true, payload: [1, 0, 4, 0, 0xAA]), "16 05 01 00 04 00 aa"),
            // Control PDU, all flags: 0b11 | 0x04 | 0x08 | 0x10 = 0x1F.
            (DataPDU(llid: .control, nesn: true, sn: true, moreData: true, payload: [0x02, 0x13]), "1f 02 02 13"),
        ]
        for (pdu, hex) in cases {
            #expect(pdu.encode() == bytes(hex))
            #expect(try DataPDU(decoding: bytes(hex), encrypted: false) == pdu)
            #expect(pdu.airOctets == bytes(hex).count)
        }
        #expect(DataPDU.control(.pingReq).encode() == bytes("03 01 12"))
    }

    @Test func dataPDUWithMIC() throws {
        // Encrypted: the length counts payload and the 4-octet MIC (carried little-endian here).
        let pdu = DataPDU(llid: .start, payload: [1, 0, 4, 0, 0xAA], mic: 0x1122_3344)
        let hex = "02 09 01 00 04 00 aa 44 33 22 11"
        #expect(pdu.encode() == bytes(hex))
        #expect(pdu.airOctets == 11)
        #expect(try DataPDU(decoding: bytes(hex), encrypted: true) == pdu)
        // The same octets on an unencrypted link are nine octets of payload.
        #expect(try DataPDU(decoding: bytes(hex), encrypted: false).payload.count == 9)
        // An empty PDU carries no MIC even on an encrypted link.
        let empty = try DataPDU(decoding: bytes("01 00"), encrypted: true)
        #expect(empty.mic == nil && empty.payload.isEmpty)
    }

    @Test(arguments: [
        ("", false), ("01", false),
        ("00 00", false),                    // LLID 0b00 is reserved
        ("02 03 01 02", false),              // length 3, two octets follow
        ("02 01 01 02", false),              // a trailing octet
        ("02 03 01 02 03", true),            // encrypted, no room for a MIC
        ("02 04 01 02 03 04", true),         // encrypted: a MIC with an empty payload
    ])
    func malformedDataPDUsThrow(hex: String, encrypted: Bool) {
        #expect(throws: DecodeError.self) { try DataPDU(decoding: [UInt8](hex: hex)!, encrypted: encrypted) }
    }

    @Test func dataPDUPayloadLimit() throws {
        // Payload at most 251 octets (§2.4); 255 fits the length field only with a MIC.
        let longest = [0x02, 251] + [UInt8](repeating: 0, count: 251)
        #expect(try DataPDU(decoding: longest, encrypted: false).payload.count == 251)
        let tooLong = [0x02, 252] + [UInt8](repeating: 0, count: 252)
        #expect(throws: DecodeError.self) { try DataPDU(decoding: tooLong, encrypted: false) }
        let withMIC = [0x02, 255] + [UInt8](repeating: 0, count: 255)
        #expect(try DataPDU(decoding: withMIC, encrypted: true).payload.count == 251)
    }
}
