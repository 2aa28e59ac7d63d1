import ATT
import AssignedNumbers
import DaemonProtocol
import GAP
import GATT
import HCI
import HCIDriver
import HostDevice
import L2CAP
import RoleServices
import SMP
import Scheduling

/// The central role of a manager whose device is `corebluetoothd`'s: each call a message, each
/// message of its session an event, as ``CentralService`` gives them in the process.
///
/// Loop-confined (the host's loop), once ``open(onState:)`` ran.
public final class RemoteCentralRole: CentralRole, @unchecked Sendable {
    @exclusivity(unchecked) private var eventsHeld = WeakHeldExistential<any CentralServiceEvents>(wrappedValue: nil)
    public var events: (any CentralServiceEvents)? {
        get { eventsHeld.wrappedValue }
        set { eventsHeld.wrappedValue = newValue }
    }
    private let host: DaemonSessionHost
    private var session: UInt32?
    private var state: UInt8 = 0
    private var links: [LEAddress: RemoteCentralLink] = [:]
    private var nextRequest: UInt32 = 1
    private var rssiRequests: [UInt32: (Result<Int8, HCIError>) -> Void] = [:]
    /// The connection events asked for (sent again to a daemon that came back).
    private var connectionEventFilter: (services: [BluetoothUUID]?, peripherals: [LEAddress]?)?
    /// Hears each connection event: the peer, and whether it connected. Set before ``open``.
    public var onConnectionEvent: ((LEAddress, Bool) -> Void)?
    /// Channels being opened: the peer, the PSM and who waits, by request.
    private var channelRequests: [UInt32: (peer: LEAddress, psm: UInt16, completion: (Result<RoleChannel, ChannelOpenError>) -> Void)] = [:]
    private var channels: RemoteChannels!
    private let pairing: RemotePairing

    public init(host: DaemonSessionHost) {
        self.host = host
        pairing = RemotePairing(loop: host.loop) { [host] in host.version }
        channels = RemoteChannels { [weakSelf = WeakHandle(self)] make in weakSelf.object?.send(make) }
        pairing.sendMessage = { [weakSelf = WeakHandle(self)] make in weakSelf.object?.send(make) }
    }

    /// Any thread: the daemon asks it the pairing prompts of this session's links.
    public var pairingAgent: (any PairingAgent)? {
        get { pairing.agent }
        set { pairing.agent = newValue }
    }

    /// Whether the daemon's device is on for this session.
    public var isOn: Bool { session != nil && state == 5 }

    /// On the loop: opens the session; `onState` gets each state the daemon reports (a
    /// `CBManagerState` raw value, and why it is not on), and `unsupported` with the reason if
    /// the connection to the daemon ends. With `restoreIdentifier`, the daemon keeps the
    /// session when this process goes; and if it kept one under that identifier, `onRestore`
    /// gets what it kept before the first state (its connected peers' links are this role's
    /// from then on: take them with ``link(for:)`` and resume their subscriptions with
    /// ``resumeNotifications(from:handle:onValue:)``).
    public func open(restoreIdentifier: String? = nil, onRestore: @escaping (_ peers: [DaemonRestoredPeer], _ scan: DaemonRestoredScan?) -> Void = { _, _ in },
                     onState: @escaping (UInt8, String?) -> Void) {
        let id = host.openSession({ [weakSelf = WeakHandle(self)] message in
            weakSelf.object?.handle(message, onRestore: onRestore, onState: onState)
        }, lost: { [weakSelf = WeakHandle(self)] reason, permanent in
            // The daemon went: `.resetting` while the host connects again (as iOS apps see
            // `bluetoothd` restart), `.unsupported` when it will not; the links are gone.
            guard let self = weakSelf.object else { return }
            let wasOn = self.isOn
            let newState: UInt8 = permanent ? 2 : 1
            self.state = newState
            self.closeAllLinks(cause: .link(HCIStatus(0x08)), notify: wasOn)
            let waiting = self.rssiRequests
            self.rssiRequests = [:]
            for completion in waiting.values { completion(.failure(.notSupported("corebluetoothd went"))) }
            self.failChannelRequests()
            self.channels.closeAll()
            onState(newState, "corebluetoothd at \(self.host.path): \(reason)")
        }, reopen: { [weakSelf = WeakHandle(self)] in
            // A daemon that came back: the session opens again there (its state follows).
            guard let self = weakSelf.object, let session = self.session else { return }
            self.host.send(.openCentral(session: session, restoreIdentifier: restoreIdentifier))
            self.pairing.sessionOpened()
            if let filter = self.connectionEventFilter {
                self.host.send(.registerConnectionEvents(session: session, services: filter.services, peripherals: filter.peripherals))
            }
        })
        session = id
        host.send(.openCentral(session: id, restoreIdentifier: restoreIdentifier))
        pairing.sessionOpened()
    }

    /// The manager went: the daemon ends the session (its scan and connections with it).
    public func close() {
        guard let session else { return }
        self.session = nil
        host.closeSession(session)
    }

    // MARK: - Calls

    private func send(_ make: (UInt32) -> DaemonMessage) {
        guard let session else { return }
        host.send(make(session))
    }

    func request() -> UInt32 {
        defer { nextRequest &+= 1 }
        return nextRequest
    }

    public func startScan(_ request: ScanRequest) {
        send { .startScan(session: $0, services: request.services.map { Array($0) }, solicited: Array(request.solicited),
                          allowDuplicates: request.allowDuplicates) }
    }

    public func stopScan() { send { .stopScan(session: $0) } }

    /// Asks for connection events of the daemon's device (any client's connections) to peers
    /// with any of `services` and among `peripherals` (nil: any): ``onConnectionEvent`` hears them.
    public func registerConnectionEvents(services: [BluetoothUUID]?, peripherals: [LEAddress]?) {
        connectionEventFilter = (services, peripherals)
        send { .registerConnectionEvents(session: $0, services: services, peripherals: peripherals) }
    }

    public func connect(_ peer: LEAddress, autoReconnect: Bool) {
        if let link = links[peer] {
            // Already connected: the API side hears it again (as on iOS).
            events?.central(self, didConnect: link)
            return
        }
        send { .connect(session: $0, peer: peer, autoReconnect: autoReconnect) }
    }

    public func cancel(_ peer: LEAddress, notify: Bool) { send { .cancel(session: $0, peer: peer, notify: notify) } }

    public func link(for peer: LEAddress) -> (any CentralRoleLink)? { links[peer] }

    /// A restored link's subscription (the daemon kept it on): `onValue` gets its values.
    public func resumeNotifications(from peer: LEAddress, handle: ATTHandle, onValue: @escaping ([UInt8]) -> Void) {
        links[peer]?.resume(handle, onValue)
    }

    public func readRSSI(of peer: LEAddress, completion: @escaping (Result<Int8, HCIError>) -> Void) {
        guard let session, links[peer] != nil else { return completion(.failure(.notSupported("the peer is not connected"))) }
        let id = request()
        rssiRequests[id] = completion
        host.send(.readRSSI(session: session, peer: peer, request: id))
    }

    public func openChannel(to peer: LEAddress, psm: UInt16, completion: @escaping (Result<RoleChannel, ChannelOpenError>) -> Void) {
        guard let session, links[peer] != nil else { return completion(.failure(.disconnected)) }
        // Not `.disconnected`: the API side would wait for the link's end to answer the call.
        guard host.version >= 2 else {
            return completion(.failure(.notSupported("corebluetoothd speaks protocol version \(host.version), without L2CAP channels.")))
        }
        let id = request()
        channelRequests[id] = (peer, psm, completion)
        host.send(.openChannel(session: session, peer: peer, request: id, psm: psm))
    }

    /// The daemon went: channels being opened fail as their links do.
    private func failChannelRequests() {
        let waiting = channelRequests
        channelRequests = [:]
        for request in waiting.values { request.completion(.failure(.disconnected)) }
    }

    /// Fire and forget, as in the process. A daemon of protocol version 2 or older has no message
    /// for it: its device keeps the PHYs it has.
    public func setPHY(of peer: LEAddress, _ phy: LEPHY) {
        guard let session, links[peer] != nil, host.version >= 3 else { return }
        host.send(.setPHY(session: session, peer: peer, phy: phy.rawValue))
    }

    /// Fire and forget, as in the process. A daemon of protocol version 2 or older has no message
    /// for it: its device keeps the parameters it chose.
    public func updateParameters(of peer: LEAddress, _ parameters: ConnectionParameters) {
        guard let session, links[peer] != nil, host.version >= 3 else { return }
        host.send(.setConnectionParameters(session: session, peer: peer, intervalMin: parameters.intervalMin,
                                           intervalMax: parameters.intervalMax, latency: parameters.latency,
                                           timeout: parameters.timeout))
    }

    func sendLinkMessage(_ make: (UInt32) -> DaemonMessage) { send(make) }

    // MARK: - Messages

    private func handle(_ message: DaemonMessage, onRestore: ([DaemonRestoredPeer], DaemonRestoredScan?) -> Void,
                        onState: (UInt8, String?) -> Void) {
        switch message {
        case .restoreState(_, let peers, let scan, _):
            for restored in peers where restored.isConnected {
                links[restored.peer] = RemoteCentralLink(role: self, peer: restored.peer, mtu: Int(restored.mtu))
            }
            onRestore(peers, scan)
        case .state(_, let newState, let reason):
            pairing.stateArrived()
            let wasOn = isOn
            state = newState
            if wasOn && !isOn { closeAllLinks(cause: .link(HCIStatus(0x08)), notify: false) }
            onState(newState, reason)
        case .discovered(_, let peer, let data, let scanResponse, let isConnectable, let rssi):
            events?.central(self, didDiscover: peer, advertisement: AdvertisingData(bytes: data + (scanResponse ?? [])),
                            raw: (data, scanResponse), isConnectable: isConnectable, rssi: rssi)
        case .scanFailed:
            events?.centralScanFailed(self)
        case .connected(_, let peer, let mtu):
            let link = links[peer] ?? RemoteCentralLink(role: self, peer: peer, mtu: Int(mtu))
            links[peer] = link
            events?.central(self, didConnect: link)
            if link.events == nil {
                // Nobody on the API side wants it any more (the peripheral was released).
                cancel(peer, notify: false)
            } else {
                link.events?.linkMTUChanged(link.mtu)
            }
        case .failedToConnect(_, let peer, _):
            events?.central(self, didFailToConnect: peer, error: .failed(HCIStatus(0x3E)))
        case .disconnected(_, let peer, let cause, let isReconnecting):
            links.removeValue(forKey: peer)?.close()
            let wire: CentralDisconnection = switch cause {
            case .requested(let notify): .requested(notify: notify)
            case .attTimeout: .attTimeout
            case .link(let status): .link(status)
            }
            events?.central(self, didDisconnect: peer, cause: wire, isReconnecting: isReconnecting)
        case .linkMTU(_, let peer, let mtu):
            links[peer]?.mtuChanged(Int(mtu))
        case .linkName(_, let peer, let name):
            links[peer]?.events?.linkReadName(name)
        case .linkServicesChanged(_, let peer, let range):
            links[peer]?.events?.linkServicesChanged(range)
        case .linkWriteBudget(_, let peer, let count):
            links[peer]?.events?.linkReturnedWriteBudget(Int(count))
        case .notification(_, let peer, let handle, let value):
            links[peer]?.deliver(value, for: handle)
        case .connectionEvent(_, let peer, let connected):
            onConnectionEvent?(peer, connected)
        case .rssi(_, let id, let rssi, let error):
            guard let completion = rssiRequests.removeValue(forKey: id) else { return }
            completion(error.map { .failure(.notSupported($0)) } ?? .success(rssi))
        case .services, .includedServices, .characteristics, .descriptors, .value, .done:
            for link in links.values where link.answer(message) { return }
        case .channelOpened(_, let id, let result):
            guard let request = channelRequests.removeValue(forKey: id) else {
                // Nobody waits for it (the daemon came back meanwhile): it closes.
                if case .success(let channel) = result { send { .channelClose(session: $0, channel: channel) } }
                return
            }
            switch result {
            case .success(let channel): request.completion(.success(channels.channel(channel, psm: request.psm, peer: request.peer)))
            case .failure(let error): request.completion(.failure(ChannelOpenError(error)))
            }
        default:
            if channels.handle(message) { return }
            _ = pairing.handle(message)
        }
    }

    private func closeAllLinks(cause: CentralDisconnection, notify: Bool) {
        let all = links
        links = [:]
        for (peer, link) in all {
            link.close()
            if notify { events?.central(self, didDisconnect: peer, cause: cause, isReconnecting: false) }
        }
    }
}

/// A connection of a remote central role: GATT procedures as requests, answered by the
/// daemon's messages. Loop-confined.
final class RemoteCentralLink: CentralRoleLink, @unchecked Sendable {
    let peer: LEAddress
    @exclusivity(unchecked) private var eventsHeld = WeakHeldExistential<any CentralLinkEvents>(wrappedValue: nil)
    var events: (any CentralLinkEvents)? {
        get { eventsHeld.wrappedValue }
        set { eventsHeld.wrappedValue = newValue }
    }
    private(set) var isClosed = false
    private(set) var mtu: Int
    @WeakHeld private var role: RemoteCentralRole?
    private var pending: [UInt32: (DaemonMessage) -> Void] = [:]
    private var valueHandlers: [ATTHandle: ([UInt8]) -> Void] = [:]

    init(role: RemoteCentralRole, peer: LEAddress, mtu: Int) {
        self.role = role
        self.peer = peer
        self.mtu = mtu
    }

    func mtuChanged(_ mtu: Int) {
        self.mtu = mtu
        events?.linkMTUChanged(mtu)
    }

    func deliver(_ value: [UInt8], for handle: ATTHandle) { valueHandlers[handle]?(value) }

    func resume(_ handle: ATTHandle, _ onValue: @escaping ([UInt8]) -> Void) { valueHandlers[handle] = onValue }

    /// Takes the answer to one of this link's requests; false if it is not one.
    func answer(_ message: DaemonMessage) -> Bool {
        let id: UInt32? = switch message {
        case .services(_, let id, _), .includedServices(_, let id, _), .characteristics(_, let id, _), .descriptors(_, let id, _),
             .value(_, let id, _), .done(_, let id, _): id
        default: nil
        }
        guard let id, let handler = pending.removeValue(forKey: id) else { return false }
        handler(message)
        return true
    }

    /// The link is gone: every request still waiting fails as disconnected.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        let waiting = pending
        pending = [:]
        valueHandlers = [:]
        for handler in waiting.values { handler(.done(session: 0, request: 0, error: .disconnected)) }
        events?.linkClosed()
    }

    /// Sends a request; `handler` gets its answer (or a `done` with `.disconnected`).
    private func request(_ make: (UInt32, UInt32) -> DaemonMessage, then handler: @escaping (DaemonMessage) -> Void) {
        guard !isClosed, let role else { return handler(.done(session: 0, request: 0, error: .disconnected)) }
        let id = role.request()
        pending[id] = handler
        role.sendLinkMessage { make($0, id) }
    }

    private static func failure(_ message: DaemonMessage) -> GATTClientError {
        if case .done(_, _, let error?) = message { return error }
        return .protocolViolation("the daemon answered \(message.kind)")
    }

    func discoverPrimaryServices(uuid: BluetoothUUID?, completion: @escaping (Result<[DiscoveredService], GATTClientError>) -> Void) {
        request({ .discoverServices(session: $0, peer: peer, request: $1, uuid: uuid) }, then: {
            if case .services(_, _, let result) = $0 { completion(result) } else { completion(.failure(Self.failure($0))) }
        })
    }

    func discoverIncludedServices(of service: DiscoveredService,
                                  completion: @escaping (Result<[DiscoveredIncludedService], GATTClientError>) -> Void) {
        request({ .discoverIncludedServices(session: $0, peer: peer, request: $1, service: service) }, then: {
            if case .includedServices(_, _, let result) = $0 { completion(result) } else { completion(.failure(Self.failure($0))) }
        })
    }

    func discoverCharacteristics(of service: DiscoveredService,
                                 completion: @escaping (Result<[DiscoveredCharacteristic], GATTClientError>) -> Void) {
        request({ .discoverCharacteristics(session: $0, peer: peer, request: $1, service: service) }, then: {
            if case .characteristics(_, _, let result) = $0 { completion(result) } else { completion(.failure(Self.failure($0))) }
        })
    }

    func discoverDescriptors(of characteristic: DiscoveredCharacteristic,
                             completion: @escaping (Result<[DiscoveredDescriptor], GATTClientError>) -> Void) {
        request({ .discoverDescriptors(session: $0, peer: peer, request: $1, characteristic: characteristic) }, then: {
            if case .descriptors(_, _, let result) = $0 { completion(result) } else { completion(.failure(Self.failure($0))) }
        })
    }

    func readValue(of handle: ATTHandle, completion: @escaping (Result<[UInt8], GATTClientError>) -> Void) {
        request({ .read(session: $0, peer: peer, request: $1, handle: handle) }, then: {
            if case .value(_, _, let result) = $0 { completion(result) } else { completion(.failure(Self.failure($0))) }
        })
    }

    func writeValue(_ value: [UInt8], to handle: ATTHandle, completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        request({ .write(session: $0, peer: peer, request: $1, handle: handle, value: value) }, then: {
            if case .done(_, _, nil) = $0 { completion(.success(())) } else { completion(.failure(Self.failure($0))) }
        })
    }

    func enqueueWrite(_ value: [UInt8], to handle: ATTHandle) {
        guard !isClosed else { return }
        role?.sendLinkMessage { .writeWithoutResponse(session: $0, peer: peer, handle: handle, value: value) }
    }

    func subscribe(to characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle?,
                   onValue: @escaping ([UInt8]) -> Void, completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        // Values may come before the answer (as in the process: from the moment the CCCD
        // write is sent).
        let handle = characteristic.valueHandle
        let previous = valueHandlers.updateValue(onValue, forKey: handle)
        request({
            .setNotify(session: $0, peer: peer, request: $1, characteristic: characteristic, clientConfiguration: clientConfiguration,
                       enabled: true)
        }, then: { [weakSelf = WeakHandle(self)] answer in
            if case .done(_, _, nil) = answer { return completion(.success(())) }
            weakSelf.object?.valueHandlers[handle] = previous
            completion(.failure(Self.failure(answer)))
        })
    }

    func unsubscribe(from characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle?,
                     completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        let handle = characteristic.valueHandle
        request({
            .setNotify(session: $0, peer: peer, request: $1, characteristic: characteristic, clientConfiguration: clientConfiguration,
                       enabled: false)
        }, then: { [weakSelf = WeakHandle(self)] answer in
            guard case .done(_, _, nil) = answer else { return completion(.failure(Self.failure(answer))) }
            weakSelf.object?.valueHandlers[handle] = nil
            completion(.success(()))
        })
    }
}
