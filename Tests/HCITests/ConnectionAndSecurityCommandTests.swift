import ByteCoding
import Testing
@testable import HCI

@Suite("HCI commands: connection management, data length, PHY")
struct ConnectionManagementCommandTests {
    @Test func connectionUpdate() throws {
        let command = LEConnectionUpdate(connectionHandle: 0x0001, connectionIntervalMin: 0x0006, connectionIntervalMax: 0x000C,
                                         maxLatency: 4, supervisionTimeout: 0x0064, minCELength: 1, maxCELength: 2)
        // Opcode 0x2013, 14 octets, each field little-endian.
        #expect(h4Hex(command) == hex("01 13 20 0e 01 00 06 00 0c 00 04 00 64 00 01 00 02 00"))
        #expect(LEConnectionUpdate.completion == .commandStatus)
        try expectRoundTrip(command)
    }

    @Test func remoteConnectionParameterReplies() throws {
        try expectRoundTrip(LERemoteConnectionParameterRequestReply(
            connectionHandle: 0x0002, intervalMin: 0x0010, intervalMax: 0x0020, maxLatency: 1, timeout: 0x00C8,
            minCELength: 0, maxCELength: 4))
        let negative = LERemoteConnectionParameterRequestNegativeReply(connectionHandle: 0x0002)
        #expect(negative.reason == .unacceptableConnectionParameters)
        // Opcode 0x2021; handle 2; reason 0x3B.
        #expect(h4Hex(negative) == hex("01 21 20 03 02 00 3b"))
        try expectRoundTrip(negative)
        try expectReturnRoundTrip(LERemoteConnectionParameterRequestReply.ReturnParameters(connectionHandle: 2))
        try expectReturnRoundTrip(LERemoteConnectionParameterRequestNegativeReply.ReturnParameters(
            status: .unknownConnectionIdentifier, connectionHandle: 0x0EFF))
    }

    @Test func remoteInformation() throws {
        try expectRoundTrip(LEReadRemoteFeatures(connectionHandle: 0x0040))
        #expect(LEReadRemoteFeatures.completion == .commandStatus)
        #expect(h4Hex(LEReadRemoteFeatures(connectionHandle: 0x0040)) == hex("01 16 20 02 40 00"))
        try expectRoundTrip(ReadRSSI(connectionHandle: 0x0040))
        // Read RSSI is OGF 0x05, OCF 0x005 → 0x1405.
        #expect(h4Hex(ReadRSSI(connectionHandle: 0x0040)) == hex("01 05 14 02 40 00"))
        try expectReturnRoundTrip(ReadRSSI.ReturnParameters(connectionHandle: 0x0040, rssi: -60))
        // RSSI is a signed octet: 0xC4 = -60 dBm.
        let rssi = try ReadRSSI.ReturnParameters(returnBytes: [UInt8](hex: "00 40 00 c4")!, context: "test")
        #expect(rssi.rssi == -60)
    }

    @Test func dataLength() throws {
        let command = LESetDataLength(connectionHandle: 0x0001, txOctets: 251, txTime: 2120)
        // Opcode 0x2022: handle 1, 251 = 0x00FB octets, 2120 = 0x0848 µs.
        #expect(h4Hex(command) == hex("01 22 20 06 01 00 fb 00 48 08"))
        try expectRoundTrip(command)
        try expectReturnRoundTrip(LESetDataLength.ReturnParameters(connectionHandle: 1))
        try expectRoundTrip(LEReadSuggestedDefaultDataLength())
        try expectReturnRoundTrip(LEReadSuggestedDefaultDataLength.ReturnParameters(
            suggestedMaxTXOctets: 27, suggestedMaxTXTime: 328))
        try expectRoundTrip(LEWriteSuggestedDefaultDataLength())
        try expectRoundTrip(LEWriteSuggestedDefaultDataLength(suggestedMaxTXOctets: 27, suggestedMaxTXTime: 328))
        try expectRoundTrip(LEReadMaximumDataLength())
        try expectReturnRoundTrip(LEReadMaximumDataLength.ReturnParameters(
            supportedMaxTXOctets: 251, supportedMaxTXTime: 17040, supportedMaxRXOctets: 251, supportedMaxRXTime: 17040))
        // A controller's answer: 251 octets / 2120 µs both ways.
        let maximum = try LEReadMaximumDataLength.ReturnParameters(
            returnBytes: [UInt8](hex: "00 fb 00 48 08 fb 00 48 08")!, context: "test")
        #expect(maximum == .init(supportedMaxTXOctets: 251, supportedMaxTXTime: 2120,
                                 supportedMaxRXOctets: 251, supportedMaxRXTime: 2120))
    }

    @Test func phy() throws {
        try expectRoundTrip(LEReadPHY(connectionHandle: 3))
        try expectReturnRoundTrip(LEReadPHY.ReturnParameters(connectionHandle: 3, txPHY: .le2M, rxPHY: .leCoded))
        #expect(throws: DecodeError.self) {
            // PHY 0x04 is not defined.
            try LEReadPHY.ReturnParameters(returnBytes: [0x00, 0x03, 0x00, 0x01, 0x04], context: "test")
        }
        try expectRoundTrip(LESetDefaultPHY())
        try expectRoundTrip(LESetDefaultPHY(allPHYs: 0x03, txPHYs: 0, rxPHYs: 0))
        let setPHY = LESetPHY(connectionHandle: 3, txPHYs: LEPHY.le2M.maskBit, rxPHYs: LEPHY.le2M.maskBit)
        // Opcode 0x2032: handle 3, All_PHYs 0, TX/RX 0x02 (LE 2M), PHY_Options 0.
        #expect(h4Hex(setPHY) == hex("01 32 20 07 03 00 00 02 02 00 00"))
        #expect(LESetPHY.completion == .commandStatus)
        try expectRoundTrip(setPHY)
        try expectRoundTrip(LESetPHY(connectionHandle: 3, allPHYs: 0, txPHYs: 0x05, rxPHYs: 0x04, phyOptions: 2))
        #expect(LEPHY.le1M.maskBit == 0x01 && LEPHY.le2M.maskBit == 0x02 && LEPHY.leCoded.maskBit == 0x04)
    }
}

@Suite("HCI commands: encryption and AES")
struct SecurityCommandTests {
    let key: [UInt8] = Array(0x00...0x0F)

    @Test func enableEncryptionBytes() throws {
        let command = LEEnableEncryption(connectionHandle: 0x0040, randomNumber: 0xABCD_EF01_2345_6789,
                                         encryptedDiversifier: 0x1234, longTermKey: key)
        // Opcode 0x2019, 28 octets: handle, Rand (8 octets LE), EDIV (LE), LTK as given.
        #expect(h4Hex(command) == hex("""
            01 19 20 1c 40 00 89 67 45 23 01 ef cd ab 34 12
            00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f
            """))
        #expect(LEEnableEncryption.completion == .commandStatus)
        try expectRoundTrip(command)
        // LE Secure Connections keys: Rand and EDIV zero.
        try expectRoundTrip(LEEnableEncryption(connectionHandle: 1, longTermKey: Array(repeating: 0xA5, count: 16)))
    }

    @Test func longTermKeyReplies() throws {
        let reply = LELongTermKeyRequestReply(connectionHandle: 0x0041, longTermKey: key)
        // Opcode 0x201A: handle then the 16 key octets.
        #expect(h4Hex(reply) == hex("01 1a 20 12 41 00 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"))
        try expectRoundTrip(reply)
        try expectRoundTrip(LELongTermKeyRequestNegativeReply(connectionHandle: 0x0041))
        try expectReturnRoundTrip(LELongTermKeyRequestReply.ReturnParameters(connectionHandle: 0x0041))
        try expectReturnRoundTrip(LELongTermKeyRequestNegativeReply.ReturnParameters(connectionHandle: 0x0041))
    }

    @Test func encryptBytes() throws {
        let plaintext: [UInt8] = Array(0x10...0x1F)
        let command = LEEncrypt(key: key, plaintextData: plaintext)
        // Opcode 0x2017, 32 octets: key then plaintext, both as given (wire order).
        #expect(h4Hex(command) == hex("""
            01 17 20 20 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f
            10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f
            """))
        try expectRoundTrip(command)
        try expectReturnRoundTrip(LEEncrypt.ReturnParameters(encryptedData: Array(0xF0...0xFF)))
        // FIPS-197 Appendix C.1's ciphertext 69c4e0d8…70b4c55a as HCI carries it: the spec puts
        // the most significant octet last on the wire, so the octets are reversed.
        let encrypted = try LEEncrypt.ReturnParameters(
            returnBytes: [0x00] + [UInt8](hex: "5a c5 b4 70 80 b7 cd d8 30 04 7b 6a d8 e0 c4 69")!, context: "test")
        #expect(encrypted.encryptedData.reversed().hexString == "69c4e0d86a7b0430d8cdb78070b4c55a")
    }

    @Test func shortKeysArePaddedNotTrapped() throws {
        // A caller mistake (15-octet key) still yields a well-formed 32-octet command.
        let command = LEEncrypt(key: Array(repeating: 1, count: 15), plaintextData: Array(repeating: 2, count: 17))
        #expect(command.packet.parameters.count == 32)
    }

    @Test func rand() throws {
        try expectRoundTrip(LERand())
        try expectReturnRoundTrip(LERand.ReturnParameters(randomNumber: 0x0123_4567_89AB_CDEF))
        let r = try LERand.ReturnParameters(returnBytes: [UInt8](hex: "00 ef cd ab 89 67 45 23 01")!, context: "test")
        #expect(r.randomNumber == 0x0123_4567_89AB_CDEF)
    }
}

@Suite("HCI commands: filter accept list, resolving list, states")
struct ListCommandTests {
    @Test func filterAcceptList() throws {
        try expectRoundTrip(LEReadFilterAcceptListSize())
        try expectReturnRoundTrip(LEReadFilterAcceptListSize.ReturnParameters(filterAcceptListSize: 8))
        try expectRoundTrip(LEClearFilterAcceptList())
        let add = LEAddDeviceToFilterAcceptList(addressType: .randomDevice, address: testAddress)
        // Opcode 0x2011: type 1, address little-endian.
        #expect(h4Hex(add) == hex("01 11 20 07 01 55 44 33 22 11 c0"))
        try expectRoundTrip(add)
        try expectRoundTrip(LEAddDeviceToFilterAcceptList(addressType: .anonymous, address: .zero))
        try expectRoundTrip(LERemoveDeviceFromFilterAcceptList(addressType: .publicDevice, address: testAddress))
        #expect(throws: DecodeError.self) {
            try LEAddDeviceToFilterAcceptList(packet: HCICommandPacket(
                opcode: LEAddDeviceToFilterAcceptList.opcode, parameters: [0x02, 1, 2, 3, 4, 5, 6]))
        }
    }

    @Test func resolvingList() throws {
        let add = LEAddDeviceToResolvingList(peerIdentityAddressType: .randomDevice, peerIdentityAddress: testAddress,
                                             peerIRK: Array(0x00...0x0F), localIRK: Array(0x10...0x1F))
        // Opcode 0x2027, 39 octets: type, address, peer IRK, local IRK.
        #expect(h4Hex(add) == hex("""
            01 27 20 27 01 55 44 33 22 11 c0
            00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f
            10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f
            """))
        try expectRoundTrip(add)
        try expectRoundTrip(LERemoveDeviceFromResolvingList(peerIdentityAddressType: .publicDevice, peerIdentityAddress: testAddress))
        try expectRoundTrip(LEClearResolvingList())
        try expectRoundTrip(LEReadResolvingListSize())
        try expectReturnRoundTrip(LEReadResolvingListSize.ReturnParameters(resolvingListSize: 16))
        try expectRoundTrip(LESetAddressResolutionEnable(addressResolutionEnable: true))
        try expectRoundTrip(LESetResolvablePrivateAddressTimeout())
        // 900 s = 0x0384.
        #expect(h4Hex(LESetResolvablePrivateAddressTimeout()) == hex("01 2e 20 02 84 03"))
        // Identity address types are only public (0) or random static (1).
        var bytes = add.packet.parameters
        bytes[0] = 0x02
        #expect(throws: DecodeError.self) {
            try LEAddDeviceToResolvingList(packet: HCICommandPacket(opcode: LEAddDeviceToResolvingList.opcode, parameters: bytes))
        }
        #expect(throws: DecodeError.self) {
            try LESetAddressResolutionEnable(packet: HCICommandPacket(opcode: LESetAddressResolutionEnable.opcode, parameters: [2]))
        }
    }

    @Test func readResolvableAddresses() throws {
        let peer = LEReadPeerResolvableAddress(peerIdentityAddressType: .publicDevice, peerIdentityAddress: testAddress)
        // Opcode 0x202B: identity type, identity address little-endian.
        #expect(h4Hex(peer) == hex("01 2b 20 07 00 55 44 33 22 11 c0"))
        try expectRoundTrip(peer)
        let local = LEReadLocalResolvableAddress(peerIdentityAddressType: .randomDevice, peerIdentityAddress: testAddress)
        #expect(h4Hex(local) == hex("01 2c 20 07 01 55 44 33 22 11 c0"))
        try expectRoundTrip(local)
        // Status, then the address little-endian.
        let rpa = BluetoothAddress("4A:BB:CC:DD:EE:FF")!
        let peerReturn = LEReadPeerResolvableAddress.ReturnParameters(peerResolvableAddress: rpa)
        #expect(peerReturn.bytes == [0x00, 0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0x4A])
        try expectReturnRoundTrip(peerReturn)
        let localReturn = LEReadLocalResolvableAddress.ReturnParameters(status: .unknownConnectionIdentifier,
                                                                        localResolvableAddress: .zero)
        #expect(localReturn.bytes == [0x02, 0, 0, 0, 0, 0, 0])
        try expectReturnRoundTrip(localReturn)
        #expect(throws: DecodeError.self) {
            try LEReadLocalResolvableAddress(packet: HCICommandPacket(
                opcode: LEReadLocalResolvableAddress.opcode, parameters: [0x02, 1, 2, 3, 4, 5, 6]))
        }
    }

    @Test func privacyMode() throws {
        let command = LESetPrivacyMode(peerIdentityAddressType: .randomDevice, peerIdentityAddress: testAddress, privacyMode: .device)
        // Opcode 0x204E: identity type, identity address, mode.
        #expect(h4Hex(command) == hex("01 4e 20 08 01 55 44 33 22 11 c0 01"))
        try expectRoundTrip(command)
        try expectRoundTrip(LESetPrivacyMode(peerIdentityAddressType: .publicDevice, peerIdentityAddress: testAddress, privacyMode: .network))
        #expect(throws: DecodeError.self) {
            try LESetPrivacyMode(packet: HCICommandPacket(opcode: LESetPrivacyMode.opcode, parameters: [0, 1, 2, 3, 4, 5, 6, 2]))
        }
    }

    @Test func supportedStates() throws {
        try expectRoundTrip(LEReadSupportedStates())
        try expectReturnRoundTrip(LEReadSupportedStates.ReturnParameters(leStates: 0x0000_03FF_FFFF_FFFF))
    }
}
