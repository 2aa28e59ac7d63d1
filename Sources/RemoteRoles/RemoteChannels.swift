import DaemonProtocol
import HCI
import HostDevice
import L2CAP
import RoleServices
import SMP
import Scheduling

// The client's side of channels and pairing prompts (docs/daemon.md, "Channels and pairing"):
// a daemon's channel as a `RoleChannel`'s transport, and the role's pairing agent asked for
// the daemon's prompts.

/// A channel on the daemon, as the transport of this process's `RoleChannel`: writes go out as
/// `channelWrite` within the window (the daemon's `channelSent` returns room), SDUs come in as
/// `channelData` and are counted back with `channelConsumed` once handed to the streams; the
/// streams' pause is the daemon's (it withholds the peer's credits). Loop-confined (the host's
/// loop).
final class RemoteChannelTransport: RoleChannelTransport {
    let id: UInt32
    private weak var owner: RemoteChannels?
    /// Bytes written that the daemon's `channelSent` has not counted.
    private var unsent = 0
    private(set) var isOpen = true
    var onReceive: (([UInt8]) -> Void)?
    var onCanSendMore: (() -> Void)?
    var onClose: ((L2CAPChannelCloseReason) -> Void)?

    init(id: UInt32, owner: RemoteChannels) {
        self.id = id
        self.owner = owner
    }

    /// The pieces the writes are cut into: the daemon's channel cuts them again to the peer's MTU.
    var remoteMTU: Int { 4096 }

    var isReceivePaused = false {
        didSet {
            guard isOpen, isReceivePaused != oldValue else { return }
            owner?.send { [id, isReceivePaused] in .channelPause(session: $0, channel: id, paused: isReceivePaused) }
        }
    }

    func send(_ sdu: [UInt8]) -> Bool {
        guard isOpen, let owner else { return false }
        guard unsent + sdu.count <= DaemonFrame.channelWindow else { return false }
        unsent += sdu.count
        owner.send { [id] in .channelWrite(session: $0, channel: id, bytes: sdu) }
        return true
    }

    func close() {
        guard isOpen else { return }
        owner?.send { [id] in .channelClose(session: $0, channel: id) }
    }

    func received(_ bytes: [UInt8]) {
        guard isOpen else { return }
        onReceive?(bytes)
        owner?.send { [id] in .channelConsumed(session: $0, channel: id, count: UInt32(clamping: bytes.count)) }
    }

    func sent(_ count: Int) {
        unsent = max(0, unsent - count)
        onCanSendMore?()
    }

    func closed(_ reason: L2CAPChannelCloseReason) {
        guard isOpen else { return }
        isOpen = false
        let handler = onClose
        onReceive = nil
        onCanSendMore = nil
        onClose = nil
        handler?(reason)
    }
}

/// One remote role's channels. Loop-confined (the host's loop).
final class RemoteChannels {
    private var transports: [UInt32: RemoteChannelTransport] = [:]
    /// Sends a message of the role's session (nothing once it is closed).
    private let sendMessage: ((UInt32) -> DaemonMessage) -> Void

    init(send: @escaping ((UInt32) -> DaemonMessage) -> Void) { sendMessage = send }

    func send(_ make: (UInt32) -> DaemonMessage) { sendMessage(make) }

    /// The daemon's channel `id` as a `RoleChannel`.
    func channel(_ id: UInt32, psm: UInt16, peer: LEAddress) -> RoleChannel {
        let transport = RemoteChannelTransport(id: id, owner: self)
        transports[id] = transport
        return RoleChannel(transport: transport, psm: psm, peer: peer)
    }

    /// Takes a channel message of the daemon; false if it is not one.
    func handle(_ message: DaemonMessage) -> Bool {
        switch message {
        case .channelData(_, let id, let bytes): transports[id]?.received(bytes)
        case .channelSent(_, let id, let count): transports[id]?.sent(Int(count))
        case .channelClosed(_, let id, let reason):
            let mapped: L2CAPChannelCloseReason = switch reason {
            case .local: .local
            case .remote: .remote
            case .linkLost: .linkLost
            case .protocolError(let what): .protocolError(what)
            }
            transports.removeValue(forKey: id)?.closed(mapped)
        default: return false
        }
        return true
    }

    /// The daemon went: every channel is gone, as with its link.
    func closeAll() {
        let all = transports.values
        transports = [:]
        for transport in all { transport.closed(.linkLost) }
    }
}

extension ChannelOpenError {
    init(_ error: DaemonChannelOpenError) {
        switch error {
        case .refused(let code):
            let refusal: L2CAPChannelOpenError = if let result = CreditBasedConnectionResult(rawValue: code) {
                .refused(result)
            } else {
                .refusedWithCode(code)
            }
            self = .l2cap(refusal)
        case .timeout: self = .l2cap(.timeout)
        case .disconnected: self = .disconnected
        case .noFreeChannelIDs: self = .l2cap(.noFreeChannelIDs)
        case .invalidParameters: self = .l2cap(.invalidParameters)
        case .pairingFailed(let local, let reason):
            let failure: SMPError = if let reason = reason.flatMap(SMPPairingFailedReason.init(rawValue:)) {
                local ? .localFailure(reason) : .remoteFailure(reason)
            } else {
                .timeout
            }
            self = .security(.pairingFailed(failure))
        case .peerRemovedPairingInformation: self = .security(.peerRemovedPairingInformation)
        case .encryptionTimedOut: self = .security(.encryptionTimedOut)
        case .encryptionFailed(let status): self = .security(.encryptionFailed(HCIStatus(status)))
        case .notSupported(let why): self = .notSupported(why)
        }
    }
}

extension ChannelPublishError {
    init(_ error: DaemonChannelPublishError) {
        switch error {
        case .noFreePSM: self = .noFreePSM
        case .psmInUse(let psm): self = .psmInUse(psm)
        case .invalidPSM(let psm): self = .invalidPSM(psm)
        }
    }
}

/// A remote role's pairing agent: set from any thread (the daemon hears its IO capability),
/// asked on the loop for each `pairingPrompt` of the role's session.
///
/// `@unchecked Sendable`: the agent is behind its lock; `loop` is immutable and `sendMessage`
/// is set before the object is shared, then called on the loop only.
final class RemotePairing: @unchecked Sendable {
    private let agentStorage = Locked<(any PairingAgent)?>(nil)
    private let loop: EventLoop
    /// Sends a message of the role's session, on the loop. Set once by the role's init, before
    /// the object is shared.
    var sendMessage: ((UInt32) -> DaemonMessage) -> Void = { _ in }
    /// The protocol version the daemon agreed to (0 before its `welcome`): pairing needs 2.
    private let version: () -> UInt16
    /// On the loop: whether this session's daemon heard of the agent.
    private var announced = false

    init(loop: EventLoop, version: @escaping () -> UInt16) {
        self.loop = loop
        self.version = version
    }

    var agent: (any PairingAgent)? {
        get { agentStorage.withLock { $0 } }
        set {
            agentStorage.withLock { $0 = newValue }
            loop.execute { [self] in announce() }
        }
    }

    /// On the loop: tells the daemon the agent's IO capability (or that there is none), if
    /// it speaks version 2.
    private func announce() {
        guard version() >= 2 else { return }
        announced = true
        let capability = agent?.ioCapability.rawValue
        sendMessage { .setPairingAgent(session: $0, ioCapability: capability) }
    }

    /// On the loop: the session was opened (again, on a daemon that came back): the daemon
    /// hears of the agent with the session's first state (its version is known by then).
    func sessionOpened() { announced = false }

    /// On the loop: a state of the session arrived.
    func stateArrived() {
        if !announced, agent != nil { announce() }
    }

    /// On the loop: takes a `pairingPrompt`; false if it is not one.
    func handle(_ message: DaemonMessage) -> Bool {
        guard case .pairingPrompt(_, let id, let peer, let question) = message else { return false }
        let prompt: PairingPrompt = switch question {
        case .confirmPairing(let method): .confirmPairing(method: PairingMethod(wire: method))
        case .displayPasskey(let passkey): .displayPasskey(passkey)
        case .enterPasskey: .enterPasskey
        case .confirmNumber(let value): .confirmNumber(value)
        case .outOfBandData: .outOfBandData
        }
        let answer: @Sendable (PairingReply) -> Void = { [weak self] reply in
            let wire: DaemonPairingReply = switch reply {
            case .accept: .accept
            case .reject: .reject
            case .passkey(let passkey): passkey <= 999_999 ? .passkey(passkey) : .reject
            case .outOfBand(let data):
                .outOfBand(peerConfirm: data.peerConfirm, peerRandom: data.peerRandom, temporaryKey: data.legacyTemporaryKey)
            }
            guard let self else { return }
            loop.execute { [self] in sendMessage { .pairingReply(session: $0, prompt: id, reply: wire) } }
        }
        // An agent taken away since the daemon asked: the pairing is refused.
        guard let agent else {
            answer(.reject)
            return true
        }
        agent.prompt(prompt, peer: peer, reply: answer)
        return true
    }
}

extension PairingMethod {
    /// `confirmPairing`'s method byte (an unknown one is taken as Just Works: no value to check).
    init(wire: UInt8) {
        self = switch wire {
        case 1: .numericComparison
        case 2: .passkeyDisplay
        case 3: .passkeyInput
        case 4: .outOfBand
        default: .justWorks
        }
    }
}
