import ATT
import HCI
import L2CAP
import Scheduling

/// An ATT bearer as a GATT server connection, made by `GATTServer.attach(_:)`. It holds the
/// bearer, so the server sends on it directly, and listens to it: readiness to send goes on
/// with the connection's waiting updates, and the close ends the connection in the server. The
/// server holds it while the connection is open; the bearer holds it only weakly.
public final class GATTBearerConnection: GATTServerConnection, ATTBearerListener, @unchecked Sendable {
    public let bearer: ATTBearer
    @exclusivity(unchecked) private var serverHeld = WeakHeld<GATTServer>(wrappedValue: nil)  // exclusivity checks: 0.05 % of pair
    private var server: GATTServer? {
        get { serverHeld.wrappedValue }
        set { serverHeld.wrappedValue = newValue }
    }

    init(bearer: ATTBearer, server: GATTServer) {
        self.bearer = bearer
        self.server = server
    }

    public var mtu: Int { bearer.mtu }
    public var securityLevel: LESecurityLevel { bearer.securityLevel }
    /// Set by the link's owner while the peer is bonded, so that a protected attribute on a
    /// link not yet encrypted answers Insufficient Encryption (encrypt with the bond's key)
    /// rather than Insufficient Authentication (pair).
    @exclusivity(unchecked) public var hasEncryptionKey = false  // exclusivity checks: 0.05 % of pair

    public func notify(handle: ATTHandle, bytes: UnsafeRawBufferPointer) -> Bool {
        bearer.notify(handle: handle, bytes: bytes)
    }

    public func indicate(handle: ATTHandle, value: [UInt8], completion: @escaping (Bool) -> Void) {
        bearer.indicate(handle: handle, value: value) { result in
            if case .success = result { completion(true) } else { completion(false) }
        }
    }

    public func attBearerIsReadyToSend() { server?.connectionIsReadyToSend(self) }

    public func attBearerDidClose(_ reason: ATTBearer.CloseReason) { server?.connectionClosed(self) }
}

extension GATTServer {
    /// Serves this database on `bearer`: its requests and commands come here (the bearer's
    /// `onRequest` and `onCommand` are taken over), and the returned connection listens to it
    /// (readiness to send, the close), beside the bearer's other listeners.
    @discardableResult
    public func attach(_ bearer: ATTBearer) -> GATTBearerConnection {
        let connection = GATTBearerConnection(bearer: bearer, server: self)
        connectionOpened(connection)
        // Weakly: the connection holds the bearer.
        bearer.onRequest = { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] request, responder in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return responder.respondError(.unlikelyError) }
            self.handle(request, from: connection) { responder.respond($0) }
        }
        bearer.onCommand = { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] pdu in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            self.handleCommand(pdu, from: connection)
        }
        bearer.addListener(connection)
        return connection
    }
}
