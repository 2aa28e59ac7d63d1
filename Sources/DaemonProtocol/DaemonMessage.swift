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

/// One message between a client and `corebluetoothd`, version 1 of the protocol
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
        case registerConnectionEvents = 0x0030
        case restoreState = 0x8030
        case connectionEvent = 0x8031

        /// Whether clients send it (else the daemon does).
        public var isFromClient: Bool { rawValue < 0x8000 }
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
        r.context = "daemon message \(kind)"
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
        }
    }
}
