import ATT
import GATT
import HCI
import HCIDriver
import HCITransport
import HostStack
import L2CAP
import Bonding
import LECrypto
import Logging
import SMP
import Scheduling
import StackLogging

/// The host on one controller, shared by every user of that controller, as a phone's apps
/// share its radio: the `LEHost` (HCI driver, L2CAP links, GAP procedures), the device's one
/// GATT server and database, and per connection the ATT bearer, the GATT server connection and
/// the GATT client (``DeviceConnection``).
///
/// Its users are ``HostDeviceClient``s (a Core Bluetooth manager each, in both roles). The
/// device merges what they ask of the controller and hands each only what is its own:
/// - **Scanning**: the controller scans while any client does; every client that scans gets
///   every report and filters and coalesces them itself.
/// - **Connections** belong to the clients that made them (as central) or, for connections a
///   peer makes, to the clients in the peripheral role. A client gives a connection up with
///   ``disconnect(_:for:)``; the link goes down when no owner is left.
/// - **Advertising**: one advertising set per client when the controller has extended
///   advertising; otherwise the controller's one set, one client at a time.
/// - **Services** of every client go into the one database; reads, writes and subscriptions
///   reach the client whose service holds the attribute.
///
/// Loop-confined: call it on its loop, and its clients are called there.
public final class HostDevice: LEHostDelegate, @unchecked Sendable {
    public let host: LEHost
    public let gattServer: GATTServer
    public var loop: EventLoop { host.loop }
    /// The address the device uses on the air (its static random address, or the public one
    /// if the controller refused a random address), once started.
    public private(set) var address: LEAddress?
    /// Where the device's loggers come from (its host's, each connection's): the process's
    /// unless a test gives its own.
    public let logging: StackLogging
    /// `corebluetooth.hci`: what the device drops or refuses that concerns no one connection.
    let logger: Logger

    struct ClientEntry {
        @WeakHeldExistential var client: (any HostDeviceClient)?
        let id: ObjectIdentifier
        var roles: HostDeviceRoles
        var isScanning = false
        var advertisingSet: UInt8?
        /// The owner number its updates carry in the GATT server (the smallest free one).
        let updateOwner: Int
    }
    /// In the order they joined: callbacks reach them in that order.
    @exclusivity(unchecked) var clients: [ClientEntry] = []  // exclusivity checks: 0.08 % of adv

    @exclusivity(unchecked) public private(set) var connections = ConnectionTable()  // exclusivity checks: 0.06 % of pair
    /// Connections by their GATT server connection, filled as requests arrive (a connection
    /// that never carries a request costs no entry: fleets of connections count every byte).
    var connectionsByServerConnection: [ObjectIdentifier: DeviceConnection] = [:]

    // Scanning (HostDevice+Scanning)
    var controllerScanning = false
    var scanCommandInFlight = false

    // Connecting (HostDevice+Connecting)
    struct PendingConnection {
        let peer: LEAddress
        var owners: [ObjectIdentifier]
    }
    var pending: [PendingConnection] = []
    var initiating: LEAddress?
    var cancellingInitiation = false
    var turnTimer: TimerHandle?
    /// How long one waiting connection has the initiator before the next one's turn: the
    /// controller initiates one connection at a time.
    public static let initiatorTurn: Duration = .seconds(2)
    /// How long the owners of a new connection (as central) wait for the ATT MTU exchange
    /// before hearing of the connection anyway.
    public static let mtuExchangeGrace: Duration = .seconds(2)

    // Services (HostDevice+Services)
    struct OwnedService {
        let id: GATTServiceID
        let range: ClosedRange<ATTHandle>
        let owner: ObjectIdentifier
    }
    @exclusivity(unchecked) var services: [OwnedService] = []  // exclusivity checks: 0.05 % of pair

    // Security (HostDevice+Security)
    /// The pairing policy each link's Security Manager starts from.
    public var securityConfiguration = SMPConfiguration()
    /// Whether a request the peer refuses for want of security pairs (or encrypts) and is
    /// retried, as iOS does (the default); off, the refusal is the answer.
    public var raisesSecurityOnRefusal = true
    /// The ATT_MTU this device offers on its connections from now on (tests lower it, so that
    /// values need long reads and writes).
    public var preferredMTU = ATTMTU.preferred
    /// Answers pairing prompts on links whose owners have no agent of their own.
    public var pairingAgent: any PairingAgent = AutoAcceptPairingAgent()
    /// Told, on the loop, when a peer bonds: the address its link was made to and the identity
    /// its bond is kept under (the identity address it gave, else that address). Reports and
    /// links name the peer by that identity from then on, whatever private address it uses:
    /// what keeps the API's identifier for the peer across its address rotations.
    public var onBond: ((_ linkPeer: LEAddress, _ identity: LEAddress) -> Void)?
    /// The keys of bonded peers: in memory until ``useBondStore(_:)`` gives the device a
    /// persistent store for its controller.
    public internal(set) var bonds = BondStore(inMemoryFor: LEAddress(.publicDevice, .zero))
    var pairingFailures: [LEAddress: PairingFailures] = [:]
    /// Out-of-band data handed out for the next pairing that uses it (`makeLocalOutOfBandData`).
    var localOutOfBandData: SMPLocalOOBData?
    /// Bonded peers whose resolvable private addresses the host resolves (the controller cannot,
    /// or its list is full): the address each was last seen at, to connect to, by identity.
    var lastResolvableAddress: [LEAddress: LEAddress] = [:]

    // Channels (HostDevice+Channels)
    /// The PSMs clients published, in publication order.
    var publishedPSMs: [PublishedPSM] = []

    public private(set) var isClosed = false
    /// The controller reset itself and is being initialised again: nothing is asked of it
    /// until clients hear `deviceDidReset`.
    public private(set) var isResetting = false
    /// Closed or resetting: the controller takes nothing now.
    var isOff: Bool { isClosed || isResetting || host.driver.isResetting }
    /// How often private addresses rotate, once ``enablePrivacy(rotation:completion:)`` turned
    /// them on (on again after a controller reset).
    var privacyRotation: Duration?

    /// A device on the controller behind `transport`, run on `loop`; its GAP service names it
    /// `deviceName` until a client renames it.
    public init(transport: HCITransport, loop: EventLoop, deviceName: String, logging: StackLogging = .standard) {
        host = LEHost(transport: transport, loop: loop, logging: logging)
        gattServer = GATTServer(deviceName: deviceName)
        self.logging = logging
        logger = logging.logger(.hci)
        host.delegate = self
        routeServerRequests()
    }

    /// Opens the transport, initialises the controller and sets the device's static random
    /// address (derived from the public one, so stable across runs, as phones show themselves
    /// with a random address; some controllers route LE data only by random addresses).
    public func start(completion: @escaping (Result<LEAddress, HCIError>) -> Void) {
        assertOnLoop()
        host.start { [self] result in
            switch result {
            case .success(let info):
                let random = LEHost.staticRandomAddress(from: info.address)
                host.setRandomAddress(random) { [self] result in
                    switch result {
                    case .success: address = LEAddress(.randomDevice, random)
                    case .failure(let error):
                        logger.notice("no random address (\(error)): using the public address \(info.address)")
                        address = LEAddress(.publicDevice, info.address)
                    }
                    completion(.success(address!))
                }
            case .failure(let error):
                isClosed = true
                completion(.failure(error))
            }
        }
    }

    /// Closes the transport. Clients are not called: they are going away too.
    public func stop() {
        assertOnLoop()
        host.delegate = nil
        host.stop()
        dropEverything()
    }

    /// Debug builds check every entry point runs on the device's loop.
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        loop.assertConfined("HostDevice", file: file, line: line)
    }

    // MARK: - Clients

    /// Adds a client in `roles`. A client in the peripheral role owns the connections peers
    /// make from then on.
    public func addClient(_ client: any HostDeviceClient, roles: HostDeviceRoles) {
        assertOnLoop()
        let id = ObjectIdentifier(client)
        guard !clients.contains(where: { $0.id == id }) else { return }
        let taken = Set(clients.map(\.updateOwner))
        let owner = (0...).first { !taken.contains($0) }!
        clients.append(ClientEntry(client: client, id: id, roles: roles, updateOwner: owner))
    }

    /// The owner number `client`'s updates carry in ``gattServer`` (`updateValue(…owner:)`):
    /// the server reports their hand-over per owner, so each client keeps its own budget.
    public func updateOwner(of client: any HostDeviceClient) -> Int? {
        assertOnLoop()
        return entryIndex(client).map { clients[$0].updateOwner }
    }

    /// Removes a client and everything it had: its scan, its pending connections, its share of
    /// connections (a link only it owned goes down), its advertising set and its services.
    /// It is not called again.
    public func removeClient(_ client: any HostDeviceClient) {
        assertOnLoop()
        let id = ObjectIdentifier(client)
        guard let index = clients.firstIndex(where: { $0.id == id }) else { return }
        let entry = clients.remove(at: index)
        if entry.isScanning { reconcileScan() }
        for peer in pending.filter({ $0.owners.contains(id) }).map(\.peer) { dropPendingOwner(id, of: peer) }
        for connection in connections.values where connection.isOwned(by: id) {
            connection.owners.removeAll { $0 == id }
            if connection.owners.isEmpty && connection.role == .central { host.disconnect(connection.le) }
        }
        for connection in connections.values { connection.users.removeAll { $0 == id } }
        if let set = entry.advertisingSet, !isOff {
            host.stopAdvertising(set: set) { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                if case .failure(let error) = result { self?.logger.warning("stopping a removed client's advertising failed: \(error)") }
            }
        }
        removeAllServices(ownedBy: id)
        unpublishAllChannels(ownedBy: id)
    }

    func entryIndex(_ client: any HostDeviceClient) -> Int? {
        let id = ObjectIdentifier(client)
        return clients.firstIndex { $0.id == id }
    }

    /// The live clients whose identifiers are in `ids`, in joining order.
    func clients<IDs: Sequence<ObjectIdentifier>>(in ids: IDs) -> [any HostDeviceClient] {
        let ids = Set(ids)
        return clients.compactMap { ids.contains($0.id) ? $0.client : nil }
    }

    // MARK: - Connections

    /// The connection a GATT server request came on.
    public func connection(for serverConnection: any GATTServerConnection) -> DeviceConnection? {
        assertOnLoop()
        // A device has a few connections: a look at each is cheaper than hashing (every
        // request and write comes through here). Fleets of them use the index.
        if connections.count <= 4 {
            for connection in connections.values where connection.serverConnection === serverConnection { return connection }
            return nil
        }
        let key = ObjectIdentifier(serverConnection)
        if let known = connectionsByServerConnection[key] { return known }
        guard let found = connections.values.first(where: { $0.serverConnection === serverConnection }) else { return nil }
        connectionsByServerConnection[key] = found
        return found
    }

    /// Reads the connection's RSSI (dBm); fails when the controller cannot measure it.
    public func readRSSI(_ connection: DeviceConnection, completion: @escaping (Result<Int8, HCIError>) -> Void) {
        assertOnLoop()
        host.driver.send(ReadRSSI(connectionHandle: connection.handle)) { result in
            switch result {
            case .success(let parameters) where parameters.rssi != 127: completion(.success(parameters.rssi))
            case .success: completion(.failure(.notSupported("the controller could not measure the RSSI")))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// Asks for PHYs on a connection.
    public func setPHY(_ connection: DeviceConnection, tx: Set<LEPHY>, rx: Set<LEPHY>,
                       completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        assertOnLoop()
        host.setPHY(connection.le, tx: tx, rx: rx, completion: completion)
    }

    /// Asks for new connection parameters on a connection.
    public func updateParameters(_ connection: DeviceConnection, _ parameters: ConnectionParameters,
                                 completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        assertOnLoop()
        host.updateParameters(connection.le, parameters, completion: completion)
    }

    // MARK: - LEHostDelegate

    public func host(_ host: LEHost, didDiscover report: AdvertisingReport) {
        assertOnLoop()
        var report = report
        if report.address.isResolvablePrivate, let identity = resolvedIdentity(of: report.address) {
            report.address = identity
        }
        for entry in clients where entry.isScanning { entry.client?.device(self, didDiscover: report) }
    }

    public func host(_ host: LEHost, didConnect le: LEConnection) {
        assertOnLoop()
        let connection = DeviceConnection(le: le, peer: identity(of: le.peer), server: gattServer, loop: loop, logging: logging)
        connection.bearer.preferredMTU = preferredMTU
        connections[le.handle] = connection
        attachSecurityManager(to: connection)
        attachChannelServer(to: connection)
        let handle = le.handle
        connection.bearer.onTransactionTimeout = { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, let connection = self.connections[handle] else { return }
            self.attTransactionTimedOut(on: connection)
        }
        if le.role == .central {
            centralConnectionCompleted(connection)
        } else {
            // A peer connected to our advertising: it is every peripheral client's.
            connection.owners = clients.filter { $0.roles.contains(.peripheral) }.map(\.id)
            connection.isReady = true
            for client in clients(in: connection.owners) { client.device(self, didConnect: connection) }
        }
    }

    /// An ATT request or indication left unanswered for 30 s leaves the bearer dead (Vol 3
    /// Part F §3.3.3): the link is of no use after that, so it goes.
    func attTransactionTimedOut(on connection: DeviceConnection) {
        guard connection.isOpen else { return }
        connection.logger(.att).warning("\(connection.peer) left an ATT transaction unanswered for 30 s; disconnecting")
        connection.attTimedOut = true
        host.disconnect(connection.le)
    }

    public func host(_ host: LEHost, didDisconnect le: LEConnection, reason: HCIStatus) {
        assertOnLoop()
        guard let connection = connections.removeValue(forKey: le.handle) else { return }
        connectionsByServerConnection[ObjectIdentifier(connection.serverConnection)] = nil
        connection.isOpen = false
        connection.readyTimer?.cancel()
        connection.readyTimer = nil
        securityLinkClosed(connection)
        if !connection.isReady {
            for client in clients(in: connection.owners) {
                client.device(self, didFailToConnectTo: connection.peer, error: .droppedBeforeReady(reason))
            }
            return
        }
        for client in clients(in: connection.owners + connection.users) {
            client.device(self, didDisconnect: connection, reason: reason)
        }
    }

    public func host(_ host: LEHost, encryptionChangedOn le: LEConnection, status: HCIStatus) {
        assertOnLoop()
        guard let connection = connections[le.handle] else { return }
        encryptionChanged(on: connection, status: status)
    }

    /// As peripheral: the key of the pairing under way or of the peer's bond; none, and the
    /// request is refused.
    public func host(_ host: LEHost, longTermKeyFor le: LEConnection, rand: UInt64, ediv: UInt16) -> [UInt8]? {
        assertOnLoop()
        guard let connection = connections[le.handle] else { return nil }
        return longTermKey(for: connection, rand: rand, ediv: ediv)
    }

    public func host(_ host: LEHost, didStopAdvertisingSet set: UInt8) {
        assertOnLoop()
        clients.first { $0.advertisingSet == set }?.client?.deviceDidStopAdvertising(self)
    }

    public func host(_ host: LEHost, didClose error: HCITransportError?) {
        assertOnLoop()
        if let error { logger.error("controller closed: \(error)") }
        dropEverything()
        for entry in clients { entry.client?.device(self, didClose: error) }
    }

    /// What the controller was doing for the clients ends with it (a reset, a close): pending
    /// connections and the one being made, the scan, every client's advertising set.
    private func forgetControllerActivity() {
        pending = []
        initiating = nil
        cancellingInitiation = false
        turnTimer?.cancel()
        turnTimer = nil
        controllerScanning = false
        for index in clients.indices {
            clients[index].isScanning = false
            clients[index].advertisingSet = nil
        }
    }

    /// The controller reset itself (the links were reported lost, each with Hardware Failure,
    /// just before): pending connections, scans, advertising sets, and every client's services
    /// and published channels are gone, as Core Bluetooth drops them below `.poweredOff` (apps
    /// add their services and advertise again after `.resetting`). Clients hear
    /// `deviceWillReset`, then `deviceDidReset` once the controller is back.
    public func host(_ host: LEHost, willReset error: HCIError) {
        assertOnLoop()
        logger.warning("controller reset (\(error)): its links are gone; initialising it again")
        isResetting = true
        forgetControllerActivity()
        for entry in clients {
            removeAllServices(ownedBy: entry.id)
            unpublishAllChannels(ownedBy: entry.id)
        }
        for entry in clients { entry.client?.deviceWillReset(self) }
    }

    /// The controller is initialised again: the device's random address, the resolving list
    /// and privacy are set up as at start, then clients hear `deviceDidReset`.
    public func host(_ host: LEHost, didReset info: ControllerInfo) {
        assertOnLoop()
        let random = LEHost.staticRandomAddress(from: info.address)
        host.setRandomAddress(random) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, self.isResetting, !self.isClosed else { return }
            if case .failure(let error) = result { self.logger.warning("no random address after the reset: \(error)") }
            self.loadResolvingList { [weakSelf = WeakHandle(self)] in
                let `self` = weakSelf.object
                guard let self, self.isResetting, !self.isClosed else { return }
                let back = { [weakSelf = WeakHandle(self)] in
                    let `self` = weakSelf.object
                    guard let self, self.isResetting, !self.isClosed else { return }
                    self.isResetting = false
                    self.logger.notice("controller back after its reset")
                    for entry in self.clients { entry.client?.deviceDidReset(self) }
                }
                guard let rotation = self.privacyRotation else { return back() }
                self.enablePrivacy(rotation: rotation) { [weakSelf = WeakHandle(self)] result in
                    let `self` = weakSelf.object
                    if case .failure(let error) = result { self?.logger.warning("no private addresses after the reset: \(error)") }
                    back()
                }
            }
        }
    }

    /// The controller is gone: nothing of it is left to use.
    private func dropEverything() {
        isClosed = true
        isResetting = false
        for connection in connections.values {
            connection.isOpen = false
            connection.readyTimer?.cancel()
            connection.readyTimer = nil
        }
        connections = ConnectionTable()
        connectionsByServerConnection = [:]
        publishedPSMs = []
        forgetControllerActivity()
    }
}
