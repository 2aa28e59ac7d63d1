import HCI
import HCIDriver
import HostStack
import Scheduling

extension HostDevice {
    /// Starts (or replaces) `client`'s advertising. With extended advertising each client has an
    /// advertising set of its own, as many as the controller has; with legacy advertising the
    /// controller has one, which one client at a time may use: another client's request fails
    /// until that one stops.
    public func startAdvertising(_ parameters: AdvertisingParameters, for client: any HostDeviceClient,
                                 completion: @escaping (Result<Void, HCIError>) -> Void) {
        assertOnLoop()
        guard let index = entryIndex(client), !isOff else {
            return completion(.failure(.notSupported("the device is not on")))
        }
        let set: UInt8
        if let own = clients[index].advertisingSet {
            set = own
        } else {
            let taken = Set(clients.compactMap(\.advertisingSet))
            let count = host.usesExtendedCommands ? host.supportedAdvertisingSets : 1
            guard let free = (0..<UInt8(clamping: count)).first(where: { !taken.contains($0) }) else {
                return completion(.failure(.notSupported(count == 1
                    ? "the controller advertises one set at a time, and another client of this controller is advertising"
                    : "all \(count) advertising sets of the controller are in use")))
            }
            set = free
            clients[index].advertisingSet = set
        }
        let id = ObjectIdentifier(client)
        host.startAdvertising(parameters, set: set) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return completion(result) }
            if case .failure = result, let index = self.clients.firstIndex(where: { $0.id == id }),
               self.clients[index].advertisingSet == set, !self.host.advertisingSets.contains(set) {
                self.clients[index].advertisingSet = nil
            }
            completion(result)
        }
    }

    /// Stops `client`'s advertising and frees its set.
    public func stopAdvertising(for client: any HostDeviceClient,
                                completion: @escaping (Result<Void, HCIError>) -> Void = { _ in }) {
        assertOnLoop()
        guard let index = entryIndex(client), let set = clients[index].advertisingSet else { return completion(.success(())) }
        clients[index].advertisingSet = nil
        guard !isOff else { return completion(.success(())) }
        host.stopAdvertising(set: set, completion: completion)
    }

    /// The advertising set `client` holds, if any.
    public func advertisingSet(of client: any HostDeviceClient) -> UInt8? {
        assertOnLoop()
        return entryIndex(client).flatMap { clients[$0].advertisingSet }
    }
}
