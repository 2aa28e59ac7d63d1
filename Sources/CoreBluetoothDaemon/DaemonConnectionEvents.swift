import AssignedNumbers
import HCI

/// Connection events (docs/daemon.md, "Connection events"): the device's connections made by
/// any client's central session, told to the sessions that registered for them
/// (`registerForConnectionEvents(options:)`), filtered by the peer's services (as advertised
/// to, or discovered by, any session) and by peer. One per daemon, shared by its clients.
///
/// Loop-confined (the device's loop).
public final class DaemonConnectionEvents: @unchecked Sendable {
    struct Filter {
        /// Peers with any of these services; nil: any peer.
        var services: Set<BluetoothUUID>?
        /// These peers only; nil: any.
        var peripherals: Set<LEAddress>?
    }

    private var listeners: [ObjectIdentifier: (filter: Filter, tell: (LEAddress, Bool) -> Void)] = [:]
    /// Sessions connected to each peer: the peer connected when the first one is, and
    /// disconnected when the last one is not any more.
    private var users: [LEAddress: Int] = [:]
    /// What is known of each peer's services.
    private var services: [LEAddress: Set<BluetoothUUID>] = [:]
    /// Peers whose services are remembered, at most (those connected are kept past it).
    static let rememberedPeers = 4096

    public init() {}

    func register(_ owner: AnyObject, filter: Filter, tell: @escaping (LEAddress, Bool) -> Void) {
        listeners[ObjectIdentifier(owner)] = (filter, tell)
    }

    func unregister(_ owner: AnyObject) { listeners[ObjectIdentifier(owner)] = nil }

    /// `peer` advertises, or has, these services.
    func learned(_ found: [BluetoothUUID], of peer: LEAddress) {
        guard !found.isEmpty else { return }
        if services[peer] == nil, services.count >= Self.rememberedPeers {
            services = services.filter { users[$0.key] != nil }
        }
        services[peer, default: []].formUnion(found)
    }

    /// A session's connection to `peer` is up.
    func connected(_ peer: LEAddress) {
        users[peer, default: 0] += 1
        if users[peer] == 1 { tell(peer, connected: true) }
    }

    /// A session's connection to `peer` is gone (for it).
    func disconnected(_ peer: LEAddress) {
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
