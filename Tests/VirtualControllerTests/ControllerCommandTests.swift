import ByteCoding
import HCI
import Scheduling
import Testing
@testable import VirtualController

@Suite("Virtual controller: commands")
struct ControllerCommandTests {
    func host() -> RawHost {
        let radio = VirtualRadio(loop: EventLoop(pacing: .manual))
        return RawHost(VirtualController(radio: radio, address: BluetoothAddress("11:22:33:44:55:66")!))
    }

    @Test func resetAndIdentity() throws {
        let h = host()
        #expect(h.status(Reset()) == .success)
        let version = try #require(h.returning(ReadLocalVersionInformation()))
        #expect(version.hciVersion == 0x0D)
        let address = try #require(h.returning(ReadBDADDR()))
        #expect(address.bdAddr == BluetoothAddress("11:22:33:44:55:66"))
        let buffers = try #require(h.returning(LEReadBufferSizeV1()))
        #expect(buffers.leACLDataPacketLength == 251 && buffers.totalNumLEACLDataPackets == 12)
        let commands = try #require(h.returning(ReadLocalSupportedCommands()))
        #expect(SupportedCommandsTable.isSupported(LESetAdvertisingParameters.opcode, in: commands.supportedCommands))
        #expect(SupportedCommandsTable.isSupported(LEReadBufferSizeV2.opcode, in: commands.supportedCommands))
        // Extended advertising, scanning and initiating are claimed (0x2035–0x203D, 0x2041–0x2043).
        for opcode: UInt16 in [0x2035, 0x2036, 0x2037, 0x2038, 0x2039, 0x203A, 0x203B, 0x203C, 0x203D, 0x2041, 0x2042, 0x2043] {
            #expect(SupportedCommandsTable.isSupported(HCIOpcode(rawValue: opcode), in: commands.supportedCommands))
        }
        let features = try #require(h.returning(LEReadLocalSupportedFeatures()))
        #expect(features.features.contains(.leEncryption))
        #expect(features.features.contains(.le2MPHY))
        #expect(features.features.contains(.leExtendedAdvertising))
    }

    @Test func unknownCommandAlwaysAnswered() throws {
        let h = host()
        let event = try #require(h.raw(HCICommandPacket(opcode: HCIOpcode(ogf: 0x3F, ocf: 0x0123), parameters: [1, 2, 3])))
        guard case .commandComplete(let c) = event else { Issue.record("expected Command Complete"); return }
        #expect(c.status == .unknownHCICommand)
        // Byte for byte: 04 0E 04 01 23 FD 01.
        #expect(HCIPacket.event(c.packet).h4Bytes == [UInt8](hex: "04 0e 04 01 23 fd 01"))
    }

    @Test func malformedParametersGetInvalidParameters() throws {
        let h = host()
        // LE Set Advertising Parameters with 3 of its 15 bytes.
        guard case .commandComplete(let c)? = h.raw(HCICommandPacket(opcode: LESetAdvertisingParameters.opcode, parameters: [0x20, 0, 0x20])) else {
            Issue.record("expected Command Complete"); return
        }
        #expect(c.status == .invalidHCICommandParameters)
        // A command answered by Command Status answers malformed input the same way.
        guard case .commandStatus(let s)? = h.raw(HCICommandPacket(opcode: LECreateConnection.opcode, parameters: [1])) else {
            Issue.record("expected Command Status"); return
        }
        #expect(s.status == .invalidHCICommandParameters)
        // Advertising data longer than 31 bytes.
        guard case .commandComplete(let d)? = h.raw(HCICommandPacket(opcode: LESetAdvertisingData.opcode, parameters: [32] + [UInt8](repeating: 0, count: 31))) else {
            Issue.record("expected Command Complete"); return
        }
        #expect(d.status == .invalidHCICommandParameters)
    }

    @Test func wrongStateAndUnknownHandles() {
        let h = host()
        h.initialize()
        #expect(h.status(LECreateConnectionCancel()) == .commandDisallowed)
        #expect(h.status(Disconnect(connectionHandle: 0x0040, reason: .remoteUserTerminatedConnection)) == .unknownConnectionIdentifier)
        #expect(h.status(ReadRemoteVersionInformation(connectionHandle: 0x0123)) == .unknownConnectionIdentifier)
        #expect(h.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        #expect(h.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x0020, advertisingIntervalMax: 0x0020, advertisingType: .advInd,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)) == .commandDisallowed)
        #expect(h.status(LESetRandomAddress(randomAddress: BluetoothAddress("C1:00:00:00:00:01")!)) == .commandDisallowed)
        #expect(h.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        // Random own address without a random address set.
        #expect(h.status(LESetScanParameters(leScanType: .passive, leScanInterval: 0x10, leScanWindow: 0x10,
                                             ownAddressType: .randomDevice, scanningFilterPolicy: .basicUnfiltered)) == .success)
        #expect(h.status(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) == .invalidHCICommandParameters)
        // Window longer than interval.
        #expect(h.status(LESetScanParameters(leScanType: .passive, leScanInterval: 0x10, leScanWindow: 0x20,
                                             ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) == .invalidHCICommandParameters)
        // Invalid disconnect reason.
        #expect(h.status(LEReadBufferSizeV2()) == .success)
    }

    @Test func leRandAndEncrypt() throws {
        let h = host()
        let r1 = try #require(h.returning(LERand()))
        let r2 = try #require(h.returning(LERand()))
        #expect(r1.randomNumber != r2.randomNumber)
        // FIPS-197 Appendix C.1 AES-128, with HCI's least-significant-octet-first parameters.
        let key = Array([UInt8](hex: "000102030405060708090a0b0c0d0e0f")!.reversed())
        let plaintext = Array([UInt8](hex: "00112233445566778899aabbccddeeff")!.reversed())
        let encrypted = try #require(h.returning(LEEncrypt(key: key, plaintextData: plaintext)))
        #expect(encrypted.encryptedData == Array([UInt8](hex: "69c4e0d86a7b0430d8cdb78070b4c55a")!.reversed()))
    }

    @Test func eventMaskSilencesEvents() {
        let devices = TwoDevices()
        // Mask out LE meta events on A: scanning then reports nothing.
        #expect(devices.a.status(SetEventMask(eventMask: 0x0000_1FFF_FFFF_FFFF)) == .success)
        #expect(devices.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        #expect(devices.a.status(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) == .success)
        devices.loop.run(for: .seconds(5))
        #expect(devices.a.takeLEEvents().isEmpty)
    }
}
