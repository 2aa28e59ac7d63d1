import ByteCoding
import HCI
import Testing

/// Encodes `event` as a full H4 frame, compares it with `hex`, and decodes the frame back.
private func expectFrame(_ event: HCIEvent, _ hex: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let expected = try #require([UInt8](hex: hex), sourceLocation: sourceLocation)
    #expect(HCIPacket.event(event.packet).h4Bytes.hexString == expected.hexString, sourceLocation: sourceLocation)
    guard case .event(let packet) = try HCIPacket(h4: expected) else {
        Issue.record("not an event frame", sourceLocation: sourceLocation)
        return
    }
    #expect(try HCIEvent(decoding: packet) == event, sourceLocation: sourceLocation)
}

@Suite struct EventVectorTests {
    // Frames: 04 (H4 event), event code, parameter length, parameters (Vol 4 Part E §5.4.4).
    // Handles, intervals and other multi-octet fields are little-endian; addresses are sent
    // least significant byte first.

    @Test func commandCompleteForReset() throws {
        // 01 = Num_HCI_Command_Packets, 03 0c = opcode 0x0C03 (OGF 3, OCF 3), 00 = status success.
        try expectFrame(.commandComplete(CommandComplete(opcode: Reset.opcode, returning: StatusReturn())),
                        "04 0e 04 01 03 0c 00")
    }

    @Test func disconnectionComplete() throws {
        // status 00, handle 0x0040, reason 0x13 (remote user terminated).
        try expectFrame(.disconnectionComplete(DisconnectionComplete(connectionHandle: 0x0040,
                                                                     reason: .remoteUserTerminatedConnection)),
                        "04 05 04 00 40 00 13")
    }

    @Test func numberOfCompletedPacketsWithTwoHandles() throws {
        // Num_Handles 2, then (handle, count) pairs: (0x0040, 1), (0x0041, 2).
        try expectFrame(.numberOfCompletedPackets(NumberOfCompletedPackets(entries: [
            .init(handle: 0x0040, completedPackets: 1), .init(handle: 0x0041, completedPackets: 2),
        ])), "04 13 09 02 40 00 01 00 41 00 02 00")
    }

    @Test func encryptionChange() throws {
        // status 00, handle 0x0040, Encryption_Enabled 01.
        try expectFrame(.encryptionChange(EncryptionChange(connectionHandle: 0x0040, encryptionEnabled: 1)),
                        "04 08 04 00 40 00 01")
    }

    @Test func encryptionChangeV2() throws {
        // v1's parameters then Encryption_Key_Size 0x10.
        try expectFrame(.encryptionChangeV2(EncryptionChangeV2(connectionHandle: 0x0040, encryptionEnabled: 1,
                                                               encryptionKeySize: 16)),
                        "04 59 05 00 40 00 01 10")
    }

    @Test func readRemoteVersionInformationComplete() throws {
        // status 00, handle 0x0040, version 0x0d, company 0x0059, subversion 0x1234.
        try expectFrame(.readRemoteVersionInformationComplete(ReadRemoteVersionInformationComplete(
            connectionHandle: 0x0040, version: 0x0D, companyIdentifier: 0x0059, subversion: 0x1234)),
                        "04 0c 08 00 40 00 0d 59 00 34 12")
    }

    @Test func hardwareErrorAndDataBufferOverflow() throws {
        try expectFrame(.hardwareError(HardwareError(hardwareCode: 0x42)), "04 10 01 42")
        try expectFrame(.dataBufferOverflow(DataBufferOverflow(linkType: DataBufferOverflow.aclLinkType)), "04 1a 01 01")
    }

    @Test func leConnectionComplete() throws {
        // 3e, length 0x13, subevent 01; status 00, handle 0x0040, role 01 (peripheral), peer type 01
        // (random), C0:11:22:33:44:55 LSB first, interval 0x0018 (30 ms), latency 0, timeout 0x0048
        // (720 ms), clock accuracy 01 (250 ppm).
        try expectFrame(.le(.connectionComplete(LEConnectionComplete(
            connectionHandle: 0x0040, role: .peripheral, peerAddressType: .randomDevice,
            peerAddress: BluetoothAddress("C0:11:22:33:44:55")!, connectionInterval: 0x0018,
            peripheralLatency: 0, supervisionTimeout: 0x0048, centralClockAccuracy: 1))),
                        "04 3e 13 01 00 40 00 01 01 55 44 33 22 11 c0 18 00 00 00 48 00 01")
    }

    @Test func leEnhancedConnectionComplete() throws {
        // subevent 0a; status 00, handle 0x0041, role 00, peer type 02 (public identity),
        // peer 00:11:22:33:44:55, local RPA 4A:BB:CC:DD:EE:FF, peer RPA zero, interval 0x0028,
        // latency 0, timeout 0x01f4, clock accuracy 00: 30 parameter octets + subevent = 0x1f.
        try expectFrame(.le(.enhancedConnectionComplete(LEEnhancedConnectionComplete(
            connectionHandle: 0x0041, role: .central, peerAddressType: .publicIdentity,
            peerAddress: BluetoothAddress("00:11:22:33:44:55")!,
            localResolvablePrivateAddress: BluetoothAddress("4A:BB:CC:DD:EE:FF")!, connectionInterval: 0x0028,
            peripheralLatency: 0, supervisionTimeout: 0x01F4, centralClockAccuracy: 0))),
                        "04 3e 1f 0a 00 41 00 00 02 55 44 33 22 11 00 ff ee dd cc bb 4a 00 00 00 00 00 00 28 00 00 00 f4 01 00")
    }

    @Test func leEnhancedConnectionCompleteV2() throws {
        // As v1 (subevent 29 instead of 0a) followed by Advertising_Handle 03, Sync_Handle 0xffff.
        try expectFrame(.le(.enhancedConnectionCompleteV2(LEEnhancedConnectionCompleteV2(
            connectionHandle: 0x0041, role: .peripheral, peerAddressType: .publicDevice,
            peerAddress: BluetoothAddress("00:11:22:33:44:55")!, connectionInterval: 0x0028,
            peripheralLatency: 0, supervisionTimeout: 0x01F4, centralClockAccuracy: 0,
            advertisingHandle: 3, syncHandle: 0xFFFF))),
                        "04 3e 22 29 00 41 00 01 00 55 44 33 22 11 00 00 00 00 00 00 00 00 00 00 00 00 00 28 00 00 00 f4 01 00 03 ff ff")
    }

    @Test func leAdvertisingReportWithTwoReports() throws {
        // Num_Reports 02, then report by report (Vol 4 Part E §5.2):
        //   00 ADV_IND, 00 public, 00:11:22:33:44:55, length 03, data 02 01 06 (Flags), RSSI c4 (-60 dBm)
        //   04 SCAN_RSP, 01 random, C0:00:00:00:00:01, length 00, RSSI 7f (not available)
        // Parameter length: subevent 1 + count 1 + 13 + 10 = 0x19.
        let event = HCIEvent.le(.advertisingReport(LEAdvertisingReport(reports: [
            .init(eventType: .advInd, addressType: .publicDevice, address: BluetoothAddress("00:11:22:33:44:55")!,
                  data: [0x02, 0x01, 0x06], rssi: -60),
            .init(eventType: .scanRsp, addressType: .randomDevice, address: BluetoothAddress("C0:00:00:00:00:01")!,
                  data: [], rssi: 127),
        ])))
        try expectFrame(event, "04 3e 19 02 02 00 00 55 44 33 22 11 00 03 02 01 06 c4 04 01 01 00 00 00 00 c0 00 7f")
    }

    @Test func leDirectedAdvertisingReport() throws {
        // 01 report: 01 ADV_DIRECT_IND, 00 public, 00:11:22:33:44:55, 01 random direct address
        // 4A:BB:CC:DD:EE:FF, RSSI d8 (-40 dBm).
        try expectFrame(.le(.directedAdvertisingReport(LEDirectedAdvertisingReport(reports: [
            .init(addressType: .publicDevice, address: BluetoothAddress("00:11:22:33:44:55")!,
                  directAddress: BluetoothAddress("4A:BB:CC:DD:EE:FF")!, rssi: -40),
        ]))), "04 3e 12 0b 01 01 00 55 44 33 22 11 00 01 ff ee dd cc bb 4a d8")
    }

    @Test func leExtendedAdvertisingReport() throws {
        // One report: Event_Type 0x0013 (connectable | scannable | legacy = ADV_IND, complete),
        // 00 public, 00:11:22:33:44:55, primary PHY 01 (1M), secondary 00 (none), SID ff (no ADI),
        // TX power 7f (n/a), RSSI ba (-70 dBm), periodic interval 0000, direct type 00, direct
        // address zero, length 03, data 02 01 06. Length: 1 + 1 + 24 + 3 = 0x1d.
        try expectFrame(.le(.extendedAdvertisingReport(LEExtendedAdvertisingReport(reports: [
            .init(eventType: [.connectable, .scannable, .legacy], addressType: .publicDevice,
                  address: BluetoothAddress("00:11:22:33:44:55")!, rssi: -70, data: [0x02, 0x01, 0x06]),
        ]))), "04 3e 1d 0d 01 13 00 00 55 44 33 22 11 00 01 00 ff 7f ba 00 00 00 00 00 00 00 00 00 03 02 01 06")
    }

    @Test func leExtendedAdvertisingReportAnonymousAndIncomplete() throws {
        // Event_Type 0x0020: non-connectable extended advertising, data status 01 (more to come);
        // Address_Type ff (anonymous), address zero, PHYs 03/02, SID 05, TX power fc (-4), RSSI a6
        // (-90), periodic interval 0x0050, direct type 00, direct address zero, length 01, data aa.
        let frame = "04 3e 1b 0d 01 20 00 ff 00 00 00 00 00 00 03 02 05 fc a6 50 00 00 00 00 00 00 00 00 01 aa"
        let event = LEExtendedAdvertisingReport(reports: [
            .init(eventType: ExtendedAdvertisingEventType([], dataStatus: .incompleteMoreToCome), addressType: nil,
                  address: .zero, primaryPHY: 3, secondaryPHY: 2, advertisingSID: 5, txPower: -4, rssi: -90,
                  periodicAdvertisingInterval: 0x0050, data: [0xAA]),
        ])
        try expectFrame(.le(.extendedAdvertisingReport(event)), frame)
        #expect(event.reports[0].eventType.dataStatus == .incompleteMoreToCome)
        #expect(event.reports[0].eventType.isDisjoint(with: [.connectable, .scannable, .directed, .legacy]))
    }

    @Test func extendedEventTypeDataStatusBits() {
        var type: ExtendedAdvertisingEventType = [.connectable, .legacy]
        #expect(type.dataStatus == .complete)
        type.dataStatus = .incompleteTruncated
        #expect(type.rawValue == 0b100_0001 | 0b1_0000)
        #expect(type.contains(.connectable) && type.contains(.legacy))
        type.dataStatus = .complete
        #expect(type.rawValue == 0b1_0001)
    }

    @Test func leLongTermKeyRequest() throws {
        // handle 0x0040, Random_Number 0x0123456789abcdef (LE64), EDIV 0xbeef.
        try expectFrame(.le(.longTermKeyRequest(LELongTermKeyRequest(
            connectionHandle: 0x0040, randomNumber: 0x0123_4567_89AB_CDEF, encryptedDiversifier: 0xBEEF))),
                        "04 3e 0d 05 40 00 ef cd ab 89 67 45 23 01 ef be")
    }

    @Test func leDataLengthChange() throws {
        // handle 0x0040, TX 251 octets / 2120 µs, RX 27 octets / 328 µs.
        try expectFrame(.le(.dataLengthChange(LEDataLengthChange(
            connectionHandle: 0x0040, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 27, maxRxTime: 328))),
                        "04 3e 0b 07 40 00 fb 00 48 08 1b 00 48 01")
    }

    @Test func lePHYUpdateComplete() throws {
        // status 00, handle 0x0040, TX and RX PHY 02 (LE 2M).
        try expectFrame(.le(.phyUpdateComplete(LEPHYUpdateComplete(connectionHandle: 0x0040, txPhy: 2, rxPhy: 2))),
                        "04 3e 06 0c 00 40 00 02 02")
    }

    @Test func leConnectionUpdateCompleteAndParameterRequest() throws {
        // status 00, handle 0x0040, interval 6 (7.5 ms), latency 4, timeout 10 (100 ms).
        try expectFrame(.le(.connectionUpdateComplete(LEConnectionUpdateComplete(
            connectionHandle: 0x0040, connectionInterval: 6, peripheralLatency: 4, supervisionTimeout: 10))),
                        "04 3e 0a 03 00 40 00 06 00 04 00 0a 00")
        // handle 0x0040, interval 6…12, max latency 0, timeout 200 (2 s).
        try expectFrame(.le(.remoteConnectionParameterRequest(LERemoteConnectionParameterRequest(
            connectionHandle: 0x0040, intervalMin: 6, intervalMax: 12, maxLatency: 0, timeout: 200))),
                        "04 3e 0b 06 40 00 06 00 0c 00 00 00 c8 00")
    }

    @Test func leReadRemoteFeaturesScanTimeoutSetTerminatedKeyRefresh() throws {
        // status 00, handle 0x0040, features 0x00000001000000ff (LE64).
        try expectFrame(.le(.readRemoteFeaturesComplete(LEReadRemoteFeaturesComplete(
            connectionHandle: 0x0040, leFeatures: 0x0000_0001_0000_00FF))),
                        "04 3e 0c 04 00 40 00 ff 00 00 00 01 00 00 00")
        try expectFrame(.le(.scanTimeout(LEScanTimeout())), "04 3e 01 11")
        // status 00, advertising handle 01, connection handle 0x0040, 0 completed events.
        try expectFrame(.le(.advertisingSetTerminated(LEAdvertisingSetTerminated(
            advertisingHandle: 1, connectionHandle: 0x0040, numCompletedExtendedAdvertisingEvents: 0))),
                        "04 3e 06 12 00 01 40 00 00")
        try expectFrame(.encryptionKeyRefreshComplete(EncryptionKeyRefreshComplete(connectionHandle: 0x0040)),
                        "04 30 03 00 40 00")
    }
}

@Suite struct EventRoundTripTests {
    @Test(arguments: EventSamples.all)
    func roundTrip(_ event: HCIEvent) throws {
        let frame = HCIPacket.event(event.packet).h4Bytes
        guard case .event(let packet) = try HCIPacket(h4: frame) else {
            Issue.record("not an event frame")
            return
        }
        let decoded = try HCIEvent(decoding: packet)
        #expect(decoded == event)
        #expect(decoded.name == event.name)
        if case .unknown = decoded { Issue.record("typed event decoded as unknown") }
        if case .le(.unknown) = decoded { Issue.record("typed LE subevent decoded as unknown") }
    }

    @Test func typedStructsDecodeTheirOwnPackets() throws {
        let disconnection = DisconnectionComplete(connectionHandle: 0x0123, reason: .connectionTimeout)
        #expect(try DisconnectionComplete(packet: disconnection.packet) == disconnection)
        let report = LEAdvertisingReport(reports: [
            .init(eventType: .advNonconnInd, addressType: .randomDevice, address: EventSamples.rpa, data: [1], rssi: -1),
        ])
        #expect(try LEAdvertisingReport(packet: report.packet) == report)
        // The wrong code is refused rather than misread.
        #expect(throws: DecodeError.self) { try LEConnectionComplete(packet: report.packet) }
        #expect(throws: DecodeError.self) { try HardwareError(packet: disconnection.packet) }
    }

    @Test func names() throws {
        #expect(HCIEvent.disconnectionComplete(DisconnectionComplete(connectionHandle: 1, reason: .success)).name
            == "Disconnection Complete")
        #expect(HCIEvent.le(.advertisingReport(LEAdvertisingReport(reports: []))).name == "LE Advertising Report")
        #expect(HCIEvent.unknown(HCIEventPacket(code: 0xFF, parameters: [])).name == "Unknown event 0xff")
        #expect(HCIEvent.le(.unknown(subevent: 0x7F, parameters: [])).name == "Unknown LE subevent 0x7f")
        #expect(EncryptionChangeV2.name == "Encryption Change [v2]")
    }

    @Test func unknownCodesStayRaw() throws {
        let vendor = HCIEventPacket(code: 0xFF, parameters: [1, 2, 3])
        #expect(try HCIEvent(decoding: vendor) == .unknown(vendor))
        #expect(try HCIEvent(decoding: vendor).packet == vendor)
        let futureSubevent = HCIEventPacket(code: 0x3E, parameters: [0x7F, 9, 8])
        #expect(try HCIEvent(decoding: futureSubevent) == .le(.unknown(subevent: 0x7F, parameters: [9, 8])))
        #expect(try HCIEvent(decoding: futureSubevent).packet == futureSubevent)
    }

    @Test func handleFlagBitsAreMasked() throws {
        // The top four bits of a Connection_Handle field are not part of the handle.
        let packet = HCIEventPacket(code: 0x05, parameters: [0x00, 0x40, 0x30, 0x13])
        #expect(try DisconnectionComplete(packet: packet).connectionHandle == 0x0040)
        let nocp = HCIEventPacket(code: 0x13, parameters: [0x01, 0x41, 0xF0, 0x05, 0x00])
        #expect(try NumberOfCompletedPackets(packet: nocp).entries == [.init(handle: 0x0041, completedPackets: 5)])
    }
}
