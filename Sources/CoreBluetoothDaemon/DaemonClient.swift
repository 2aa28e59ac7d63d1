import ATT
import AssignedNumbers
import DaemonProtocol
import GAP
import GATT
import HCI
import HCIDriver
import HCITransport
import HostDevice
import RoleServices

/// Why the daemon stops serving a client: what it sent is not the protocol, or not allowed.
public struct DaemonClientViolation: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// One client process of `corebluetoothd`, on the device's loop: the handshake, then one role
/// service per session (a manager of the client), each the host device's client as a manager's
/// is in a process. Messages come in through ``receive(_:)``; what the roles say goes out
/// through `send`, as values (docs/daemon.md). A message that breaks the protocol throws: the
/// owner drops the client (``close()``), and its sessions leave the device with it, the other
/// clients untouched.
///
/// Loop-confined (the device's loop).
public final class DaemonClient: @unchecked Sendable {
    /// A name for logs: the client's `hello` name, once it said it.
    public private(set) var name: String
    public private(set) var isClosed = false
    private let device: HostDevice
    private let send: (DaemonMessage) -> Void
    private var version: UInt16?
    private var centrals: [UInt32: CentralSession] = [:]
    private var peripherals: [UInt32: PeripheralSession] = [:]

    /// `send` writes a message to the client (the owner frames it and keeps the order).
    public init(device: HostDevice, name: String, send: @escaping (DaemonMessage) -> Void) {
        self.device = device
        self.name = name
        self.send = send
    }

    /// The sessions open now.
    public var sessionCount: Int { centrals.count + peripherals.count }

    /// Acts on one message of the client. Throws when the message breaks the protocol (the
    /// client is then closed already).
    public func receive(_ message: DaemonMessage) throws(DaemonClientViolation) {
        guard !isClosed else { return }
        do throws(DaemonClientViolation) {
            try handle(message)
        } catch {
            close()
            throw error
        }
    }

    /// Ends every session: each role service leaves the device (its scan, connections and
    /// subscriptions with it). Nothing is sent after.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        let sessions = centrals.values
        centrals = [:]
        for session in sessions { session.end() }
        let peripheralSessions = peripherals.values
        peripherals = [:]
        for session in peripheralSessions { session.end() }
    }

    private func handle(_ message: DaemonMessage) throws(DaemonClientViolation) {
        guard message.kind.isFromClient else { throw DaemonClientViolation("\(message.kind) is the daemon's message") }
        guard version != nil else {
            guard case .hello(let highest, let lowest, let name) = message else {
                throw DaemonClientViolation("\(message.kind) before hello")
            }
            guard lowest <= DaemonFrame.version, highest >= DaemonFrame.minimumVersion else {
                send(.refused(reason: "no common protocol version (the client speaks \(lowest)–\(highest), the daemon "
                    + "\(DaemonFrame.minimumVersion)–\(DaemonFrame.version))"))
                throw DaemonClientViolation("no common protocol version")
            }
            let agreed = min(highest, DaemonFrame.version)
            version = agreed
            self.name = name
            send(.welcome(version: agreed, deviceAddress: device.address))
            return
        }
        switch message {
        case .hello:
            throw DaemonClientViolation("a second hello")
        case .openCentral(let session, _):
            guard centrals[session] == nil, peripherals[session] == nil else { throw DaemonClientViolation("session \(session) is open already") }
            // Nothing reaches the client once it is closed (a link another client shares may
            // still deliver a value this session subscribed to).
            centrals[session] = CentralSession(id: session, device: device) { [weak self] message in
                guard let self, !isClosed else { return }
                send(message)
            }
        case .openPeripheral(let session, _):
            guard centrals[session] == nil, peripherals[session] == nil else {
                throw DaemonClientViolation("session \(session) is open already")
            }
            peripherals[session] = PeripheralSession(id: session, device: device) { [weak self] message in
                guard let self, !isClosed else { return }
                send(message)
            }
        case .close(let session):
            centrals.removeValue(forKey: session)?.end()
            peripherals.removeValue(forKey: session)?.end()
        default:
            guard let id = message.session else { throw DaemonClientViolation("\(message.kind) names no session") }
            if let session = centrals[id], !message.isPeripheralCall {
                session.handle(message)
            } else if let session = peripherals[id], message.isPeripheralCall {
                session.handle(message)
            } else {
                throw DaemonClientViolation("\(message.kind) for a session that is not open (or of the other role)")
            }
        }
    }
}

/// `CBManagerState` raw values, as `state` messages carry them.
enum ManagerState {
    static let unsupported: UInt8 = 2
    static let poweredOff: UInt8 = 4
    static let poweredOn: UInt8 = 5
}

extension DaemonMessage {
    /// The session a client's call names (nil for the handshake).
    var session: UInt32? {
        switch self {
        case .openCentral(let session, _), .openPeripheral(let session, _), .close(let session),
             .startScan(let session, _, _, _), .stopScan(let session), .connect(let session, _, _), .cancel(let session, _, _),
             .discoverServices(let session, _, _, _), .discoverIncludedServices(let session, _, _, _),
             .discoverCharacteristics(let session, _, _, _), .discoverDescriptors(let session, _, _, _),
             .read(let session, _, _, _), .write(let session, _, _, _, _), .writeWithoutResponse(let session, _, _, _),
             .setNotify(let session, _, _, _, _, _), .readRSSI(let session, _, _):
            session
        // MARK: Peripheral role
        case .publish(let session, _, _, _), .unpublish(let session, _), .unpublishAll(let session),
             .startAdvertising(let session, _), .stopAdvertising(let session), .setLatency(let session, _, _),
             .answer(let session, _, _, _), .update(let session, _, _, _):
            session
        default:
            nil
        }
    }

    /// Whether it is a peripheral manager's call (else a central's).
    var isPeripheralCall: Bool {
        switch self {
        case .publish, .unpublish, .unpublishAll, .startAdvertising, .stopAdvertising, .setLatency, .answer, .update: true
        default: false
        }
    }
}

/// One central manager of a client, on the daemon: a `CentralService` on the device, its
/// calls from messages and its events as messages. Loop-confined.
final class CentralSession: CentralServiceEvents, @unchecked Sendable {
    let id: UInt32
    private let service = CentralService()
    private let send: (DaemonMessage) -> Void
    /// What each link tells, relayed with its peer (held here: the link holds it weakly).
    private var relays: [LEAddress: LinkRelay] = [:]

    init(id: UInt32, device: HostDevice, send: @escaping (DaemonMessage) -> Void) {
        self.id = id
        self.send = send
        service.events = self
        service.deviceDidStart(device)
        send(.state(session: id, state: ManagerState.poweredOn, reason: nil))
    }

    /// The session is over: the service leaves the device (its scan and connections with it).
    func end() {
        service.events = nil
        service.device?.removeClient(service)
        service.deviceDidStop()
        relays = [:]
    }

    func handle(_ message: DaemonMessage) {
        switch message {
        case .startScan(_, let services, let solicited, let allowDuplicates):
            service.startScan(ScanRequest(services: services.map(Set.init), solicited: Set(solicited), allowDuplicates: allowDuplicates))
        case .stopScan:
            service.stopScan()
        case .connect(_, let peer, let autoReconnect):
            service.connect(peer, autoReconnect: autoReconnect)
        case .cancel(_, let peer, let notify):
            service.cancel(peer, notify: notify)
        case .discoverServices(_, let peer, let request, let uuid):
            guard let link = link(peer) else { return send(.services(session: id, request: request, result: .failure(.disconnected))) }
            link.discoverPrimaryServices(uuid: uuid) { [id, send] in send(.services(session: id, request: request, result: $0)) }
        case .discoverIncludedServices(_, let peer, let request, let target):
            guard let link = link(peer) else {
                return send(.includedServices(session: id, request: request, result: .failure(.disconnected)))
            }
            link.discoverIncludedServices(of: target) { [id, send] in send(.includedServices(session: id, request: request, result: $0)) }
        case .discoverCharacteristics(_, let peer, let request, let target):
            guard let link = link(peer) else {
                return send(.characteristics(session: id, request: request, result: .failure(.disconnected)))
            }
            link.discoverCharacteristics(of: target) { [id, send] in send(.characteristics(session: id, request: request, result: $0)) }
        case .discoverDescriptors(_, let peer, let request, let characteristic):
            guard let link = link(peer) else {
                return send(.descriptors(session: id, request: request, result: .failure(.disconnected)))
            }
            link.discoverDescriptors(of: characteristic) { [id, send] in send(.descriptors(session: id, request: request, result: $0)) }
        case .read(_, let peer, let request, let handle):
            guard let link = link(peer) else { return send(.value(session: id, request: request, result: .failure(.disconnected))) }
            link.readValue(of: handle) { [id, send] in send(.value(session: id, request: request, result: $0)) }
        case .write(_, let peer, let request, let handle, let value):
            guard let link = link(peer) else { return send(.done(session: id, request: request, error: .disconnected)) }
            link.writeValue(value, to: handle) { [id, send] in send(.done(session: id, request: request, error: $0.failure)) }
        case .writeWithoutResponse(_, let peer, let handle, let value):
            link(peer)?.enqueueWrite(value, to: handle)
        case .setNotify(_, let peer, let request, let characteristic, let cccd, let enabled):
            guard let link = link(peer) else { return send(.done(session: id, request: request, error: .disconnected)) }
            let finish: (Result<Void, GATTClientError>) -> Void = { [id, send] in
                send(.done(session: id, request: request, error: $0.failure))
            }
            if enabled {
                let handle = characteristic.valueHandle
                link.subscribe(to: characteristic, clientConfiguration: cccd, onValue: { [id, send] value in
                    send(.notification(session: id, peer: peer, handle: handle, value: value))
                }, completion: finish)
            } else {
                link.unsubscribe(from: characteristic, clientConfiguration: cccd, completion: finish)
            }
        case .readRSSI(_, let peer, let request):
            service.readRSSI(of: peer) { [id, send] result in
                switch result {
                case .success(let rssi): send(.rssi(session: id, request: request, rssi: rssi, error: nil))
                case .failure(let error): send(.rssi(session: id, request: request, rssi: 127, error: "\(error)"))
                }
            }
        default:
            break
        }
    }

    private func link(_ peer: LEAddress) -> (any CentralRoleLink)? {
        guard let link = service.link(for: peer), !link.isClosed else { return nil }
        return link
    }

    // MARK: - The role's events, as messages

    func central(_ service: any CentralRole, didDiscover peer: LEAddress, advertisement: AdvertisingData,
                 raw: (advertisement: [UInt8], scanResponse: [UInt8]?), isConnectable: Bool, rssi: Int8?) {
        // The bytes as received; the client merges them as the service did.
        send(.discovered(session: id, peer: peer, advertisingData: raw.advertisement, scanResponse: raw.scanResponse,
                         isConnectable: isConnectable, rssi: rssi))
    }

    func centralScanFailed(_ service: any CentralRole) { send(.scanFailed(session: id)) }

    func central(_ service: any CentralRole, didConnect link: any CentralRoleLink) {
        let relay = relays[link.peer] ?? LinkRelay(session: id, peer: link.peer, send: send)
        relays[link.peer] = relay
        // Set before returning: a link nobody takes is ended by the service.
        link.events = relay
        send(.connected(session: id, peer: link.peer, mtu: UInt16(clamping: link.mtu)))
    }

    func central(_ service: any CentralRole, didFailToConnect peer: LEAddress, error: DeviceConnectError) {
        send(.failedToConnect(session: id, peer: peer, reason: "\(error)"))
    }

    func central(_ service: any CentralRole, didDisconnect peer: LEAddress, cause: CentralDisconnection, isReconnecting: Bool) {
        relays[peer] = nil
        let wire: DaemonDisconnectCause = switch cause {
        case .requested(let notify): .requested(notify: notify)
        case .attTimeout: .attTimeout
        case .link(let status): .link(status)
        }
        send(.disconnected(session: id, peer: peer, cause: wire, isReconnecting: isReconnecting))
    }

    func central(_ service: any CentralRole, deviceDidClose error: HCITransportError?) {
        send(.state(session: id, state: ManagerState.poweredOff, reason: error.map { "\($0)" }))
    }
}

/// One link's events, as messages naming its peer.
final class LinkRelay: CentralLinkEvents, @unchecked Sendable {
    let session: UInt32
    let peer: LEAddress
    let send: (DaemonMessage) -> Void

    init(session: UInt32, peer: LEAddress, send: @escaping (DaemonMessage) -> Void) {
        self.session = session
        self.peer = peer
        self.send = send
    }

    func linkMTUChanged(_ mtu: Int) { send(.linkMTU(session: session, peer: peer, mtu: UInt16(clamping: mtu))) }
    func linkReadName(_ name: String) { send(.linkName(session: session, peer: peer, name: name)) }
    func linkServicesChanged(_ range: ClosedRange<ATTHandle>) {
        send(.linkServicesChanged(session: session, peer: peer, range: range))
    }
    func linkReturnedWriteBudget(_ count: Int) {
        send(.linkWriteBudget(session: session, peer: peer, count: UInt16(clamping: count)))
    }
    func linkClosed() {}
}

extension Result where Success == Void {
    /// The error, or nil on success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
