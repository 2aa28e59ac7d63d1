import ATT
import GATT
import Logging
import Scheduling
import StackLogging

extension HostDevice {
    /// Adds a service of `client`'s to the device's one database (beside the other clients'
    /// services, as iOS merges its apps' services); peers are told through Service Changed.
    public func addService(_ service: GATTService, for client: any HostDeviceClient) throws(GATTDatabaseError)
        -> GATTServiceHandles
    {
        assertOnLoop()
        let handles = try gattServer.addService(service)
        services.append(OwnedService(id: handles.id, range: handles.range, owner: ObjectIdentifier(client)))
        return handles
    }

    /// Removes one of `client`'s services. Another client's service is not removed (an error).
    public func removeService(_ id: GATTServiceID, for client: any HostDeviceClient) throws(GATTDatabaseError) {
        assertOnLoop()
        guard let index = services.firstIndex(where: { $0.id == id }), services[index].owner == ObjectIdentifier(client) else {
            throw .unknownService(id)
        }
        try gattServer.removeService(id)
        services.remove(at: index)
    }

    /// Removes every service of `client`'s, and only those.
    public func removeAllServices(for client: any HostDeviceClient) {
        assertOnLoop()
        removeAllServices(ownedBy: ObjectIdentifier(client))
    }

    func removeAllServices(ownedBy owner: ObjectIdentifier) {
        // Includers before the services they include: newest first.
        for service in services.reversed() where service.owner == owner {
            do throws(GATTDatabaseError) {
                try gattServer.removeService(service.id)
            } catch {
                logging.logger(.gatt).warning("removing service \(service.id) failed: \(error)")
            }
        }
        services.removeAll { $0.owner == owner }
    }

    /// The client whose service holds `handle`.
    func owner(of handle: ATTHandle) -> (any HostDeviceClient)? {
        guard let id = ownerID(of: handle) else { return nil }
        return clients.first { $0.id == id }?.client
    }

    /// The identifier of the client whose service holds `handle`.
    func ownerID(of handle: ATTHandle) -> ObjectIdentifier? {
        for service in services where service.range.contains(handle) { return service.owner }
        return nil
    }

    /// The client now owns traffic on `connection` (a request for its service), so it hears of
    /// the connection's end even if it does not own the connection.
    private func use(_ connection: DeviceConnection, by client: any HostDeviceClient) {
        let id = ObjectIdentifier(client)
        guard !connection.isOwned(by: id), !connection.users.contains(id) else { return }
        connection.users.append(id)
    }

    /// The GATT server's requests go to the client whose service holds the attribute.
    func routeServerRequests() {
        gattServer.onRead = { [weakSelf = WeakHandle(self)] request, respond in
            let `self` = weakSelf.object
            guard let self, let connection = self.connection(for: request.connection),
                  let client = self.owner(of: request.handle) else { return respond(.failure(.unlikelyError)) }
            self.use(connection, by: client)
            client.device(self, read: request, on: connection, respond: respond)
        }
        gattServer.onWrite = { [weakSelf = WeakHandle(self)] requests, respond in
            let `self` = weakSelf.object
            guard let self, let first = requests.first, let connection = self.connection(for: first.connection),
                  let id = self.ownerID(of: first.handle) else { return respond(.unlikelyError) }
            // An Execute Write spanning several clients' services is refused: one answer, all
            // or nothing, cannot come from two clients.
            guard requests.count == 1 || requests.allSatisfy({ self.ownerID(of: $0.handle) == id }),
                  let client = self.clients.first(where: { $0.id == id })?.client else {
                return respond(.unlikelyError)
            }
            self.use(connection, by: client)
            client.device(self, write: requests, on: connection, respond: respond)
        }
        gattServer.onSubscriptionChange = { [weakSelf = WeakHandle(self)] serverConnection, handle, old, configuration in
            let `self` = weakSelf.object
            guard let self, let connection = self.connection(for: serverConnection) else { return }
            self.rememberSubscription(configuration, of: handle, on: connection)
            guard let client = self.owner(of: handle) else { return }
            if !configuration.isEmpty { self.use(connection, by: client) }
            client.device(self, subscriptionChanged: configuration, from: old, forCharacteristic: handle, on: connection)
        }
        gattServer.onDatabaseChanged = { [weakSelf = WeakHandle(self)] _ in weakSelf.object?.databaseChangedForAbsentBonds() }
        gattServer.onUpdatesHandedOver = { [weakSelf = WeakHandle(self)] count, owner in
            let `self` = weakSelf.object
            guard let self else { return }
            self.clients.first { $0.updateOwner == owner }?.client?.device(self, updatesHandedOver: count)
        }
    }
}
