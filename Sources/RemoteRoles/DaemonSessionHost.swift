import DaemonProtocol
import Foundation
import Scheduling

/// A process's connection to `corebluetoothd` (one per socket path, shared by the process's
/// managers on it): the handshake, and the messages of each session handed to it on a loop of
/// the connection's own, where the remote roles run as the in-process ones run on a device's
/// loop.
///
/// Sessions and their handlers are loop-confined; `send` is callable from any thread.
public final class DaemonSessionHost: @unchecked Sendable {
    public let path: String
    public let loop: EventLoop
    private var socket: FramedSocket!
    // Loop-confined.
    private var sessions: [UInt32: (DaemonMessage) -> Void] = [:]
    private var closers: [UInt32: (String) -> Void] = [:]
    private var nextSession: UInt32 = 1
    private var closedReason: String?

    private static let registry = Locked<[String: Weak]>([:])
    private struct Weak { weak var host: DaemonSessionHost? }

    /// The process's connection to the daemon at `path` (made now if there is none).
    public static func connecting(to path: String, name: String) throws -> DaemonSessionHost {
        try registry.withLock { hosts in
            if let host = hosts[path]?.host { return host }
            let host = try DaemonSessionHost(path: path, name: name)
            hosts[path] = Weak(host: host)
            return host
        }
    }

    private init(path: String, name: String) throws {
        self.path = path
        loop = EventLoop(name: "CoreBluetooth daemon:\(path)", pacing: .realTime)
        let fd = try FramedSocket.connect(path: path)
        socket = FramedSocket(fd: fd, name: "daemon:\(path)", onMessage: { [weak self] message in
            guard let self else { return }
            loop.execute { self.dispatch(message) }
        }, onClose: { [weak self] reason in
            guard let self else { return }
            loop.execute { self.closed(reason) }
        })
        socket.send(.hello(version: DaemonFrame.version, minimumVersion: DaemonFrame.minimumVersion, name: name))
        socket.start()
    }

    deinit {
        socket?.close()
        loop.shutdown()
    }

    public func send(_ message: DaemonMessage) { socket.send(message) }

    /// On the loop: a new session, whose messages go to `handler`; `closed` is called if the
    /// connection ends.
    public func openSession(_ handler: @escaping (DaemonMessage) -> Void, closed: @escaping (String) -> Void) -> UInt32 {
        let id = nextSession
        nextSession += 1
        sessions[id] = handler
        closers[id] = closed
        if let closedReason { closed(closedReason) }
        return id
    }

    /// On the loop: the session is over (its manager went).
    public func closeSession(_ id: UInt32) {
        sessions[id] = nil
        closers[id] = nil
        send(.close(session: id))
    }

    private func dispatch(_ message: DaemonMessage) {
        switch message {
        case .welcome:
            break
        case .refused(let reason):
            socket.close("the daemon refused: \(reason)")
        default:
            guard let id = message.sessionID, let handler = sessions[id] else { return }
            handler(message)
        }
    }

    private func closed(_ reason: String) {
        guard closedReason == nil else { return }
        closedReason = reason
        for closer in closers.values { closer(reason) }
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
             .done(let session, _, _), .rssi(let session, _, _, _), .notification(let session, _, _, _):
            session
        // MARK: Peripheral role
        case .published(let session, _, _), .unpublished(let session, _, _), .advertisingStarted(let session, _, _),
             .advertisingStopped(let session), .centralConnected(let session, _, _, _), .centralMTU(let session, _, _),
             .centralDisconnected(let session, _, _), .readRequest(let session, _, _, _, _), .writeRequest(let session, _, _),
             .subscribed(let session, _, _), .unsubscribed(let session, _, _), .updatesHandedOver(let session, _):
            session
        default:
            nil
        }
    }
}
