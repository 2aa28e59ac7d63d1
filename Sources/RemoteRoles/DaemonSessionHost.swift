import DaemonProtocol
import Foundation
import Scheduling

/// A process's connection to `corebluetoothd` (one per socket path, shared by the process's
/// managers on it): the handshake, and the messages of each session handed to it on a loop of
/// the connection's own, where the remote roles run as the in-process ones run on a device's
/// loop.
///
/// When the daemon goes (its socket closes: a restart, a crash), every session hears it
/// (`lost`), and the host connects again with backoff on the loop's timer; once the new daemon
/// says `welcome`, each session is opened again (`reopen`), as iOS apps see `bluetoothd`
/// restart. Only a refusal ends the connection for good.
///
/// Sessions and their handlers are loop-confined; `send` is callable from any thread.
public final class DaemonSessionHost: @unchecked Sendable {
    public let path: String
    public let loop: EventLoop
    private let name: String
    /// The connection now (replaced on the loop when the daemon comes back).
    private let socket = Locked<FramedSocket?>(nil)
    // Loop-confined.
    private var sessions: [UInt32: Session] = [:]
    private var nextSession: UInt32 = 1
    /// Why the connection ended for good (a refusal).
    private var closedReason: String?
    /// Why the daemon is away while the host connects again; nil while connected.
    private var awayReason: String?
    /// Counts connections, so that a stale one's events are ignored.
    private var connection = 0
    private var welcomed = false
    /// On the loop: the protocol version the daemon agreed to (0 before its `welcome`).
    public private(set) var version: UInt16 = 0
    private var retry: TimerHandle?
    private var backoff = DaemonSessionHost.firstBackoff
    /// Whether `loop` is the host's own, to shut down with it (not a test's radio loop).
    private let ownsLoop: Bool
    /// The virtual clock frames hold while they travel (tests only: ``DaemonWireClock``).
    private let wireClock: DaemonWireClock?

    /// The first wait before connecting again, doubled after each failure up to ``maximumBackoff``.
    public static let firstBackoff: Duration = .milliseconds(50)
    public static let maximumBackoff: Duration = .seconds(2)

    private struct Session {
        var handler: (DaemonMessage) -> Void
        var lost: (_ reason: String, _ permanent: Bool) -> Void
        var reopen: () -> Void
    }

    private static let registry = Locked<[String: Weak]>([:])
    private struct Weak { @WeakHeld var host: DaemonSessionHost? }

    /// The process's connection to the daemon at `path` (made now if there is none).
    public static func connecting(to path: String, name: String) throws -> DaemonSessionHost {
        try connecting(to: path, name: name, loop: nil)
    }

    /// The same, with the sessions on `loop` when the connection is made now: the suites'
    /// daemon mode runs them on the virtual radio's loop, whose clock their callbacks hold.
    package static func connecting(to path: String, name: String, loop: EventLoop?) throws -> DaemonSessionHost {
        try registry.withLock { hosts in
            if let host = hosts[path]?.host { return host }
            let host = try DaemonSessionHost(path: path, name: name, loop: loop)
            hosts[path] = Weak(host: host)
            return host
        }
    }

    private init(path: String, name: String, loop: EventLoop?) throws {
        self.path = path
        self.name = name
        self.loop = loop ?? EventLoop(name: "CoreBluetooth daemon:\(path)", pacing: .realTime)
        ownsLoop = loop == nil
        wireClock = DaemonWireClock.clock(for: path)
        // The first connection is made here: no daemon at all is the caller's error to report.
        start(try FramedSocket.connect(path: path), connection: 0)
    }

    deinit {
        socket.current?.close()
        retry?.cancel()
        if ownsLoop { loop.shutdown() }
    }

    /// From the loop (the roles' calls), frames leave together at the end of its burst.
    public func send(_ message: DaemonMessage) { socket.current?.send(message, batchedOn: loop) }

    /// Runs a connection on `fd`: hello, then its messages on the loop.
    private func start(_ fd: Int32, connection number: Int) {
        let wire = wireClock
        // The messages of one read in one loop job: a burst of notifications costs one wake-up.
        let socket = FramedSocket(fd: fd, name: "daemon:\(path)", wireClock: wire, onMessages: { [weakSelf = WeakHandle(self)] messages in
            guard let self = weakSelf.object else {
                for _ in messages { wire?.delivered() }
                return
            }
            self.loop.execute {
                for message in messages {
                    if self.connection == number { self.dispatch(message) }
                    wire?.delivered()
                }
            }
        }, onClose: { [weakSelf = WeakHandle(self)] reason in
            guard let self = weakSelf.object else {
                wire?.connectionClosed()
                return
            }
            self.loop.execute {
                if self.connection == number { self.lost(reason) }
                wire?.connectionClosed()
            }
        })
        self.socket.withLock { $0 = socket }
        socket.send(.hello(version: DaemonFrame.version, minimumVersion: DaemonFrame.minimumVersion, name: name))
        socket.start()
    }

    /// On the loop: a new session, whose messages go to `handler`. `lost` is called when the
    /// daemon goes (`permanent`: it will not be reached again), `reopen` when a daemon that
    /// came back said `welcome` (open the session again there).
    public func openSession(_ handler: @escaping (DaemonMessage) -> Void, lost: @escaping (_ reason: String, _ permanent: Bool) -> Void,
                            reopen: @escaping () -> Void) -> UInt32 {
        let id = nextSession
        nextSession += 1
        sessions[id] = Session(handler: handler, lost: lost, reopen: reopen)
        if let closedReason { lost(closedReason, true) } else if let awayReason { lost(awayReason, false) }
        return id
    }

    /// Ends the connection as the process's end would (a crash, `kill -9`): no `close` for its
    /// sessions, and no connecting again; the daemon keeps the restorable ones. Every session
    /// hears it as a daemon that will not be reached again. For tests that play a process
    /// dying inside one process; any thread.
    package func abandon() {
        loop.execute { [self] in
            closedReason = "the connection was abandoned"
            retry?.cancel()
            retry = nil
            socket.current?.close(closedReason!)
        }
    }

    /// On the loop: the session is over (its manager went).
    public func closeSession(_ id: UInt32) {
        sessions[id] = nil
        send(.close(session: id))
    }

    private func dispatch(_ message: DaemonMessage) {
        switch message {
        case .welcome(let agreed, _):
            guard !welcomed else { return }
            welcomed = true
            version = agreed
            backoff = Self.firstBackoff
            guard awayReason != nil else { return }
            // A daemon that came back: the sessions open again there.
            awayReason = nil
            for session in sessions.values { session.reopen() }
        case .refused(let reason):
            closedReason = "the daemon refused: \(reason)"
            socket.current?.close(closedReason!)
        default:
            guard let id = message.sessionID, let session = sessions[id] else { return }
            session.handler(message)
        }
    }

    /// On the loop: the connection ended.
    private func lost(_ reason: String) {
        connection += 1
        welcomed = false
        socket.withLock { $0 = nil }
        let permanent = closedReason != nil
        let first = awayReason == nil
        if !permanent && first { awayReason = reason }
        if permanent || first {
            for session in sessions.values { session.lost(closedReason ?? reason, permanent) }
        }
        if !permanent { scheduleRetry() }
    }

    /// Connects again after the backoff (on the loop's timer; a Unix socket connects at once
    /// or fails, so the attempt never holds the loop).
    private func scheduleRetry() {
        retry?.cancel()
        retry = loop.schedule(after: backoff) { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object else { return }
            self.retry = nil
            self.backoff = min(self.backoff * 2, Self.maximumBackoff)
            do {
                self.start(try FramedSocket.connect(path: self.path), connection: self.connection)
            } catch {
                self.scheduleRetry()
            }
        }
    }
}

extension DaemonMessage {
    /// The session a daemon's message is for.
    var sessionID: UInt32? {
        switch self {
        case .state(let session, _, _), .discovered(let session, _, _, _, _, _), .scanFailed(let session),
             .connected(let session, _, _), .failedToConnect(let session, _, _), .disconnected(let session, _, _, _),
             .linkMTU(let session, _, _), .linkName(let session, _, _), .linkServicesChanged(let session, _, _),
             .linkWriteBudget(let session, _, _), .services(let session, _, _), .includedServices(let session, _, _),
             .characteristics(let session, _, _), .descriptors(let session, _, _), .value(let session, _, _),
             .done(let session, _, _), .rssi(let session, _, _, _), .notification(let session, _, _, _),
             .restoreState(let session, _, _, _), .connectionEvent(let session, _, _),
             .restorePeripheralState(let session, _, _, _):
            session
        // MARK: Peripheral role
        case .published(let session, _, _), .unpublished(let session, _, _), .advertisingStarted(let session, _, _),
             .advertisingStopped(let session), .centralConnected(let session, _, _, _), .centralMTU(let session, _, _),
             .centralDisconnected(let session, _, _), .readRequest(let session, _, _, _, _), .writeRequest(let session, _, _),
             .subscribed(let session, _, _), .unsubscribed(let session, _, _), .updatesHandedOver(let session, _),
             .channelOpened(let session, _, _), .channelPublished(let session, _, _), .channelUnpublished(let session, _, _),
             .channelIncoming(let session, _, _, _, _), .channelData(let session, _, _), .channelSent(let session, _, _),
             .channelClosed(let session, _, _), .pairingPrompt(let session, _, _, _):
            session
        default:
            nil
        }
    }
}
