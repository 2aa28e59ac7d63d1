import ATT
import Bonding
import GATT
import HCI
import HCIDriver
import HostStack
import L2CAP
import Logging
import SMP
import Scheduling
import StackLogging

/// Why a link's security could not be raised.
public enum LinkSecurityError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Pairing failed (a check, the agent, the peer, or the 30 s SMP timeout).
    case pairingFailed(SMPError)
    /// Encryption with the bond's key failed: the peer lost its keys (PIN or Key Missing).
    case peerRemovedPairingInformation
    /// Encryption with the bond's key failed otherwise.
    case encryptionFailed(HCIStatus)
    /// No Encryption Change came in time.
    case encryptionTimedOut
    /// The link went down first.
    case disconnected

    public var description: String {
        switch self {
        case .pairingFailed(let error): "\(error)"
        case .peerRemovedPairingInformation: "the peer removed its pairing information"
        case .encryptionFailed(let status): "encryption failed: \(status)"
        case .encryptionTimedOut: "encryption timed out"
        case .disconnected: "the link went down"
        }
    }
}

/// A Just Works agent that accepts every pairing: a headless gateway's default (as the issue of
/// a phone's dialog does not arise), and what a device uses when no client has an agent.
public final class AutoAcceptPairingAgent: PairingAgent {
    public init() {}
    public var ioCapability: SMPIOCapability { .noInputNoOutput }
    public func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        switch prompt {
        case .confirmPairing, .displayPasskey, .confirmNumber: reply(.accept)
        case .enterPasskey, .outOfBandData: reply(.reject)
        }
    }
}

/// The agent a link's Security Manager talks to: the first owner's agent when it has one,
/// else the device's. Looked up at each use, as owners come and go.
final class ConnectionPairingAgent: PairingAgent, @unchecked Sendable {
    // Read on the device's loop only (the Security Manager runs there): the weak references
    // are never touched from another thread.
    @WeakHeld private var device: HostDevice?
    @WeakHeld private var connection: DeviceConnection?
    private let fallback: any PairingAgent

    init(device: HostDevice, connection: DeviceConnection) {
        self.device = device
        self.connection = connection
        fallback = device.pairingAgent
    }

    private var agent: any PairingAgent {
        guard let device, let connection else { return fallback }
        for client in device.clients(in: connection.owners) {
            if let agent = client.pairingAgent { return agent }
        }
        return device.pairingAgent
    }

    var ioCapability: SMPIOCapability { agent.ioCapability }

    func hasOutOfBandData(for peer: LEAddress) -> Bool { agent.hasOutOfBandData(for: peer) }

    /// While a person answers, a virtual clock must not leap over the wait (it would time the
    /// pairing out in an instant): the clock is held until the reply.
    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        guard let loop = device?.loop else { return agent.prompt(prompt, peer: peer, reply: reply) }
        loop.holdClock()
        let once = Locked(false)
        agent.prompt(prompt, peer: peer) { answer in
            guard once.withLock({ done in
                defer { done = true }
                return !done
            }) else { return }
            // The reply posts to the loop first: released before, the clock could leap over
            // the SMP timeout between the two.
            reply(answer)
            loop.releaseClock()
        }
    }
}

extension HostDevice {
    /// How long Encryption Change may take after LE Enable Encryption before the attempt is
    /// given up (the link layer's own procedure timeout is 40 s).
    public static let encryptionTimeout: Duration = .seconds(30)

    // MARK: Raising a link's security

    /// Makes the link at least as secure as `level`: encrypts with the bond's key when there
    /// is one, pairs otherwise (as central a Pairing Request; as peripheral a Security Request,
    /// after which the central pairs or encrypts). Waits with the others when a pairing or an
    /// encryption is already under way.
    public func secure(_ connection: DeviceConnection, level: LESecurityLevel,
                       completion: @escaping (Result<Void, LinkSecurityError>) -> Void) {
        assertOnLoop()
        guard connection.isOpen else { return completion(.failure(.disconnected)) }
        guard connection.security.level < level else { return completion(.success(())) }
        connection.securityWaiters.append(completion)
        guard connection.securityWaiters.count == 1 else { return }
        let encrypted = connection.le.isEncrypted
        if !encrypted, connection.role == .central, let key = bondKey(for: connection), key.securityLevel >= level {
            encrypt(connection, with: key)
        } else {
            pair(connection, requireMITM: level >= .authenticatedEncryption)
        }
    }

    /// Pairs on the link whatever its state (a user asked to): the new keys replace a bond's
    /// only if they are as strong.
    public func pair(_ connection: DeviceConnection, completion: @escaping (Result<Void, LinkSecurityError>) -> Void) {
        assertOnLoop()
        guard connection.isOpen else { return completion(.failure(.disconnected)) }
        connection.securityWaiters.append(completion)
        guard connection.securityWaiters.count == 1 else { return }
        pair(connection, requireMITM: securityConfiguration.requireMITM)
    }

    /// What a peer's refusal for want of security asks of a link (an ATT error, an L2CAP
    /// channel result).
    enum SecurityRefusal {
        case insufficientEncryption, insufficientAuthentication
    }

    /// The security level that answers `refusal` on `connection`: encryption for Insufficient
    /// Encryption; for Insufficient Authentication, encryption on an unencrypted link (it may
    /// be all it takes), else a MITM-protected key (the current one is too weak).
    func securityLevel(after refusal: SecurityRefusal, on connection: DeviceConnection) -> LESecurityLevel {
        switch refusal {
        case .insufficientEncryption: .unauthenticatedEncryption
        case .insufficientAuthentication: connection.le.isEncrypted ? .authenticatedEncryption : .unauthenticatedEncryption
        }
    }

    /// The ATT client's hook: a request refused for want of security raises it, then is
    /// retried once (Vol 3 Part C §10.3.2), so the app sees only the final answer.
    func raiseSecurity(on connection: DeviceConnection, for refusal: ATTPDU.ErrorResponse,
                       done: @escaping (ATTBearerError?) -> Void) {
        guard raisesSecurityOnRefusal else { return done(.errorResponse(refusal)) }
        let refused: SecurityRefusal
        switch refusal.errorCode {
        case .insufficientEncryption: refused = .insufficientEncryption
        case .insufficientAuthentication: refused = .insufficientAuthentication
        default:
            // Encryption Key Size Too Short: our keys are 16 octets already.
            return done(.errorResponse(refusal))
        }
        secure(connection, level: securityLevel(after: refused, on: connection)) { result in
            switch result {
            case .success: done(nil)
            case .failure(.peerRemovedPairingInformation): done(.securityFailed(.peerRemovedPairingInformation))
            case .failure(.encryptionTimedOut): done(.securityFailed(.encryptionTimedOut))
            case .failure(.disconnected): done(.disconnected)
            // The server's refusal stands (iOS reports Insufficient Authentication when
            // pairing fails or cannot give MITM protection).
            case .failure: done(.errorResponse(refusal))
            }
        }
    }

    private func pair(_ connection: DeviceConnection, requireMITM: Bool) {
        let manager = securityManager(for: connection, requireMITM: requireMITM)
        guard !manager.isPairing else { return }
        manager.pair()
    }

    private func encrypt(_ connection: DeviceConnection, with key: SMPLongTermKey) {
        connection.encryptingWith = (key.securityLevel, key.keySize)
        connection.encryptionTimer?.cancel()
        let handle = connection.handle
        connection.encryptionTimer = loop.schedule(after: Self.encryptionTimeout) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, let connection = self.connections[handle] else { return }
            connection.encryptionTimer = nil
            connection.encryptingWith = nil
            self.finishSecurity(connection, .failure(.encryptionTimedOut))
        }
        host.startEncryption(connection.le, longTermKey: key.key, rand: key.rand, ediv: key.ediv) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard case .failure(let error) = result, let self, let connection = self.connections[handle] else { return }
            connection.logger(.smp).warning("LE Enable Encryption refused: \(error)")
            connection.encryptionTimer?.cancel()
            connection.encryptionTimer = nil
            connection.encryptingWith = nil
            self.finishSecurity(connection, .failure(.encryptionFailed(.unspecifiedError)))
        }
    }

    func finishSecurity(_ connection: DeviceConnection, _ result: Result<Void, LinkSecurityError>) {
        let waiters = connection.securityWaiters
        connection.securityWaiters = []
        for waiter in waiters { waiter(result) }
    }

    // MARK: The link's Security Manager

    func securityManager(for connection: DeviceConnection, requireMITM: Bool = false) -> SecurityManager {
        // A new session only to ask for MITM protection the current one does not ask for.
        if let existing = connection.securityManagerStorage,
           !requireMITM || existing.configuration.requireMITM || existing.isPairing {
            return existing
        }
        var configuration = securityConfiguration
        configuration.requireMITM = configuration.requireMITM || requireMITM
        if configuration.localIdentity == nil, let address {
            configuration.localIdentity = SMPLocalIdentity(irk: bonds.localIRK, address: address)
        }
        // Confirm and check values bind the addresses used on the air (resolvable private
        // addresses when the link was made with them), not identities.
        let local = connection.le.localResolvablePrivateAddress.map { LEAddress(.randomDevice, $0) }
            ?? address ?? LEAddress(.randomDevice, .zero)
        let channel = connection.le.l2cap.securityManager!
        let agent = ConnectionPairingAgent(device: self, connection: connection)
        let manager = SecurityManager(
            role: connection.role, localAddress: local, peerAddress: connection.le.peerOnAir, configuration: configuration,
            agent: agent, loop: loop, send: { [weakChannel = WeakHandle(channel)] sdu in _ = weakChannel.object?.send(sdu) })
        manager.delegate = self
        manager.logSource = LazyLogger(.smp, link: connection.logContext)
        manager.hasPeerOutOfBandData = agent.hasOutOfBandData(for: connection.peer)
        manager.localOutOfBandData = localOutOfBandData
        connection.securityManagerStorage = manager
        return manager
    }

    /// Gives SMP PDUs on a new link to its Security Manager (made on the first one).
    func attachSecurityManager(to connection: DeviceConnection) {
        let handle = connection.handle
        connection.le.l2cap.securityManager.onReceive = { [weakSelf = WeakHandle(self)] sdu in
            let `self` = weakSelf.object
            guard let self, let connection = self.connections[handle] else { return }
            self.securityManager(for: connection).receive(sdu)
        }
        connection.bearer.onInsufficientSecurity = { [weakSelf = WeakHandle(self)] refusal, done in
            let `self` = weakSelf.object
            guard let self, let connection = self.connections[handle] else { return done(.disconnected) }
            self.raiseSecurity(on: connection, for: refusal, done: done)
        }
        if let bond = bond(for: connection.peer) {
            connection.security.isBonded = true
            connection.security.peerIdentity = bond.peerIdentity
            connection.serverConnection.hasEncryptionKey = true
        }
    }

    // MARK: Host events

    func encryptionChanged(on connection: DeviceConnection, status: HCIStatus) {
        connection.encryptionTimer?.cancel()
        connection.encryptionTimer = nil
        let encrypted = connection.le.isEncrypted
        if encrypted {
            let worth = connection.encryptingWith ?? (.unauthenticatedEncryption, 16)
            connection.security.level = worth.level
            connection.security.keySize = worth.keySize
        } else {
            connection.security.level = .noSecurity
            connection.security.keySize = 0
        }
        connection.encryptingWith = nil
        connection.le.l2cap.securityLevel = connection.security.level
        // Told first: a pairing may end here (its didFinishPairing resolves the waiters), and a
        // peripheral's Security Request that the central answered with a bond's key stops
        // waiting without one.
        connection.securityManagerStorage?.encryptionChanged(status: status, enabled: encrypted)
        let pairing = connection.securityManagerStorage?.isPairing == true
        if encrypted, !pairing, connection.security.isBonded { restoreBondState(on: connection) }
        // An encryption with a bond's key ends here.
        guard !pairing, !connection.securityWaiters.isEmpty else { return }
        if encrypted {
            finishSecurity(connection, .success(()))
        } else if status == .pinOrKeyMissing {
            connection.logger(.smp).warning("\(connection.peer) no longer has the bond's key")
            finishSecurity(connection, .failure(.peerRemovedPairingInformation))
        } else {
            finishSecurity(connection, .failure(.encryptionFailed(status)))
        }
    }

    /// As peripheral, the central encrypts: with the key of the pairing under way, or a
    /// bond's. The level the key is worth is kept for Encryption Change.
    func longTermKey(for connection: DeviceConnection, rand: UInt64, ediv: UInt16) -> [UInt8]? {
        // The key of the pairing under way; none while only our Security Request waits (the
        // central may answer it by encrypting with the bond's key).
        if let manager = connection.securityManagerStorage, manager.isPairing,
           let key = manager.longTermKeyRequest(rand: rand, ediv: ediv) {
            return key
        }
        guard let key = bond(for: connection.peer)?.peripheralLTK, key.rand == rand, key.ediv == ediv else {
            connection.logger(.smp).warning("\(connection.peer) asked to encrypt with a key we do not have")
            return nil
        }
        connection.encryptingWith = (key.securityLevel, key.keySize)
        return key.key
    }

    func securityLinkClosed(_ connection: DeviceConnection) {
        connection.encryptionTimer?.cancel()
        connection.encryptionTimer = nil
        connection.securityManagerStorage?.linkClosed()
        finishSecurity(connection, .failure(.disconnected))
    }

    /// Makes this device's LE Secure Connections out-of-band data (a fresh key pair's confirm
    /// value and a random value) for the app to hand to a peer over another channel (NFC, a QR
    /// code); the next pairing whose peer says it has it uses it, once.
    public func makeLocalOutOfBandData() -> SMPLocalOOBData {
        assertOnLoop()
        let data = SMPLocalOOBData()
        localOutOfBandData = data
        return data
    }

    // MARK: Privacy

    /// The identity behind `address`: itself, or, for a resolvable private address, the
    /// identity of the bond whose IRK resolves it (the host resolves what the controller did
    /// not). Remembers where the peer was seen, to connect to it by identity.
    func identity(of address: LEAddress) -> LEAddress {
        guard address.isResolvablePrivate, let identity = resolvedIdentity(of: address) else { return address }
        return identity
    }

    func resolvedIdentity(of address: LEAddress) -> LEAddress? {
        guard let bond = bonds.bond(for: address), bond.peerIRK != nil else { return nil }
        lastResolvableAddress[bond.peerIdentity] = address
        return bond.peerIdentity
    }

    /// Where to connect to `peer`: its last resolvable private address when the host resolves
    /// it, else the address itself (the controller resolves identities in its list).
    func onAirAddress(of peer: LEAddress) -> LEAddress {
        guard !host.resolvingListPeers.contains(peer.normalized), let seen = lastResolvableAddress[peer.normalized] else { return peer }
        return seen
    }

    /// Puts the bonded peers that have an IRK in the controller's resolving list, with this
    /// device's IRK, in device privacy mode (so that a peer showing its identity address stays
    /// reachable), then turns resolution on: the controller then reports their identities and
    /// connects to them by identity. Done once, before the device advertises, scans or
    /// connects: controllers refuse these commands meanwhile once resolution is on. Peers bonded
    /// later are resolved by the host until the next start; so are all of them on a controller
    /// without a resolving list or privacy modes.
    public func loadResolvingList(completion: @escaping () -> Void) {
        assertOnLoop()
        guard host.supportsAddressResolution, !isClosed, !host.isResolvingAddresses else { return completion() }
        guard let size = host.resolvingListSize else {
            host.readResolvingListSize { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                guard let self, case .success = result else { return completion() }
                self.loadResolvingList(completion: completion)
            }
            return
        }
        let room = max(0, Int(size) - host.resolvingListPeers.count - 1)  // one left for enablePrivacy
        let wanted = bonds.bonds.filter { $0.peerIRK != nil && !host.resolvingListPeers.contains($0.peerIdentity.normalized) }
        addToResolvingList(Array(wanted.prefix(room)), localIRK: bonds.localIRK) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, !self.host.resolvingListPeers.isEmpty else { return completion() }
            self.host.setAddressResolution(enabled: true) { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                if case .failure(let error) = result { self?.logger.warning("address resolution: \(error)") }
                completion()
            }
        }
    }

    /// Adds the bonds one after the other, each in device privacy mode; a peer whose mode
    /// cannot be set leaves the list again (network mode would hide it when it shows its
    /// identity address).
    private func addToResolvingList(_ bonds: [Bond], localIRK: [UInt8], then done: @escaping () -> Void) {
        guard let bond = bonds.first, let irk = bond.peerIRK else { return done() }
        let rest = Array(bonds.dropFirst())
        let peer = bond.peerIdentity
        host.addToResolvingList(peer, peerIRK: irk, localIRK: localIRK) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return }
            if case .failure(let error) = result {
                self.logger.notice("resolving list: \(error); the host resolves \(peer)")
                return self.addToResolvingList(rest, localIRK: localIRK, then: done)
            }
            self.host.setPrivacyMode(.device, for: peer) { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                guard let self else { return }
                guard case .failure = result else { return self.addToResolvingList(rest, localIRK: localIRK, then: done) }
                self.host.removeFromResolvingList(peer) { [weakSelf = WeakHandle(self)] _ in
                    let `self` = weakSelf.object
                    self?.addToResolvingList(rest, localIRK: localIRK, then: done)
                }
            }
        }
    }

    /// Makes the device advertise and connect from resolvable private addresses made from its
    /// IRK and renewed every `rotation` (15 minutes by default, as phones do), so that only
    /// bonded peers recognise it. The controller makes the addresses: one without a resolving
    /// list cannot, and the completion says so.
    public func enablePrivacy(rotation: Duration = .seconds(900), completion: @escaping (Result<Void, HCIError>) -> Void) {
        assertOnLoop()
        guard host.supportsAddressResolution else {
            return completion(.failure(.notSupported("the controller cannot make resolvable private addresses")))
        }
        let seconds = UInt16(clamping: max(1, min(3600, rotation.components.seconds)))
        // An entry for "any peer" (the zero address, no peer IRK) carries our IRK: the
        // controller uses it for undirected advertising and for peers not in the list.
        let anyone = LEAddress(.publicDevice, .zero)
        host.addToResolvingList(anyone, peerIRK: [UInt8](repeating: 0, count: 16), localIRK: bonds.localIRK) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return }
            if case .failure(let error) = result { return completion(.failure(error)) }
            self.host.setResolvablePrivateAddressTimeout(seconds: seconds) { [weakSelf = WeakHandle(self)] _ in
                let `self` = weakSelf.object
                guard let self else { return }
                self.host.setAddressResolution(enabled: true) { [weakSelf = WeakHandle(self)] result in
                    let `self` = weakSelf.object
                    guard let self else { return }
                    if case .success = result {
                        self.host.usesPrivateAddresses = true
                        self.privacyRotation = rotation
                    }
                    completion(result)
                }
            }
        }
    }

    // MARK: Bonds

    /// A bonded client's subscriptions outlive its connections (Vol 3 Part G §3.3.3.3): each
    /// change is kept in its bond; the unsubscribes a disconnection reports are not changes.
    func rememberSubscription(_ configuration: GATTClientConfiguration, of handle: ATTHandle, on connection: DeviceConnection) {
        guard connection.security.isBonded, connection.isOpen, connection.le.l2cap.isOpen else { return }
        bonds.update(peer: connection.peer) { bond in
            bond.cccdValues[handle.rawValue] = configuration.isEmpty ? nil : configuration.rawValue
        }
    }

    /// The database changed: bonded clients that asked for Service Changed and are not
    /// connected hear of it when they come back.
    func databaseChangedForAbsentBonds() {
        let scHandle = gattServer.serviceChangedHandle.rawValue
        let present = connections.values.compactMap { $0.security.isBonded ? bonds.bond(for: $0.peer)?.peerIdentity : nil }
        for bond in bonds.bonds where !present.contains(bond.peerIdentity) {
            guard let bits = bond.cccdValues[scHandle], GATTClientConfiguration(rawValue: bits).contains(.indication) else { continue }
            bonds.update(peer: bond.peerIdentity) { $0.serviceChangedPending = true }
        }
    }

    /// A bonded client is back on an encrypted link: its subscriptions return, and a Service
    /// Changed it missed is indicated (the whole range: what changed meanwhile is not kept).
    func restoreBondState(on connection: DeviceConnection) {
        guard let bond = bonds.bond(for: connection.peer) else { return }
        var configurations: [ATTHandle: GATTClientConfiguration] = [:]
        for (handle, bits) in bond.cccdValues { configurations[ATTHandle(handle)] = GATTClientConfiguration(rawValue: bits) }
        if !configurations.isEmpty { gattServer.restoreClientConfigurations(configurations, for: connection.serverConnection) }
        if bond.serviceChangedPending {
            gattServer.indicateServiceChanged(ATTHandle(0x0001)...ATTHandle(0xFFFF), to: connection.serverConnection)
            bonds.update(peer: connection.peer) { $0.serviceChangedPending = false }
        }
    }

    /// A new bond keeps what the client had already subscribed to on this link.
    func rememberSubscriptions(of connection: DeviceConnection) {
        let configurations = gattServer.clientConfigurations(for: connection.serverConnection)
        guard !configurations.isEmpty else { return }
        bonds.update(peer: connection.peer) { bond in
            for (handle, configuration) in configurations { bond.cccdValues[handle.rawValue] = configuration.rawValue }
        }
    }

    /// The key to encrypt with as central on a link to this peer.
    func bondKey(for connection: DeviceConnection) -> SMPLongTermKey? {
        bond(for: connection.peer)?.centralLTK
    }

    func bond(for peer: LEAddress) -> Bond? {
        bonds.bond(for: peer)
    }

    /// Removes what is known of `peer` (its keys, and its subscriptions here).
    @discardableResult
    public func removeBond(for peer: LEAddress) -> Bool {
        assertOnLoop()
        for connection in connections.values where connection.security.isBonded && bonds.bond(for: connection.peer)?.matches(peer) == true {
            connection.security.isBonded = false
            connection.serverConnection.hasEncryptionKey = false
        }
        return bonds.removeBond(for: peer)
    }

    /// Keeps bonds in `store` from now on (the controller's persistent store); bonds made so
    /// far in memory move into it unless it has stronger keys for the same peers.
    public func useBondStore(_ store: BondStore) {
        assertOnLoop()
        for bond in bonds.bonds { try? store.store(bond) }
        bonds = store
    }

}

extension HostDevice: SecurityManagerDelegate {
    public func securityManager(_ manager: SecurityManager, startEncryptionWith key: SMPLongTermKey) {
        assertOnLoop()
        guard let connection = connection(of: manager) else { return }
        connection.encryptingWith = (key.securityLevel, key.keySize)
        host.startEncryption(connection.le, longTermKey: key.key, rand: key.rand, ediv: key.ediv) { [weakManager = WeakHandle(manager)] result in
            let manager = weakManager.object
            if case .failure = result { manager?.encryptionChanged(status: .unspecifiedError, enabled: false) }
        }
    }

    public func securityManager(_ manager: SecurityManager, didFinishPairing result: Result<PairingOutcome, SMPError>) {
        assertOnLoop()
        guard let connection = connection(of: manager) else { return }
        switch result {
        case .success(let outcome):
            pairingFailures[connection.peer] = nil
            connection.security.level = outcome.linkKeySecurity
            connection.security.keySize = outcome.keySize
            connection.le.l2cap.securityLevel = outcome.linkKeySecurity
            if let identity = outcome.peerIdentityAddress { connection.security.peerIdentity = identity }
            if outcome.bonded {
                do {
                    let bond = try bonds.save(outcome, peer: connection.peer)
                    connection.security.isBonded = true
                    connection.serverConnection.hasEncryptionKey = true
                    rememberSubscriptions(of: connection)
                    if let bond { onBond?(connection.peer, bond.peerIdentity) }
                } catch {
                    // A weaker key than the bond's: this link uses it, the bond keeps its own.
                    connection.logger(.smp).error("new keys for \(connection.peer) not stored: \(error)")
                }
            }
            // Out-of-band data serves one pairing.
            if outcome.method == .outOfBand { localOutOfBandData = nil }
            connection.logger(.smp).debug("paired with \(connection.peer) (\(outcome.method), \(outcome.bonded ? "bonded" : "not bonded"))")
            finishSecurity(connection, .success(()))
        case .failure(let error):
            if case .disconnected = error {} else { notePairingFailure(connection.peer) }
            connection.logger(.smp).debug("pairing with \(connection.peer) failed: \(error)")
            finishSecurity(connection, .failure(.pairingFailed(error)))
        }
    }

    public func securityManager(_ manager: SecurityManager, didReceiveSecurityRequest requirements: SMPAuthRequirements) {
        assertOnLoop()
        guard let connection = connection(of: manager), connection.securityWaiters.isEmpty else { return }
        let wanted: LESecurityLevel = requirements.contains(.mitm) ? .authenticatedEncryption : .unauthenticatedEncryption
        secure(connection, level: wanted) { [weakConnection = WeakHandle(connection)] result in
            let connection = weakConnection.object
            if case .failure(let error) = result { connection?.logger(.smp).info("the peripheral's Security Request: \(error)") }
        }
    }

    public func securityManagerShouldAllowPairing(_ manager: SecurityManager) -> Bool {
        assertOnLoop()
        guard let connection = connection(of: manager), let failure = pairingFailures[connection.peer] else { return true }
        return loop.now >= failure.retryAfter
    }

    private func connection(of manager: SecurityManager) -> DeviceConnection? {
        connections.values.first { $0.securityManagerStorage === manager }
    }

    /// Repeated Attempts (Vol 3 Part H §2.3.6): after each failed pairing, the peer waits
    /// twice as long as before (1 s, 2 s, … up to a minute) before we pair with it again.
    private func notePairingFailure(_ peer: LEAddress) {
        let count = (pairingFailures[peer]?.count ?? 0) + 1
        let wait = Duration.seconds(min(60, 1 << min(count - 1, 6)))
        pairingFailures[peer] = PairingFailures(count: count, retryAfter: loop.now + wait)
    }
}

/// Failed pairings with one peer, for the Repeated Attempts back-off.
struct PairingFailures {
    var count: Int
    var retryAfter: LoopInstant
}

