import ATT
import HCI
import HCIDriver
import HostStack
import Logging
import Scheduling
import StackLogging

extension HostDevice {
    /// `client` wants a connection to `peer` as central. Never times out: it stays pending until
    /// made or cancelled with ``cancelConnecting(to:for:)``. When another client is already
    /// connected to `peer` as central, the connection is shared: `client` becomes an owner too
    /// and hears `didConnect` at once.
    public func connect(to peer: LEAddress, for client: any HostDeviceClient) {
        assertOnLoop()
        guard !isOff else { return }
        let id = ObjectIdentifier(client)
        if let existing = connections.values.first(where: { $0.peer == peer && $0.role == .central && $0.isOpen }) {
            if !existing.owners.contains(id) { existing.owners.append(id) }
            // Already connected: the client hears it now (again, as on iOS, if it owned it),
            // or with the other owners once the link is ready.
            if existing.isReady { client.device(self, didConnect: existing) }
            return
        }
        if let index = pending.firstIndex(where: { $0.peer == peer }) {
            if !pending[index].owners.contains(id) { pending[index].owners.append(id) }
            return
        }
        pending.append(PendingConnection(peer: peer, owners: [id]))
        initiateNext()
    }

    /// How many connections clients asked for are not made yet.
    public var pendingConnectionCount: Int { pending.count }

    /// `client` no longer wants a pending connection to `peer`; the attempt stops when no client
    /// wants it. False when `client` had no pending connection to `peer`.
    @discardableResult
    public func cancelConnecting(to peer: LEAddress, for client: any HostDeviceClient) -> Bool {
        assertOnLoop()
        let id = ObjectIdentifier(client)
        guard pending.contains(where: { $0.peer == peer && $0.owners.contains(id) }) else { return false }
        dropPendingOwner(id, of: peer)
        return true
    }

    /// `client` gives its share of `connection` up. The link goes down when no owner is left
    /// (`didDisconnect` follows with the link's reason); otherwise only `client` hears
    /// `didDisconnect` (Connection Terminated By Local Host) and the others keep the link.
    /// A client that does not own the connection cannot end it.
    public func disconnect(_ connection: DeviceConnection, for client: any HostDeviceClient) {
        assertOnLoop()
        let id = ObjectIdentifier(client)
        guard connection.isOpen, connection.isOwned(by: id) else {
            connection.logger(.api).warning("a client asked to end a connection it does not own (\(connection.peer)); refused")
            return
        }
        if connection.owners.count == 1 {
            host.disconnect(connection.le)
            return
        }
        connection.owners.removeAll { $0 == id }
        connection.users.removeAll { $0 == id }
        // After the current job, as the other disconnections are reported.
        loop.execute { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, let client = self.clients.first(where: { $0.id == id })?.client else { return }
            if connection.isReady {
                client.device(self, didDisconnect: connection, reason: .connectionTerminatedByLocalHost)
            } else {
                client.device(self, didFailToConnectTo: connection.peer, error: .failed(.connectionTerminatedByLocalHost))
            }
        }
    }

    func dropPendingOwner(_ id: ObjectIdentifier, of peer: LEAddress) {
        guard let index = pending.firstIndex(where: { $0.peer == peer }) else { return }
        pending[index].owners.removeAll { $0 == id }
        guard pending[index].owners.isEmpty else { return }
        pending.remove(at: index)
        if initiating == peer, !cancellingInitiation {
            cancellingInitiation = true
            host.cancelConnecting { _ in }
        }
    }

    /// Starts the controller on the first waiting connection; with several waiting, each gets
    /// the initiator for `initiatorTurn` in turn.
    func initiateNext() {
        guard initiating == nil, !cancellingInitiation, !isOff, let next = pending.first?.peer else { return }
        initiating = next
        // From the device's static random address (set at start), as phones connect.
        host.connect(to: onAirAddress(of: next), ownRandomAddress: host.randomAddress != nil) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, case .failure(let error) = result else { return }
            self.initiating = nil
            if case .status(let status, _) = error, status == .commandDisallowed, self.host.awaitsLateCancelOutcome {
                // The controller still initiates the attempt it said it cancelled (Bumble's
                // does until that peer connects): this one waits and tries again.
                self.logger.info("connecting to \(next) refused while the controller still initiates a cancelled attempt; retrying in \(Self.initiatorTurn)")
                self.turnTimer?.cancel()
                self.turnTimer = self.loop.schedule(after: Self.initiatorTurn) { [weakSelf = WeakHandle(self)] in weakSelf.object?.initiateNext() }
                return
            }
            // The controller refused the attempt: it cannot connect to this device now.
            self.logger.info("connecting to \(next) failed: \(error)")
            self.failPending(next, .refused(error))
            self.initiateNext()
        }
        turnTimer?.cancel()
        turnTimer = nil
        if pending.count > 1 {
            turnTimer = loop.schedule(after: Self.initiatorTurn) { [weakSelf = WeakHandle(self)] in weakSelf.object?.endTurn(of: next) }
        }
    }

    /// Another connection is waiting: stop initiating this one and put it at the back.
    private func endTurn(of peer: LEAddress) {
        guard initiating == peer, pending.count > 1, !cancellingInitiation else { return }
        cancellingInitiation = true
        host.cancelConnecting { _ in }
    }

    private func failPending(_ peer: LEAddress, _ error: DeviceConnectError) {
        guard let index = pending.firstIndex(where: { $0.peer == peer }) else { return }
        let owners = pending.remove(at: index).owners
        for client in clients(in: owners) { client.device(self, didFailToConnectTo: peer, error: error) }
    }

    public func host(_ host: LEHost, didFailToConnectTo peer: LEAddress, status: HCIStatus) {
        assertOnLoop()
        let address = initiating ?? peer
        initiating = nil
        turnTimer?.cancel()
        turnTimer = nil
        if cancellingInitiation {
            cancellingInitiation = false
            // Its turn ended (or nobody wants it any more): to the back of the line.
            if let index = pending.firstIndex(where: { $0.peer == address }) {
                pending.append(pending.remove(at: index))
            }
        } else {
            failPending(address, .failed(status))
        }
        initiateNext()
    }

    /// A connection this device made as central: its owners are the clients that still wait
    /// for it; it is ready for them after the ATT MTU exchange.
    func centralConnectionCompleted(_ connection: DeviceConnection) {
        if initiating == connection.peer {
            initiating = nil
            cancellingInitiation = false
            turnTimer?.cancel()
            turnTimer = nil
        }
        let owners = pending.first { $0.peer == connection.peer }?.owners ?? []
        pending.removeAll { $0.peer == connection.peer }
        connection.owners = owners
        initiateNext()
        guard !connection.owners.isEmpty else {
            // Cancelled while the controller was connecting.
            host.disconnect(connection.le)
            return
        }
        connection.readyTimer = loop.schedule(after: Self.mtuExchangeGrace) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            self.becomeReady(connection)
        }
        connection.client.exchangeMTU { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] result in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            if case .failure(let error) = result {
                // The link went down before it was ready: its owners hear didFailToConnect.
                guard error != .disconnected else { return }
                connection.logger(.att).warning("ATT MTU exchange failed: \(error)")
            }
            self.becomeReady(connection)
        }
    }

    private func becomeReady(_ connection: DeviceConnection) {
        guard !connection.isReady, connection.isOpen else { return }
        connection.isReady = true
        connection.readyTimer?.cancel()
        connection.readyTimer = nil
        for client in clients(in: connection.owners) { client.device(self, didConnect: connection) }
    }
}
