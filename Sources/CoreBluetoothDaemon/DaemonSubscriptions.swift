import ATT
import GATT
import HCI
import HostDevice
import Scheduling

/// The subscriptions of every central session of the daemon, per link and characteristic.
///
/// Sessions of several clients share a link to a peer (the device has one connection per
/// peer), and the link's one GATT client keeps one value handler per characteristic and one
/// CCCD at the peer. So the daemon keeps, per link and characteristic, the sessions subscribed:
/// the GATT client's handler hands each value to every one of them, the CCCD is written off
/// only when the last one unsubscribes, and a session that leaves a link others keep up — its
/// client went (a clean exit, a crash, `kill -9`), or it cancelled its share — takes its
/// subscriptions with it: the CCCD goes off when nobody else wants the values, so no
/// subscription of a gone client stays on the peripheral.
///
/// Loop-confined (the device's loop); one per daemon, shared by its clients' sessions.
public final class DaemonSubscriptions: @unchecked Sendable {
    // Safe to share: its state is touched on the device's loop only (the server hands it to
    // each client's sessions, which run there).
    private struct Key: Hashable {
        let link: ObjectIdentifier
        let handle: ATTHandle
    }

    private struct Entry {
        let connection: DeviceConnection
        let characteristic: DiscoveredCharacteristic
        let cccd: ATTHandle?
        /// By session, in no order.
        var sessions: [ObjectIdentifier: ([UInt8]) -> Void]
    }

    private var entries: [Key: Entry] = [:]

    public init() {}

    /// The subscriptions held, counted per session.
    public var count: Int { entries.values.reduce(0) { $0 + $1.sessions.count } }

    /// `session` subscribes to `characteristic` on `connection`: its values reach `onValue`
    /// (and every other session's subscribed to it). The CCCD is written (again, when others
    /// are subscribed already: it costs a write and keeps the answer the peer's).
    func subscribe(_ session: AnyObject, on connection: DeviceConnection, to characteristic: DiscoveredCharacteristic,
                   clientConfiguration: ATTHandle?, onValue: @escaping ([UInt8]) -> Void,
                   completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        let key = Key(link: ObjectIdentifier(connection), handle: characteristic.valueHandle)
        let id = ObjectIdentifier(session)
        entries[key, default: Entry(connection: connection, characteristic: characteristic, cccd: clientConfiguration,
                                    sessions: [:])].sessions[id] = onValue
        connection.client.subscribe(to: characteristic, clientConfiguration: clientConfiguration, onValue: { [weakSelf = WeakHandle(self)] value in
            guard let entry = weakSelf.object?.entries[key] else { return }
            for handler in entry.sessions.values { handler(value) }
        }, completion: { [weakSelf = WeakHandle(self)] result in
            if case .failure = result { weakSelf.object?.remove(id, from: key) }
            completion(result.map { _ in () })
        })
    }

    /// `session` unsubscribes: the CCCD is written off when no other session is subscribed.
    func unsubscribe(_ session: AnyObject, on connection: DeviceConnection, from characteristic: DiscoveredCharacteristic,
                     clientConfiguration: ATTHandle?, completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        let key = Key(link: ObjectIdentifier(connection), handle: characteristic.valueHandle)
        remove(ObjectIdentifier(session), from: key)
        if entries[key] != nil { return completion(.success(())) }
        connection.client.unsubscribe(from: characteristic, clientConfiguration: clientConfiguration, completion: completion)
    }

    /// `session` is off the link to `peer` (its share cancelled, the link down) — nil: off every
    /// link (the session ended). Its subscriptions go; on a link that stays up for others, a
    /// characteristic nobody else is subscribed to is unsubscribed at the peer.
    func leave(_ session: AnyObject, peer: LEAddress? = nil) {
        let id = ObjectIdentifier(session)
        for (key, entry) in entries where entry.sessions[id] != nil && (peer == nil || entry.connection.peer == peer) {
            remove(id, from: key)
            guard entries[key] == nil, entry.connection.isOpen, entry.connection.ownerCount > 0 else { continue }
            entry.connection.client.unsubscribe(from: entry.characteristic, clientConfiguration: entry.cccd) { _ in }
        }
    }

    /// The peer's Service Changed covered `range` on the link to `peer`: `session`'s
    /// subscriptions there are gone with the attributes (its client rediscovers and subscribes
    /// again); nothing is written.
    func forget(_ session: AnyObject, peer: LEAddress, in range: ClosedRange<ATTHandle>) {
        let id = ObjectIdentifier(session)
        for (key, entry) in entries where entry.sessions[id] != nil && entry.connection.peer == peer && range.contains(key.handle) {
            remove(id, from: key)
        }
    }

    private func remove(_ session: ObjectIdentifier, from key: Key) {
        guard var entry = entries[key] else { return }
        entry.sessions[session] = nil
        entries[key] = entry.sessions.isEmpty ? nil : entry
    }
}
