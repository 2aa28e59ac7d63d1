import HCI
import Scheduling

/// One link's Security Manager (Vol 3 Part H), in either role: pairing (LE legacy and LE Secure
/// Connections, every association model), key distribution and the SMP timeout.
///
/// The host makes one per link, wires `receive` to the SMP fixed channel and `send` to it, and
/// tells it about encryption changes. Loop-confined.
public final class SecurityManager: @unchecked Sendable {
    public let role: LERole
    public let localAddress: LEAddress
    public let peerAddress: LEAddress
    public let configuration: SMPConfiguration
    public let agent: PairingAgent
    public let loop: EventLoop
    @exclusivity(unchecked) public weak var delegate: SecurityManagerDelegate?
    /// Logs the protocol's progress (never a key, passkey or random value); nil logs nothing.
    @exclusivity(unchecked) public var log: (@Sendable (String) -> Void)?
    private let sendSDU: ([UInt8]) -> Void

    public init(role: LERole, localAddress: LEAddress, peerAddress: LEAddress, configuration: SMPConfiguration,
                agent: PairingAgent, loop: EventLoop, send: @escaping ([UInt8]) -> Void) {
        self.role = role
        self.localAddress = localAddress
        self.peerAddress = peerAddress
        self.configuration = configuration
        self.agent = agent
        self.loop = loop
        self.sendSDU = send
    }

    /// Whether a pairing is under way.
    public var isPairing: Bool { false }

    /// An SMP PDU from the peer.
    public func receive(_ sdu: [UInt8]) {
        // Stub until the state machine lands: refuse every pairing.
        guard let code = sdu.first, code == 0x01 || code == 0x0B else { return }
        sendSDU([0x05, SMPPairingFailedReason.pairingNotSupported.rawValue])
    }

    /// Starts pairing: as central a Pairing Request, as peripheral a Security Request.
    public func pair() {
        delegate?.securityManager(self, didFinishPairing: .failure(.localFailure(.pairingNotSupported)))
    }

    /// The link's encryption changed (Encryption Change or Key Refresh Complete).
    public func encryptionChanged(status: HCIStatus, enabled: Bool) {}

    /// Peripheral: the controller asks for the key of a link being encrypted during pairing
    /// (the STK of legacy pairing, the LTK of Secure Connections, with EDIV and Rand zero), as
    /// HCI carries it. Nil when this session has no key for that request.
    public func longTermKeyRequest(rand: UInt64, ediv: UInt16) -> [UInt8]? { nil }

    /// The link went down: a pairing under way ends with `.disconnected`; timers stop.
    public func linkClosed() {}
}
