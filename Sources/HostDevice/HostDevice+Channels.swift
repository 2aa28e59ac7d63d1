import HCI
import HostStack
import L2CAP
import Logging
import Scheduling
import StackLogging

/// Why a PSM could not be published.
public enum ChannelPublishError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Every dynamic PSM (0x0080–0x00FF) is taken.
    case noFreePSM
    /// The SPSM asked for is published already (by this client or another).
    case psmInUse(UInt16)
    /// Not an LE SPSM (0x0001–0x00FF).
    case invalidPSM(UInt16)

    public var description: String {
        switch self {
        case .noFreePSM: "every dynamic PSM (0x0080–0x00FF) is published"
        case .psmInUse(let psm): "PSM 0x\(String(psm, radix: 16)) is published already"
        case .invalidPSM(let psm): "0x\(String(psm, radix: 16)) is not an LE PSM (0x0001–0x00FF)"
        }
    }
}

/// Why a channel could not be opened.
public enum ChannelOpenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// L2CAP failed or the peer refused (its result code).
    case l2cap(L2CAPChannelOpenError)
    /// The peer asked for more security and raising it failed.
    case security(LinkSecurityError)
    /// The link went down first.
    case disconnected
    /// Channels cannot be opened this way (why): a client of a `corebluetoothd` that speaks
    /// protocol version 1, which has no channels.
    case notSupported(String)

    public var description: String {
        switch self {
        case .notSupported(let why): why
        case .l2cap(let error): "\(error)"
        case .security(let error): "the peer needs a more secure link, and raising its security failed: \(error)"
        case .disconnected: "the link went down"
        }
    }
}

/// A PSM a client published: incoming channels for it are that client's.
struct PublishedPSM {
    let psm: UInt16
    let owner: ObjectIdentifier
    let requiresEncryption: Bool
}

extension HostDevice {
    /// The PSMs a publication without a named SPSM gets, lowest free first (Vol 3 Part A §4.22).
    public static let dynamicPSMs: ClosedRange<UInt16> = 0x0080...0x00FF

    /// Publishes a credit-based channel server for `client`: the named SPSM (0x0001–0x00FF), or
    /// the lowest free dynamic PSM. Peers' channels to it are handed to the client
    /// (``HostDeviceClient/device(_:didOpen:on:psm:)``); with `requiresEncryption` they are
    /// refused on a link that is not encrypted (Insufficient Authentication, or Insufficient
    /// Encryption when the peer is bonded, so the peer pairs or encrypts and tries again).
    public func publishChannel(for client: any HostDeviceClient, psm: UInt16? = nil,
                               requiresEncryption: Bool) -> Result<UInt16, ChannelPublishError> {
        assertOnLoop()
        let chosen: UInt16
        if let psm {
            guard (0x0001...0x00FF).contains(psm) else { return .failure(.invalidPSM(psm)) }
            guard !publishedPSMs.contains(where: { $0.psm == psm }) else { return .failure(.psmInUse(psm)) }
            chosen = psm
        } else {
            let taken = Set(publishedPSMs.map(\.psm))
            guard let free = Self.dynamicPSMs.first(where: { !taken.contains($0) }) else { return .failure(.noFreePSM) }
            chosen = free
        }
        publishedPSMs.append(PublishedPSM(psm: chosen, owner: ObjectIdentifier(client), requiresEncryption: requiresEncryption))
        return .success(chosen)
    }

    /// Stops accepting channels to `psm`; channels already open stay open. False when `client`
    /// did not publish it.
    @discardableResult
    public func unpublishChannel(_ psm: UInt16, for client: any HostDeviceClient) -> Bool {
        assertOnLoop()
        let owner = ObjectIdentifier(client)
        guard let index = publishedPSMs.firstIndex(where: { $0.psm == psm && $0.owner == owner }) else { return false }
        publishedPSMs.remove(at: index)
        return true
    }

    func unpublishAllChannels(ownedBy owner: ObjectIdentifier) {
        publishedPSMs.removeAll { $0.owner == owner }
    }

    /// Opens a credit-based channel to `psm` on the peer: in the enhanced credit-based mode
    /// (Credit Based Connection Request, 0x17) when the peer supports it, else in the LE mode
    /// (0x14, after the peer's Command Reject). A refusal for want of security
    /// (Insufficient Authentication, Insufficient Encryption, Encryption Key Size Too Short)
    /// raises the link's security — with the bond's key, or by pairing — and the open is tried
    /// once more, as iOS does.
    public func openChannel(on connection: DeviceConnection, psm: UInt16,
                            parameters: CreditBasedChannelParameters = .default,
                            completion: @escaping (Result<L2CAPCreditChannel, ChannelOpenError>) -> Void) {
        assertOnLoop()
        openChannel(on: connection, psm: psm, parameters: parameters, retryAfterSecurity: true, completion: completion)
    }

    private func openChannel(on connection: DeviceConnection, psm: UInt16, parameters: CreditBasedChannelParameters,
                             retryAfterSecurity: Bool,
                             completion: @escaping (Result<L2CAPCreditChannel, ChannelOpenError>) -> Void) {
        guard connection.isOpen else { return completion(.failure(.disconnected)) }
        connection.le.l2cap.openCreditBasedChannel(psm: psm, parameters: parameters, enhanced: true) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            switch result {
            case .success(let channel):
                completion(.success(channel))
            case .failure(.refused(let refusal)) where retryAfterSecurity:
                let refused: SecurityRefusal
                switch refusal {
                case .insufficientEncryption: refused = .insufficientEncryption
                case .insufficientAuthentication, .encryptionKeySizeTooShort: refused = .insufficientAuthentication
                default: return completion(.failure(.l2cap(.refused(refusal))))
                }
                guard let self else { return completion(.failure(.disconnected)) }
                let level = self.securityLevel(after: refused, on: connection)
                connection.logger(.l2cap).debug("L2CAP channel to PSM 0x\(String(psm, radix: 16)) needs more security (\(refusal)); raising it, then retrying")
                self.secure(connection, level: level) { [weakSelf = WeakHandle(self)] secured in
                    let `self` = weakSelf.object
                    switch secured {
                    case .success:
                        guard let self else { return completion(.failure(.disconnected)) }
                        self.openChannel(on: connection, psm: psm, parameters: parameters, retryAfterSecurity: false,
                                    completion: completion)
                    case .failure(.disconnected):
                        completion(.failure(.disconnected))
                    case .failure(let error):
                        completion(.failure(.security(error)))
                    }
                }
            case .failure(.disconnected):
                completion(.failure(.disconnected))
            case .failure(let error):
                completion(.failure(.l2cap(error)))
            }
        }
    }

    /// Makes the link answer peers' channel requests from the published PSMs.
    func attachChannelServer(to connection: DeviceConnection) {
        let handle = connection.handle
        connection.le.l2cap.creditBasedServer = { [weakSelf = WeakHandle(self)] psm in
            let `self` = weakSelf.object
            guard let self, let connection = self.connections[handle] else { return .refuse(.noResourcesAvailable) }
            return self.channelDecision(for: psm, on: connection)
        }
    }

    private func channelDecision(for psm: UInt16, on connection: DeviceConnection) -> CreditBasedChannelDecision {
        guard let published = publishedPSMs.first(where: { $0.psm == psm }) else { return .refuse(.spsmNotSupported) }
        if published.requiresEncryption {
            guard connection.le.isEncrypted else {
                // As the GATT server answers: a bonded peer only has to encrypt.
                return .refuse(bond(for: connection.peer) != nil ? .insufficientEncryption : .insufficientAuthentication)
            }
            if connection.security.keySize > 0 && connection.security.keySize < securityConfiguration.minimumKeySize {
                return .refuse(.encryptionKeySizeTooShort)
            }
        }
        let handle = connection.handle
        return .accept(.default) { [weakSelf = WeakHandle(self)] channel in
            let `self` = weakSelf.object
            guard let self, let connection = self.connections[handle],
                  let owner = self.clients.first(where: { $0.id == published.owner })?.client else {
                return channel.close()
            }
            // The owner hears of the link's end like the link's other users.
            if !connection.isOwned(by: published.owner), !connection.users.contains(published.owner) {
                connection.users.append(published.owner)
            }
            owner.device(self, didOpen: channel, on: connection, psm: psm)
        }
    }
}
