import Bonding
import Foundation
import HCI
import HostDevice
import SMP
import Scheduling

// **Linux extension.** On iOS the system pairs, showing its own dialogs; on Linux an app (or a
// headless gateway's default) answers instead, through a pairing agent.

/// **Linux extension.** What the local device can show and enter during pairing (Core spec
/// Vol 3 Part H §2.3.2): it decides which pairing methods are possible.
public enum CBPairingIOCapability: Int, Sendable, CaseIterable {
    case displayOnly = 0
    case displayYesNo = 1
    case keyboardOnly = 2
    case noInputNoOutput = 3
    case keyboardDisplay = 4

    var smp: SMPIOCapability { SMPIOCapability(rawValue: UInt8(rawValue))! }
}

/// **Linux extension.** How a pairing checks that nobody is in the middle. Each request names
/// the method, so an app can tell its user which one is being used (a method the user did not
/// expect is a warning sign).
public enum CBPairingMethod: Int, Sendable {
    /// No check: protects against eavesdropping only.
    case justWorks = 0
    /// Both devices show a six-digit number; the user confirms they match.
    case numericComparison = 1
    /// This device shows a six-digit passkey that the user types on the peer.
    case passkeyDisplay = 2
    /// The user types here the six-digit passkey the peer shows.
    case passkeyEntry = 3
    /// Data exchanged over another channel (NFC, a QR code).
    case outOfBand = 4

    init(_ method: PairingMethod) {
        switch method {
        case .justWorks: self = .justWorks
        case .numericComparison: self = .numericComparison
        case .passkeyDisplay: self = .passkeyDisplay
        case .passkeyInput: self = .passkeyEntry
        case .outOfBand: self = .outOfBand
        }
    }
}

/// **Linux extension.** One question a pairing asks. Answer it exactly once, from any thread,
/// now or later (a user typing); the pairing fails on its own after 30 seconds without an answer.
public final class CBPairingRequest: NSObject, @unchecked Sendable {
    /// What is asked.
    public enum Kind: Hashable, Sendable {
        /// Just Works: accept the pairing or not.
        case confirmPairing
        /// Show `passkey` (six digits, zero-padded) to the user, who types it on the peer; then `accept()`.
        case displayPasskey(UInt32)
        /// Ask the user for the passkey the peer shows; answer with `enterPasskey(_:)`.
        case enterPasskey
        /// Show `value` (six digits, zero-padded); `accept()` when the user confirms the peer shows the same.
        case confirmNumber(UInt32)
        /// Answer with `provideOutOfBandData(…)`.
        case outOfBandData
    }

    /// The peer's identifier: its `CBPeripheral` or `CBCentral` has the same.
    public let peerIdentifier: UUID
    /// The method this pairing uses.
    public let method: CBPairingMethod
    public let kind: Kind
    private let reply: @Sendable (PairingReply) -> Void

    init(peerIdentifier: UUID, method: CBPairingMethod, kind: Kind, reply: @escaping @Sendable (PairingReply) -> Void) {
        self.peerIdentifier = peerIdentifier
        self.method = method
        self.kind = kind
        self.reply = reply
    }

    /// Yes: pair (Just Works), the passkey is shown, or the numbers match.
    public func accept() { reply(.accept) }
    /// No: the pairing fails.
    public func reject() { reply(.reject) }
    /// The passkey the user typed (0–999999).
    public func enterPasskey(_ passkey: UInt32) { reply(passkey <= 999_999 ? .passkey(passkey) : .reject) }
    /// What the out-of-band channel gave: for LE Secure Connections the peer's confirm and
    /// random values (16 bytes each), for legacy pairing the 16-byte temporary key; all in
    /// the order SMP carries them (least significant byte first).
    public func provideOutOfBandData(peerConfirm: Data? = nil, peerRandom: Data? = nil, temporaryKey: Data? = nil) {
        reply(.outOfBand(PairingOOBData(peerConfirm: peerConfirm.map { [UInt8]($0) }, peerRandom: peerRandom.map { [UInt8]($0) },
                                        legacyTemporaryKey: temporaryKey.map { [UInt8]($0) })))
    }
}

/// **Linux extension.** Answers pairing questions for a manager (``CBManager/linuxPairingAgent``)
/// or for the whole process (``CBPairing/defaultAgent``). Called on the manager's delegate
/// queue (the main queue for the process-wide agent when no manager is involved).
public protocol CBPairingAgent: AnyObject, Sendable {
    /// What this agent can show and enter.
    var ioCapability: CBPairingIOCapability { get }
    /// Answer `request` (now or later, exactly once).
    func handle(_ request: CBPairingRequest)
    /// Whether out-of-band data from the device `peerIdentifier` names is at hand (read from
    /// its NFC tag or QR code): pairing then uses it, and the agent is asked `.outOfBandData`.
    /// False by default. Called on the stack's thread: answer at once, without blocking.
    func hasOutOfBandData(for peerIdentifier: UUID) -> Bool
}

extension CBPairingAgent {
    public func hasOutOfBandData(for peerIdentifier: UUID) -> Bool { false }
}

/// **Linux extension.** Process-wide pairing settings.
public enum CBPairing {
    private static let agentStorage = Locked<(any CBPairingAgent)?>(nil)

    /// The agent for managers that have none of their own. Nil (the default): every pairing is
    /// Just Works and accepted, as a headless gateway expects.
    public static var defaultAgent: (any CBPairingAgent)? {
        get { agentStorage.withLock { $0 } }
        set { agentStorage.withLock { $0 = newValue } }
    }
}

/// An app's `CBPairingAgent` as the host's `PairingAgent`: prompts become requests delivered
/// on the manager's delegate queue, with the peer's Core Bluetooth identifier.
final class ManagerPairingAgent: PairingAgent, @unchecked Sendable {
    // Immutable after init; `CBPairingAgent` is Sendable and CallbackQueue is thread-safe.
    let agent: any CBPairingAgent
    private let callbacks: CallbackQueue?
    private let identifiers: IdentifierStore

    init(agent: any CBPairingAgent, callbacks: CallbackQueue?, identifiers: IdentifierStore) {
        self.agent = agent
        self.callbacks = callbacks
        self.identifiers = identifiers
    }

    var ioCapability: SMPIOCapability { agent.ioCapability.smp }

    func hasOutOfBandData(for peer: LEAddress) -> Bool { agent.hasOutOfBandData(for: identifiers.assignIdentifier(for: peer)) }

    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        let kind: CBPairingRequest.Kind
        let method: PairingMethod
        switch prompt {
        case .confirmPairing(let m): (kind, method) = (.confirmPairing, m)
        case .displayPasskey(let passkey): (kind, method) = (.displayPasskey(passkey), .passkeyDisplay)
        case .enterPasskey: (kind, method) = (.enterPasskey, .passkeyInput)
        case .confirmNumber(let value): (kind, method) = (.confirmNumber(value), .numericComparison)
        case .outOfBandData: (kind, method) = (.outOfBandData, .outOfBand)
        }
        let request = CBPairingRequest(peerIdentifier: identifiers.assignIdentifier(for: peer), method: CBPairingMethod(method),
                                       kind: kind, reply: reply)
        let agent = agent
        if let callbacks {
            callbacks.async { agent.handle(request) }
        } else {
            DispatchQueue.main.async { agent.handle(request) }
        }
    }
}

/// The device's agent: ``CBPairing/defaultAgent`` when the app set one (asked on the main
/// queue), else Just Works accepted.
final class ProcessPairingAgent: PairingAgent {
    private let automatic = AutoAcceptPairingAgent()

    private var current: any PairingAgent {
        guard let agent = CBPairing.defaultAgent else { return automatic }
        return ManagerPairingAgent(agent: agent, callbacks: nil, identifiers: .persistent)
    }

    var ioCapability: SMPIOCapability { current.ioCapability }

    func hasOutOfBandData(for peer: LEAddress) -> Bool { current.hasOutOfBandData(for: peer) }

    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        current.prompt(prompt, peer: peer, reply: reply)
    }
}
