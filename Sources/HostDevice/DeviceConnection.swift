import ATT
import GATT
import HCI
import HCIDriver
import HostStack
import L2CAP
import Logging
import SMP
import Scheduling
import StackLogging

/// What a connection's encryption is worth, kept per connection by its host device: the place
/// the Security Manager fills (pairing, bonds) and the LTK request is answered from.
public struct ConnectionSecurity: Sendable, Hashable {
    /// LE security mode 1 level of the link now.
    public var level: LESecurityLevel = .noSecurity
    /// The encryption key's size in octets (0 while unencrypted).
    public var keySize = 0
    /// Whether the peer is bonded (its keys are stored).
    public var isBonded = false
    /// The peer's identity address once known (from its Identity Address Information, or a
    /// bond whose IRK resolved its address), which a resolvable private address stands in for.
    public var peerIdentity: LEAddress?

    public init() {}
}

/// One LE connection of a host device, with the stack above L2CAP that every connection has:
/// the ATT bearer, the device's GATT server serving it, and a GATT client for the peer's
/// database. Clients of the device share it; which of them it belongs to is `owners`.
///
/// Loop-confined (the device's loop).
public final class DeviceConnection: @unchecked Sendable {
    public let le: LEConnection
    public let bearer: ATTBearer
    /// The device's GATT server's view of this connection (the key its requests carry).
    public let serverConnection: GATTBearerConnection
    /// The GATT client on this connection (Core Bluetooth queues whatever the app asks for),
    /// made when first used: a peripheral-role connection mostly never needs one, and each
    /// costs memory in fleets of thousands of connections.
    public var client: GATTClient {
        if let existing = clientStorage { return existing }
        let client = GATTClient(bearer: bearer)
        client.maximumQueuedProcedures = Int.max
        client.logSource = LazyLogger(.gatt, link: logContext)
        clientStorage = client
        return client
    }
    private var clientStorage: GATTClient?
    /// What this connection's loggers share: the link's (the device's logging, the handle, the
    /// peer and role), or one of its own when the peer's identity is not the link's address.
    public let logContext: LinkLogContext
    /// What the link's encryption is worth; the LTK request is answered from here.
    public internal(set) var security = ConnectionSecurity()
    /// Set once the owners heard of the connection (after the ATT MTU exchange as central).
    public internal(set) var isReady = false
    public internal(set) var isOpen = true
    /// An ATT request or indication went unanswered for 30 s: the device ended the link.
    public internal(set) var attTimedOut = false
    /// The clients this connection belongs to (by `ObjectIdentifier` of the client), in the
    /// order they took it. Mostly one: kept inline, the others in an array that is empty (no
    /// storage) until a second client shares the connection — fleets count every byte.
    var owners: [ObjectIdentifier] {
        get { firstOwner.map { [$0] + otherOwners } ?? [] }
        set {
            firstOwner = newValue.first
            otherOwners = Array(newValue.dropFirst())
        }
    }
    private var firstOwner: ObjectIdentifier?
    private var otherOwners: [ObjectIdentifier] = []
    /// Clients that got traffic on the connection without owning it (requests for their
    /// services on it): they hear of its end too.
    var users: [ObjectIdentifier] = []
    var readyTimer: TimerHandle?

    // Security (HostDevice+Security), in an object of its own made when first needed: most
    // links of a fleet never pair, and every byte of a connection counts there.
    private var securityWork: SecurityWork?

    final class SecurityWork {
        /// The link's Security Manager, made when SMP is first needed on it.
        var manager: SecurityManager?
        /// Who waits for the link's security to be raised (a pairing or an encryption under way).
        var waiters: [(Result<Void, LinkSecurityError>) -> Void] = []
        /// What the key the link is being encrypted with is worth, until Encryption Change.
        var encryptingWith: (level: LESecurityLevel, keySize: Int)?
        var encryptionTimer: TimerHandle?
    }

    private var work: SecurityWork {
        if let securityWork { return securityWork }
        let made = SecurityWork()
        securityWork = made
        return made
    }

    // Clearing what was never set makes nothing.
    var securityManagerStorage: SecurityManager? {
        get { securityWork?.manager }
        set { if newValue != nil || securityWork != nil { work.manager = newValue } }
    }
    var securityWaiters: [(Result<Void, LinkSecurityError>) -> Void] {
        get { securityWork?.waiters ?? [] }
        set { if !newValue.isEmpty || securityWork != nil { work.waiters = newValue } }
    }
    var encryptingWith: (level: LESecurityLevel, keySize: Int)? {
        get { securityWork?.encryptingWith }
        set { if newValue != nil || securityWork != nil { work.encryptingWith = newValue } }
    }
    var encryptionTimer: TimerHandle? {
        get { securityWork?.encryptionTimer }
        set { if newValue != nil || securityWork != nil { work.encryptionTimer = newValue } }
    }

    init(le: LEConnection, peer: LEAddress? = nil, server: GATTServer, loop: EventLoop, logging: StackLogging = .standard) {
        self.le = le
        let peer = peer ?? le.peer
        self.peer = peer
        let linkContext = le.l2cap.logContext
        // The link's host has the device's logging: share its context unless the peer differs.
        if peer == le.peer, linkContext.peer != nil {
            logContext = linkContext
        } else {
            logContext = LinkLogContext(logging: logging, connection: le.handle, peer: peer,
                                        role: le.role == .central ? "central" : "peripheral")
        }
        bearer = ATTBearer(channel: le.l2cap.att, loop: loop)
        serverConnection = server.attach(bearer)
        bearer.logSource = LazyLogger(.att, link: logContext)
    }

    /// A logger for `layer` tagged with this connection (`connection`, `peer`, `role`), for the
    /// device's rare messages about it (its objects make theirs from ``logContext`` when they
    /// first log).
    public func logger(_ layer: LogLayer) -> Logger { logContext.logger(layer) }

    public var handle: ConnectionHandle { le.handle }
    public var role: LERole { le.role }
    /// The peer's identity: the address the link was made with, or, when the peer used a
    /// resolvable private address the controller did not resolve, the identity of the bond
    /// whose IRK resolves it.
    public let peer: LEAddress
    public var loop: EventLoop { bearer.loop }

    /// How many clients own the connection (a daemon's status reports it: a link nobody owns is
    /// on its way down).
    public var ownerCount: Int { firstOwner == nil ? 0 : 1 + otherOwners.count }

    /// Whether the client with this identifier owns the connection.
    public func isOwned(by client: ObjectIdentifier) -> Bool { firstOwner == client || otherOwners.contains(client) }
}

/// A device's connections by handle: an array searched in order (a device has a few, and a
/// lookup happens per HCI event, not per packet), so a connection costs a slot rather than a
/// dictionary's storage of its own.
public struct ConnectionTable: Sendable {
    private var items: [DeviceConnection] = []

    public init() {}

    public subscript(handle: ConnectionHandle) -> DeviceConnection? {
        get {
            for connection in items where connection.handle == handle { return connection }
            return nil
        }
        set {
            items.removeAll { $0.handle == handle }
            if let newValue { items.append(newValue) }
        }
    }

    /// In the order they were made.
    public var values: [DeviceConnection] { items }
    public var count: Int { items.count }
    public var isEmpty: Bool { items.isEmpty }

    @discardableResult
    public mutating func removeValue(forKey handle: ConnectionHandle) -> DeviceConnection? {
        guard let index = items.firstIndex(where: { $0.handle == handle }) else { return nil }
        return items.remove(at: index)
    }
}
