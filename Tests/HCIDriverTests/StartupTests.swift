import ByteCoding
import HCI
import HCIDriver
import HCITransport
import Scheduling
import Testing

@Suite struct StartupTests {
    // Command H4 frames: 01, opcode (LE16), parameter length, parameters.
    static let reset = "01030c00"                                  // 0x0C03
    static let readLocalVersion = "01011000"                       // 0x1001
    static let readLocalSupportedCommands = "01021000"             // 0x1002
    static let readLocalSupportedFeatures = "01031000"             // 0x1003
    static let readBDADDR = "01091000"                             // 0x1009
    // Set Event Mask 0x0C01: bits 4, 7, 11, 15, 25, 47, 61 = 0x2000_8000_0200_8890, LE.
    static let setEventMask = "01010c08" + "9088000200800020"
    // Set Event Mask Page 2 0x0C63: nothing (Encryption Change v1 is enough) = 0, LE.
    static let setEventMaskPage2 = "01630c08" + "0000000000000000"
    // LE Set Event Mask 0x2001: subevents 0x01–0x07 (bits 0–6 = 0x7F), 0x0A–0x0D (bits 9–12 =
    // 0x1E00), 0x11–0x12 (bits 16–17 = 0x3_0000) = 0x0000_0000_0003_1E7F, LE.
    static let leSetEventMask = "01012008" + "7f1e030000000000"
    static let leReadBufferSizeV1 = "01022000"                     // 0x2002
    static let leReadBufferSizeV2 = "01602000"                     // 0x2060
    static let readBufferSize = "01051000"                         // 0x1005
    static let leReadLocalSupportedFeatures = "01032000"           // 0x2003
    static let leReadMaximumDataLength = "012f2000"                // 0x202F

    @Test func fullSequenceWithV2BufferSizeByteForByte() throws {
        let h = Harness()
        var commands = SupportedCommands()
        commands.insert(.setEventMaskPage2)
        commands.insert(.leReadBufferSizeV2)
        commands.insert(.leReadMaximumDataLength)
        h.controller.scriptStartup(supportedCommands: commands, leBuffer: (251, 8))

        let info = try #require(try h.start()?.get())

        #expect(h.transport.sentHex == [
            Self.reset, Self.readLocalVersion, Self.readLocalSupportedCommands,
            Self.readLocalSupportedFeatures, Self.readBDADDR, Self.setEventMask, Self.setEventMaskPage2,
            Self.leSetEventMask, Self.leReadBufferSizeV2, Self.leReadLocalSupportedFeatures,
            Self.leReadMaximumDataLength,
        ])
        #expect(info.hciVersion == 0x0D)
        #expect(info.hciSubversion == 0x1234)
        #expect(info.lmpVersion == 0x0D)
        #expect(info.companyIdentifier == 0x005F)
        #expect(info.lmpSubversion == 0x5678)
        #expect(info.supportedCommands == commands)
        #expect(info.lmpFeatures == 1 << 38)
        #expect(info.address == BluetoothAddress("C0:11:22:33:44:55"))
        #expect(info.aclDataPacketLength == 251)
        #expect(info.totalACLDataPackets == 8)
        #expect(!info.usesSharedBREDRBuffers)
        #expect(info.leFeatures == LEFeatures(rawValue: 0x3F))
        #expect(info.maxDataLength == LEMaximumDataLength(supportedMaxTXOctets: 251, supportedMaxTXTime: 2120,
                                                          supportedMaxRXOctets: 251, supportedMaxRXTime: 2120))
        #expect(h.driver.controllerInfo == info)
        #expect(h.driver.aclCredits == 8)
        // The controller answered each command at once: no time passed.
        #expect(h.loop.now == .zero)
    }

    @Test func leBufferSizeZeroFallsBackToReadBufferSize() throws {
        let h = Harness()
        // An empty bitmap: no Page 2, no [v2], no LE Read Maximum Data Length.
        h.controller.scriptStartup(leBuffer: (0, 0), brEdrBuffer: (1021, 4))

        let info = try #require(try h.start()?.get())

        #expect(h.transport.sentHex == [
            Self.reset, Self.readLocalVersion, Self.readLocalSupportedCommands,
            Self.readLocalSupportedFeatures, Self.readBDADDR, Self.setEventMask, Self.leSetEventMask,
            Self.leReadBufferSizeV1, Self.readBufferSize, Self.leReadLocalSupportedFeatures,
        ])
        #expect(info.aclDataPacketLength == 1021)
        #expect(info.totalACLDataPackets == 4)
        #expect(info.usesSharedBREDRBuffers)
        #expect(info.maxDataLength == nil)
    }

    @Test func leBufferCountZeroAloneAlsoFallsBack() throws {
        let h = Harness()
        h.controller.scriptStartup(leBuffer: (27, 0), brEdrBuffer: (310, 10))
        let info = try #require(try h.start()?.get())
        #expect(h.transport.sentHex.contains(Self.readBufferSize))
        #expect(info.aclDataPacketLength == 310)
        #expect(info.totalACLDataPackets == 10)
    }

    @Test func v2FailureFallsBackToV1() throws {
        let h = Harness()
        var commands = SupportedCommands()
        commands.insert(.leReadBufferSizeV2)
        h.controller.scriptStartup(supportedCommands: commands, leBuffer: (27, 5))
        // The bitmap lies: [v2] is an unknown command.
        h.controller.answer(0x2060, .complete(returnParameters: "01"))

        let info = try #require(try h.start()?.get())
        let sent = h.transport.sentHex
        #expect(sent.firstIndex(of: Self.leReadBufferSizeV2)! + 1 == sent.firstIndex(of: Self.leReadBufferSizeV1)!)
        #expect(info.aclDataPacketLength == 27)
        #expect(info.totalACLDataPackets == 5)
    }

    @Test func optionalStepsMayFailOrTimeOut() throws {
        let h = Harness()
        var commands = SupportedCommands()
        commands.insert(.leReadMaximumDataLength)
        h.controller.scriptStartup(supportedCommands: commands)
        // Supported commands fails with a one-byte return: the bitmap stays empty, so no
        // LE Read Maximum Data Length.
        h.controller.answer(0x1002, .complete(returnParameters: "01"))
        // LE Set Event Mask is never answered.
        h.controller.answer(0x2001, .silent)

        let info = try #require(try h.start()?.get())
        #expect(h.loop.now == LoopInstant.zero + .seconds(5))
        #expect(info.supportedCommands == SupportedCommands())
        #expect(info.maxDataLength == nil)
        #expect(info.totalACLDataPackets == 3)
        #expect(!h.transport.sentHex.contains(Self.leReadMaximumDataLength))
    }

    @Test func resetFailureFailsStart() {
        let h = Harness()
        h.controller.scriptStartup()
        h.controller.answer(0x0C03, .complete(returnParameters: "03"))
        let result = h.start()
        #expect(result?.failure == .status(.hardwareFailure, command: "Reset"))
        #expect(h.transport.sentHex == [Self.reset])
        // The failure is final: the transport is closed.
        #expect(!h.transport.isOpen)
        #expect(h.delegate.closes.count == 1)
    }

    @Test func versionTimeoutFailsStart() {
        let h = Harness()
        h.controller.scriptStartup()
        h.controller.answer(0x1001, .silent)
        let result = h.start()
        #expect(result?.failure == .timeout(command: "Read Local Version Information"))
        #expect(h.driver.controllerInfo == nil)
    }

    @Test func missingBuffersFailStart() {
        let h = Harness()
        h.controller.scriptStartup(leBuffer: (0, 0))
        h.controller.answer(0x1005, .complete(returnParameters: "01"))
        #expect(h.start()?.failure == .status(.unknownHCICommand, command: "Read Buffer Size"))
    }

    @Test func transportClosingDuringStartFailsStart() {
        let h = Harness()
        h.controller.scriptStartup()
        h.controller.answer(0x1009, .silent)
        var result: Result<ControllerInfo, HCIError>?
        h.driver.start { result = $0 }
        h.loop.run(for: .seconds(1))
        #expect(result == nil)
        h.transport.fail(HCITransportError("unplugged"))
        #expect(result?.failure == .transportClosed(HCITransportError("unplugged")))
        #expect(h.driver.controllerInfo == nil)
    }

    @Test func transportThatCannotOpenFailsStart() {
        let h = Harness()
        h.transport.openError = HCITransportError("no such device")
        #expect(h.start()?.failure == .transportClosed(HCITransportError("no such device")))
    }

    @Test func startingTwiceIsRefused() throws {
        let h = Harness()
        try h.startRunning()
        guard case .notSupported? = h.start()?.failure else {
            Issue.record("second start was not refused")
            return
        }
    }

    @Test func extendedAdvertisingNeedsFeatureAndCommands() {
        var info = ControllerInfo()
        info.leFeatures = .leExtendedAdvertising
        #expect(!info.supportsExtendedAdvertising)
        #expect(!info.supportsExtendedScanning)
        info.supportedCommands.insert(.leSetExtendedAdvertisingParameters)
        info.supportedCommands.insert(.leSetExtendedAdvertisingData)
        info.supportedCommands.insert(.leSetExtendedAdvertisingEnable)
        #expect(info.supportsExtendedAdvertising)
        #expect(!info.supportsExtendedScanning)
        info.supportedCommands.insert(.leSetExtendedScanParameters)
        info.supportedCommands.insert(.leSetExtendedScanEnable)
        info.supportedCommands.insert(.leExtendedCreateConnection)
        #expect(info.supportsExtendedScanning)
        info.leFeatures = []
        #expect(!info.supportsExtendedAdvertising)
        #expect(!info.supportsExtendedScanning)
    }

    @Test func supportedCommandPositionsMatchTheSpecTable() {
        // Vol 4 Part E §6.27: octet 41 bit 5 is LE Read Buffer Size [v2]; octet 22 bit 2 Set
        // Event Mask Page 2; octet 35 bit 3 LE Read Maximum Data Length.
        var bytes = [UInt8](repeating: 0, count: 64)
        bytes[41] = 0x20
        bytes[22] = 0x04
        bytes[35] = 0x08
        let commands = SupportedCommands(bytes)
        #expect(commands.supports(.leReadBufferSizeV2))
        #expect(commands.supports(.setEventMaskPage2))
        #expect(commands.supports(.leReadMaximumDataLength))
        #expect(!commands.supports(.leExtendedCreateConnection))
        #expect(!commands.supports(octet: 64, bit: 0))
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
