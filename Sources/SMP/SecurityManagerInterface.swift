import HCI
import Scheduling

// The Security Manager's contract with the layers around it (Core spec Vol 3 Part H): what the
// host gives a pairing session and what it hears back. The session itself is `SecurityManager`.

/// IO capabilities (Vol 3 Part H §2.3.2, Table 3.4), as the Pairing Request/Response carry them.
public enum SMPIOCapability: UInt8, Sendable, Hashable, Codable, CaseIterable {
    case displayOnly = 0x00
    case displayYesNo = 0x01
    case keyboardOnly = 0x02
    case noInputNoOutput = 0x03
    case keyboardDisplay = 0x04
}

/// The AuthReq field (Vol 3 Part H §3.5.1).
public struct SMPAuthRequirements: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Bonding_Flags 0b01: keys are to be stored.
    public static let bonding = SMPAuthRequirements(rawValue: 0x01)
    public static let mitm = SMPAuthRequirements(rawValue: 0x04)
    public static let secureConnections = SMPAuthRequirements(rawValue: 0x08)
    public static let keypress = SMPAuthRequirements(rawValue: 0x10)
    public static let ct2 = SMPAuthRequirements(rawValue: 0x20)
}

/// Initiator/Responder Key Distribution (Vol 3 Part H §3.6.1).
public struct SMPKeyDistribution: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// LTK, EDIV and Rand (legacy pairing only; ignored by LE Secure Connections).
    public static let encryptionKey = SMPKeyDistribution(rawValue: 0x01)
    /// IRK and identity address.
    public static let identityKey = SMPKeyDistribution(rawValue: 0x02)
    /// CSRK.
    public static let signingKey = SMPKeyDistribution(rawValue: 0x04)
    /// BR/EDR link key derivation (not used on LE-only devices).
    public static let linkKey = SMPKeyDistribution(rawValue: 0x08)
}

/// Pairing Failed reason codes (Vol 3 Part H §3.5.5, Table 3.7).
public enum SMPPairingFailedReason: UInt8, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case passkeyEntryFailed = 0x01
    case oobNotAvailable = 0x02
    case authenticationRequirements = 0x03
    case confirmValueFailed = 0x04
    case pairingNotSupported = 0x05
    case encryptionKeySize = 0x06
    case commandNotSupported = 0x07
    case unspecifiedReason = 0x08
    case repeatedAttempts = 0x09
    case invalidParameters = 0x0A
    case dhKeyCheckFailed = 0x0B
    case numericComparisonFailed = 0x0C
    case brEdrPairingInProgress = 0x0D
    case crossTransportKeyDerivationNotAllowed = 0x0E
    case keyRejected = 0x0F
    case busy = 0x10

    public var description: String {
        switch self {
        case .passkeyEntryFailed: "passkey entry failed"
        case .oobNotAvailable: "OOB not available"
        case .authenticationRequirements: "authentication requirements cannot be met"
        case .confirmValueFailed: "confirm value failed"
        case .pairingNotSupported: "pairing not supported"
        case .encryptionKeySize: "encryption key size insufficient"
        case .commandNotSupported: "command not supported"
        case .unspecifiedReason: "unspecified reason"
        case .repeatedAttempts: "repeated attempts"
        case .invalidParameters: "invalid parameters"
        case .dhKeyCheckFailed: "DHKey check failed"
        case .numericComparisonFailed: "numeric comparison failed"
        case .brEdrPairingInProgress: "BR/EDR pairing in progress"
        case .crossTransportKeyDerivationNotAllowed: "cross-transport key derivation not allowed"
        case .keyRejected: "key rejected"
        case .busy: "busy"
        }
    }
}

/// The association model a pairing uses (Vol 3 Part H §2.3.5.1), told to the agent with every
/// prompt so that a user can notice a method they did not expect (method confusion).
public enum PairingMethod: String, Sendable, Hashable, Codable {
    case justWorks
    case numericComparison
    /// Passkey entry where this side shows the passkey and the peer's user types it.
    case passkeyDisplay
    /// Passkey entry where this side's user types the passkey.
    case passkeyInput
    case outOfBand

    /// Whether the method protects against a man in the middle (makes an authenticated key).
    public var isAuthenticated: Bool { self != .justWorks }
}

/// Out-of-band data (Vol 3 Part H §2.3.5.6.4 for LE Secure Connections, §2.3.5.4 for legacy).
public struct PairingOOBData: Sendable, Hashable {
    /// LE Secure Connections: the peer's confirm value and random value (16 octets each, as
    /// SMP carries them, least significant octet first); nil when only legacy TK is known.
    public var peerConfirm: [UInt8]?
    public var peerRandom: [UInt8]?
    /// Legacy pairing: the 16-octet temporary key (least significant octet first).
    public var legacyTemporaryKey: [UInt8]?
    public init(peerConfirm: [UInt8]? = nil, peerRandom: [UInt8]? = nil, legacyTemporaryKey: [UInt8]? = nil) {
        self.peerConfirm = peerConfirm
        self.peerRandom = peerRandom
        self.legacyTemporaryKey = legacyTemporaryKey
    }
}

/// What the agent is asked during a pairing. Each case names the method, so a prompt for an
/// unexpected method is visible to the user.
public enum PairingPrompt: Sendable, Hashable {
    /// Just Works: accept pairing with no check (answer `.accept` or `.reject`).
    case confirmPairing(method: PairingMethod)
    /// Passkey entry, this side shows `passkey` (six digits) for the peer's user to type.
    /// Answer `.accept` once shown (or `.reject` to abort).
    case displayPasskey(UInt32)
    /// Passkey entry, this side's user types the passkey shown on the peer: answer `.passkey(n)`.
    case enterPasskey
    /// Numeric comparison: both sides show `value` (six digits); answer `.accept` if they match.
    case confirmNumber(UInt32)
    /// Out of band: answer `.outOfBand(data)` with what the OOB channel delivered.
    case outOfBandData
}

/// An agent's answer to a prompt.
public enum PairingReply: Sendable, Hashable {
    case accept
    case reject
    case passkey(UInt32)
    case outOfBand(PairingOOBData)
}

/// Who answers pairing prompts: a user at a terminal, an app's UI, or a headless default.
/// `reply` may be called later and from any thread (a user typing); exactly once.
public protocol PairingAgent: AnyObject, Sendable {
    /// The IO capability this agent offers (what the Pairing Request/Response advertise).
    var ioCapability: SMPIOCapability { get }
    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void)
    /// Whether out-of-band data from `peer` is at hand (the OOB flag this side sends); when the
    /// pairing then uses OOB, the agent is asked `.outOfBandData`. False by default.
    func hasOutOfBandData(for peer: LEAddress) -> Bool
}

extension PairingAgent {
    public func hasOutOfBandData(for peer: LEAddress) -> Bool { false }
}

/// A long term key and what it is worth, as HCI carries it (16 octets, least significant first).
public struct SMPLongTermKey: Sendable, Hashable, Codable {
    public var key: [UInt8]
    /// EDIV and Rand of a legacy-distributed LTK; both zero for LE Secure Connections.
    public var ediv: UInt16
    public var rand: UInt64
    /// The negotiated encryption key size, 7–16 octets.
    public var keySize: Int
    /// Made by a MITM-protected method.
    public var authenticated: Bool
    /// Made by LE Secure Connections.
    public var secureConnections: Bool

    public init(key: [UInt8], ediv: UInt16, rand: UInt64, keySize: Int, authenticated: Bool, secureConnections: Bool) {
        self.key = key
        self.ediv = ediv
        self.rand = rand
        self.keySize = keySize
        self.authenticated = authenticated
        self.secureConnections = secureConnections
    }

    /// The LE security mode 1 level a link encrypted with this key has.
    public var securityLevel: LESecurityLevel {
        guard authenticated else { return .unauthenticatedEncryption }
        return secureConnections && keySize == 16 ? .authenticatedSecureConnections : .authenticatedEncryption
    }
}

/// Everything a finished pairing produced, for the bond store and for this link.
public struct PairingOutcome: Sendable, Hashable {
    public var method: PairingMethod
    /// The key the link is encrypted with now (STK for legacy, LTK for Secure Connections).
    public var linkKeySecurity: LESecurityLevel
    public var keySize: Int
    /// Both sides asked for bonding: the keys below are to be stored.
    public var bonded: Bool
    /// The key to encrypt future links with when we are the central (the peer's distributed
    /// LTK in legacy pairing; the derived LTK in LE Secure Connections).
    public var centralLTK: SMPLongTermKey?
    /// The key to answer a central's LTK request with when we are the peripheral (the LTK we
    /// distributed in legacy pairing; the derived LTK in LE Secure Connections).
    public var peripheralLTK: SMPLongTermKey?
    /// The peer's IRK (16 octets, as SMP carries it) and identity address, when distributed.
    public var peerIRK: [UInt8]?
    public var peerIdentityAddress: LEAddress?
    /// The peer's CSRK (16 octets) and ours, when distributed.
    public var peerCSRK: [UInt8]?
    public var localCSRK: [UInt8]?

    public init(method: PairingMethod, linkKeySecurity: LESecurityLevel, keySize: Int, bonded: Bool) {
        self.method = method
        self.linkKeySecurity = linkKeySecurity
        self.keySize = keySize
        self.bonded = bonded
    }
}

/// Why a pairing ended without keys.
public enum SMPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// We sent Pairing Failed with this reason (our check failed or our agent rejected).
    case localFailure(SMPPairingFailedReason)
    /// The peer sent Pairing Failed with this reason.
    case remoteFailure(SMPPairingFailedReason)
    /// No SMP progress for 30 s (Vol 3 Part H §3.4); no SMP traffic on this link afterwards.
    case timeout
    /// The link went down during the pairing.
    case disconnected
    /// Link encryption with the new key failed (HCI status of Encryption Change).
    case encryptionFailed(HCIStatus)

    public var description: String {
        switch self {
        case .localFailure(let reason): "pairing failed here: \(reason)"
        case .remoteFailure(let reason): "the peer failed the pairing: \(reason)"
        case .timeout: "the pairing timed out"
        case .disconnected: "the link went down during pairing"
        case .encryptionFailed(let status): "encryption failed: \(status)"
        }
    }
}

/// What a pairing session asks of the host it runs in.
public protocol SecurityManagerDelegate: AnyObject {
    /// Central: encrypt the link with `key` (HCI LE Enable Encryption); tell the session the
    /// result with `encryptionChanged`.
    func securityManager(_ manager: SecurityManager, startEncryptionWith key: SMPLongTermKey)
    /// The pairing ended (keys in the outcome, or why not). Called once per pairing.
    func securityManager(_ manager: SecurityManager, didFinishPairing result: Result<PairingOutcome, SMPError>)
    /// Central: the peripheral sent a Security Request. The host either encrypts with a bond's
    /// key or calls `pair()`.
    func securityManager(_ manager: SecurityManager, didReceiveSecurityRequest requirements: SMPAuthRequirements)
    /// A pairing from the peer is about to start (its Pairing Request, or our answer to its
    /// Security Request). False refuses it with Pairing Failed "Repeated Attempts": the host
    /// keeps the back-off per peer across links.
    func securityManagerShouldAllowPairing(_ manager: SecurityManager) -> Bool
}

extension SecurityManagerDelegate {
    public func securityManagerShouldAllowPairing(_ manager: SecurityManager) -> Bool { true }
}

/// This device's identity, distributed in Identity Information / Identity Address Information.
public struct SMPLocalIdentity: Sendable, Hashable {
    /// 16 octets as SMP carries it (least significant first); never all zero.
    public var irk: [UInt8]
    /// A public or static random address.
    public var address: LEAddress
    public init(irk: [UInt8], address: LEAddress) {
        self.irk = irk
        self.address = address
    }
}

/// A device's pairing policy; every link's session gets a copy.
public struct SMPConfiguration: Sendable, Hashable {
    /// Ask for (and accept) bonding.
    public var bondable = true
    /// Require a MITM-protected method; pairing that cannot give one fails with
    /// Authentication Requirements.
    public var requireMITM = false
    /// Refuse legacy pairing (Secure Connections Only mode).
    public var secureConnectionsOnly = false
    /// Offer LE Secure Connections (the SC bit of AuthReq). Off makes every pairing legacy:
    /// for tests and for checking a peer's legacy pairing, never for production use.
    public var supportsSecureConnections = true
    /// The smallest encryption key size accepted (7–16); 16 by default against key-size
    /// downgrades.
    public var minimumKeySize = 16
    /// The largest encryption key size offered (7–16).
    public var maximumKeySize = 16
    /// Distributed as IRK + identity address when set and the peer asks for it.
    public var localIdentity: SMPLocalIdentity?
    /// Distribute a CSRK when the peer asks for it.
    public var distributeSigningKey = true
    /// Accept the peer's use of the debug P-256 key (off: the spec's debug mode only).
    public var allowDebugKeys = false
    /// The SMP transaction timeout (Vol 3 Part H §3.4).
    public var timeout: Duration = .seconds(30)

    public init() {}
}
