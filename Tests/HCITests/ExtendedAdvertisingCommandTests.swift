import ByteCoding
import Testing
@testable import HCI

@Suite("HCI commands: extended advertising")
struct ExtendedAdvertisingCommandTests {
    @Test func setRandomAddress() throws {
        let command = LESetAdvertisingSetRandomAddress(advertisingHandle: 1, randomAddress: testAddress)
        #expect(h4Hex(command) == hex("01 35 20 07 01 55 44 33 22 11 c0"))
        try expectRoundTrip(command)
    }

    @Test func parametersBytes() throws {
        let command = LESetExtendedAdvertisingParameters(
            advertisingHandle: 1, advertisingEventProperties: [.legacy, .connectable, .scannable],
            primaryAdvertisingIntervalMin: 0x0000A0, primaryAdvertisingIntervalMax: 0x0000F0,
            primaryAdvertisingChannelMap: 0x07, ownAddressType: .randomDevice, peerAddressType: .publicDevice,
            peerAddress: .zero, advertisingFilterPolicy: .acceptAll, advertisingTXPower: 0x7F,
            primaryAdvertisingPHY: .le1M, secondaryAdvertisingMaxSkip: 0, secondaryAdvertisingPHY: .le1M,
            advertisingSID: 0, scanRequestNotificationEnable: false)
        // Opcode 0x2036, 25 octets: handle 1; properties 0x0013 (legacy ADV_IND); intervals as
        // 3 octets (0x0000A0, 0x0000F0); channels 37–39; own random; peer public + zero address;
        // no filter; TX power 0x7F (no preference); primary 1M; skip 0; secondary 1M; SID 0;
        // no scan request notifications.
        #expect(h4Hex(command) == hex("""
            01 36 20 19 01 13 00 a0 00 00 f0 00 00 07 01 00 00 00 00 00 00 00 00
            7f 01 00 01 00 00
            """))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetExtendedAdvertisingParameters())
        try expectRoundTrip(LESetExtendedAdvertisingParameters(
            advertisingHandle: 0xEF, advertisingEventProperties: [.connectable, .includeTxPower, .anonymous],
            primaryAdvertisingIntervalMin: 0xFF_FFFF, primaryAdvertisingIntervalMax: 0x12_3456,
            ownAddressType: .randomIdentity, peerAddressType: .randomDevice, peerAddress: testAddress,
            advertisingFilterPolicy: .filterConnectionRequests, advertisingTXPower: -20, primaryAdvertisingPHY: .leCoded,
            secondaryAdvertisingMaxSkip: 3, secondaryAdvertisingPHY: .le2M, advertisingSID: 0x0F,
            scanRequestNotificationEnable: true))
        #expect(LESetExtendedAdvertisingParameters.EventProperties.highDutyDirected.rawValue == 0x08)
    }

    @Test func parametersRejectBadValues() {
        let good = LESetExtendedAdvertisingParameters().packet.parameters
        // Octets: 10 own address type, 11 peer address type (0/1 only), 18 filter policy,
        // 20 primary PHY (2M not allowed, 0 undefined), 22 secondary PHY, 24 notification enable.
        for (index, value) in [(10, UInt8(0x04)), (11, 0x02), (18, 0x04), (20, 0x02), (20, 0x00), (22, 0x04), (24, 0x02)] {
            var bytes = good
            bytes[index] = value
            #expect(throws: DecodeError.self, "octet \(index) = \(value)") {
                try LESetExtendedAdvertisingParameters(packet: HCICommandPacket(
                    opcode: LESetExtendedAdvertisingParameters.opcode, parameters: bytes))
            }
        }
    }

    @Test func parametersReturn() throws {
        try expectReturnRoundTrip(LESetExtendedAdvertisingParameters.ReturnParameters(selectedTXPower: -8))
        // Selected_TX_Power 0xF8 = -8 dBm.
        let r = try LESetExtendedAdvertisingParameters.ReturnParameters(returnBytes: [0x00, 0xF8], context: "test")
        #expect(r.selectedTXPower == -8)
    }

    @Test func dataBytes() throws {
        let command = LESetExtendedAdvertisingData(advertisingHandle: 1, operation: .completeData,
                                                   fragmentPreference: .controllerMayFragment,
                                                   advertisingData: [0x02, 0x01, 0x06])
        // Opcode 0x2037: handle 1, complete data, may fragment, length 3, data (no padding).
        #expect(h4Hex(command) == hex("01 37 20 07 01 03 00 03 02 01 06"))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetExtendedAdvertisingData(operation: .unchangedData, advertisingData: []))
        try expectRoundTrip(LESetExtendedAdvertisingData(
            operation: .firstFragment, fragmentPreference: .controllerShouldNotFragment,
            advertisingData: Array(repeating: 0x55, count: 251)))
        try expectRoundTrip(LESetExtendedScanResponseData(scanResponseData: [0x03, 0x09, 0x41, 0x42]))
        try expectRoundTrip(LESetExtendedScanResponseData(advertisingHandle: 2, operation: .lastFragment,
                                                          scanResponseData: Array(repeating: 1, count: 100)))
    }

    @Test func dataRejectsBadValues() {
        let opcode = LESetExtendedAdvertisingData.opcode
        // Length 252 is above the 251-octet limit, even with 252 octets present.
        #expect(throws: DecodeError.self) {
            try LESetExtendedAdvertisingData(packet: HCICommandPacket(
                opcode: opcode, parameters: [0x00, 0x03, 0x00, 252] + Array(repeating: 0, count: 252)))
        }
        // Length says 5, only 3 octets follow.
        #expect(throws: DecodeError.self) {
            try LESetExtendedAdvertisingData(packet: HCICommandPacket(opcode: opcode, parameters: [0x00, 0x03, 0x00, 5, 1, 2, 3]))
        }
        // Operation 0x05 and Fragment_Preference 0x02 are undefined.
        #expect(throws: DecodeError.self) {
            try LESetExtendedAdvertisingData(packet: HCICommandPacket(opcode: opcode, parameters: [0x00, 0x05, 0x00, 0]))
        }
        #expect(throws: DecodeError.self) {
            try LESetExtendedScanResponseData(packet: HCICommandPacket(
                opcode: LESetExtendedScanResponseData.opcode, parameters: [0x00, 0x03, 0x02, 0]))
        }
        // Encoding cuts over-long data at 251 octets.
        let long = LESetExtendedAdvertisingData(advertisingData: Array(repeating: 0, count: 300))
        #expect(long.packet.parameters.count == 4 + 251)
    }

    @Test func enableBytes() throws {
        let command = LESetExtendedAdvertisingEnable(enable: true, sets: [
            .init(advertisingHandle: 1, duration: 0x01F4, maxExtendedAdvertisingEvents: 0),
            .init(advertisingHandle: 2, duration: 0, maxExtendedAdvertisingEvents: 5),
        ])
        // Opcode 0x2039: enable, Num_Sets 2, then per set (interleaved) handle, duration
        // (0x01F4 = 5 s), max events.
        #expect(h4Hex(command) == hex("01 39 20 0a 01 02 01 f4 01 00 02 00 00 05"))
        try expectRoundTrip(command)
        // Disable all sets: Enable 0, Num_Sets 0.
        #expect(h4Hex(LESetExtendedAdvertisingEnable(enable: false, sets: [])) == hex("01 39 20 02 00 00"))
        try expectRoundTrip(LESetExtendedAdvertisingEnable(enable: false, sets: []))
        // Num_Sets says 2, only one set follows.
        #expect(throws: DecodeError.self) {
            try LESetExtendedAdvertisingEnable(packet: HCICommandPacket(
                opcode: LESetExtendedAdvertisingEnable.opcode, parameters: [0x01, 0x02, 0x01, 0x00, 0x00, 0x00]))
        }
    }

    @Test func setManagement() throws {
        try expectRoundTrip(LEReadMaximumAdvertisingDataLength())
        try expectReturnRoundTrip(LEReadMaximumAdvertisingDataLength.ReturnParameters(maxAdvertisingDataLength: 1650))
        // 0x0672 = 1650 octets.
        let maximum = try LEReadMaximumAdvertisingDataLength.ReturnParameters(returnBytes: [0x00, 0x72, 0x06], context: "test")
        #expect(maximum.maxAdvertisingDataLength == 1650)
        try expectRoundTrip(LEReadNumberOfSupportedAdvertisingSets())
        try expectReturnRoundTrip(LEReadNumberOfSupportedAdvertisingSets.ReturnParameters(numSupportedAdvertisingSets: 16))
        try expectRoundTrip(LERemoveAdvertisingSet(advertisingHandle: 3))
        try expectRoundTrip(LEClearAdvertisingSets())
        #expect(h4Hex(LEClearAdvertisingSets()) == hex("01 3d 20 00"))
    }
}

@Suite("HCI commands: extended scanning and connection creation")
struct ExtendedScanningCommandTests {
    @Test func scanParametersBytes() throws {
        let command = LESetExtendedScanParameters(ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered,
                                                  scanningPHYs: [
                                                    .init(phy: .le1M, scanType: .active, scanInterval: 0x0060, scanWindow: 0x0030),
                                                    .init(phy: .leCoded, scanType: .passive, scanInterval: 0x0120, scanWindow: 0x0090),
                                                  ])
        // Opcode 0x2041: own public, unfiltered, Scanning_PHYs 0x05 (1M | Coded), then per PHY
        // type, interval, window.
        #expect(h4Hex(command) == hex("01 41 20 0d 00 00 05 01 60 00 30 00 00 20 01 90 00"))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetExtendedScanParameters())
        // Entries given out of order are written in mask-bit order.
        var reversed = command
        reversed.scanningPHYs.reverse()
        #expect(reversed.packet == command.packet)
    }

    @Test func scanParametersRejectBadValues() {
        let opcode = LESetExtendedScanParameters.opcode
        // Scanning_PHYs bit 1 (LE 2M) is reserved for scanning.
        #expect(throws: DecodeError.self) {
            try LESetExtendedScanParameters(packet: HCICommandPacket(opcode: opcode, parameters: [0, 0, 0x02, 0, 0x10, 0, 0x10, 0]))
        }
        // Scan_Type 2 is undefined.
        #expect(throws: DecodeError.self) {
            try LESetExtendedScanParameters(packet: HCICommandPacket(opcode: opcode, parameters: [0, 0, 0x01, 2, 0x10, 0, 0x10, 0]))
        }
        // Mask names two PHYs, one entry follows.
        #expect(throws: DecodeError.self) {
            try LESetExtendedScanParameters(packet: HCICommandPacket(opcode: opcode, parameters: [0, 0, 0x05, 0, 0x10, 0, 0x10, 0]))
        }
    }

    @Test func scanEnable() throws {
        let command = LESetExtendedScanEnable(enable: true, filterDuplicates: .enabledResetForEachPeriod,
                                              duration: 0x0064, period: 0x0002)
        // Opcode 0x2042: enable, filter 2, duration 1 s (0x0064 × 10 ms), period 2.56 s.
        #expect(h4Hex(command) == hex("01 42 20 06 01 02 64 00 02 00"))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetExtendedScanEnable(enable: false))
        #expect(throws: DecodeError.self) {
            try LESetExtendedScanEnable(packet: HCICommandPacket(opcode: LESetExtendedScanEnable.opcode,
                                                                 parameters: [1, 3, 0, 0, 0, 0]))
        }
    }

    @Test func extendedCreateConnectionBytes() throws {
        let command = LEExtendedCreateConnection(
            initiatorFilterPolicy: .peerAddress, ownAddressType: .publicDevice, peerAddressType: .randomDevice,
            peerAddress: testAddress, initiatingPHYs: [
                .init(phy: .leCoded, scanInterval: 0x0180, scanWindow: 0x0090, connectionIntervalMin: 0x0028,
                      connectionIntervalMax: 0x0038, maxLatency: 0, supervisionTimeout: 0x0064),
                .init(phy: .le1M, scanInterval: 0x0060, scanWindow: 0x0030, connectionIntervalMin: 0x0018,
                      connectionIntervalMax: 0x0028, maxLatency: 0, supervisionTimeout: 0x002A),
            ])
        // Opcode 0x2043, 42 octets: filter 0, own public, peer random, address, Initiating_PHYs
        // 0x05; then LE 1M's 16 octets before LE Coded's (mask-bit order, whatever the array order).
        #expect(h4Hex(command) == hex("""
            01 43 20 2a 00 00 01 55 44 33 22 11 c0 05
            60 00 30 00 18 00 28 00 00 00 2a 00 00 00 00 00
            80 01 90 00 28 00 38 00 00 00 64 00 00 00 00 00
            """))
        #expect(LEExtendedCreateConnection.completion == .commandStatus)
        // Decoding yields the entries in mask-bit order.
        let decoded = try LEExtendedCreateConnection(packet: command.packet)
        #expect(decoded.initiatingPHYs.map(\.phy) == [.le1M, .leCoded])
        try expectRoundTrip(decoded)
        try expectRoundTrip(LEExtendedCreateConnection(peerAddress: testAddress))
        try expectRoundTrip(LEExtendedCreateConnection(
            initiatorFilterPolicy: .filterAcceptList, ownAddressType: .publicIdentity, peerAddressType: .randomIdentity,
            peerAddress: .zero, initiatingPHYs: LEPHY.allCases.map { .init(phy: $0) }))
    }

    @Test func extendedCreateConnectionRejectsBadValues() {
        let good = LEExtendedCreateConnection(peerAddress: testAddress).packet.parameters
        var reserved = good
        reserved[9] = 0x09  // bit 3 of Initiating_PHYs is reserved
        #expect(throws: DecodeError.self) {
            try LEExtendedCreateConnection(packet: HCICommandPacket(opcode: LEExtendedCreateConnection.opcode, parameters: reserved))
        }
        var badPeer = good
        badPeer[2] = 0x04
        #expect(throws: DecodeError.self) {
            try LEExtendedCreateConnection(packet: HCICommandPacket(opcode: LEExtendedCreateConnection.opcode, parameters: badPeer))
        }
    }
}
