import ATT
import HCI
import L2CAP

/// An ATT bearer as a GATT server connection. It holds the bearer weakly: the bearer's owner
/// (the host's connection) keeps it alive, and the bearer's callbacks keep this adapter.
public final class GATTBearerConnection: GATTServerConnection, @unchecked Sendable {
    public private(set) weak var bearer: ATTBearer?

    init(bearer: ATTBearer) { self.bearer = bearer }

    public var mtu: Int { bearer?.mtu ?? ATTMTU.leDefault }
    public var securityLevel: LESecurityLevel { bearer?.securityLevel ?? .noSecurity }

    public func notify(handle: ATTHandle, value: [UInt8]) -> Bool {
        bearer?.notify(handle: handle, value: value) ?? false
    }

    public func indicate(handle: ATTHandle, value: [UInt8], completion: @escaping (Bool) -> Void) {
        guard let bearer else { return completion(false) }
        bearer.indicate(handle: handle, value: value) { result in
            if case .success = result { completion(true) } else { completion(false) }
        }
    }
}

extension GATTServer {
    /// Serves this database on `bearer`: its requests and commands come here, its readiness to
    /// send again releases waiting updates, and its closing drops the connection's subscriptions.
    /// Takes over the bearer's `onRequest` and `onCommand`; `onReadyToSendCommands` and `onClose`
    /// handlers already set (a GATT client on the same bearer) keep being called.
    @discardableResult
    public func attach(_ bearer: ATTBearer) -> GATTBearerConnection {
        let connection = GATTBearerConnection(bearer: bearer)
        connectionOpened(connection)
        bearer.onRequest = { [weak self] request, responder in
            guard let self else { return responder.respondError(.unlikelyError) }
            self.handle(request, from: connection) { responder.respond($0) }
        }
        bearer.onCommand = { [weak self] pdu in self?.handleCommand(pdu, from: connection) }
        let previousReady = bearer.onReadyToSendCommands
        bearer.onReadyToSendCommands = { [weak self] in
            previousReady?()
            self?.connectionIsReadyToSend(connection)
        }
        let previousClose = bearer.onClose
        bearer.onClose = { [weak self] reason in
            previousClose?(reason)
            self?.connectionClosed(connection)
        }
        return connection
    }
}
