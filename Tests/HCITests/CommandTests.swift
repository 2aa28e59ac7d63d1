import ByteCoding
import Testing
@testable import HCI

@Suite("HCI commands: setup and controller information")
struct SetupCommandTests {
    @Test func resetBytes() throws {
        // Opcode 0x0C03 (OGF 0x03, OCF 0x003) little-endian, no parameters.
        #expect(h4Hex(Reset()) == hex("01 03 0c 00"))
        try expectRoundTrip(Reset())
    }

    @Test func eventMasks() throws {
        try expectRoundTrip(SetEventMask())
        try expectRoundTrip(SetEventMask(eventMask: 0x3DBF_F807_FFFB_FFFF))
        try expectRoundTrip(SetEventMaskPage2(eventMaskPage2: 1 << 23))
        try expectRoundTrip(LESetEventMask())
        try expectRoundTrip(LESetEventMask(leEventMask: 0x0000_0000_000F_FFFF))
        // Opcode 0x0C01; the spec's default mask 0x00001FFFFFFFFFFF, little-endian.
        #expect(h4Hex(SetEventMask()) == hex("01 01 0c 08 ff ff ff ff ff 1f 00 00"))
        // Opcode 0x2001; default LE mask 0x1F.
        #expect(h4Hex(LESetEventMask()) == hex("01 01 20 08 1f 00 00 00 00 00 00 00"))
    }

    @Test func informationalCommands() throws {
        try expectRoundTrip(ReadLocalVersionInformation())
        try expectRoundTrip(ReadLocalSupportedCommands())
        try expectRoundTrip(ReadLocalSupportedFeatures())
        try expectRoundTrip(ReadBufferSize())
        try expectRoundTrip(ReadBDADDR())
        try expectRoundTrip(LEReadBufferSizeV1())
        try expectRoundTrip(LEReadBufferSizeV2())
        try expectRoundTrip(LEReadLocalSupportedFeatures())
        // Read BD_ADDR is OGF 0x04, OCF 0x009 → 0x1009.
        #expect(h4Hex(ReadBDADDR()) == hex("01 09 10 00"))
    }

    @Test func informationalReturns() throws {
        try expectReturnRoundTrip(ReadLocalVersionInformation.ReturnParameters(
            hciVersion: 0x0D, hciSubversion: 0x1234, lmpVersion: 0x0D, companyIdentifier: 0xFFFF, lmpSubversion: 0x5678))
        var commands = ReadLocalSupportedCommands.ReturnParameters()
        commands.setSupported(octet: 0, bit: 5)
        commands.setSupported(octet: 25, bit: 0)
        try expectReturnRoundTrip(commands)
        try expectReturnRoundTrip(ReadLocalSupportedFeatures.ReturnParameters(lmpFeatures: 1 << 38 | 1 << 37))
        try expectReturnRoundTrip(ReadBufferSize.ReturnParameters(
            aclDataPacketLength: 1021, synchronousDataPacketLength: 64, totalNumACLDataPackets: 8,
            totalNumSynchronousDataPackets: 1))
        try expectReturnRoundTrip(ReadBDADDR.ReturnParameters(bdAddr: testAddress))
        try expectReturnRoundTrip(LEReadBufferSizeV1.ReturnParameters(leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15))
        try expectReturnRoundTrip(LEReadBufferSizeV2.ReturnParameters(
            leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15, isoDataPacketLength: 300, totalNumISODataPackets: 4))
        try expectReturnRoundTrip(LEReadLocalSupportedFeatures.ReturnParameters(features: [.leEncryption, .le2MPHY]))
    }

    @Test func leReadBufferSizeRealBytes() throws {
        // Status 0x00, LE_ACL_Data_Packet_Length 0x00FB, Total_Num_LE_ACL_Data_Packets 0x0F.
        let r = try LEReadBufferSizeV1.ReturnParameters(returnBytes: [UInt8](hex: "00 fb 00 0f")!, context: "test")
        #expect(r.status == .success)
        #expect(r.leACLDataPacketLength == 251)
        #expect(r.totalNumLEACLDataPackets == 15)
    }

    @Test func readBDADDRRealBytes() throws {
        // The address is little-endian on the wire: 55 44 33 22 11 C0 is C0:11:22:33:44:55.
        let r = try ReadBDADDR.ReturnParameters(returnBytes: [UInt8](hex: "00 55 44 33 22 11 c0")!, context: "test")
        #expect(r.bdAddr == testAddress)
    }

    @Test func readLocalVersionRealBytes() throws {
        // HCI 5.4 (0x0D), HCI subversion 0x0100, LMP 5.4, company 0x0002, LMP subversion 0x2222.
        let r = try ReadLocalVersionInformation.ReturnParameters(
            returnBytes: [UInt8](hex: "00 0d 00 01 0d 02 00 22 22")!, context: "test")
        #expect(r == .init(hciVersion: 0x0D, hciSubversion: 0x0100, lmpVersion: 0x0D, companyIdentifier: 2, lmpSubversion: 0x2222))
    }

    @Test func supportedCommandsBitmap() throws {
        var bitmap = [UInt8](repeating: 0, count: 64)
        bitmap[0] = 0b0010_0000  // octet 0 bit 5: Disconnect
        bitmap[25] = 0b0000_0001  // octet 25 bit 0: LE Set Event Mask
        let r = try ReadLocalSupportedCommands.ReturnParameters(returnBytes: [0x00] + bitmap, context: "test")
        #expect(r.supports(octet: 0, bit: 5))
        #expect(r.supports(octet: 25, bit: 0))
        #expect(!r.supports(octet: 25, bit: 1))
        #expect(!r.supports(octet: 64, bit: 0))
        #expect(!r.supports(octet: 0, bit: 8))
        #expect(throws: DecodeError.self) {
            try ReadLocalSupportedCommands.ReturnParameters(returnBytes: [0x00] + bitmap.dropLast(), context: "test")
        }
    }

    @Test func leFeatures() throws {
        // 0x0000_0000_0000_0901: LE Encryption (0), LE 2M PHY (8), LE Coded PHY (11).
        let r = try LEReadLocalSupportedFeatures.ReturnParameters(
            returnBytes: [UInt8](hex: "00 01 09 00 00 00 00 00 00")!, context: "test")
        #expect(r.features == [.leEncryption, .le2MPHY, .leCodedPHY])
        #expect(!r.features.contains(.leExtendedAdvertising))
        #expect(LEFeatures.minimumNumberOfUsedChannels.rawValue == 1 << 16)
    }

    @Test func randomAddress() throws {
        try expectRoundTrip(LESetRandomAddress(randomAddress: testAddress))
        // Opcode 0x2005, 6 octets, address little-endian.
        #expect(h4Hex(LESetRandomAddress(randomAddress: testAddress)) == hex("01 05 20 06 55 44 33 22 11 c0"))
    }

    @Test func wrongOpcodeThrows() {
        let packet = LESetScanEnable(leScanEnable: true).packet
        #expect(throws: DecodeError.self) { try LESetAdvertisingEnable(packet: packet) }
        #expect(throws: DecodeError.self) { try Reset(packet: ReadBDADDR().packet) }
    }

    @Test func namesAndOpcodesAreUnique() {
        #expect(Set(HCICommands.all.map { $0.opcode }).count == HCICommands.all.count)
        #expect(HCICommands.name(of: HCIOpcode(rawValue: 0x0C03)) == "Reset")
        #expect(HCICommands.name(of: HCIOpcode(rawValue: 0x2006)) == "LE Set Advertising Parameters")
        #expect(HCICommands.name(of: HCIOpcode(rawValue: 0xFC00)) == nil)
    }
}

@Suite("HCI commands: connections")
struct ConnectionCommandTests {
    @Test func disconnectBytes() throws {
        let command = Disconnect(connectionHandle: 0x0040)
        // Opcode 0x0406 (OGF 0x01, OCF 0x006); handle 0x0040; reason 0x13 Remote User Terminated.
        #expect(h4Hex(command) == hex("01 06 04 03 40 00 13"))
        #expect(Disconnect.completion == .commandStatus)
        try expectRoundTrip(command)
        try expectRoundTrip(Disconnect(connectionHandle: 0x0EFF, reason: .connectionTerminatedByLocalHost))
    }

    @Test func handleFlagsAreMasked() throws {
        // The top four bits of a handle field are not part of the handle.
        let command = try Disconnect(packet: HCICommandPacket(opcode: Disconnect.opcode, parameters: [0x40, 0x20, 0x13]))
        #expect(command.connectionHandle == 0x0040)
    }

    @Test func readRemoteVersion() throws {
        try expectRoundTrip(ReadRemoteVersionInformation(connectionHandle: 1))
        #expect(ReadRemoteVersionInformation.completion == .commandStatus)
        // Opcode 0x041D.
        #expect(h4Hex(ReadRemoteVersionInformation(connectionHandle: 1)) == hex("01 1d 04 02 01 00"))
    }

    @Test func createConnectionBytes() throws {
        let command = LECreateConnection(
            leScanInterval: 0x0060, leScanWindow: 0x0030, initiatorFilterPolicy: .peerAddress,
            peerAddressType: .randomDevice, peerAddress: testAddress, ownAddressType: .publicDevice,
            connectionIntervalMin: 0x0018, connectionIntervalMax: 0x0028, maxLatency: 0,
            supervisionTimeout: 0x002A, minCELength: 0, maxCELength: 0)
        // Opcode 0x200D, 25 octets: scan interval 0x0060, window 0x0030, filter 0, peer random,
        // address, own public, interval 0x0018–0x0028, latency 0, timeout 0x002A, CE 0, 0.
        #expect(h4Hex(command) == hex("""
            01 0d 20 19 60 00 30 00 00 01 55 44 33 22 11 c0 00
            18 00 28 00 00 00 2a 00 00 00 00 00
            """))
        #expect(LECreateConnection.completion == .commandStatus)
        try expectRoundTrip(command)
        try expectRoundTrip(LECreateConnection(initiatorFilterPolicy: .filterAcceptList,
                                               peerAddressType: .randomIdentity, peerAddress: .zero,
                                               ownAddressType: .randomIdentity))
        try expectRoundTrip(LECreateConnectionCancel())
    }

    @Test func createConnectionRejectsBadEnums() throws {
        var bytes = LECreateConnection(peerAddress: testAddress).packet.parameters
        bytes[4] = 0x02  // Initiator_Filter_Policy 2 is not defined in v1
        #expect(throws: DecodeError.self) {
            try LECreateConnection(packet: HCICommandPacket(opcode: LECreateConnection.opcode, parameters: bytes))
        }
        bytes[4] = 0x00
        bytes[5] = 0x04  // Peer_Address_Type 4 is reserved
        #expect(throws: DecodeError.self) {
            try LECreateConnection(packet: HCICommandPacket(opcode: LECreateConnection.opcode, parameters: bytes))
        }
    }
}

@Suite("HCI commands: legacy advertising and scanning")
struct LegacyAdvertisingCommandTests {
    @Test func advertisingParametersBytes() throws {
        let command = LESetAdvertisingParameters(
            advertisingIntervalMin: 0x00A0, advertisingIntervalMax: 0x00F0, advertisingType: .advInd,
            ownAddressType: .randomDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)
        // Opcode 0x2006, 15 octets: 0x00A0 (100 ms), 0x00F0 (150 ms), ADV_IND, own random,
        // peer public, zero address, channels 37–39, no filtering.
        #expect(h4Hex(command) == hex("01 06 20 0f a0 00 f0 00 00 01 00 00 00 00 00 00 00 07 00"))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetAdvertisingParameters(
            advertisingType: .advDirectIndLowDuty, ownAddressType: .publicIdentity, peerAddressType: .randomDevice,
            peerAddress: testAddress, advertisingChannelMap: 0x01, advertisingFilterPolicy: .filterBoth))
    }

    @Test func advertisingParametersRejectBadEnums() {
        let good = LESetAdvertisingParameters().packet.parameters
        for (index, value) in [(4, UInt8(0x05)), (5, 0x04), (6, 0x02), (14, 0x04)] {
            var bytes = good
            bytes[index] = value
            #expect(throws: DecodeError.self, "octet \(index) = \(value)") {
                try LESetAdvertisingParameters(packet: HCICommandPacket(opcode: LESetAdvertisingParameters.opcode, parameters: bytes))
            }
        }
    }

    @Test func advertisingDataBytes() throws {
        // Flags AD structure: length 2, type 0x01, LE General Discoverable | BR/EDR Not Supported.
        let command = LESetAdvertisingData(advertisingData: [0x02, 0x01, 0x06])
        // Opcode 0x2008, 32 octets: length 3, the data, 28 zero octets of padding.
        #expect(h4Hex(command) == hex("01 08 20 20 03 02 01 06") + String(repeating: "00", count: 28))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetAdvertisingData())
        try expectRoundTrip(LESetAdvertisingData(advertisingData: Array(0..<31)))
        try expectRoundTrip(LESetScanResponseData(scanResponseData: [0x05, 0x09, 0x54, 0x65, 0x73, 0x74]))
        try expectRoundTrip(LESetScanResponseData(scanResponseData: Array(repeating: 0xAA, count: 31)))
    }

    @Test func advertisingDataTooLong() throws {
        // Encoding cuts at 31 octets instead of trapping.
        let long = LESetAdvertisingData(advertisingData: Array(repeating: 1, count: 40))
        #expect(long.packet.parameters.count == 32)
        #expect(try LESetAdvertisingData(packet: long.packet).advertisingData.count == 31)
        // A length octet above 31 is malformed.
        let bad = HCICommandPacket(opcode: LESetAdvertisingData.opcode, parameters: [32] + Array(repeating: 0, count: 31))
        #expect(throws: DecodeError.self) { try LESetAdvertisingData(packet: bad) }
        let badResponse = HCICommandPacket(opcode: LESetScanResponseData.opcode, parameters: [0xFF] + Array(repeating: 0, count: 31))
        #expect(throws: DecodeError.self) { try LESetScanResponseData(packet: badResponse) }
    }

    @Test func enables() throws {
        try expectRoundTrip(LESetAdvertisingEnable(advertisingEnable: true))
        try expectRoundTrip(LESetAdvertisingEnable(advertisingEnable: false))
        #expect(h4Hex(LESetAdvertisingEnable(advertisingEnable: true)) == hex("01 0a 20 01 01"))
        try expectRoundTrip(LESetScanEnable(leScanEnable: true, filterDuplicates: true))
        try expectRoundTrip(LESetScanEnable(leScanEnable: false))
        #expect(h4Hex(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) == hex("01 0c 20 02 01 00"))
        #expect(throws: DecodeError.self) {
            try LESetAdvertisingEnable(packet: HCICommandPacket(opcode: LESetAdvertisingEnable.opcode, parameters: [0x02]))
        }
        #expect(throws: DecodeError.self) {
            try LESetScanEnable(packet: HCICommandPacket(opcode: LESetScanEnable.opcode, parameters: [0x01, 0x02]))
        }
    }

    @Test func scanParameters() throws {
        let command = LESetScanParameters(leScanType: .active, leScanInterval: 0x0060, leScanWindow: 0x0030,
                                          ownAddressType: .randomDevice, scanningFilterPolicy: .basicFiltered)
        // Opcode 0x200B, 7 octets: active, 0x0060 (60 ms), 0x0030 (30 ms), own random, filtered.
        #expect(h4Hex(command) == hex("01 0b 20 07 01 60 00 30 00 01 01"))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetScanParameters())
        #expect(throws: DecodeError.self) {
            try LESetScanParameters(packet: HCICommandPacket(opcode: LESetScanParameters.opcode,
                                                             parameters: [0x02, 0x10, 0x00, 0x10, 0x00, 0x00, 0x00]))
        }
    }
}
