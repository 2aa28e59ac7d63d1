import ATT
import AssignedNumbers
import ByteCoding
import GATT
import HCI

/// Why a central's connection ended, as the role service says it (a daemon's
/// `disconnected` message).
public enum DaemonDisconnectCause: Sendable, Hashable {
    /// The client asked (`cancel`); `notify` is what it asked with.
    case requested(notify: Bool)
    /// The peer left an ATT request unanswered for 30 s.
    case attTimeout
    /// The link went down for this reason.
    case link(HCIStatus)
}

/// One message between a client and `corebluetoothd`, versions 1 to 3 of the protocol
/// (docs/daemon.md, "Messages"): values only. `session` names one manager of the client,
/// `request` one call that answers.
public enum DaemonMessage: Sendable, Hashable {
    // MARK: Client → daemon

    /// The client's first message: the versions it speaks and a name for logs.
    case hello(version: UInt16, minimumVersion: UInt16, name: String)
    case openCentral(session: UInt32, restoreIdentifier: String?)
    case openPeripheral(session: UInt32, restoreIdentifier: String?)
    case close(session: UInt32)
    /// `services` nil: every device.
    case startScan(session: UInt32, services: [BluetoothUUID]?, solicited: [BluetoothUUID], allowDuplicates: Bool)
    case stopScan(session: UInt32)
    case connect(session: UInt32, peer: LEAddress, autoReconnect: Bool)
    case cancel(session: UInt32, peer: LEAddress, notify: Bool)
    /// `uuid` nil: every primary service. Answered by `services`.
    case discoverServices(session: UInt32, peer: LEAddress, request: UInt32, uuid: BluetoothUUID?)
    /// Answered by `includedServices`.
    case discoverIncludedServices(session: UInt32, peer: LEAddress, request: UInt32, service: DiscoveredService)
    /// Answered by `characteristics`.
    case discoverCharacteristics(session: UInt32, peer: LEAddress, request: UInt32, service: DiscoveredService)
    /// Answered by `descriptors`.
    case discoverDescriptors(session: UInt32, peer: LEAddress, request: UInt32, characteristic: DiscoveredCharacteristic)
    /// Answered by `value`.
    case read(session: UInt32, peer: LEAddress, request: UInt32, handle: ATTHandle)
    /// Answered by `done`.
    case write(session: UInt32, peer: LEAddress, request: UInt32, handle: ATTHandle, value: [UInt8])
    case writeWithoutResponse(session: UInt32, peer: LEAddress, handle: ATTHandle, value: [UInt8])
    /// Answered by `done`; values follow as `notification`s.
    case setNotify(session: UInt32, peer: LEAddress, request: UInt32, characteristic: DiscoveredCharacteristic,
                   clientConfiguration: ATTHandle?, enabled: Bool)
    /// Answered by `rssi`.
    case readRSSI(session: UInt32, peer: LEAddress, request: UInt32)
    /// New connection parameters asked for a link, in the link layer's units (interval 1.25 ms,
    /// timeout 10 ms); fire and forget, as on a device of the process's own (version 3).
    case setConnectionParameters(session: UInt32, peer: LEAddress, intervalMin: UInt16, intervalMax: UInt16, latency: UInt16,
                                 timeout: UInt16)
    /// A PHY asked for both ways on a link (`LEPHY` raw value); fire and forget (version 3).
    case setPHY(session: UInt32, peer: LEAddress, phy: UInt8)

    // MARK: Daemon → client

    /// The version both speak, and the device's address when it is on.
    case welcome(version: UInt16, deviceAddress: LEAddress?)
    /// The daemon will not serve this client (no common version, not allowed); it closes.
    case refused(reason: String)
    /// The session's `CBManagerState` raw value, and why it is not powered on.
    case state(session: UInt32, state: UInt8, reason: String?)
    case discovered(session: UInt32, peer: LEAddress, advertisingData: [UInt8], scanResponse: [UInt8]?, isConnectable: Bool, rssi: Int8?)
    case scanFailed(session: UInt32)
    case connected(session: UInt32, peer: LEAddress, mtu: UInt16)
    case failedToConnect(session: UInt32, peer: LEAddress, reason: String)
    case disconnected(session: UInt32, peer: LEAddress, cause: DaemonDisconnectCause, isReconnecting: Bool)
    case linkMTU(session: UInt32, peer: LEAddress, mtu: UInt16)
    case linkName(session: UInt32, peer: LEAddress, name: String)
    case linkServicesChanged(session: UInt32, peer: LEAddress, range: ClosedRange<ATTHandle>)
    case linkWriteBudget(session: UInt32, peer: LEAddress, count: UInt16)
    case services(session: UInt32, request: UInt32, result: Result<[DiscoveredService], GATTClientError>)
    case includedServices(session: UInt32, request: UInt32, result: Result<[DiscoveredIncludedService], GATTClientError>)
    case characteristics(session: UInt32, request: UInt32, result: Result<[DiscoveredCharacteristic], GATTClientError>)
    case descriptors(session: UInt32, request: UInt32, result: Result<[DiscoveredDescriptor], GATTClientError>)
    case value(session: UInt32, request: UInt32, result: Result<[UInt8], GATTClientError>)
    /// A write or `setNotify` finished: `error` nil on success.
    case done(session: UInt32, request: UInt32, error: GATTClientError?)
    /// The RSSI in dBm, or why it could not be read.
    case rssi(session: UInt32, request: UInt32, rssi: Int8, error: String?)
    case notification(session: UInt32, peer: LEAddress, handle: ATTHandle, value: [UInt8])

    // MARK: Restoration and connection events

    /// Daemon → client, before the first `state` of a session opened with the restore
    /// identifier of a session whose client went: what the daemon kept for it (its peers,
    /// connected or connecting, with what was discovered on them; its scan), and how many
    /// notifications it dropped while no client held it (the oldest, past its bound). The
    /// notifications it kept follow the `state`, in order.
    case restoreState(session: UInt32, peers: [DaemonRestoredPeer], scan: DaemonRestoredScan?, droppedNotifications: UInt32)
    /// Client → daemon: report `connectionEvent`s for connections of the device (any client's)
    /// to peers advertising or having any of `services` (nil: any) and among `peripherals`
    /// (nil: any). Replaces the session's earlier registration.
    case registerConnectionEvents(session: UInt32, services: [BluetoothUUID]?, peripherals: [LEAddress]?)
    /// Daemon → client: a matching peer connected to the device, or its last connection ended.
    case connectionEvent(session: UInt32, peer: LEAddress, connected: Bool)
    /// Daemon → client, before the first `state` of a peripheral session opened with the
    /// restore identifier of a session whose client went: its services as they are published
    /// (under the keys the earlier client gave them), the advertisement it is still advertising
    /// (nil: not advertising), and the centrals connected to it with what each is subscribed to.
    case restorePeripheralState(session: UInt32, services: [DaemonRestoredLocalService], advertisement: DaemonAdvertisement?,
                                centrals: [DaemonRestoredCentral])
    // MARK: Peripheral role

    // Client → daemon: one message per `PeripheralRole` call. Keys name the client's services,
    // `central` the daemon's id of a connected central, `request` a peer's request to answer.

    /// Publishes `service` (its included services named by `includedKeys`); answered by `published`.
    case publish(session: UInt32, key: UInt32, includedKeys: [UInt32], service: GATTService)
    /// Answered by `unpublished`.
    case unpublish(session: UInt32, key: UInt32)
    /// Answered by `unpublished` for each published service.
    case unpublishAll(session: UInt32)
    /// Answered by `advertisingStarted`.
    case startAdvertising(session: UInt32, advertisement: DaemonAdvertisement)
    case stopAdvertising(session: UInt32)
    /// `latency`: 0 low, 1 medium, 2 high.
    case setLatency(session: UInt32, central: UInt32, latency: UInt8)
    /// Answers a `readRequest` or `writeRequest`: `error` nil for success (an ATT error code
    /// otherwise), with `value` for a read.
    case answer(session: UInt32, request: UInt32, error: UInt8?, value: [UInt8]?)
    /// A value for the subscribers of `handle` (`centrals` nil: all of them); each takes a slot
    /// of the client's budget, which `updatesHandedOver` gives back.
    case update(session: UInt32, handle: ATTHandle, value: [UInt8], centrals: [UInt32]?)

    // Daemon → client: one message per `PeripheralServiceEvents` event.

    case published(session: UInt32, key: UInt32, result: Result<GATTServiceHandles, DaemonPublishError>)
    case unpublished(session: UInt32, key: UInt32, error: DaemonUnpublishError?)
    /// `isOn` false when advertising did not start or was stopped while starting.
    case advertisingStarted(session: UInt32, error: DaemonAdvertisingError?, isOn: Bool)
    case advertisingStopped(session: UInt32)
    case centralConnected(session: UInt32, central: UInt32, peer: LEAddress, mtu: UInt16)
    case centralMTU(session: UInt32, central: UInt32, mtu: UInt16)
    /// The requests the central left unanswered are dropped.
    case centralDisconnected(session: UInt32, central: UInt32, abandonedRequests: [UInt32])
    case readRequest(session: UInt32, request: UInt32, central: UInt32, handle: ATTHandle, offset: UInt16)
    /// `request` nil: a Write Command (answered already).
    case writeRequest(session: UInt32, request: UInt32?, writes: [DaemonWrite])
    case subscribed(session: UInt32, central: UInt32, handle: ATTHandle)
    case unsubscribed(session: UInt32, central: UInt32, handle: ATTHandle)
    /// This many `update`s left the daemon (sent, or dropped): their slots are free again.
    case updatesHandedOver(session: UInt32, count: UInt32)

    // MARK: Channels and pairing (version 2)

    // Client → daemon. `channel` (u32) is the daemon's id of one open channel (unique in the
    // daemon); `prompt` (u32) one pairing question.

    /// Opens a credit-based channel to `psm` on the link to `peer`; answered by `channelOpened`.
    case openChannel(session: UInt32, peer: LEAddress, request: UInt32, psm: UInt16)
    /// Publishes a channel server on `psm` (nil: a free dynamic one); answered by `channelPublished`.
    case publishChannel(session: UInt32, request: UInt32, psm: UInt16?, requiresEncryption: Bool)
    /// Answered by `channelUnpublished`.
    case unpublishChannel(session: UInt32, request: UInt32, psm: UInt16)
    /// Bytes to send on the channel, in order. The client keeps at most
    /// `DaemonFrame.channelWindow` bytes written that `channelSent` has not counted.
    case channelWrite(session: UInt32, channel: UInt32, bytes: [UInt8])
    /// The client took this many bytes of `channelData` (the daemon's window has room again).
    case channelConsumed(session: UInt32, channel: UInt32, count: UInt32)
    /// The app's stream is full (true) or has room again: the daemon withholds the peer's
    /// credits meanwhile.
    case channelPause(session: UInt32, channel: UInt32, paused: Bool)
    /// Disconnects the channel; `channelClosed` follows.
    case channelClose(session: UInt32, channel: UInt32)
    /// The session's pairing agent: its IO capability (Vol 3 Part H §2.3.2), or nil for none
    /// (the daemon's own agent answers). With one, prompts on the session's links come as
    /// `pairingPrompt`.
    case setPairingAgent(session: UInt32, ioCapability: UInt8?)
    /// The answer to `pairingPrompt` `prompt`.
    case pairingReply(session: UInt32, prompt: UInt32, reply: DaemonPairingReply)

    // Daemon → client.

    case channelOpened(session: UInt32, request: UInt32, result: Result<UInt32, DaemonChannelOpenError>)
    case channelPublished(session: UInt32, request: UInt32, result: Result<UInt16, DaemonChannelPublishError>)
    /// `wasPublished` false: the session had not published it.
    case channelUnpublished(session: UInt32, request: UInt32, wasPublished: Bool)
    /// A central opened channel `channel` to a PSM the session published.
    case channelIncoming(session: UInt32, channel: UInt32, central: UInt32, peer: LEAddress, psm: UInt16)
    /// One SDU the peer sent. The daemon keeps at most `DaemonFrame.channelWindow` bytes
    /// of it not counted by `channelConsumed`: past it, it withholds the peer's credits.
    case channelData(session: UInt32, channel: UInt32, bytes: [UInt8])
    /// L2CAP took this many bytes of `channelWrite`.
    case channelSent(session: UInt32, channel: UInt32, count: UInt32)
    case channelClosed(session: UInt32, channel: UInt32, reason: DaemonChannelCloseReason)
    /// A question of the pairing on the link to `peer`, for the session's agent; answered by
    /// `pairingReply`, or the pairing fails on its own (SMP's 30 s timeout).
    case pairingPrompt(session: UInt32, prompt: UInt32, peer: LEAddress, question: DaemonPairingPrompt)

    /// The message's type on the wire. Client → daemon below 0x8000, daemon → client above.
    public enum Kind: UInt16, Sendable, CaseIterable {
        case hello = 0x0001
        case openCentral = 0x0002
        case openPeripheral = 0x0003
        case close = 0x0004
        case startScan = 0x0010
        case stopScan = 0x0011
        case connect = 0x0012
        case cancel = 0x0013
        case discoverServices = 0x0020
        case discoverIncludedServices = 0x0021
        case discoverCharacteristics = 0x0022
        case discoverDescriptors = 0x0023
        case read = 0x0024
        case write = 0x0025
        case writeWithoutResponse = 0x0026
        case setNotify = 0x0027
        case readRSSI = 0x0028
        case setConnectionParameters = 0x0029
        case setPHY = 0x002A

        case welcome = 0x8001
        case refused = 0x8002
        case state = 0x8003
        case discovered = 0x8010
        case scanFailed = 0x8011
        case connected = 0x8012
        case failedToConnect = 0x8013
        case disconnected = 0x8014
        case linkMTU = 0x8015
        case linkName = 0x8016
        case linkServicesChanged = 0x8017
        case linkWriteBudget = 0x8018
        case services = 0x8020
        case includedServices = 0x8021
        case characteristics = 0x8022
        case descriptors = 0x8023
        case value = 0x8024
        case done = 0x8025
        case rssi = 0x8026
        case notification = 0x8027

        // MARK: Restoration and connection events
        case registerConnectionEvents = 0x0040
        case restoreState = 0x8040
        case connectionEvent = 0x8041
        case restorePeripheralState = 0x8042
        // MARK: Peripheral role
        case publish = 0x0030
        case unpublish = 0x0031
        case unpublishAll = 0x0032
        case startAdvertising = 0x0033
        case stopAdvertising = 0x0034
        case setLatency = 0x0035
        case answer = 0x0036
        case update = 0x0037
        case published = 0x8030
        case unpublished = 0x8031
        case advertisingStarted = 0x8032
        case advertisingStopped = 0x8033
        case centralConnected = 0x8034
        case centralMTU = 0x8035
        case centralDisconnected = 0x8036
        case readRequest = 0x8037
        case writeRequest = 0x8038
        case subscribed = 0x8039
        case unsubscribed = 0x803A
        case updatesHandedOver = 0x803B
        // MARK: Channels and pairing (version 2)
        case openChannel = 0x0050
        case publishChannel = 0x0051
        case unpublishChannel = 0x0052
        case channelWrite = 0x0053
        case channelConsumed = 0x0054
        case channelPause = 0x0055
        case channelClose = 0x0056
        case setPairingAgent = 0x0058
        case pairingReply = 0x0059
        case channelOpened = 0x8050
        case channelPublished = 0x8051
        case channelUnpublished = 0x8052
        case channelIncoming = 0x8053
        case channelData = 0x8054
        case channelSent = 0x8055
        case channelClosed = 0x8056
        case pairingPrompt = 0x8058

        /// Whether clients send it (else the daemon does).
        public var isFromClient: Bool { rawValue < 0x8000 }

        /// The first protocol version that has it.
        public var version: UInt16 {
            switch self {
            case .setConnectionParameters, .setPHY: 3
            default: (rawValue & 0x7FFF) >= 0x0050 ? 2 : 1
            }
        }
    }

    public var kind: Kind {
        switch self {
        case .hello: .hello
        case .openCentral: .openCentral
        case .openPeripheral: .openPeripheral
        case .close: .close
        case .startScan: .startScan
        case .stopScan: .stopScan
        case .connect: .connect
        case .cancel: .cancel
        case .discoverServices: .discoverServices
        case .discoverIncludedServices: .discoverIncludedServices
        case .discoverCharacteristics: .discoverCharacteristics
        case .discoverDescriptors: .discoverDescriptors
        case .read: .read
        case .write: .write
        case .writeWithoutResponse: .writeWithoutResponse
        case .setNotify: .setNotify
        case .readRSSI: .readRSSI
        case .setConnectionParameters: .setConnectionParameters
        case .setPHY: .setPHY
        case .welcome: .welcome
        case .refused: .refused
        case .state: .state
        case .discovered: .discovered
        case .scanFailed: .scanFailed
        case .connected: .connected
        case .failedToConnect: .failedToConnect
        case .disconnected: .disconnected
        case .linkMTU: .linkMTU
        case .linkName: .linkName
        case .linkServicesChanged: .linkServicesChanged
        case .linkWriteBudget: .linkWriteBudget
        case .services: .services
        case .includedServices: .includedServices
        case .characteristics: .characteristics
        case .descriptors: .descriptors
        case .value: .value
        case .done: .done
        case .rssi: .rssi
        case .notification: .notification
        // MARK: Restoration and connection events
        case .restoreState: .restoreState
        case .registerConnectionEvents: .registerConnectionEvents
        case .connectionEvent: .connectionEvent
        case .restorePeripheralState: .restorePeripheralState
        // MARK: Peripheral role
        case .publish: .publish
        case .unpublish: .unpublish
        case .unpublishAll: .unpublishAll
        case .startAdvertising: .startAdvertising
        case .stopAdvertising: .stopAdvertising
        case .setLatency: .setLatency
        case .answer: .answer
        case .update: .update
        case .published: .published
        case .unpublished: .unpublished
        case .advertisingStarted: .advertisingStarted
        case .advertisingStopped: .advertisingStopped
        case .centralConnected: .centralConnected
        case .centralMTU: .centralMTU
        case .centralDisconnected: .centralDisconnected
        case .readRequest: .readRequest
        case .writeRequest: .writeRequest
        case .subscribed: .subscribed
        case .unsubscribed: .unsubscribed
        case .updatesHandedOver: .updatesHandedOver
        case .openChannel: .openChannel
        case .publishChannel: .publishChannel
        case .unpublishChannel: .unpublishChannel
        case .channelWrite: .channelWrite
        case .channelConsumed: .channelConsumed
        case .channelPause: .channelPause
        case .channelClose: .channelClose
        case .setPairingAgent: .setPairingAgent
        case .pairingReply: .pairingReply
        case .channelOpened: .channelOpened
        case .channelPublished: .channelPublished
        case .channelUnpublished: .channelUnpublished
        case .channelIncoming: .channelIncoming
        case .channelData: .channelData
        case .channelSent: .channelSent
        case .channelClosed: .channelClosed
        case .pairingPrompt: .pairingPrompt
        }
    }

    // MARK: - Encoder

    /// The message's type and fields (a frame's payload: `DaemonFrame` puts the length before it).
    public func encode(into w: inout ByteWriter) {
        w.u16(kind.rawValue)
        switch self {
        case .hello(let version, let minimumVersion, let name): w.u16(version); w.u16(minimumVersion); w.string(name)
        case .openCentral(let session, let identifier), .openPeripheral(let session, let identifier):
            w.u32(session); w.optional(identifier) { $0.string($1) }
        case .close(let session), .stopScan(let session), .scanFailed(let session): w.u32(session)
        case .startScan(let session, let services, let solicited, let allowDuplicates):
            w.u32(session)
            w.optional(services) { $0.array($1) { $0.uuid($1) } }
            w.array(solicited) { $0.uuid($1) }
            w.bool(allowDuplicates)
        case .connect(let session, let peer, let flag), .cancel(let session, let peer, let flag):
            w.u32(session); w.leAddress(peer); w.bool(flag)
        case .discoverServices(let session, let peer, let request, let uuid):
            w.u32(session); w.leAddress(peer); w.u32(request); w.optional(uuid) { $0.uuid($1) }
        case .discoverIncludedServices(let session, let peer, let request, let service),
             .discoverCharacteristics(let session, let peer, let request, let service):
            w.u32(session); w.leAddress(peer); w.u32(request); w.service(service)
        case .discoverDescriptors(let session, let peer, let request, let characteristic):
            w.u32(session); w.leAddress(peer); w.u32(request); w.characteristic(characteristic)
        case .read(let session, let peer, let request, let handle):
            w.u32(session); w.leAddress(peer); w.u32(request); w.handle(handle)
        case .write(let session, let peer, let request, let handle, let value):
            w.u32(session); w.leAddress(peer); w.u32(request); w.handle(handle); w.blob(value)
        case .writeWithoutResponse(let session, let peer, let handle, let value):
            w.u32(session); w.leAddress(peer); w.handle(handle); w.blob(value)
        case .setNotify(let session, let peer, let request, let characteristic, let cccd, let enabled):
            w.u32(session); w.leAddress(peer); w.u32(request); w.characteristic(characteristic)
            w.optional(cccd) { $0.handle($1) }
            w.bool(enabled)
        case .readRSSI(let session, let peer, let request): w.u32(session); w.leAddress(peer); w.u32(request)
        case .setConnectionParameters(let session, let peer, let intervalMin, let intervalMax, let latency, let timeout):
            w.u32(session); w.leAddress(peer); w.u16(intervalMin); w.u16(intervalMax); w.u16(latency); w.u16(timeout)
        case .setPHY(let session, let peer, let phy): w.u32(session); w.leAddress(peer); w.u8(phy)
        case .welcome(let version, let address): w.u16(version); w.optional(address) { $0.leAddress($1) }
        case .refused(let reason): w.string(reason)
        case .state(let session, let state, let reason): w.u32(session); w.u8(state); w.optional(reason) { $0.string($1) }
        case .discovered(let session, let peer, let data, let scanResponse, let isConnectable, let rssi):
            w.u32(session); w.leAddress(peer); w.blob(data); w.optional(scanResponse) { $0.blob($1) }; w.bool(isConnectable)
            w.optional(rssi) { $0.i8($1) }
        case .connected(let session, let peer, let mtu), .linkMTU(let session, let peer, let mtu),
             .linkWriteBudget(let session, let peer, let mtu):
            w.u32(session); w.leAddress(peer); w.u16(mtu)
        case .failedToConnect(let session, let peer, let text), .linkName(let session, let peer, let text):
            w.u32(session); w.leAddress(peer); w.string(text)
        case .disconnected(let session, let peer, let cause, let isReconnecting):
            w.u32(session); w.leAddress(peer)
            switch cause {
            case .requested(let notify): w.u8(notify ? 1 : 0); w.u8(0)
            case .attTimeout: w.u8(2); w.u8(0)
            case .link(let status): w.u8(3); w.u8(status.rawValue)
            }
            w.bool(isReconnecting)
        case .linkServicesChanged(let session, let peer, let range): w.u32(session); w.leAddress(peer); w.handles(range)
        case .services(let session, let request, let result):
            w.u32(session); w.u32(request); w.result(result) { $0.array($1) { $0.service($1) } }
        case .includedServices(let session, let request, let result):
            w.u32(session); w.u32(request); w.result(result) { $0.array($1) { $0.includedService($1) } }
        case .characteristics(let session, let request, let result):
            w.u32(session); w.u32(request); w.result(result) { $0.array($1) { $0.characteristic($1) } }
        case .descriptors(let session, let request, let result):
            w.u32(session); w.u32(request); w.result(result) { $0.array($1) { $0.descriptor($1) } }
        case .value(let session, let request, let result): w.u32(session); w.u32(request); w.result(result) { $0.blob($1) }
        case .done(let session, let request, let error): w.u32(session); w.u32(request); w.optional(error) { $0.gattError($1) }
        case .rssi(let session, let request, let rssi, let error):
            w.u32(session); w.u32(request); w.i8(rssi); w.optional(error) { $0.string($1) }
        case .notification(let session, let peer, let handle, let value):
            w.u32(session); w.leAddress(peer); w.handle(handle); w.blob(value)
        // MARK: Restoration and connection events
        case .restoreState(let session, let peers, let scan, let dropped):
            w.u32(session); w.array(peers) { $0.restoredPeer($1) }; w.optional(scan) { $0.restoredScan($1) }; w.u32(dropped)
        case .registerConnectionEvents(let session, let services, let peripherals):
            w.u32(session); w.optional(services) { $0.array($1) { $0.uuid($1) } }; w.optional(peripherals) { $0.array($1) { $0.leAddress($1) } }
        case .connectionEvent(let session, let peer, let connected): w.u32(session); w.leAddress(peer); w.bool(connected)
        case .restorePeripheralState(let session, let services, let advertisement, let centrals):
            w.u32(session); w.array(services) { $0.restoredLocalService($1) }; w.optional(advertisement) { $0.advertisement($1) }
            w.array(centrals) { $0.restoredCentral($1) }
        // MARK: Peripheral role
        case .publish(let session, let key, let includedKeys, let service):
            w.u32(session); w.u32(key); w.array(includedKeys) { $0.u32($1) }; w.gattService(service)
        case .unpublish(let session, let key): w.u32(session); w.u32(key)
        case .unpublishAll(let session), .stopAdvertising(let session), .advertisingStopped(let session): w.u32(session)
        case .startAdvertising(let session, let advertisement): w.u32(session); w.advertisement(advertisement)
        case .setLatency(let session, let central, let latency): w.u32(session); w.u32(central); w.u8(latency)
        case .answer(let session, let request, let error, let value):
            w.u32(session); w.u32(request); w.optional(error) { $0.u8($1) }; w.optional(value) { $0.blob($1) }
        case .update(let session, let handle, let value, let centrals):
            w.u32(session); w.handle(handle); w.blob(value); w.optional(centrals) { $0.array($1) { $0.u32($1) } }
        case .published(let session, let key, let result):
            w.u32(session); w.u32(key)
            switch result {
            case .success(let handles): w.u8(0); w.serviceHandles(handles)
            case .failure(let error): w.u8(1); w.publishError(error)
            }
        case .unpublished(let session, let key, let error):
            w.u32(session); w.u32(key); w.optional(error) { $0.unpublishError($1) }
        case .advertisingStarted(let session, let error, let isOn):
            w.u32(session); w.optional(error) { $0.advertisingError($1) }; w.bool(isOn)
        case .centralConnected(let session, let central, let peer, let mtu):
            w.u32(session); w.u32(central); w.leAddress(peer); w.u16(mtu)
        case .centralMTU(let session, let central, let mtu): w.u32(session); w.u32(central); w.u16(mtu)
        case .centralDisconnected(let session, let central, let abandoned):
            w.u32(session); w.u32(central); w.array(abandoned) { $0.u32($1) }
        case .readRequest(let session, let request, let central, let handle, let offset):
            w.u32(session); w.u32(request); w.u32(central); w.handle(handle); w.u16(offset)
        case .writeRequest(let session, let request, let writes):
            w.u32(session); w.optional(request) { $0.u32($1) }; w.array(writes) { $0.write($1) }
        case .subscribed(let session, let central, let handle), .unsubscribed(let session, let central, let handle):
            w.u32(session); w.u32(central); w.handle(handle)
        case .updatesHandedOver(let session, let count): w.u32(session); w.u32(count)
        // MARK: Channels and pairing (version 2)
        case .openChannel(let session, let peer, let request, let psm): w.u32(session); w.leAddress(peer); w.u32(request); w.u16(psm)
        case .publishChannel(let session, let request, let psm, let requiresEncryption):
            w.u32(session); w.u32(request); w.optional(psm) { $0.u16($1) }; w.bool(requiresEncryption)
        case .unpublishChannel(let session, let request, let psm): w.u32(session); w.u32(request); w.u16(psm)
        case .channelWrite(let session, let channel, let bytes), .channelData(let session, let channel, let bytes):
            w.u32(session); w.u32(channel); w.blob(bytes)
        case .channelConsumed(let session, let channel, let count), .channelSent(let session, let channel, let count):
            w.u32(session); w.u32(channel); w.u32(count)
        case .channelPause(let session, let channel, let paused): w.u32(session); w.u32(channel); w.bool(paused)
        case .channelClose(let session, let channel): w.u32(session); w.u32(channel)
        case .setPairingAgent(let session, let capability): w.u32(session); w.optional(capability) { $0.u8($1) }
        case .pairingReply(let session, let prompt, let reply): w.u32(session); w.u32(prompt); w.pairingReply(reply)
        case .channelOpened(let session, let request, let result):
            w.u32(session); w.u32(request)
            switch result {
            case .success(let channel): w.u8(0); w.u32(channel)
            case .failure(let error): w.u8(1); w.channelOpenError(error)
            }
        case .channelPublished(let session, let request, let result):
            w.u32(session); w.u32(request)
            switch result {
            case .success(let psm): w.u8(0); w.u16(psm)
            case .failure(let error): w.u8(1); w.channelPublishError(error)
            }
        case .channelUnpublished(let session, let request, let wasPublished): w.u32(session); w.u32(request); w.bool(wasPublished)
        case .channelIncoming(let session, let channel, let central, let peer, let psm):
            w.u32(session); w.u32(channel); w.u32(central); w.leAddress(peer); w.u16(psm)
        case .channelClosed(let session, let channel, let reason): w.u32(session); w.u32(channel); w.channelCloseReason(reason)
        case .pairingPrompt(let session, let prompt, let peer, let question):
            w.u32(session); w.u32(prompt); w.leAddress(peer); w.pairingPrompt(question)
        }
    }

    /// The message's type and fields, as `decode(_:)` takes them.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 32)
        encode(into: &w)
        return w.bytes
    }

    // MARK: - Decoder

    /// Decodes a frame's payload (type, then fields, and nothing after them). Throws for an
    /// unknown type, a field that does not decode, or bytes left over: a peer that sends such
    /// a payload speaks another protocol, and the connection to it ends.
    public static func decode(_ payload: ArraySlice<UInt8>) throws(DaemonProtocolError) -> DaemonMessage {
        var r = ByteReader(payload, context: "daemon message")
        let rawKind: UInt16
        do { rawKind = try r.u16() } catch { throw .malformed(kind: nil, "\(error)") }
        guard let kind = Kind(rawValue: rawKind) else { throw .unknownKind(rawKind) }
        let message: DaemonMessage
        do {
            message = try fields(of: kind, &r)
        } catch {
            throw .malformed(kind: kind, "\(error)")
        }
        guard r.isAtEnd else { throw .trailingBytes(kind: kind, count: r.remaining) }
        return message
    }

    public static func decode(_ payload: [UInt8]) throws(DaemonProtocolError) -> DaemonMessage {
        try decode(payload[...])
    }

    private static func fields(of kind: Kind, _ r: inout ByteReader) throws -> DaemonMessage {
        switch kind {
        case .hello:
            let version = try r.u16(), minimum = try r.u16(), name = try r.string()
            return .hello(version: version, minimumVersion: minimum, name: name)
        case .openCentral:
            let session = try r.u32(), identifier = try r.optional { try $0.string() }
            return .openCentral(session: session, restoreIdentifier: identifier)
        case .openPeripheral:
            let session = try r.u32(), identifier = try r.optional { try $0.string() }
            return .openPeripheral(session: session, restoreIdentifier: identifier)
        case .close: return .close(session: try r.u32())
        case .startScan:
            let session = try r.u32()
            let services = try r.optional { try $0.array { try $0.uuid() } }
            let solicited = try r.array { try $0.uuid() }
            return .startScan(session: session, services: services, solicited: solicited, allowDuplicates: try r.bool())
        case .stopScan: return .stopScan(session: try r.u32())
        case .connect:
            let session = try r.u32(), peer = try r.leAddress(), flag = try r.bool()
            return .connect(session: session, peer: peer, autoReconnect: flag)
        case .cancel:
            let session = try r.u32(), peer = try r.leAddress(), flag = try r.bool()
            return .cancel(session: session, peer: peer, notify: flag)
        case .discoverServices:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), uuid = try r.optional { try $0.uuid() }
            return .discoverServices(session: session, peer: peer, request: request, uuid: uuid)
        case .discoverIncludedServices:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), service = try r.service()
            return .discoverIncludedServices(session: session, peer: peer, request: request, service: service)
        case .discoverCharacteristics:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), service = try r.service()
            return .discoverCharacteristics(session: session, peer: peer, request: request, service: service)
        case .discoverDescriptors:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), characteristic = try r.characteristic()
            return .discoverDescriptors(session: session, peer: peer, request: request, characteristic: characteristic)
        case .read:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), handle = try r.handle()
            return .read(session: session, peer: peer, request: request, handle: handle)
        case .write:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), handle = try r.handle(), value = try r.blob()
            return .write(session: session, peer: peer, request: request, handle: handle, value: value)
        case .writeWithoutResponse:
            let session = try r.u32(), peer = try r.leAddress(), handle = try r.handle(), value = try r.blob()
            return .writeWithoutResponse(session: session, peer: peer, handle: handle, value: value)
        case .setNotify:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), characteristic = try r.characteristic()
            let cccd = try r.optional { try $0.handle() }, enabled = try r.bool()
            return .setNotify(session: session, peer: peer, request: request, characteristic: characteristic,
                              clientConfiguration: cccd, enabled: enabled)
        case .readRSSI:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32()
            return .readRSSI(session: session, peer: peer, request: request)
        case .setConnectionParameters:
            let session = try r.u32(), peer = try r.leAddress()
            let intervalMin = try r.u16(), intervalMax = try r.u16(), latency = try r.u16(), timeout = try r.u16()
            return .setConnectionParameters(session: session, peer: peer, intervalMin: intervalMin, intervalMax: intervalMax,
                                            latency: latency, timeout: timeout)
        case .setPHY:
            let session = try r.u32(), peer = try r.leAddress(), phy = try r.u8()
            guard (1...3).contains(phy) else { throw DecodeError("\(r.context): PHY \(phy) (1 to 3)") }
            return .setPHY(session: session, peer: peer, phy: phy)
        case .welcome:
            let version = try r.u16(), address = try r.optional { try $0.leAddress() }
            return .welcome(version: version, deviceAddress: address)
        case .refused: return .refused(reason: try r.string())
        case .state:
            let session = try r.u32(), state = try r.u8(), reason = try r.optional { try $0.string() }
            return .state(session: session, state: state, reason: reason)
        case .discovered:
            let session = try r.u32(), peer = try r.leAddress(), data = try r.blob()
            let scanResponse = try r.optional { try $0.blob() }, connectable = try r.bool()
            let rssi = try r.optional { try $0.i8() }
            return .discovered(session: session, peer: peer, advertisingData: data, scanResponse: scanResponse,
                               isConnectable: connectable, rssi: rssi)
        case .scanFailed: return .scanFailed(session: try r.u32())
        case .connected:
            let session = try r.u32(), peer = try r.leAddress(), mtu = try r.u16()
            return .connected(session: session, peer: peer, mtu: mtu)
        case .failedToConnect:
            let session = try r.u32(), peer = try r.leAddress(), reason = try r.string()
            return .failedToConnect(session: session, peer: peer, reason: reason)
        case .disconnected:
            let session = try r.u32(), peer = try r.leAddress(), rawCause = try r.u8(), status = try r.u8()
            let cause: DaemonDisconnectCause
            switch rawCause {
            case 0, 1: cause = .requested(notify: rawCause == 1)
            case 2: cause = .attTimeout
            case 3: cause = .link(HCIStatus(status))
            default: throw DecodeError("\(r.context): disconnection cause \(rawCause)")
            }
            return .disconnected(session: session, peer: peer, cause: cause, isReconnecting: try r.bool())
        case .linkMTU:
            let session = try r.u32(), peer = try r.leAddress(), mtu = try r.u16()
            return .linkMTU(session: session, peer: peer, mtu: mtu)
        case .linkName:
            let session = try r.u32(), peer = try r.leAddress(), name = try r.string()
            return .linkName(session: session, peer: peer, name: name)
        case .linkServicesChanged:
            let session = try r.u32(), peer = try r.leAddress(), range = try r.handles()
            return .linkServicesChanged(session: session, peer: peer, range: range)
        case .linkWriteBudget:
            let session = try r.u32(), peer = try r.leAddress(), count = try r.u16()
            return .linkWriteBudget(session: session, peer: peer, count: count)
        case .services:
            let session = try r.u32(), request = try r.u32(), result = try r.result { try $0.array { try $0.service() } }
            return .services(session: session, request: request, result: result)
        case .includedServices:
            let session = try r.u32(), request = try r.u32(), result = try r.result { try $0.array { try $0.includedService() } }
            return .includedServices(session: session, request: request, result: result)
        case .characteristics:
            let session = try r.u32(), request = try r.u32(), result = try r.result { try $0.array { try $0.characteristic() } }
            return .characteristics(session: session, request: request, result: result)
        case .descriptors:
            let session = try r.u32(), request = try r.u32(), result = try r.result { try $0.array { try $0.descriptor() } }
            return .descriptors(session: session, request: request, result: result)
        case .value:
            let session = try r.u32(), request = try r.u32(), result = try r.result { try $0.blob() }
            return .value(session: session, request: request, result: result)
        case .done:
            let session = try r.u32(), request = try r.u32(), error = try r.optional { try $0.gattError() }
            return .done(session: session, request: request, error: error)
        case .rssi:
            let session = try r.u32(), request = try r.u32(), rssi = try r.i8(), error = try r.optional { try $0.string() }
            return .rssi(session: session, request: request, rssi: rssi, error: error)
        case .notification:
            let session = try r.u32(), peer = try r.leAddress(), handle = try r.handle(), value = try r.blob()
            return .notification(session: session, peer: peer, handle: handle, value: value)
        // MARK: Restoration and connection events
        case .restoreState:
            let session = try r.u32(), peers = try r.array { try $0.restoredPeer() }, scan = try r.optional { try $0.restoredScan() }
            return .restoreState(session: session, peers: peers, scan: scan, droppedNotifications: try r.u32())
        case .registerConnectionEvents:
            let session = try r.u32(), services = try r.optional { try $0.array { try $0.uuid() } }
            let peripherals = try r.optional { try $0.array { try $0.leAddress() } }
            return .registerConnectionEvents(session: session, services: services, peripherals: peripherals)
        case .connectionEvent:
            let session = try r.u32(), peer = try r.leAddress(), connected = try r.bool()
            return .connectionEvent(session: session, peer: peer, connected: connected)
        case .restorePeripheralState:
            let session = try r.u32(), services = try r.array { try $0.restoredLocalService() }
            let advertisement = try r.optional { try $0.advertisement() }, centrals = try r.array { try $0.restoredCentral() }
            return .restorePeripheralState(session: session, services: services, advertisement: advertisement, centrals: centrals)
        // MARK: Peripheral role
        case .publish:
            let session = try r.u32(), key = try r.u32(), included = try r.array { try $0.u32() }, service = try r.gattService()
            return .publish(session: session, key: key, includedKeys: included, service: service)
        case .unpublish:
            let session = try r.u32(), key = try r.u32()
            return .unpublish(session: session, key: key)
        case .unpublishAll: return .unpublishAll(session: try r.u32())
        case .startAdvertising:
            let session = try r.u32(), advertisement = try r.advertisement()
            return .startAdvertising(session: session, advertisement: advertisement)
        case .stopAdvertising: return .stopAdvertising(session: try r.u32())
        case .setLatency:
            let session = try r.u32(), central = try r.u32(), latency = try r.u8()
            return .setLatency(session: session, central: central, latency: latency)
        case .answer:
            let session = try r.u32(), request = try r.u32(), error = try r.optional { try $0.u8() }
            let value = try r.optional { try $0.blob() }
            return .answer(session: session, request: request, error: error, value: value)
        case .update:
            let session = try r.u32(), handle = try r.handle(), value = try r.blob()
            let centrals = try r.optional { try $0.array { try $0.u32() } }
            return .update(session: session, handle: handle, value: value, centrals: centrals)
        case .published:
            let session = try r.u32(), key = try r.u32()
            let result: Result<GATTServiceHandles, DaemonPublishError>
            switch try r.u8() {
            case 0: result = .success(try r.serviceHandles())
            case 1: result = .failure(try r.publishError())
            case let other: throw DecodeError("\(r.context): result \(other)")
            }
            return .published(session: session, key: key, result: result)
        case .unpublished:
            let session = try r.u32(), key = try r.u32(), error = try r.optional { try $0.unpublishError() }
            return .unpublished(session: session, key: key, error: error)
        case .advertisingStarted:
            let session = try r.u32(), error = try r.optional { try $0.advertisingError() }, isOn = try r.bool()
            return .advertisingStarted(session: session, error: error, isOn: isOn)
        case .advertisingStopped: return .advertisingStopped(session: try r.u32())
        case .centralConnected:
            let session = try r.u32(), central = try r.u32(), peer = try r.leAddress(), mtu = try r.u16()
            return .centralConnected(session: session, central: central, peer: peer, mtu: mtu)
        case .centralMTU:
            let session = try r.u32(), central = try r.u32(), mtu = try r.u16()
            return .centralMTU(session: session, central: central, mtu: mtu)
        case .centralDisconnected:
            let session = try r.u32(), central = try r.u32(), abandoned = try r.array { try $0.u32() }
            return .centralDisconnected(session: session, central: central, abandonedRequests: abandoned)
        case .readRequest:
            let session = try r.u32(), request = try r.u32(), central = try r.u32(), handle = try r.handle(), offset = try r.u16()
            return .readRequest(session: session, request: request, central: central, handle: handle, offset: offset)
        case .writeRequest:
            let session = try r.u32(), request = try r.optional { try $0.u32() }, writes = try r.array { try $0.write() }
            return .writeRequest(session: session, request: request, writes: writes)
        case .subscribed:
            let session = try r.u32(), central = try r.u32(), handle = try r.handle()
            return .subscribed(session: session, central: central, handle: handle)
        case .unsubscribed:
            let session = try r.u32(), central = try r.u32(), handle = try r.handle()
            return .unsubscribed(session: session, central: central, handle: handle)
        case .updatesHandedOver:
            let session = try r.u32(), count = try r.u32()
            return .updatesHandedOver(session: session, count: count)
        // MARK: Channels and pairing (version 2)
        case .openChannel:
            let session = try r.u32(), peer = try r.leAddress(), request = try r.u32(), psm = try r.u16()
            return .openChannel(session: session, peer: peer, request: request, psm: psm)
        case .publishChannel:
            let session = try r.u32(), request = try r.u32(), psm = try r.optional { try $0.u16() }, encryption = try r.bool()
            return .publishChannel(session: session, request: request, psm: psm, requiresEncryption: encryption)
        case .unpublishChannel:
            let session = try r.u32(), request = try r.u32(), psm = try r.u16()
            return .unpublishChannel(session: session, request: request, psm: psm)
        case .channelWrite:
            let session = try r.u32(), channel = try r.u32(), bytes = try r.blob()
            return .channelWrite(session: session, channel: channel, bytes: bytes)
        case .channelConsumed:
            let session = try r.u32(), channel = try r.u32(), count = try r.u32()
            return .channelConsumed(session: session, channel: channel, count: count)
        case .channelPause:
            let session = try r.u32(), channel = try r.u32(), paused = try r.bool()
            return .channelPause(session: session, channel: channel, paused: paused)
        case .channelClose:
            let session = try r.u32(), channel = try r.u32()
            return .channelClose(session: session, channel: channel)
        case .setPairingAgent:
            let session = try r.u32(), capability = try r.optional { try $0.u8() }
            if let capability, capability > 4 { throw DecodeError("\(r.context): IO capability \(capability)") }
            return .setPairingAgent(session: session, ioCapability: capability)
        case .pairingReply:
            let session = try r.u32(), prompt = try r.u32(), reply = try r.pairingReply()
            return .pairingReply(session: session, prompt: prompt, reply: reply)
        case .channelOpened:
            let session = try r.u32(), request = try r.u32()
            let result: Result<UInt32, DaemonChannelOpenError>
            switch try r.u8() {
            case 0: result = .success(try r.u32())
            case 1: result = .failure(try r.channelOpenError())
            case let other: throw DecodeError("\(r.context): result \(other)")
            }
            return .channelOpened(session: session, request: request, result: result)
        case .channelPublished:
            let session = try r.u32(), request = try r.u32()
            let result: Result<UInt16, DaemonChannelPublishError>
            switch try r.u8() {
            case 0: result = .success(try r.u16())
            case 1: result = .failure(try r.channelPublishError())
            case let other: throw DecodeError("\(r.context): result \(other)")
            }
            return .channelPublished(session: session, request: request, result: result)
        case .channelUnpublished:
            let session = try r.u32(), request = try r.u32(), wasPublished = try r.bool()
            return .channelUnpublished(session: session, request: request, wasPublished: wasPublished)
        case .channelIncoming:
            let session = try r.u32(), channel = try r.u32(), central = try r.u32(), peer = try r.leAddress(), psm = try r.u16()
            return .channelIncoming(session: session, channel: channel, central: central, peer: peer, psm: psm)
        case .channelData:
            let session = try r.u32(), channel = try r.u32(), bytes = try r.blob()
            return .channelData(session: session, channel: channel, bytes: bytes)
        case .channelSent:
            let session = try r.u32(), channel = try r.u32(), count = try r.u32()
            return .channelSent(session: session, channel: channel, count: count)
        case .channelClosed:
            let session = try r.u32(), channel = try r.u32(), reason = try r.channelCloseReason()
            return .channelClosed(session: session, channel: channel, reason: reason)
        case .pairingPrompt:
            let session = try r.u32(), prompt = try r.u32(), peer = try r.leAddress(), question = try r.pairingPrompt()
            return .pairingPrompt(session: session, prompt: prompt, peer: peer, question: question)
        }
    }
}
