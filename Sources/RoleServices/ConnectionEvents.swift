import AssignedNumbers
import HCI

/// Connection events (`registerForConnectionEvents(options:)`; docs/daemon.md, "Connection
/// events"): the connections of one host device made by any of its central roles (a daemon's
/// clients' sessions, or the managers of a process sharing a controller), told to the roles
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
    /// Roles connected to each peer: the peer connected when the first one is, and
    /// disconnected when the last one is not any more.
    private var users: [LEAddress: Int] = [:]
    /// What is known of each peer's services.
    private var services: [LEAddress: Set<BluetoothUUID>] = [:]
    /// Peers whose services are remembered, at most (those connected are kept past it).
    static let rememberedPeers = 4096

    public init() {}

    public func register(_ owner: AnyObject, filter: Filter, tell: @escaping (LEAddress, Bool) -> Void) {
        listeners[ObjectIdentifier(owner)] = (filter, tell)
    }

    public func unregister(_ owner: AnyObject) { listeners[ObjectIdentifier(owner)] = nil }

    /// `peer` advertises, or has, these services.
    public func learned(_ found: [BluetoothUUID], of peer: LEAddress) {
        guard !found.isEmpty else { return }
        if services[peer] == nil, services.count >= Self.rememberedPeers {
            services = services.filter { users[$0.key] != nil }
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
