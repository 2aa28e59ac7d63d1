import DaemonProtocol
import Foundation
import Glibc
import HostDevice
import Logging
import Scheduling
import StackLogging

/// Who is at the other end of a client's socket, as the kernel says (`SO_PEERCRED`), never as
/// the client says: the user keys what a client may see.
public struct PeerCredentials: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// Why the daemon could not listen.
public struct DaemonServerError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
}

/// `corebluetoothd`'s socket: accepts clients on a Unix stream socket and serves each as a
/// ``DaemonClient`` on the device's loop. Each connection's bytes are read on a thread of its
/// own and decoded there; what a client is sent is written by another thread of its own, so
/// that neither a slow nor a silent client ever holds the loop. A client whose bytes are not
/// the protocol, or that leaves more than ``outboxLimit`` bytes unread, is dropped alone.
public final class DaemonServer: Sendable {
    public let path: String
    /// Bytes a client may leave unread before it is dropped.
    public static let outboxLimit = 1 << 20

    private let listenFD: Int32
    private let device: HostDevice
    /// Sessions kept for restoration (touched on the device's loop only).
    private let restoration: DaemonRestoration
    /// Connection events, for every client (touched on the device's loop only).
    private let connectionEvents = DaemonConnectionEvents()
    /// Subscriptions of every client's central sessions, per link (touched on the device's
    /// loop only).
    private let subscriptions = DaemonSubscriptions()
    private let channelLedger = DaemonChannelLedger()
    /// `corebluetooth.daemon`: clients connecting and leaving (info), the socket failing.
    private let logger: Logger
    private let state = Locked(State())
    private let stopped = DispatchSemaphore(value: 0)
    /// The virtual clock the clients' frames hold (tests only: ``DaemonWireClock``).
    private let wireClock: DaemonWireClock?

    private struct State {
        var closed = false
        /// The listening socket is open (its descriptor is closed under the lock, so that
        /// `close` never shuts down a descriptor number reused since).
        var listening = true
        var connections: [ObjectIdentifier: DaemonConnection] = [:]
    }

    /// Listens on `path` (a socket file left there is replaced only when nothing answers on it:
    /// another daemon is not displaced). Call from any thread. `onEvent`: the command started
    /// when an event arrives for a kept session (`--on-event`).
    public init(path: String, device: HostDevice, onEvent: DaemonEventCommand? = nil,
                logging: StackLogging = .standard) throws(DaemonServerError) {
        self.path = path
        self.device = device
        wireClock = DaemonWireClock.clock(for: path)
        logger = logging.logger(.daemon)
        restoration = DaemonRestoration(onEvent: onEvent.map { command in { key, event in command.launch(key, event: event) } })
        listenFD = try Self.listen(path: path)
        // Connections peers make to the device are connection events too, whichever session
        // serves them.
        let connectionEvents = connectionEvents
        device.loop.execute { connectionEvents.observeAcceptedConnections(on: device) }
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "corebluetoothd acceptor"
        thread.start()
    }

    /// The credentials of the clients connected now.
    public var clientCredentials: [PeerCredentials] {
        state.withLock { $0.connections.values.map(\.credentials) }
    }

    /// What the daemon holds now, in one line (`corebluetoothd` logs it on SIGUSR1; the
    /// process tests read it to find leaks): `status clients=C kept=K links=L owners=o1,o2…
    /// procedures=p1,p2… pending=P subscriptions=S channels=N paused=Q buffered=B` — the clients
    /// connected, the sessions kept for restoration, the device's links (in the order they were
    /// made) with how many sessions own each and how many GATT procedures are queued or running
    /// on it, the connections being attempted, the subscriptions central sessions hold (per
    /// session), and the L2CAP channels relayed to clients: how many, how many withhold the
    /// peer's credits, and the bytes the daemon holds for them.
    /// Calls `completion` on the device's loop.
    public func status(_ completion: @escaping @Sendable (String) -> Void) {
        let clients = state.withLock { $0.connections.count }
        let device = device
        let restoration = restoration
        let subscriptions = subscriptions
        let channels = channelLedger
        device.loop.execute {
            let links = device.connections.values
            completion("status clients=\(clients) kept=\(restoration.count) links=\(links.count)"
                + " owners=\(links.map { String($0.ownerCount) }.joined(separator: ","))"
                + " procedures=\(links.map { String($0.client.pendingProcedures) }.joined(separator: ","))"
                + " pending=\(device.pendingConnectionCount) subscriptions=\(subscriptions.count)"
                + " channels=\(channels.open) paused=\(channels.paused) buffered=\(channels.buffered)")
        }
    }

    /// Stops accepting, drops every client (their sessions leave the device) and removes the
    /// socket file.
    public func close() {
        let connections = state.withLock { state -> [DaemonConnection] in
            guard !state.closed else { return [] }
            state.closed = true
            return Array(state.connections.values)
        }
        // Wakes the blocked accept (Linux: accept on a shut-down listening socket fails).
        state.withLock { state in
            if state.listening { shutdown(listenFD, Int32(SHUT_RDWR)) }
        }
        stopped.wait()
        stopped.signal()
        for connection in connections { connection.drop() }
        // Nothing is kept past the daemon: its kept sessions end, and so do those of clients
        // that go after this.
        let restoration = restoration
        device.loop.execute { restoration.close() }
    }

    private func acceptLoop() {
        defer {
            state.withLock { state in
                state.listening = false
                Glibc.close(listenFD)
            }
            unlink(path)
            stopped.signal()
        }
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if !state.withLock({ $0.closed }) { logger.error("no more clients: accept failed: \(String(cString: strerror(code)))") }
                return
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let connection = DaemonConnection(fd: fd, credentials: Self.credentials(fd), device: device, restoration: restoration,
                                              connectionEvents: connectionEvents, subscriptions: subscriptions,
                                              channelLedger: channelLedger, logger: logger, wireClock: wireClock) { [self] gone in
                state.withLock { _ = $0.connections.removeValue(forKey: ObjectIdentifier(gone)) }
            }
            // Started under the lock, so that `close` finds every connection it must drop
            // started (a connection that ends at once waits for the lock to say it is gone).
            let admitted = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.connections[ObjectIdentifier(connection)] = connection
                connection.start()
                return true
            }
            guard admitted else {
                Glibc.close(fd)
                return
            }
            logger.info("client pid \(connection.credentials.pid) uid \(connection.credentials.uid) connected")
        }
    }

    private static func credentials(_ fd: Int32) -> PeerCredentials {
        // struct ucred: pid_t pid, uid_t uid, gid_t gid.
        var raw: (Int32, UInt32, UInt32) = (-1, UInt32.max, UInt32.max)
        var length = socklen_t(MemoryLayout.size(ofValue: raw))
        _ = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &raw, &length)
        return PeerCredentials(pid: raw.0, uid: raw.1, gid: raw.2)
    }

    private static func listen(path: String) throws(DaemonServerError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw DaemonServerError(description: "a socket path must be 1–\(capacity - 1) bytes: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DaemonServerError(description: "socket: \(String(cString: strerror(errno)))") }
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> Int32 in
                if Glibc.bind(fd, address, length) == 0 { return 0 }
                guard errno == EADDRINUSE else { return errno }
                // A socket file is there: another daemon's, or a stale one.
                let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                defer { Glibc.close(probe) }
                if connect(probe, address, length) == 0 { return EADDRINUSE }
                unlink(path)
                return Glibc.bind(fd, address, length) == 0 ? 0 : errno
            }
        }
        guard bound == 0 else {
            Glibc.close(fd)
            let why = bound == EADDRINUSE ? "another daemon is listening there" : String(cString: strerror(bound))
            throw DaemonServerError(description: "cannot listen on \(path): \(why)")
        }
        // Owner and group only: root's daemon is for the users of its group.
        chmod(path, 0o660)
        guard Glibc.listen(fd, 16) == 0 else {
            let code = errno
            Glibc.close(fd)
            unlink(path)
            throw DaemonServerError(description: "cannot listen on \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }
}

/// One accepted client: its socket (a ``FramedSocket``: a reader and a writer thread) and its
/// ``DaemonClient`` on the device's loop.
final class DaemonConnection: @unchecked Sendable {
    // Safe to share: `credentials`, `device`, `subscriptions`, `logger`, `wireClock` and `gone` are immutable, `socket` is set in
    // `start` before anything reads it, and `client` is touched only on the device's loop.
    let credentials: PeerCredentials
    private let fd: Int32
    private let device: HostDevice
    private let restoration: DaemonRestoration
    private let connectionEvents: DaemonConnectionEvents
    private let subscriptions: DaemonSubscriptions
    private let channelLedger: DaemonChannelLedger
    private let logger: Logger
    private let gone: @Sendable (DaemonConnection) -> Void
    private let wireClock: DaemonWireClock?
    private var socket: FramedSocket?
    private var client: DaemonClient?

    init(fd: Int32, credentials: PeerCredentials, device: HostDevice, restoration: DaemonRestoration,
         connectionEvents: DaemonConnectionEvents, subscriptions: DaemonSubscriptions, channelLedger: DaemonChannelLedger,
         logger: Logger, wireClock: DaemonWireClock? = nil, gone: @escaping @Sendable (DaemonConnection) -> Void) {
        self.channelLedger = channelLedger
        self.fd = fd
        self.wireClock = wireClock
        self.credentials = credentials
        self.device = device
        self.restoration = restoration
        self.connectionEvents = connectionEvents
        self.subscriptions = subscriptions
        var logger = logger
        logger[metadataKey: "client"] = "\(credentials.pid)"
        self.logger = logger
        self.gone = gone
    }

    /// Serves the client: its messages run on the loop, in order, after its client is made.
    func start() {
        let loop = device.loop
        let wire = wireClock
        let socket = FramedSocket(fd: fd, name: "corebluetoothd client \(credentials.pid)", outboxLimit: DaemonServer.outboxLimit,
                              wireClock: wire,
                              onMessages: { [weakSelf = WeakHandle(self)] messages in
                                  guard let self = weakSelf.object else {
                                      for _ in messages { wire?.delivered() }
                                      return
                                  }
                                  // The messages of one read in one loop job.
                                  loop.execute {
                                      for message in messages {
                                          self.receive(message)
                                          wire?.delivered()
                                      }
                                  }
                              },
                              onClose: { [weakSelf = WeakHandle(self)] reason in
                                  guard let self = weakSelf.object else { return }
                                  loop.execute { [self] in
                                      self.client?.close()
                                      self.client = nil
                                      wire?.connectionClosed()
                                  }
                                  // After the close is posted: what the device hears from now
                                  // on reaches the loop after it (a restorable session parks it).
                                  self.logger.info("client pid \(self.credentials.pid) left: \(reason)")
                                  self.gone(self)
                              })
        // Set before anything can use it: the threads start and the client is made after.
        self.socket = socket
        loop.execute { [self] in
            client = DaemonClient(device: device, name: "pid \(credentials.pid)", uid: credentials.uid,
                                  restoration: restoration, connectionEvents: connectionEvents,
                                  subscriptions: subscriptions, channelLedger: channelLedger) { message in
                // On the loop (the client is loop-confined): frames leave together at its burst's end.
                socket.send(message, batchedOn: loop)
            }
        }
        socket.start()
    }

    /// On the loop.
    private func receive(_ message: DaemonMessage) {
        guard let client else { return }
        do throws(DaemonClientViolation) {
            try client.receive(message)
        } catch {
            drop("dropped: \(error)")
        }
    }

    /// Ends the connection (any thread): the socket closes, then the client's sessions leave
    /// the device on the loop.
    func drop(_ reason: String = "the daemon stopped") {
        socket?.close(reason)
    }
}
