import HCI
import HCIDriver
import Scheduling

// The controller's resolving list and address resolution (Vol 4 Part E §7.8.38–7.8.45): the
// host hands it the peers' IRKs and its own, and the link layer makes and resolves the
// resolvable private addresses. Only for controllers that have the commands.

extension LEHost {
    /// Whether the controller has a resolving list: it marks the resolving list and address
    /// resolution commands as supported.
    public var supportsAddressResolution: Bool {
        guard let commands = info?.supportedCommands else { return false }
        return commands.supports(LEAddDeviceToResolvingList.self) && commands.supports(LERemoveDeviceFromResolvingList.self)
            && commands.supports(LEClearResolvingList.self) && commands.supports(LESetAddressResolutionEnable.self)
    }

    /// Adds a peer to the controller's resolving list (LE Add Device To Resolving List).
    ///
    /// Call while address resolution is off, or while not advertising, scanning or connecting
    /// (the controller answers Command Disallowed otherwise).
    ///
    /// - Parameters:
    ///   - peer: The peer's identity address, public or random static (identity types 0x02/0x03
    ///     count as public/random).
    ///   - peerIRK: The peer's IRK, 16 octets as HCI carries them (least significant first);
    ///     all zero when the peer has none.
    ///   - localIRK: This device's IRK for the peer, 16 octets as HCI carries them; all zero to
    ///     use the identity address with it.
    public func addToResolvingList(_ peer: LEAddress, peerIRK: [UInt8], localIRK: [UInt8],
                                   completion: @escaping (Result<Void, HCIError>) -> Void) {
        guard peerIRK.count == 16, localIRK.count == 16 else {
            return completion(.failure(.notSupported("IRKs are 16 octets")))
        }
        sendIfSupported(LEAddDeviceToResolvingList(
            peerIdentityAddressType: Self.identityType(peer), peerIdentityAddress: peer.address,
            peerIRK: peerIRK, localIRK: localIRK)) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result, let self, !self.resolvingListPeers.contains(peer.normalized) {
                self.resolvingListPeers.append(peer.normalized)
            }
            completion(result)
        }
    }

    /// Reads how many peers the resolving list holds (kept in `resolvingListSize`).
    public func readResolvingListSize(completion: @escaping (Result<UInt8, HCIError>) -> Void) {
        guard info?.supportedCommands.supports(LEReadResolvingListSize.self) == true else {
            return completion(.failure(.notSupported("the controller does not support \(LEReadResolvingListSize.name)")))
        }
        driver.send(LEReadResolvingListSize()) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            switch result {
            case .success(let parameters):
                self?.resolvingListSize = parameters.resolvingListSize
                completion(.success(parameters.resolvingListSize))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// Sets how the controller treats a listed peer that shows its identity address (LE Set
    /// Privacy Mode): `.device` accepts it as well as its resolvable private addresses, for
    /// peers that do not use privacy (most devices advertise from a fixed address).
    public func setPrivacyMode(_ mode: LESetPrivacyMode.PrivacyMode, for peer: LEAddress,
                               completion: @escaping (Result<Void, HCIError>) -> Void) {
        sendIfSupported(LESetPrivacyMode(peerIdentityAddressType: Self.identityType(peer), peerIdentityAddress: peer.address,
                                         privacyMode: mode), completion: completion)
    }

    /// Removes a peer (by its identity address) from the resolving list.
    public func removeFromResolvingList(_ peer: LEAddress, completion: @escaping (Result<Void, HCIError>) -> Void) {
        sendIfSupported(LERemoveDeviceFromResolvingList(
            peerIdentityAddressType: Self.identityType(peer), peerIdentityAddress: peer.address)) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result { self?.resolvingListPeers.removeAll { $0 == peer.normalized } }
            completion(result)
        }
    }

    /// Empties the resolving list.
    public func clearResolvingList(completion: @escaping (Result<Void, HCIError>) -> Void) {
        sendIfSupported(LEClearResolvingList()) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result { self?.resolvingListPeers = [] }
            completion(result)
        }
    }

    /// Turns address resolution in the controller on or off (LE Set Address Resolution Enable).
    /// Call while not advertising, scanning or connecting.
    public func setAddressResolution(enabled: Bool, completion: @escaping (Result<Void, HCIError>) -> Void) {
        sendIfSupported(LESetAddressResolutionEnable(addressResolutionEnable: enabled)) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .success = result { self?.isResolvingAddresses = enabled }
            completion(result)
        }
    }

    /// Own_Address_Type for advertising and connecting: with `usesPrivateAddresses` (and the
    /// controller resolving) 0x02/0x03, for which the controller makes resolvable private
    /// addresses from the local IRKs of its resolving list; else the public or random address.
    func ownAddressType(random: Bool) -> LEAddressType {
        guard usesPrivateAddresses, isResolvingAddresses else { return random ? .randomDevice : .publicDevice }
        return random ? .randomIdentity : .publicIdentity
    }

    /// The address to name `peer` by in a connection command: its identity type (0x02/0x03)
    /// when the controller resolves it, so that the link layer connects to its current
    /// resolvable private address.
    func addressForInitiating(_ peer: LEAddress) -> LEAddress {
        guard isResolvingAddresses, resolvingListPeers.contains(peer.normalized) else { return peer }
        return LEAddress(peer.isRandom ? .randomIdentity : .publicIdentity, peer.address)
    }

    /// How long the controller uses each resolvable private address before making a new one
    /// (LE Set Resolvable Private Address Timeout): 1–3600 seconds, 900 by default.
    public func setResolvablePrivateAddressTimeout(seconds: UInt16, completion: @escaping (Result<Void, HCIError>) -> Void) {
        guard (1...0x0E10).contains(seconds) else {
            return completion(.failure(.notSupported("the RPA timeout is 1–3600 seconds")))
        }
        sendIfSupported(LESetResolvablePrivateAddressTimeout(rpaTimeout: seconds), completion: completion)
    }

    /// Sends a privacy command the controller marks as supported; fails without sending otherwise.
    private func sendIfSupported<C: HCICommand>(_ command: C, completion: @escaping (Result<Void, HCIError>) -> Void) {
        guard info?.supportedCommands.supports(C.self) == true else {
            return completion(.failure(.notSupported("the controller does not support \(C.name)")))
        }
        sequence([step(command)], completion: completion)
    }

    /// Identity address types in resolving list commands are public (0) or random static (1).
    private static func identityType(_ peer: LEAddress) -> LEAddressType {
        peer.isRandom ? .randomDevice : .publicDevice
    }
}
