import ATT
import AssignedNumbers
import ByteCoding
import DaemonProtocol
import GATT
import HCI
import Scheduling
import Testing

@Suite("Daemon protocol")
struct DaemonProtocolTests {
    static let peer = LEAddress(.randomDevice, BluetoothAddress(value: 0xC0_11_22_33_44_55))
    static let heartRate = BluetoothUUID(uuid16: 0x180D)
    static let custom = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
    static let service = DiscoveredService(uuid: heartRate, handles: 0x0010...0x001F)
    static let characteristic = DiscoveredCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A37), declarationHandle: 0x0011,
                                                         valueHandle: 0x0012, properties: [.read, .notify], endHandle: 0x0014)

    /// One message of every type, with the optional fields and error cases both ways.
    static let samples: [DaemonMessage] = [
        .hello(version: 1, minimumVersion: 1, name: "heart-rate app"),
        .openCentral(session: 1, restoreIdentifier: nil),
        .openCentral(session: 2, restoreIdentifier: "com.example.central"),
        .openPeripheral(session: 3, restoreIdentifier: "périphérique"),
        .close(session: 7),
        .startScan(session: 1, services: nil, solicited: [], allowDuplicates: false),
        .startScan(session: 1, services: [heartRate, custom], solicited: [custom], allowDuplicates: true),
        .stopScan(session: 1),
        .connect(session: 1, peer: peer, autoReconnect: true),
        .cancel(session: 1, peer: peer, notify: false),
        .discoverServices(session: 1, peer: peer, request: 9, uuid: nil),
        .discoverServices(session: 1, peer: peer, request: 10, uuid: custom),
        .discoverIncludedServices(session: 1, peer: peer, request: 11, service: service),
        .discoverCharacteristics(session: 1, peer: peer, request: 12,
                                 service: DiscoveredService(uuid: custom, handles: 0x0020...0xFFFF, isPrimary: false)),
        .discoverDescriptors(session: 1, peer: peer, request: 13, characteristic: characteristic),
        .read(session: 1, peer: peer, request: 14, handle: 0x0012),
        .write(session: 1, peer: peer, request: 15, handle: 0x0012, value: Array(0..<200)),
        .writeWithoutResponse(session: 1, peer: peer, handle: 0x0012, value: []),
        .setNotify(session: 1, peer: peer, request: 16, characteristic: characteristic, clientConfiguration: 0x0013, enabled: true),
        .setNotify(session: 1, peer: peer, request: 17, characteristic: characteristic, clientConfiguration: nil, enabled: false),
        .readRSSI(session: 1, peer: peer, request: 18),
        .setConnectionParameters(session: 1, peer: peer, intervalMin: 6, intervalMax: 6, latency: 0, timeout: 0x01F4),
        .setPHY(session: 1, peer: peer, phy: 2),
        .welcome(version: 1, deviceAddress: LEAddress(.publicDevice, BluetoothAddress(value: 0x00_1B_DC_01_02_03))),
        .welcome(version: 1, deviceAddress: nil),
        .refused(reason: "no common protocol version"),
        .state(session: 1, state: 5, reason: nil),
        .state(session: 1, state: 2, reason: "hci:0: no such adapter"),
        .discovered(session: 1, peer: peer, advertisingData: [0x02, 0x01, 0x06], scanResponse: [0x02, 0x0A, 0x00], isConnectable: true, rssi: -61),
        .discovered(session: 1, peer: peer, advertisingData: [], scanResponse: nil, isConnectable: false, rssi: nil),
        .scanFailed(session: 1),
        .connected(session: 1, peer: peer, mtu: 247),
        .failedToConnect(session: 1, peer: peer, reason: "the connection failed (0x3E)"),
        .disconnected(session: 1, peer: peer, cause: .requested(notify: true), isReconnecting: false),
        .disconnected(session: 1, peer: peer, cause: .requested(notify: false), isReconnecting: false),
        .disconnected(session: 1, peer: peer, cause: .attTimeout, isReconnecting: true),
        .disconnected(session: 1, peer: peer, cause: .link(HCIStatus(0x08)), isReconnecting: true),
        .linkMTU(session: 1, peer: peer, mtu: 517),
        .linkName(session: 1, peer: peer, name: "Polar H10 ❤︎"),
        .linkServicesChanged(session: 1, peer: peer, range: 0x0001...0xFFFF),
        .linkWriteBudget(session: 1, peer: peer, count: 3),
        .services(session: 1, request: 9, result: .success([service, DiscoveredService(uuid: custom, handles: 0x0020...0x0030)])),
        .services(session: 1, request: 9, result: .failure(.attributeError(ATTErrorCode(0x0A), handle: 0x0001))),
        .includedServices(session: 1, request: 11, result: .success([
            DiscoveredIncludedService(declarationHandle: 0x0011, uuid: custom, handles: 0x0040...0x0045),
        ])),
        .includedServices(session: 1, request: 11, result: .failure(.timeout)),
        .characteristics(session: 1, request: 12, result: .success([characteristic])),
        .characteristics(session: 1, request: 12, result: .failure(.disconnected)),
        .descriptors(session: 1, request: 13, result: .success([DiscoveredDescriptor(uuid: BluetoothUUID(uuid16: 0x2902), handle: 0x0013)])),
        .descriptors(session: 1, request: 13, result: .failure(.protocolViolation("odd length"))),
        .value(session: 1, request: 14, result: .success([0x06, 0x48])),
        .value(session: 1, request: 14, result: .failure(.invalidArgument("handle 0"))),
        .done(session: 1, request: 15, error: nil),
        .done(session: 1, request: 15, error: .writeVerificationFailed(handle: 0x0012, offset: 18)),
        .done(session: 1, request: 16, error: .notSubscribable(0x0012)),
        .done(session: 1, request: 16, error: .queueFull),
        .done(session: 1, request: 16, error: .cannotSend),
        .done(session: 1, request: 16, error: .securityFailed(.peerRemovedPairingInformation)),
        .done(session: 1, request: 16, error: .securityFailed(.encryptionTimedOut)),
        .rssi(session: 1, request: 18, rssi: -70, error: nil),
        .rssi(session: 1, request: 18, rssi: 127, error: "the controller could not measure it"),
        .notification(session: 1, peer: peer, handle: 0x0012, value: [0x06, 0x48]),
        // Restoration and connection events
        .restoreState(session: 4, peers: [], scan: nil, droppedNotifications: 0),
        .restoreState(session: 4, peers: [
            DaemonRestoredPeer(peer: peer, isConnected: true, mtu: 185, services: [
                DaemonRestoredService(service: service, characteristics: [
                    DaemonRestoredCharacteristic(characteristic: characteristic,
                                                 descriptors: [DiscoveredDescriptor(uuid: BluetoothUUID(uuid16: 0x2902), handle: 0x0013)],
                                                 isNotifying: true),
                    DaemonRestoredCharacteristic(characteristic: characteristic, descriptors: nil, isNotifying: false),
                ]),
                DaemonRestoredService(service: DiscoveredService(uuid: custom, handles: 0x0020...0x0030), characteristics: nil),
            ]),
            DaemonRestoredPeer(peer: LEAddress(.publicDevice, BluetoothAddress(value: 0x00_1B_DC_01_02_04)), isConnected: false, mtu: 23,
                               services: nil),
        ], scan: DaemonRestoredScan(services: [heartRate], solicited: [custom], allowDuplicates: true), droppedNotifications: 3),
        .registerConnectionEvents(session: 1, services: nil, peripherals: nil),
        .registerConnectionEvents(session: 1, services: [heartRate], peripherals: [peer]),
        .connectionEvent(session: 1, peer: peer, connected: true),
        .connectionEvent(session: 1, peer: peer, connected: false),
        .restorePeripheralState(session: 5, services: [], advertisement: nil, centrals: []),
        .restorePeripheralState(session: 5, services: [
            DaemonRestoredLocalService(key: 1, includedKeys: [], service: publishedService, handles: GATTServiceHandles(
                id: GATTServiceID(rawValue: 3), range: 0x0010...0x0016, includes: [],
                characteristics: [GATTCharacteristicHandles(declaration: 0x0011, value: 0x0012, clientConfiguration: 0x0013,
                                                            descriptors: [0x0014])])),
            DaemonRestoredLocalService(key: 2, includedKeys: [1], service: GATTService(uuid: custom, isPrimary: false),
                                       handles: GATTServiceHandles(id: GATTServiceID(rawValue: 4), range: 0x0017...0x0018,
                                                                   includes: [0x0018], characteristics: [])),
        ], advertisement: DaemonAdvertisement(name: "Feed", serviceUUIDs: [heartRate], manufacturerData: nil, raw: nil),
           centrals: [DaemonRestoredCentral(central: 40, peer: peer, mtu: 185, subscribed: [0x0012]),
                      DaemonRestoredCentral(central: 41, peer: peer, mtu: 23, subscribed: [])]),
        // MARK: Peripheral role
        .publish(session: 2, key: 1, includedKeys: [], service: publishedService),
        .publish(session: 2, key: 2, includedKeys: [1, 7], service: GATTService(uuid: custom, isPrimary: false)),
        .unpublish(session: 2, key: 1),
        .unpublishAll(session: 2),
        .startAdvertising(session: 2, advertisement: DaemonAdvertisement(name: "Thermomètre", serviceUUIDs: [heartRate, custom],
                                                                          manufacturerData: [0x4C, 0x00, 0x02], raw: nil)),
        .startAdvertising(session: 2, advertisement: DaemonAdvertisement(
            name: nil, serviceUUIDs: [], manufacturerData: nil,
            raw: DaemonAdvertisement.Raw(advertisement: [0x02, 0x01, 0x06], scanResponse: []))),
        .stopAdvertising(session: 2),
        .setLatency(session: 2, central: 40, latency: 1),
        .answer(session: 2, request: 5, error: nil, value: [0x2A]),
        .answer(session: 2, request: 6, error: 0x03, value: nil),
        .update(session: 2, handle: 0x0012, value: [1, 2, 3], centrals: nil),
        .update(session: 2, handle: 0x0012, value: [], centrals: [40, 41]),
        .published(session: 2, key: 1, result: .success(GATTServiceHandles(
            id: GATTServiceID(rawValue: 3), range: 0x0010...0x0016, includes: [],
            characteristics: [GATTCharacteristicHandles(declaration: 0x0011, value: 0x0012, clientConfiguration: 0x0013, descriptors: [0x0014]),
                              GATTCharacteristicHandles(declaration: 0x0015, value: 0x0016, clientConfiguration: nil, descriptors: [])]))),
        .published(session: 2, key: 2, result: .failure(.alreadyPublished)),
        .published(session: 2, key: 2, result: .failure(.includedServiceNotPublished(key: 7))),
        .published(session: 2, key: 2, result: .failure(.database(.outOfHandles))),
        .published(session: 2, key: 2, result: .failure(.database(.unknownIncludedService(GATTServiceID(rawValue: 9))))),
        .published(session: 2, key: 2, result: .failure(.database(.notStored(0x0042)))),
        .unpublished(session: 2, key: 1, error: nil),
        .unpublished(session: 2, key: 1, error: .notPublished),
        .unpublished(session: 2, key: 1, error: .included(byKey: 2)),
        .unpublished(session: 2, key: 1, error: .database(.serviceIsIncluded(GATTServiceID(rawValue: 4)))),
        .advertisingStarted(session: 2, error: nil, isOn: true),
        .advertisingStarted(session: 2, error: .alreadyAdvertising, isOn: false),
        .advertisingStarted(session: 2, error: .manufacturerDataDoesNotFit(byteCount: 40), isOn: false),
        .advertisingStarted(session: 2, error: .refused("all 4 advertising sets of the controller are in use"), isOn: false),
        .advertisingStopped(session: 2),
        .centralConnected(session: 2, central: 40, peer: peer, mtu: 23),
        .centralMTU(session: 2, central: 40, mtu: 247),
        .centralDisconnected(session: 2, central: 40, abandonedRequests: [5, 6]),
        .readRequest(session: 2, request: 5, central: 40, handle: 0x0012, offset: 22),
        .writeRequest(session: 2, request: 6, writes: [DaemonWrite(central: 40, handle: 0x0012, offset: 0, value: [1]),
                                                      DaemonWrite(central: 40, handle: 0x0016, offset: 18, value: [])]),
        .writeRequest(session: 2, request: nil, writes: [DaemonWrite(central: 40, handle: 0x0012, offset: 0, value: [9])]),
        .subscribed(session: 2, central: 40, handle: 0x0012),
        .unsubscribed(session: 2, central: 40, handle: 0x0012),
        .updatesHandedOver(session: 2, count: 256),
        // MARK: Channels and pairing (version 2)
        .openChannel(session: 1, peer: peer, request: 12, psm: 0x0080),
        .publishChannel(session: 2, request: 13, psm: nil, requiresEncryption: true),
        .publishChannel(session: 2, request: 14, psm: 0x0025, requiresEncryption: false),
        .unpublishChannel(session: 2, request: 15, psm: 0x0080),
        .channelWrite(session: 1, channel: 7, bytes: [1, 2, 3]),
        .channelWrite(session: 1, channel: 7, bytes: []),
        .channelConsumed(session: 1, channel: 7, count: 4096),
        .channelPause(session: 1, channel: 7, paused: true),
        .channelClose(session: 1, channel: 7),
        .setPairingAgent(session: 1, ioCapability: 4),
        .setPairingAgent(session: 1, ioCapability: nil),
        .pairingReply(session: 1, prompt: 3, reply: .accept),
        .pairingReply(session: 1, prompt: 3, reply: .reject),
        .pairingReply(session: 1, prompt: 3, reply: .passkey(999_999)),
        .pairingReply(session: 1, prompt: 3, reply: .outOfBand(peerConfirm: Array(repeating: 1, count: 16),
                                                               peerRandom: Array(repeating: 2, count: 16), temporaryKey: nil)),
        .channelOpened(session: 1, request: 12, result: .success(7)),
        .channelOpened(session: 1, request: 12, result: .failure(.refused(0x0002))),
        .channelOpened(session: 1, request: 12, result: .failure(.timeout)),
        .channelOpened(session: 1, request: 12, result: .failure(.disconnected)),
        .channelOpened(session: 1, request: 12, result: .failure(.noFreeChannelIDs)),
        .channelOpened(session: 1, request: 12, result: .failure(.invalidParameters)),
        .channelOpened(session: 1, request: 12, result: .failure(.pairingFailed(local: false, reason: 0x05))),
        .channelOpened(session: 1, request: 12, result: .failure(.pairingFailed(local: true, reason: nil))),
        .channelOpened(session: 1, request: 12, result: .failure(.peerRemovedPairingInformation)),
        .channelOpened(session: 1, request: 12, result: .failure(.encryptionTimedOut)),
        .channelOpened(session: 1, request: 12, result: .failure(.encryptionFailed(0x06))),
        .channelOpened(session: 1, request: 12, result: .failure(.notSupported("no"))),
        .channelPublished(session: 2, request: 13, result: .success(0x0080)),
        .channelPublished(session: 2, request: 13, result: .failure(.noFreePSM)),
        .channelPublished(session: 2, request: 14, result: .failure(.psmInUse(0x0025))),
        .channelPublished(session: 2, request: 14, result: .failure(.invalidPSM(0x0100))),
        .channelUnpublished(session: 2, request: 15, wasPublished: false),
        .channelIncoming(session: 2, channel: 8, central: 40, peer: peer, psm: 0x0080),
        .channelData(session: 2, channel: 8, bytes: Array(repeating: 0xAB, count: 300)),
        .channelSent(session: 1, channel: 7, count: 3),
        .channelClosed(session: 1, channel: 7, reason: .local),
        .channelClosed(session: 1, channel: 7, reason: .remote),
        .channelClosed(session: 1, channel: 7, reason: .linkLost),
        .channelClosed(session: 1, channel: 7, reason: .protocolError("credit overflow")),
        .pairingPrompt(session: 1, prompt: 3, peer: peer, question: .confirmPairing(method: 0)),
        .pairingPrompt(session: 1, prompt: 3, peer: peer, question: .displayPasskey(123_456)),
        .pairingPrompt(session: 1, prompt: 3, peer: peer, question: .enterPasskey),
        .pairingPrompt(session: 1, prompt: 3, peer: peer, question: .confirmNumber(42)),
        .pairingPrompt(session: 1, prompt: 3, peer: peer, question: .outOfBandData),
    ]

    /// A service with a dynamic notifying value and a stored one with a descriptor.
    static let publishedService = GATTService(uuid: heartRate, characteristics: [
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A37), properties: [.read, .notify], permissions: [.readable], value: .dynamic,
                           clientConfigurationPermissions: [.readable, .writeEncryptionRequired]),
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: [.read], extendedProperties: [.reliableWrite],
                           permissions: [.readable], value: .stored([0x01]), descriptors: [.userDescription("chest")]),
    ])

    @Test func samplesCoverEveryMessageType() {
        let covered = Set(Self.samples.map(\.kind))
        #expect(covered == Set(DaemonMessage.Kind.allCases))
    }

    @Test func everyMessageSurvivesARoundTrip() throws {
        for message in Self.samples {
            let decoded = try DaemonMessage.decode(message.encoded)
            #expect(decoded == message)
            #expect(decoded.kind.isFromClient == (message.kind.rawValue < 0x8000))
        }
    }

    // MARK: - Bytes (docs/daemon.md)

    @Test func helloBytes() {
        let frame = DaemonFrame.encode(.hello(version: 1, minimumVersion: 1, name: "ab"))
        #expect(frame == [
            0x0C, 0x00, 0x00, 0x00, // length of what follows
            0x01, 0x00, // hello
            0x01, 0x00, 0x01, 0x00, // version 1, minimum 1
            0x02, 0x00, 0x00, 0x00, 0x61, 0x62, // "ab"
        ])
    }

    @Test func restoreStateAndConnectionEventBytes() {
        let restored = DaemonRestoredPeer(peer: Self.peer, isConnected: true, mtu: 185, services: [])
        #expect(DaemonMessage.restoreState(session: 1, peers: [restored], scan: nil, droppedNotifications: 2).encoded == [
            0x40, 0x80, // restoreState
            0x01, 0x00, 0x00, 0x00, // session
            0x01, 0x00, // one peer
            0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, // random, address little-endian
            0x01, // connected
            0xB9, 0x00, // ATT_MTU 185
            0x01, 0x00, 0x00, // services discovered: none
            0x00, // no scan
            0x02, 0x00, 0x00, 0x00, // 2 notifications dropped
        ])
        #expect(DaemonMessage.connectionEvent(session: 1, peer: Self.peer, connected: false).encoded == [
            0x41, 0x80, 0x01, 0x00, 0x00, 0x00, 0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, 0x00,
        ])
    }

    @Test func connectBytes() {
        #expect(DaemonMessage.connect(session: 0x0102_0304, peer: Self.peer, autoReconnect: true).encoded == [
            0x12, 0x00, // connect
            0x04, 0x03, 0x02, 0x01, // session
            0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, // random, address little-endian as on HCI
            0x01, // autoReconnect
        ])
    }

    @Test func startScanBytesUseTheShortestUUIDs() {
        let message = DaemonMessage.startScan(session: 1, services: [Self.heartRate], solicited: [Self.custom], allowDuplicates: false)
        let expected: [UInt8] = [0x10, 0x00, 0x01, 0x00, 0x00, 0x00,
                                 0x01, 0x01, 0x00, 0x02, 0x0D, 0x18, // some: one UUID, 2 bytes, 180D
                                 0x01, 0x00, 0x10] + Self.custom.littleEndianBytes + [0x00]
        #expect(message.encoded == expected)
    }

    @Test func discoveredBytes() {
        #expect(DaemonMessage.discovered(session: 2, peer: Self.peer, advertisingData: [0x02, 0x01, 0x06], scanResponse: nil,
                                         isConnectable: true, rssi: -61).encoded == [
            0x10, 0x80, 0x02, 0x00, 0x00, 0x00,
            0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0,
            0x03, 0x00, 0x00, 0x00, 0x02, 0x01, 0x06, // advertising data
            0x00, // no scan response
            0x01, // connectable
            0x01, 0xC3, // rssi -61
        ])
    }

    @Test func servicesResultBytes() {
        #expect(DaemonMessage.services(session: 1, request: 2, result: .success([Self.service])).encoded == [
            0x20, 0x80, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            0x00, 0x01, 0x00, // success, one service
            0x02, 0x0D, 0x18, 0x10, 0x00, 0x1F, 0x00, 0x01, // 180D, 0x0010…0x001F, primary
        ])
        #expect(DaemonMessage.done(session: 1, request: 2, error: .attributeError(ATTErrorCode(0x05), handle: 0x0012)).encoded == [
            0x25, 0x80, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            0x01, 0x00, 0x05, 0x12, 0x00, // an error: ATT error 0x05 on handle 0x0012
        ])
    }

    @Test func disconnectedBytes() {
        #expect(DaemonMessage.disconnected(session: 1, peer: Self.peer, cause: .link(HCIStatus(0x13)), isReconnecting: false).encoded == [
            0x14, 0x80, 0x01, 0x00, 0x00, 0x00,
            0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0,
            0x03, 0x13, 0x00, // the link, remote user terminated; not reconnecting
        ])
    }

    @Test func publishBytes() {
        let service = GATTService(uuid: Self.heartRate, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: [.read], permissions: [.readable], value: .stored([0x01])),
        ])
        #expect(DaemonMessage.publish(session: 2, key: 1, includedKeys: [3], service: service).encoded == [
            0x30, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, // publish, session 2, key 1
            0x01, 0x00, 0x03, 0x00, 0x00, 0x00, // includes key 3
            0x02, 0x0D, 0x18, 0x01, // 180D, primary
            0x01, 0x00, // one characteristic
            0x02, 0x38, 0x2A, 0x02, 0x00, 0x00, 0x01, // 2A38, read, no extended properties, readable
            0x01, 0x01, 0x00, 0x00, 0x00, 0x01, // stored: 01
            0x00, 0x00, // no descriptors
            0x03, // CCCD readable and writeable
        ])
        #expect(DaemonMessage.writeRequest(session: 2, request: nil, writes: [
            DaemonWrite(central: 5, handle: 0x0012, offset: 1, value: [0xAB]),
        ]).encoded == [
            0x38, 0x80, 0x02, 0x00, 0x00, 0x00, 0x00, // writeRequest, session 2, a command
            0x01, 0x00, 0x05, 0x00, 0x00, 0x00, 0x12, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0xAB,
        ])
    }

    // MARK: - Garbage gives an error, never a crash

    @Test func everyTruncationIsAnError() {
        for message in Self.samples {
            let bytes = message.encoded
            for length in 0..<bytes.count {
                #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode(Array(bytes[0..<length])) }
            }
        }
    }

    @Test func trailingBytesAreAnError() {
        #expect(throws: DaemonProtocolError.trailingBytes(kind: .close, count: 1)) {
            try DaemonMessage.decode(DaemonMessage.close(session: 1).encoded + [0])
        }
    }

    /// Version 2's messages, byte for byte (docs/daemon.md, "Channels and pairing").
    @Test func channelAndPairingBytes() {
        #expect(DaemonMessage.openChannel(session: 1, peer: Self.peer, request: 2, psm: 0x0080).encoded
            == [0x50, 0x00, 1, 0, 0, 0] + [0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0] + [2, 0, 0, 0, 0x80, 0x00])
        #expect(DaemonMessage.publishChannel(session: 1, request: 2, psm: 0x0025, requiresEncryption: true).encoded
            == [0x51, 0x00, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0x25, 0x00, 1])
        #expect(DaemonMessage.channelData(session: 1, channel: 9, bytes: [0xAA, 0xBB]).encoded
            == [0x54, 0x80, 1, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 0xAA, 0xBB])
        #expect(DaemonMessage.channelOpened(session: 1, request: 2, result: .failure(.refused(0x0005))).encoded
            == [0x50, 0x80, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0x05, 0x00])
        #expect(DaemonMessage.pairingPrompt(session: 1, prompt: 3, peer: Self.peer, question: .confirmNumber(0x01E240)).encoded
            == [0x58, 0x80, 1, 0, 0, 0, 3, 0, 0, 0] + [0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0] + [3, 0x40, 0xE2, 0x01, 0x00])
        #expect(DaemonMessage.pairingReply(session: 1, prompt: 3, reply: .passkey(0x01E240)).encoded
            == [0x59, 0x00, 1, 0, 0, 0, 3, 0, 0, 0, 2, 0x40, 0xE2, 0x01, 0x00])
        #expect(DaemonMessage.Kind.openChannel.version == 2 && DaemonMessage.Kind.pairingPrompt.version == 2)
        #expect(DaemonMessage.Kind.restorePeripheralState.version == 1 && DaemonMessage.Kind.update.version == 1)
    }

    @Test func linkParameterBytes() throws {
        #expect(DaemonMessage.setConnectionParameters(session: 1, peer: Self.peer, intervalMin: 6, intervalMax: 0x0C80, latency: 3,
                                                      timeout: 0x01F4).encoded
            == [0x29, 0x00, 1, 0, 0, 0] + [0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0] + [6, 0, 0x80, 0x0C, 3, 0, 0xF4, 0x01])
        #expect(DaemonMessage.setPHY(session: 1, peer: Self.peer, phy: 3).encoded
            == [0x2A, 0x00, 1, 0, 0, 0] + [0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0] + [3])
        #expect(DaemonMessage.Kind.setConnectionParameters.version == 3 && DaemonMessage.Kind.setPHY.version == 3)
        #expect(DaemonMessage.Kind.readRSSI.version == 1)
        // PHYs other than LE 1M, 2M and Coded.
        for phy: UInt8 in [0, 4, 0xFF] {
            #expect(throws: DaemonProtocolError.self) {
                try DaemonMessage.decode([0x2A, 0x00, 1, 0, 0, 0] + [0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0] + [phy])
            }
        }
    }

    @Test func badChannelAndPairingFieldsAreErrors() {
        // A passkey of seven digits, in a reply and in a prompt.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x59, 0x00, 1, 0, 0, 0, 3, 0, 0, 0, 2, 0x40, 0x42, 0x0F, 0x00])
        }
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x58, 0x80, 1, 0, 0, 0, 3, 0, 0, 0] + [0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0] + [1, 0x40, 0x42, 0x0F, 0x00])
        }
        // An IO capability of 5; a pairing reply of kind 4; a close reason of 4; an open error of 10.
        #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode([0x58, 0x00, 1, 0, 0, 0, 1, 5]) }
        #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode([0x59, 0x00, 1, 0, 0, 0, 3, 0, 0, 0, 4]) }
        #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode([0x56, 0x80, 1, 0, 0, 0, 7, 0, 0, 0, 4]) }
        #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode([0x50, 0x80, 1, 0, 0, 0, 2, 0, 0, 0, 1, 10]) }
        // A result of 2.
        #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode([0x51, 0x80, 1, 0, 0, 0, 2, 0, 0, 0, 2]) }
    }

    @Test func unknownTypesAndBadFieldsAreErrors() {
        #expect(throws: DaemonProtocolError.unknownKind(0x7777)) { try DaemonMessage.decode([0x77, 0x77]) }
        // A Bool of 2.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x12, 0x00, 1, 0, 0, 0, 0x01, 1, 2, 3, 4, 5, 6, 0x02])
        }
        // Address type 9.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x12, 0x00, 1, 0, 0, 0, 0x09, 1, 2, 3, 4, 5, 6, 0x00])
        }
        // A UUID of 3 bytes.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x20, 0x00, 1, 0, 0, 0, 0x01, 1, 2, 3, 4, 5, 6, 9, 0, 0, 0, 0x01, 0x03, 1, 2, 3])
        }
        // A name that is not UTF-8.
        #expect(throws: DaemonProtocolError.self) { try DaemonMessage.decode([0x01, 0x00, 1, 0, 1, 0, 1, 0, 0, 0, 0xFF]) }
        // A handle range that runs backwards.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x17, 0x80, 1, 0, 0, 0, 0x00, 1, 2, 3, 4, 5, 6, 0x10, 0x00, 0x01, 0x00])
        }
        // A blob announcing 4 GiB.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x27, 0x80, 1, 0, 0, 0, 0x00, 1, 2, 3, 4, 5, 6, 0x12, 0x00, 0xFF, 0xFF, 0xFF, 0xFF])
        }
        // An array announcing 65535 services, holding none.
        #expect(throws: DaemonProtocolError.self) {
            try DaemonMessage.decode([0x20, 0x80, 1, 0, 0, 0, 2, 0, 0, 0, 0x00, 0xFF, 0xFF])
        }
    }

    /// Random payloads, and samples with random bytes changed: each decodes to a message that
    /// encodes back to the same bytes, or throws.
    @Test func randomBytesDecodeExactlyOrThrow() throws {
        var random = SeededGenerator(seed: 0xDAE_0001)
        var inputs: [[UInt8]] = []
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<40, using: &random)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            // Mostly known types, so that the fields are what gets tested.
            if count >= 2 {
                let kind = DaemonMessage.Kind.allCases.randomElement(using: &random)!
                bytes[0] = UInt8(truncatingIfNeeded: kind.rawValue)
                bytes[1] = UInt8(kind.rawValue >> 8)
            }
            inputs.append(bytes)
        }
        for message in Self.samples {
            for _ in 0..<20 {
                var bytes = message.encoded
                let index = Int.random(in: 0..<bytes.count, using: &random)
                bytes[index] = UInt8.random(in: 0...255, using: &random)
                inputs.append(bytes)
            }
        }
        var decodedCount = 0
        for bytes in inputs {
            guard let message = try? DaemonMessage.decode(bytes) else { continue }
            decodedCount += 1
            // Equal as messages; a 32-bit UUID alias re-encodes in its 16-byte form.
            #expect(try DaemonMessage.decode(message.encoded) == message)
        }
        #expect(decodedCount > 0)
    }

    // MARK: - Frames

    @Test func framesArriveAnyWayTheStreamIsCut() throws {
        let stream = Self.samples.flatMap(DaemonFrame.encode)
        for chunk in [1, 3, 7, 64, stream.count] {
            var reader = DaemonFrameReader()
            var received: [DaemonMessage] = []
            var offset = 0
            while offset < stream.count {
                reader.append(stream[offset..<min(stream.count, offset + chunk)])
                offset += chunk
                while let message = try reader.next() { received.append(message) }
            }
            #expect(received == Self.samples)
            #expect(reader.bufferedCount == 0)
        }
    }

    @Test func anOversizedFrameFailsTheReaderForGood() throws {
        var reader = DaemonFrameReader()
        reader.append([0x01, 0x00, 0x10, 0x00]) // 1 MiB + 1
        #expect(throws: DaemonProtocolError.badLength(0x0010_0001)) { try reader.next() }
        reader.append(DaemonFrame.encode(.close(session: 1)))
        #expect(throws: DaemonProtocolError.badLength(0x0010_0001)) { try reader.next() }
        #expect(reader.bufferedCount == 0)
    }

    @Test func aGarbageFrameFailsTheReader() throws {
        var reader = DaemonFrameReader()
        reader.append(DaemonFrame.encode(.close(session: 1)) + [0x02, 0x00, 0x00, 0x00, 0x99, 0x99])
        #expect(try reader.next() == .close(session: 1))
        #expect(throws: DaemonProtocolError.unknownKind(0x9999)) { try reader.next() }
        #expect(reader.failure == .unknownKind(0x9999))
    }

    @Test func aFrameTooShortForATypeFails() {
        var reader = DaemonFrameReader()
        reader.append([0x01, 0x00, 0x00, 0x00, 0x01])
        #expect(throws: DaemonProtocolError.badLength(1)) { try reader.next() }
    }
}
