import Scheduling
import ByteCoding
import HCI

/// One representative value of every typed event, for round-trip, truncation and fuzz tests.
enum EventSamples {
    static let peer = BluetoothAddress("C0:11:22:33:44:55")!
    static let rpa = BluetoothAddress("4A:BB:CC:DD:EE:FF")!

    static let hci: [HCIEvent] = [
        .disconnectionComplete(DisconnectionComplete(connectionHandle: 0x0040, reason: .remoteUserTerminatedConnection)),
        .encryptionChange(EncryptionChange(connectionHandle: 0x0040, encryptionEnabled: 0x01)),
        .readRemoteVersionInformationComplete(ReadRemoteVersionInformationComplete(
            connectionHandle: 0x0040, version: 0x0D, companyIdentifier: 0x0059, subversion: 0x1234)),
        .commandComplete(CommandComplete(opcode: Reset.opcode, returning: StatusReturn())),
        .commandStatus(CommandStatus(status: .success, opcode: HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000D))),
        .hardwareError(HardwareError(hardwareCode: 0x42)),
        .numberOfCompletedPackets(NumberOfCompletedPackets(entries: [
            .init(handle: 0x0040, completedPackets: 1), .init(handle: 0x0EFF, completedPackets: 0xFFFF),
        ])),
        .numberOfCompletedPackets(NumberOfCompletedPackets(entries: [])),
        .dataBufferOverflow(DataBufferOverflow(linkType: DataBufferOverflow.aclLinkType)),
        .encryptionKeyRefreshComplete(EncryptionKeyRefreshComplete(status: .pinOrKeyMissing, connectionHandle: 0x0001)),
        .encryptionChangeV2(EncryptionChangeV2(connectionHandle: 0x0040, encryptionEnabled: 1, encryptionKeySize: 16)),
    ]

    static let le: [LEMetaEvent] = [
        .connectionComplete(LEConnectionComplete(
            connectionHandle: 0x0040, role: .peripheral, peerAddressType: .randomDevice, peerAddress: peer,
            connectionInterval: 0x0018, peripheralLatency: 0, supervisionTimeout: 0x0048, centralClockAccuracy: 1)),
        .advertisingReport(LEAdvertisingReport(reports: [
            .init(eventType: .advInd, addressType: .publicDevice, address: peer, data: [0x02, 0x01, 0x06], rssi: -60),
            .init(eventType: .scanRsp, addressType: .randomIdentity, address: rpa,
                  data: [UInt8](repeating: 0xAB, count: 31), rssi: 127),
        ])),
        .connectionUpdateComplete(LEConnectionUpdateComplete(
            status: .unsupportedRemoteFeature, connectionHandle: 0x0040, connectionInterval: 6,
            peripheralLatency: 4, supervisionTimeout: 10)),
        .readRemoteFeaturesComplete(LEReadRemoteFeaturesComplete(connectionHandle: 0x0040, leFeatures: 0x0000_0001_0000_00FF)),
        .longTermKeyRequest(LELongTermKeyRequest(
            connectionHandle: 0x0040, randomNumber: 0x0123_4567_89AB_CDEF, encryptedDiversifier: 0xBEEF)),
        .remoteConnectionParameterRequest(LERemoteConnectionParameterRequest(
            connectionHandle: 0x0040, intervalMin: 6, intervalMax: 12, maxLatency: 0, timeout: 200)),
        .dataLengthChange(LEDataLengthChange(
            connectionHandle: 0x0040, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 27, maxRxTime: 328)),
        .enhancedConnectionComplete(LEEnhancedConnectionComplete(
            connectionHandle: 0x0041, role: .central, peerAddressType: .publicIdentity, peerAddress: peer,
            localResolvablePrivateAddress: rpa, connectionInterval: 0x0028, peripheralLatency: 0,
            supervisionTimeout: 0x01F4, centralClockAccuracy: 0)),
        .directedAdvertisingReport(LEDirectedAdvertisingReport(reports: [
            .init(addressType: .publicDevice, address: peer, directAddress: rpa, rssi: -40),
        ])),
        .phyUpdateComplete(LEPHYUpdateComplete(connectionHandle: 0x0040, txPhy: 2, rxPhy: 2)),
        .extendedAdvertisingReport(LEExtendedAdvertisingReport(reports: [
            .init(eventType: [.connectable, .scannable, .legacy], addressType: .publicDevice, address: peer,
                  rssi: -70, data: [0x02, 0x01, 0x06]),
            .init(eventType: ExtendedAdvertisingEventType([.connectable], dataStatus: .incompleteMoreToCome),
                  addressType: nil, address: .zero, primaryPHY: 3, secondaryPHY: 3, advertisingSID: 5,
                  txPower: -4, rssi: -90, periodicAdvertisingInterval: 0x0050, directAddressType: 2,
                  directAddress: rpa, data: Array(0..<100)),
        ])),
        .scanTimeout(LEScanTimeout()),
        .advertisingSetTerminated(LEAdvertisingSetTerminated(
            advertisingHandle: 1, connectionHandle: 0x0040, numCompletedExtendedAdvertisingEvents: 0)),
        .enhancedConnectionCompleteV2(LEEnhancedConnectionCompleteV2(
            connectionHandle: 0x0042, role: .peripheral, peerAddressType: .randomDevice, peerAddress: rpa,
            peerResolvablePrivateAddress: rpa, connectionInterval: 24, peripheralLatency: 2,
            supervisionTimeout: 400, centralClockAccuracy: 7, advertisingHandle: 0, syncHandle: 0xFFFF)),
    ]

    static let all: [HCIEvent] = hci + le.map(HCIEvent.le)

    /// Every event code with a typed decoder (LE Meta excluded).
    static let eventCodes: [UInt8] = [0x05, 0x08, 0x0C, 0x0E, 0x0F, 0x10, 0x13, 0x1A, 0x30, 0x59]
    /// Every LE subevent code with a typed decoder.
    static let subeventCodes: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0A, 0x0B, 0x0C, 0x0D, 0x11, 0x12, 0x29]
}

