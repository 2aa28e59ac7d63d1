import AssignedNumbers
import HCI
import HCITransport
import HostDevice
import Scheduling

/// Connection events (`registerForConnectionEvents(options:)`; docs/daemon.md, "Connection
/// events"): the connections of one host device made by any of its central roles (a daemon's
/// clients' sessions, or the managers of a process sharing a controller), and those peers made
/// to it (``observeAcceptedConnections(on:)``), told to the roles
/// that registered for them, filtered by the peer's services (as advertised to, or discovered
/// by, any of them) and by peer. One per host device (per daemon), shared by its roles.
///
/// Loop-confined (the device's loop).
public final class ConnectionEvents: @unchecked Sendable {
    public struct Filter: Sendable {
        /// Peers with any of these services; nil: any peer.
        public var services: Set<BluetoothUUID>?
        /// These peers only; nil: any.
        public var peripherals: Set<LEAddress>?

        public init(services: Set<BluetoothUUID>?, peripherals: Set<LEAddress>?) {
            self.services = services
            self.peripherals = peripherals
        }
    }

    private var listeners: [ObjectIdentifier: (filter: Filter, tell: (LEAddress, Bool) -> Void)] = [:]
    /// Hears the connections peers make to the device.
    private var acceptor: AcceptedConnections?
    /// Roles connected to each peer: the peer connected when the first one is, and
    /// disconnected when the last one is not any more.
    private var users: [LEAddress: Int] = [:]
    /// What is known of each peer's services.
    private var services: [LEAddress: Set<BluetoothUUID>] = [:]
    /// Peers whose services are remembered, at most (those connected are kept past it).
    static let rememberedPeers = 4096
    /// Counts the times services were forgotten (past ``rememberedPeers``): what a caller told
    /// at an earlier count it need not tell again while the count is the same (a scanner
    /// hears the same services report after report).
    public private(set) var forgetCount: UInt64 = 0

    public init() {}

    public func register(_ owner: AnyObject, filter: Filter, tell: @escaping (LEAddress, Bool) -> Void) {
        listeners[ObjectIdentifier(owner)] = (filter, tell)
    }

    public func unregister(_ owner: AnyObject) { listeners[ObjectIdentifier(owner)] = nil }

    /// Counts every connection a peer makes to `device` (the device as peripheral: a remote
    /// central connected to its advertising) as one role's connection, whichever client serves
    /// it, from now until the connection ends. On the device's loop (again for a new device).
    public func observeAcceptedConnections(on device: HostDevice) {
        guard acceptor?.device !== device else { return }
        let acceptor = AcceptedConnections(events: self, device: device)
        self.acceptor = acceptor
        device.addClient(acceptor, roles: .peripheral)
    }

    /// `peer` advertises, or has, these services.
    public func learned(_ found: [BluetoothUUID], of peer: LEAddress) {
        guard !found.isEmpty else { return }
        if services[peer] == nil, services.count >= Self.rememberedPeers {
            services = services.filter { users[$0.key] != nil }
            forgetCount &+= 1
        }
        services[peer, default: []].formUnion(found)
    }

    /// A role's connection to `peer` is up (once per role and connection).
    public func connected(_ peer: LEAddress) {
        users[peer, default: 0] += 1
        if users[peer] == 1 { tell(peer, connected: true) }
    }

    /// A role's connection to `peer` is gone (for it).
    public func disconnected(_ peer: LEAddress) {
        guard let count = users[peer] else { return }
        guard count <= 1 else {
            users[peer] = count - 1
            return
        }
        users[peer] = nil
        tell(peer, connected: false)
    }

    private func tell(_ peer: LEAddress, connected: Bool) {
        let known = services[peer] ?? []
        for (filter, tell) in listeners.values {
            if let wanted = filter.peripherals, !wanted.contains(peer) { continue }
            if let wanted = filter.services, wanted.isDisjoint(with: known) { continue }
            tell(peer, connected)
        }
    }
}

/// A client of the host device in the peripheral role that serves nothing (no services, no
/// advertising, no pairing agent: the device's agent or another owner's answers): it is an
/// owner of every connection a peer makes, so it hears each one come and go, and tells
/// ``ConnectionEvents``. Loop-confined.
final class AcceptedConnections: HostDeviceClient, @unchecked Sendable {
    @WeakHeld private var events: ConnectionEvents?
    @WeakHeld var device: HostDevice?
    /// One entry inline (no storage) while one peer is connected.
    private var open = IntegerKeyMap<ObjectIdentifier, LEAddress>()

    init(events: ConnectionEvents, device: HostDevice) {
        self.events = events
        self.device = device
    }

    func device(_ device: HostDevice, didConnect connection: DeviceConnection) {
        guard connection.role == .peripheral else { return }
        guard open.updateValue(connection.peer, forKey: ObjectIdentifier(connection)) == nil else { return }
        events?.connected(connection.peer)
    }

    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {
        guard let peer = open.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        events?.disconnected(peer)
    }

    func device(_ device: HostDevice, didClose error: HCITransportError?) {
        let gone = open.values
        open.removeAll()
        for peer in gone { events?.disconnected(peer) }
    }
}
