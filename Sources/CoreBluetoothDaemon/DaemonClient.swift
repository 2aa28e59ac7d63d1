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
import Scheduling

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
    /// The client's user (from its peer credentials): restorable sessions are kept under it.
    public let uid: UInt32
    private let device: HostDevice
    private let restoration: DaemonRestoration?
    private let connectionEvents: ConnectionEvents?
    private let subscriptions: DaemonSubscriptions
    private let channelLedger: DaemonChannelLedger
    private let send: (DaemonMessage) -> Void
    private var version: UInt16?
    private var centrals: [UInt32: CentralSession] = [:]
    private var peripherals: [UInt32: PeripheralSession] = [:]

    /// `send` writes a message to the client (the owner frames it and keeps the order).
    /// `restoration`: where sessions opened with a restore identifier are kept when the client
    /// goes (nil: such sessions end with the client, as the others do).
    /// `connectionEvents`: the daemon's connection events (nil: a session that registers for
    /// them hears none).
    /// `subscriptions`: the daemon's, shared by every client's sessions (they share links).
    public init(device: HostDevice, name: String, uid: UInt32 = 0, restoration: DaemonRestoration? = nil,
                connectionEvents: ConnectionEvents? = nil, subscriptions: DaemonSubscriptions = DaemonSubscriptions(),
                channelLedger: DaemonChannelLedger = DaemonChannelLedger(), send: @escaping (DaemonMessage) -> Void) {
        self.channelLedger = channelLedger
        self.device = device
        self.name = name
        self.uid = uid
        self.restoration = restoration
        self.connectionEvents = connectionEvents
        self.subscriptions = subscriptions
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

    /// The client went (its socket closed, or it broke the protocol): each session opened with
    /// a restore identifier is kept by ``DaemonRestoration`` (a central's connections, pending
    /// connections, subscriptions and scan go on; a peripheral's services, advertising and
    /// subscribers stay); every other one ends, its role service
    /// leaving the device (its scan, connections and subscriptions with it). Nothing is sent
    /// after.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        let sessions = centrals.values
        centrals = [:]
        for session in sessions {
            if let identifier = session.restoreIdentifier, let restoration {
                session.detach()
                restoration.keep(session, as: DaemonRestoration.Key(uid: uid, role: .central, identifier: identifier))
            } else {
                session.end()
            }
        }
        let peripheralSessions = peripherals.values
        peripherals = [:]
        for session in peripheralSessions {
            if let identifier = session.restoreIdentifier, let restoration {
                session.detach()
                restoration.keep(session, as: DaemonRestoration.Key(uid: uid, role: .peripheral, identifier: identifier))
            } else {
                session.end()
            }
        }
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
        case .openCentral(let session, let identifier):
            guard centrals[session] == nil, peripherals[session] == nil else { throw DaemonClientViolation("session \(session) is open already") }
            // Nothing reaches the client once it is closed (a link another client shares may
            // still deliver a value this session subscribed to).
            let sink: (DaemonMessage) -> Void = { [weakSelf = WeakHandle(self)] message in
                guard let self = weakSelf.object, !self.isClosed else { return }
                self.send(message)
            }
            if let identifier, let restoration,
               let kept = restoration.take(DaemonRestoration.Key(uid: uid, role: .central, identifier: identifier), as: CentralSession.self) {
                centrals[session] = kept
                kept.attach(id: session, send: sink)
            } else {
                centrals[session] = CentralSession(id: session, restoreIdentifier: identifier, parkedLimit: restoration?.parkedLimit ?? 0,
                                                   connectionEvents: connectionEvents, subscriptions: subscriptions,
                                                   channelLedger: channelLedger, device: device, send: sink)
            }
        case .openPeripheral(let session, let identifier):
            guard centrals[session] == nil, peripherals[session] == nil else {
                throw DaemonClientViolation("session \(session) is open already")
            }
            let sink: (DaemonMessage) -> Void = { [weakSelf = WeakHandle(self)] message in
                guard let self = weakSelf.object, !self.isClosed else { return }
                self.send(message)
            }
            if let identifier, let restoration,
               let kept = restoration.take(DaemonRestoration.Key(uid: uid, role: .peripheral, identifier: identifier),
                                           as: PeripheralSession.self) {
                peripherals[session] = kept
                kept.attach(id: session, send: sink)
            } else {
                peripherals[session] = PeripheralSession(id: session, restoreIdentifier: identifier, channelLedger: channelLedger,
                                                         device: device, send: sink)
            }
        case .close(let session):
            // The manager was released while its process lives on: nothing to restore.
            centrals.removeValue(forKey: session)?.end()
            peripherals.removeValue(forKey: session)?.end()
        default:
            guard let id = message.session else { throw DaemonClientViolation("\(message.kind) names no session") }
            guard let version, message.kind.version <= version else {
                throw DaemonClientViolation("\(message.kind) is not in the protocol version agreed")
            }
            if message.isEitherRoleCall, let session = centrals[id] {
                session.handle(message)
            } else if message.isEitherRoleCall, let session = peripherals[id] {
                session.handle(message)
            } else if let session = centrals[id], !message.isPeripheralCall {
                session.handle(message)
            } else if let session = peripherals[id], message.isPeripheralCall {
                session.handle(message)
            } else {
                throw DaemonClientViolation("\(message.kind) for a session that is not open (or of the other role)")
            }
        }
    }
}

/// A session the daemon can keep while no client holds it (a central or a peripheral session).
protocol KeptSession: AnyObject {
    /// The session is over.
    func end()
    /// While kept: hears the events an app would be relaunched for.
    var wake: ((DaemonRestoration.Event) -> Void)? { get set }
}

/// Sessions whose client went, kept under their restore identifier until a client of the same
/// user opens a session with it (docs/daemon.md, "Restoration"). Loop-confined (the device's
/// loop); one per daemon, shared by its clients.
public final class DaemonRestoration: @unchecked Sendable {
    /// What a session is kept under: its user, role and restore identifier.
    public struct Key: Hashable, Sendable {
        public enum Role: String, Sendable, Hashable { case central, peripheral }
        public var uid: UInt32
        public var role: Role
        public var identifier: String

        public init(uid: UInt32, role: Role, identifier: String) {
            self.uid = uid
            self.role = role
            self.identifier = identifier
        }
    }

    /// What arrived for a kept session that its app would be relaunched for (the names are
    /// `CB_RESTORE_EVENT`'s values).
    public enum Event: String, Sendable, Hashable {
        /// A central session: a notification or indication of a subscribed characteristic.
        case notification
        /// A central session: a pending connection completed.
        case connected
        /// A central session: its scan found a peripheral (the report itself is dropped; the
        /// scan goes on).
        case discovered
        /// A peripheral session: a read of a value the app answers.
        case read
        /// A peripheral session: a write (request or command) of a value the app takes.
        case write
        /// A peripheral session: a central subscribed, or unsubscribed.
        case subscribed, unsubscribed
    }

    /// Notifications kept per session while no client holds it; older ones are dropped (and
    /// counted in `restoreState`).
    public let parkedLimit: Int
    /// Hears the first event for each kept session (once, until a client takes the session and
    /// goes again): the daemon's `--on-event` command. Set before any client comes.
    public var onEvent: ((Key, Event) -> Void)?
    private var kept: [Key: any KeptSession] = [:]
    /// Kept sessions whose first event was told already.
    private var woken: Set<Key> = []
    private var isClosed = false

    public init(parkedLimit: Int = 1024, onEvent: ((Key, Event) -> Void)? = nil) {
        self.parkedLimit = parkedLimit
        self.onEvent = onEvent
    }

    /// How many sessions are kept now.
    public var count: Int { kept.count }

    /// The daemon stops: every kept session ends (its links with it), and so does any session
    /// whose client goes after.
    public func close() {
        isClosed = true
        let all = kept.values
        kept = [:]
        for session in all { session.end() }
    }

    func keep(_ session: any KeptSession, as key: Key) {
        guard !isClosed else { return session.end() }
        // Two clients held the same key at once: the one that went last is kept.
        if let earlier = kept.updateValue(session, forKey: key), earlier !== session { earlier.end() }
        woken.remove(key)
        // Without `weak`: a weak reference gives the session (on every notification's path) a
        // side table, and every retain and release of it the slow path.
        let weakSession = WeakHeldExistential<any KeptSession>(wrappedValue: session)
        session.wake = { [weakSelf = WeakHandle(self)] event in
            guard let self = weakSelf.object, let session = weakSession.wrappedValue, self.kept[key] === session, self.woken.insert(key).inserted else { return }
            self.onEvent?(key, event)
        }
    }

    func take<Session: KeptSession>(_ key: Key, as type: Session.Type) -> Session? {
        guard let session = kept[key] as? Session else { return nil }
        kept[key] = nil
        woken.remove(key)
        session.wake = nil
        return session
    }
}

/// The daemon's connection events: one per daemon, shared by its clients' sessions.
public typealias DaemonConnectionEvents = ConnectionEvents

/// `CBManagerState` raw values, as `state` messages carry them.
enum ManagerState {
    static let resetting: UInt8 = 1
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
             .setNotify(let session, _, _, _, _, _), .readRSSI(let session, _, _),
             .setConnectionParameters(let session, _, _, _, _, _), .setPHY(let session, _, _),
             .registerConnectionEvents(let session, _, _):
            session
        // MARK: Peripheral role
        case .publish(let session, _, _, _), .unpublish(let session, _), .unpublishAll(let session),
             .startAdvertising(let session, _), .stopAdvertising(let session), .setLatency(let session, _, _),
             .answer(let session, _, _, _), .update(let session, _, _, _):
            session
        // MARK: Channels and pairing
        case .openChannel(let session, _, _, _), .publishChannel(let session, _, _, _), .unpublishChannel(let session, _, _),
             .channelWrite(let session, _, _), .channelConsumed(let session, _, _), .channelPause(let session, _, _),
             .channelClose(let session, _), .setPairingAgent(let session, _), .pairingReply(let session, _, _):
            session
        default:
            nil
        }
    }

    /// Whether either role's session takes it (its channels, its pairing agent).
    var isEitherRoleCall: Bool {
        switch self {
        case .channelWrite, .channelConsumed, .channelPause, .channelClose, .setPairingAgent, .pairingReply: true
        default: false
        }
    }

    /// Whether it is a peripheral manager's call (else a central's).
    var isPeripheralCall: Bool {
        switch self {
        case .publish, .unpublish, .unpublishAll, .startAdvertising, .stopAdvertising, .setLatency, .answer, .update,
             .publishChannel, .unpublishChannel:
            true
        default: false
        }
    }
}

/// One central manager of a client, on the daemon: a `CentralService` on the device, its
/// calls from messages and its events as messages. Loop-confined.
///
/// A session opened with a restore identifier outlives its client (``detach()``): the service
/// stays the device's client (its links, pending connections, subscriptions and scan go on),
/// notifications are parked, and a later session with the same key takes it over
/// (``attach(id:send:)``) with a `restoreState` of what it kept.
final class CentralSession: CentralServiceEvents, KeptSession, ChannelSession, @unchecked Sendable {
    private(set) var id: UInt32
    /// The channels it opened, relayed to its client.
    private(set) lazy var channels = SessionChannels(ledger: channelLedger) { [weakSelf = WeakHandle(self)] make in weakSelf.object?.emit(make) }
    private let channelLedger: DaemonChannelLedger
    /// Its client's pairing agent, when it has one.
    var pairing: SessionPairingAgent?
    /// While kept: hears the events an app would be relaunched for (`--on-event`).
    var wake: ((DaemonRestoration.Event) -> Void)?
    let restoreIdentifier: String?
    private let service = CentralService()
    /// Where messages go; nil while no client holds the session.
    private var sink: ((DaemonMessage) -> Void)?
    /// Bumped when the session changes hands: answers to an earlier client's requests are
    /// dropped (its request numbers mean nothing to the next one).
    private var generation = 0
    /// What each link tells, relayed with its peer (held here: the link holds it weakly).
    private var relays: [LEAddress: LinkRelay] = [:]
    /// What was discovered and subscribed on each link, as relayed (for `restoreState`).
    private var records: [LEAddress: LinkRecord] = [:]
    /// Peers being connected to.
    private var connecting: Set<LEAddress> = []
    private var scan: ScanRequest?
    /// Notifications that arrived while no client held the session, oldest first.
    private var parked: [(peer: LEAddress, handle: ATTHandle, value: [UInt8])] = []
    private var droppedNotifications: UInt32 = 0
    /// At most this many notifications are parked; older ones are dropped (and counted).
    private let parkedLimit: Int
    private let connectionEvents: ConnectionEvents?
    /// The daemon's subscriptions: links are shared by sessions (of several clients).
    private let subscriptions: DaemonSubscriptions

    /// What the daemon relayed on one link.
    private struct LinkRecord {
        var services: [DiscoveredService]?
        /// By the service's first handle.
        var characteristics: [ATTHandle: [DiscoveredCharacteristic]] = [:]
        /// By the characteristic's value handle.
        var descriptors: [ATTHandle: [DiscoveredDescriptor]] = [:]
        var notifying: Set<ATTHandle> = []
    }

    init(id: UInt32, restoreIdentifier: String? = nil, parkedLimit: Int = 0, connectionEvents: ConnectionEvents? = nil,
         subscriptions: DaemonSubscriptions = DaemonSubscriptions(), channelLedger: DaemonChannelLedger = DaemonChannelLedger(),
         device: HostDevice, send: @escaping (DaemonMessage) -> Void) {
        self.id = id
        self.channelLedger = channelLedger
        self.restoreIdentifier = restoreIdentifier
        self.parkedLimit = parkedLimit
        self.connectionEvents = connectionEvents
        self.subscriptions = subscriptions
        sink = send
        service.events = self
        service.deviceDidStart(device)
        send(.state(session: id, state: ManagerState.poweredOn, reason: nil))
    }

    /// The session is over: the service leaves the device (its scan and connections with it).
    /// On links other sessions keep up, its subscriptions end (at the peer too, when nobody
    /// else wants the values), and the procedures it left queued run for nobody.
    func end() {
        clientLeft()
        sink = nil
        wake = nil
        service.events = nil
        service.device?.removeClient(service)
        subscriptions.leave(self)
        service.deviceDidStop()
        connectionEvents?.unregister(self)
        for peer in relays.keys { connectionEvents?.disconnected(peer) }
        relays = [:]
        records = [:]
        parked = []
    }

    /// Its client went: everything goes on, and notifications are parked until ``attach(id:send:)``.
    func detach() {
        clientLeft()
        sink = nil
        generation += 1
    }

    /// Its client went: its channels close (at the peer too) and its pairing prompts are
    /// answered no (the pairing fails now, not at SMP's timeout).
    private func clientLeft() {
        channels.closeAll()
        pairing?.cancelAll()
        pairing = nil
        service.pairingAgent = nil
    }

    /// A new client's session `id` takes the session over: `restoreState`, the state, then the
    /// parked notifications, in order.
    func attach(id: UInt32, send: @escaping (DaemonMessage) -> Void) {
        self.id = id
        wake = nil
        generation += 1
        sink = send
        send(.restoreState(session: id, peers: restoredPeers(), scan: scan.map {
            DaemonRestoredScan(services: $0.services.map { $0.sorted { $0.description < $1.description } },
                               solicited: $0.solicited.sorted { $0.description < $1.description }, allowDuplicates: $0.allowDuplicates)
        }, droppedNotifications: droppedNotifications))
        send(.state(session: id, state: service.isOn ? ManagerState.poweredOn : ManagerState.poweredOff, reason: nil))
        let waiting = parked
        parked = []
        droppedNotifications = 0
        for (peer, handle, value) in waiting { send(.notification(session: id, peer: peer, handle: handle, value: value)) }
    }

    private func restoredPeers() -> [DaemonRestoredPeer] {
        var peers: [DaemonRestoredPeer] = []
        for peer in relays.keys.sorted(by: { $0.description < $1.description }) {
            guard let link = link(peer) else { continue }
            let record = records[peer] ?? LinkRecord()
            let services = record.services.map { services in
                services.map { service in
                    DaemonRestoredService(service: service, characteristics: record.characteristics[service.handles.lowerBound].map {
                        $0.map { characteristic in
                            DaemonRestoredCharacteristic(characteristic: characteristic,
                                                         descriptors: record.descriptors[characteristic.valueHandle],
                                                         isNotifying: record.notifying.contains(characteristic.valueHandle))
                        }
                    })
                }
            }
            peers.append(DaemonRestoredPeer(peer: peer, isConnected: true, mtu: UInt16(clamping: link.mtu), services: services))
        }
        for peer in connecting.subtracting(relays.keys).sorted(by: { $0.description < $1.description }) {
            peers.append(DaemonRestoredPeer(peer: peer, isConnected: false, mtu: 23, services: nil))
        }
        return peers
    }

    /// Sends an event of the session, if a client holds it.
    func emit(_ make: (UInt32) -> DaemonMessage) {
        guard let sink else { return }
        sink(make(id))
    }

    /// A request's answer: for the client that asked only.
    private func answer(_ asked: Int, _ make: (UInt32) -> DaemonMessage) {
        guard asked == generation else { return }
        emit(make)
    }

    private func notify(_ peer: LEAddress, _ handle: ATTHandle, _ value: [UInt8]) {
        if let sink { return sink(.notification(session: id, peer: peer, handle: handle, value: value)) }
        wake?(.notification)
        if parked.count >= parkedLimit {
            droppedNotifications &+= 1
            guard !parked.isEmpty else { return }
            parked.removeFirst()
        }
        parked.append((peer, handle, value))
    }

    func handle(_ message: DaemonMessage) {
        let asked = generation
        switch message {
        case .startScan(_, let services, let solicited, let allowDuplicates):
            let request = ScanRequest(services: services.map(Set.init), solicited: Set(solicited), allowDuplicates: allowDuplicates)
            scan = request
            service.startScan(request)
        case .stopScan:
            scan = nil
            service.stopScan()
        case .connect(_, let peer, let autoReconnect):
            if relays[peer] == nil { connecting.insert(peer) }
            service.connect(peer, autoReconnect: autoReconnect)
        case .cancel(_, let peer, let notify):
            connecting.remove(peer)
            service.cancel(peer, notify: notify)
        case .discoverServices(_, let peer, let request, let uuid):
            guard let link = link(peer) else { return emit { .services(session: $0, request: request, result: .failure(.disconnected)) } }
            link.discoverPrimaryServices(uuid: uuid) { [weakSelf = WeakHandle(self)] result in
                guard let self = weakSelf.object else { return }
                if case .success(let found) = result { self.recordServices(found, of: uuid, on: peer) }
                self.answer(asked) { .services(session: $0, request: request, result: result) }
            }
        case .discoverIncludedServices(_, let peer, let request, let target):
            guard let link = link(peer) else {
                return emit { .includedServices(session: $0, request: request, result: .failure(.disconnected)) }
            }
            link.discoverIncludedServices(of: target) { [weakSelf = WeakHandle(self)] result in
                weakSelf.object?.answer(asked) { .includedServices(session: $0, request: request, result: result) }
            }
        case .discoverCharacteristics(_, let peer, let request, let target):
            guard let link = link(peer) else {
                return emit { .characteristics(session: $0, request: request, result: .failure(.disconnected)) }
            }
            link.discoverCharacteristics(of: target) { [weakSelf = WeakHandle(self)] result in
                guard let self = weakSelf.object else { return }
                if case .success(let found) = result { self.records[peer]?.characteristics[target.handles.lowerBound] = found }
                self.answer(asked) { .characteristics(session: $0, request: request, result: result) }
            }
        case .discoverDescriptors(_, let peer, let request, let characteristic):
            guard let link = link(peer) else {
                return emit { .descriptors(session: $0, request: request, result: .failure(.disconnected)) }
            }
            link.discoverDescriptors(of: characteristic) { [weakSelf = WeakHandle(self)] result in
                guard let self = weakSelf.object else { return }
                if case .success(let found) = result { self.records[peer]?.descriptors[characteristic.valueHandle] = found }
                self.answer(asked) { .descriptors(session: $0, request: request, result: result) }
            }
        case .read(_, let peer, let request, let handle):
            guard let link = link(peer) else { return emit { .value(session: $0, request: request, result: .failure(.disconnected)) } }
            link.readValue(of: handle) { [weakSelf = WeakHandle(self)] result in weakSelf.object?.answer(asked) { .value(session: $0, request: request, result: result) } }
        case .write(_, let peer, let request, let handle, let value):
            guard let link = link(peer) else { return emit { .done(session: $0, request: request, error: .disconnected) } }
            link.writeValue(value, to: handle) { [weakSelf = WeakHandle(self)] result in
                weakSelf.object?.answer(asked) { .done(session: $0, request: request, error: result.failure) }
            }
        case .writeWithoutResponse(_, let peer, let handle, let value):
            link(peer)?.enqueueWrite(value, to: handle)
        case .setNotify(_, let peer, let request, let characteristic, let cccd, let enabled):
            // Through the daemon's subscriptions: other sessions may share the link, and the
            // characteristic.
            guard link(peer) != nil, let connection = service.links[peer]?.connection else {
                return emit { .done(session: $0, request: request, error: .disconnected) }
            }
            let handle = characteristic.valueHandle
            let finish: (Result<Void, GATTClientError>) -> Void = { [weakSelf = WeakHandle(self)] result in
                guard let self = weakSelf.object else { return }
                if result.failure == nil {
                    if enabled { self.records[peer]?.notifying.insert(handle) } else { self.records[peer]?.notifying.remove(handle) }
                }
                self.answer(asked) { .done(session: $0, request: request, error: result.failure) }
            }
            if enabled {
                subscriptions.subscribe(self, on: connection, to: characteristic, clientConfiguration: cccd, onValue: { [weakSelf = WeakHandle(self)] value in
                    weakSelf.object?.notify(peer, handle, value)
                }, completion: finish)
            } else {
                subscriptions.unsubscribe(self, on: connection, from: characteristic, clientConfiguration: cccd, completion: finish)
            }
        case .registerConnectionEvents(_, let services, let peripherals):
            let filter = ConnectionEvents.Filter(services: services.map(Set.init), peripherals: peripherals.map(Set.init))
            connectionEvents?.register(self, filter: filter) { [weakSelf = WeakHandle(self)] peer, connected in
                weakSelf.object?.emit { .connectionEvent(session: $0, peer: peer, connected: connected) }
            }
        case .readRSSI(_, let peer, let request):
            service.readRSSI(of: peer) { [weakSelf = WeakHandle(self)] result in
                switch result {
                case .success(let rssi): weakSelf.object?.answer(asked) { .rssi(session: $0, request: request, rssi: rssi, error: nil) }
                case .failure(let error): weakSelf.object?.answer(asked) { .rssi(session: $0, request: request, rssi: 127, error: "\(error)") }
                }
            }
        case .setConnectionParameters(_, let peer, let intervalMin, let intervalMax, let latency, let timeout):
            // The controller checks the ranges (and refuses what is invalid: logged, as for an
            // app of the daemon's own process).
            service.updateParameters(of: peer, ConnectionParameters(intervalMin: intervalMin, intervalMax: intervalMax,
                                                                    latency: latency, timeout: timeout))
        case .setPHY(_, let peer, let phy):
            // The decoder let only LE PHYs through.
            if let phy = LEPHY(rawValue: phy) { service.setPHY(of: peer, phy) }
        case .openChannel(_, let peer, let request, let psm):
            service.openChannel(to: peer, psm: psm) { [weakSelf = WeakHandle(self)] result in
                switch result {
                case .success(let channel):
                    // Nobody to hand it to (the client that asked went): it closes.
                    guard let self = weakSelf.object, asked == self.generation, self.sink != nil else { return channel.close() }
                    self.channels.add(channel) { id in self.emit { .channelOpened(session: $0, request: request, result: .success(id)) } }
                case .failure(let error):
                    weakSelf.object?.answer(asked) { .channelOpened(session: $0, request: request, result: .failure(DaemonChannelOpenError(error))) }
                }
            }
        default:
            if channels.handle(message) { return }
            _ = handlePairing(message, emit: { [weakSelf = WeakHandle(self)] make in
                guard let self = weakSelf.object, self.sink != nil else { return false }
                self.emit(make)
                return true
            }, install: { service.pairingAgent = $0 })
        }
    }

    /// Services found: all of them when `uuid` is nil, else those of that type replace the
    /// ones known of that type (as the client's objects merge them).
    private func recordServices(_ found: [DiscoveredService], of uuid: BluetoothUUID?, on peer: LEAddress) {
        guard var record = records[peer] else { return }
        var services = uuid.map { uuid in (record.services ?? []).filter { $0.uuid != uuid } } ?? []
        services += found
        services.sort { $0.handles.lowerBound < $1.handles.lowerBound }
        connectionEvents?.learned(found.map(\.uuid), of: peer)
        record.services = services
        records[peer] = record
    }

    private func link(_ peer: LEAddress) -> (any CentralRoleLink)? {
        guard let link = service.link(for: peer), !link.isClosed else { return nil }
        return link
    }

    // MARK: - The role's events, as messages

    func central(_ service: any CentralRole, didDiscover peer: LEAddress, advertisement: AdvertisingData,
                 raw: (advertisement: [UInt8], scanResponse: [UInt8]?), isConnectable: Bool, rssi: Int8?) {
        connectionEvents?.learned(advertisement.serviceUUIDs, of: peer)
        // Kept: dropped, but the app would be relaunched for it (the scan goes on for it).
        if sink == nil { wake?(.discovered) }
        // The bytes as received; the client merges them as the service did.
        emit { .discovered(session: $0, peer: peer, advertisingData: raw.advertisement, scanResponse: raw.scanResponse,
                           isConnectable: isConnectable, rssi: rssi) }
    }

    func centralScanFailed(_ service: any CentralRole) {
        scan = nil
        emit { .scanFailed(session: $0) }
    }

    func central(_ service: any CentralRole, didConnect link: any CentralRoleLink) {
        let relay = relays[link.peer] ?? LinkRelay(session: self, peer: link.peer)
        if relays[link.peer] == nil { connectionEvents?.connected(link.peer) }
        relays[link.peer] = relay
        connecting.remove(link.peer)
        if records[link.peer] == nil { records[link.peer] = LinkRecord() }
        // Set before returning: a link nobody takes is ended by the service.
        link.events = relay
        if sink == nil { wake?(.connected) }
        emit { .connected(session: $0, peer: link.peer, mtu: UInt16(clamping: link.mtu)) }
    }

    func central(_ service: any CentralRole, didFailToConnect peer: LEAddress, error: DeviceConnectError) {
        connecting.remove(peer)
        emit { .failedToConnect(session: $0, peer: peer, reason: "\(error)") }
    }

    func central(_ service: any CentralRole, didDisconnect peer: LEAddress, cause: CentralDisconnection, isReconnecting: Bool) {
        if relays.removeValue(forKey: peer) != nil { connectionEvents?.disconnected(peer) }
        // The link is down, or this session cancelled its share of a link others keep.
        subscriptions.leave(self, peer: peer)
        records[peer] = nil
        if isReconnecting { connecting.insert(peer) } else { connecting.remove(peer) }
        parked.removeAll { $0.peer == peer }
        let wire: DaemonDisconnectCause = switch cause {
        case .requested(let notify): .requested(notify: notify)
        case .attTimeout: .attTimeout
        case .link(let status): .link(status)
        }
        emit { .disconnected(session: $0, peer: peer, cause: wire, isReconnecting: isReconnecting) }
    }

    func central(_ service: any CentralRole, deviceDidClose error: HCITransportError?) {
        emit { .state(session: $0, state: ManagerState.poweredOff, reason: error.map { "\($0)" }) }
    }

    /// The daemon's controller reset itself (its links were reported gone): `.resetting`, then
    /// `.poweredOn` once the daemon has reset it, as in the process.
    func centralDeviceWillReset(_ service: any CentralRole) {
        emit { .state(session: $0, state: ManagerState.resetting, reason: "the controller reset itself; corebluetoothd is resetting it") }
    }

    func centralDeviceDidReset(_ service: any CentralRole) {
        emit { .state(session: $0, state: ManagerState.poweredOn, reason: nil) }
    }

    /// Service Changed on a link: what was discovered in `range` is gone (the client rediscovers).
    fileprivate func servicesChanged(_ range: ClosedRange<ATTHandle>, on peer: LEAddress) {
        subscriptions.forget(self, peer: peer, in: range)
        guard var record = records[peer] else { return }
        let stale = (record.services ?? []).filter { $0.handles.overlaps(range) }
        record.services = record.services?.filter { !$0.handles.overlaps(range) }
        for service in stale {
            for characteristic in record.characteristics.removeValue(forKey: service.handles.lowerBound) ?? [] {
                record.descriptors[characteristic.valueHandle] = nil
                record.notifying.remove(characteristic.valueHandle)
            }
        }
        records[peer] = record
    }
}

/// One link's events, as messages naming its peer.
final class LinkRelay: CentralLinkEvents, @unchecked Sendable {
    @WeakHeld private var session: CentralSession?
    let peer: LEAddress

    init(session: CentralSession, peer: LEAddress) {
        self.session = session
        self.peer = peer
    }

    func linkMTUChanged(_ mtu: Int) { session?.emit { [peer] in .linkMTU(session: $0, peer: peer, mtu: UInt16(clamping: mtu)) } }
    func linkReadName(_ name: String) { session?.emit { [peer] in .linkName(session: $0, peer: peer, name: name) } }
    func linkServicesChanged(_ range: ClosedRange<ATTHandle>) {
        session?.servicesChanged(range, on: peer)
        session?.emit { [peer] in .linkServicesChanged(session: $0, peer: peer, range: range) }
    }
    func linkReturnedWriteBudget(_ count: Int) {
        session?.emit { [peer] in .linkWriteBudget(session: $0, peer: peer, count: UInt16(clamping: count)) }
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
