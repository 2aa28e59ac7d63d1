import DaemonProtocol
import HCI
import HostDevice
import L2CAP
import RoleServices
import SMP
import Scheduling

// The daemon's side of channels and pairing prompts (docs/daemon.md, "Channels and pairing"):
// a session's open channels relayed to its client with a bounded window each way, and its
// pairing agent, which asks the client.

/// Channel ids, unique in the daemon (a channel of another session never matches).
enum DaemonChannelIDs {
    private static let next = Locked<UInt32>(1)

    static func take() -> UInt32 {
        next.withLock { id in
            defer { id = id == .max ? 1 : id + 1 }
            return id
        }
    }
}

/// The daemon's channels, all clients' together: how many are open, how many of them withhold
/// the peer's credits, and how many bytes the daemon holds for them (its status line).
/// Loop-confined (the device's loop); one per daemon.
public final class DaemonChannelLedger: @unchecked Sendable {
    public internal(set) var open = 0
    public internal(set) var paused = 0
    /// Bytes relayed to clients that they have not counted, and bytes clients wrote that L2CAP
    /// has not taken.
    public internal(set) var buffered = 0

    public init() {}
}

/// One session's open channels. Loop-confined (the device's loop).
final class SessionChannels: @unchecked Sendable {
    private var relays: [UInt32: ChannelRelay] = [:]
    /// Sends an event of the session, if a client holds it.
    private let emit: ((UInt32) -> DaemonMessage) -> Void
    let ledger: DaemonChannelLedger

    init(ledger: DaemonChannelLedger, emit: @escaping ((UInt32) -> DaemonMessage) -> Void) {
        self.ledger = ledger
        self.emit = emit
    }

    var count: Int { relays.count }

    /// Relays `channel` to the client under a new id: `announce` tells the client of it
    /// before anything the peer sent already follows.
    func add(_ channel: RoleChannel, announce: (UInt32) -> Void) {
        let id = DaemonChannelIDs.take()
        let relay = ChannelRelay(id: id, channel: channel, owner: self)
        relays[id] = relay
        ledger.open += 1
        announce(id)
        channel.events = relay
    }

    /// Acts on a channel message of the client; false if it is not one.
    func handle(_ message: DaemonMessage) -> Bool {
        switch message {
        case .channelWrite(_, let id, let bytes): relays[id]?.write(bytes)
        case .channelConsumed(_, let id, let count): relays[id]?.consumed(Int(count))
        case .channelPause(_, let id, let paused): relays[id]?.pause(paused)
        case .channelClose(_, let id): relays[id]?.channel.close()
        default: return false
        }
        return true
    }

    /// The client went: its channels are disconnected (the peer sees them close).
    func closeAll() {
        let all = relays.values
        relays = [:]
        for relay in all {
            relay.forget()
            relay.channel.close()
        }
    }

    fileprivate func send(_ make: (UInt32) -> DaemonMessage) { emit(make) }

    fileprivate func remove(_ id: UInt32) {
        guard let relay = relays.removeValue(forKey: id) else { return }
        relay.forget()
    }
}

/// One channel, relayed: SDUs from the peer go out as `channelData` while the client's window
/// has room (past it the peer's credits are withheld, so neither the daemon nor its socket
/// queue grows with a client that does not read); what the client writes goes to L2CAP, and
/// what L2CAP took goes back as `channelSent`. Loop-confined.
final class ChannelRelay: RoleChannelEvents {
    let id: UInt32
    let channel: RoleChannel
    @WeakHeld private var owner: SessionChannels?
    /// Bytes of `channelData` the client has not counted as consumed.
    private var unconsumed = 0 {
        didSet { owner?.ledger.buffered += unconsumed - oldValue }
    }
    /// Bytes of `channelWrite` L2CAP has not taken.
    private var unsent = 0 {
        didSet { owner?.ledger.buffered += unsent - oldValue }
    }
    private var clientPaused = false
    private var isForgotten = false
    /// Whether the peer's credits are withheld.
    private var isPaused = false {
        didSet { if isPaused != oldValue { owner?.ledger.paused += isPaused ? 1 : -1 } }
    }

    init(id: UInt32, channel: RoleChannel, owner: SessionChannels) {
        self.id = id
        self.channel = channel
        self.owner = owner
    }

    func write(_ bytes: [UInt8]) {
        guard !isForgotten else { return }
        unsent += bytes.count
        // A client that ignores its window is not buffered for: its channel ends.
        guard unsent <= DaemonFrame.channelWindow else {
            owner?.remove(id)
            channel.close()
            return
        }
        channel.write(bytes)
    }

    func consumed(_ count: Int) {
        unconsumed = max(0, unconsumed - count)
        updatePause()
    }

    func pause(_ paused: Bool) {
        clientPaused = paused
        updatePause()
    }

    private func updatePause() {
        guard !isForgotten else { return }
        isPaused = clientPaused || unconsumed >= DaemonFrame.channelWindow
        channel.setReceivePaused(isPaused)
    }

    /// The relay leaves its session: what it held leaves the ledger (what the closing channel
    /// still reports is dropped).
    func forget() {
        guard !isForgotten else { return }
        unconsumed = 0
        unsent = 0
        isPaused = false
        owner?.ledger.open -= 1
        isForgotten = true
    }

    func channel(_ channel: RoleChannel, received bytes: [UInt8]) {
        guard !isForgotten else { return }
        unconsumed += bytes.count
        owner?.send { [id] in .channelData(session: $0, channel: id, bytes: bytes) }
        updatePause()
    }

    func channel(_ channel: RoleChannel, sent count: Int) {
        guard !isForgotten else { return }
        unsent = max(0, unsent - count)
        owner?.send { [id] in .channelSent(session: $0, channel: id, count: UInt32(clamping: count)) }
    }

    func channel(_ channel: RoleChannel, closed reason: L2CAPChannelCloseReason) {
        guard let owner else { return }
        owner.remove(id)
        let wire: DaemonChannelCloseReason = switch reason {
        case .local: .local
        case .remote: .remote
        case .linkLost: .linkLost
        case .protocolError(let what): .protocolError(what)
        }
        owner.send { [id] in .channelClosed(session: $0, channel: id, reason: wire) }
    }
}

extension DaemonChannelOpenError {
    init(_ error: ChannelOpenError) {
        switch error {
        case .l2cap(.refused(let result)): self = .refused(result.rawValue)
        case .l2cap(.refusedWithCode(let code)): self = .refused(code)
        case .l2cap(.timeout): self = .timeout
        case .l2cap(.disconnected), .disconnected, .security(.disconnected): self = .disconnected
        case .l2cap(.noFreeChannelIDs): self = .noFreeChannelIDs
        case .l2cap(.invalidParameters): self = .invalidParameters
        case .security(.pairingFailed(let failure)):
            switch failure {
            case .localFailure(let reason): self = .pairingFailed(local: true, reason: reason.rawValue)
            case .remoteFailure(let reason): self = .pairingFailed(local: false, reason: reason.rawValue)
            case .timeout, .disconnected: self = .pairingFailed(local: true, reason: nil)
            case .encryptionFailed(let status): self = .encryptionFailed(status.rawValue)
            }
        case .security(.peerRemovedPairingInformation): self = .peerRemovedPairingInformation
        case .security(.encryptionFailed(let status)): self = .encryptionFailed(status.rawValue)
        case .security(.encryptionTimedOut): self = .encryptionTimedOut
        case .notSupported(let why): self = .notSupported(why)
        }
    }
}

extension DaemonChannelPublishError {
    init(_ error: ChannelPublishError) {
        switch error {
        case .noFreePSM: self = .noFreePSM
        case .psmInUse(let psm): self = .psmInUse(psm)
        case .invalidPSM(let psm): self = .invalidPSM(psm)
        }
    }
}

/// A session's pairing agent on the daemon: each prompt on the session's links goes to its
/// client as `pairingPrompt`, and the client's `pairingReply` answers it. A client that goes
/// mid-prompt rejects it (``cancelAll()``): the pairing fails at once, cleanly.
///
/// `@unchecked Sendable`: `ioCapability` is immutable; everything else is used on the device's
/// loop only (the Security Manager asks there, and the session's messages arrive there).
final class SessionPairingAgent: PairingAgent, @unchecked Sendable {
    let ioCapability: SMPIOCapability
    private var pending: [UInt32: @Sendable (PairingReply) -> Void] = [:]
    private var nextPrompt: UInt32 = 1
    /// Sends a message of the session; false when no client holds it.
    private let emit: ((UInt32) -> DaemonMessage) -> Bool

    init(ioCapability: SMPIOCapability, emit: @escaping ((UInt32) -> DaemonMessage) -> Bool) {
        self.ioCapability = ioCapability
        self.emit = emit
    }

    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        let id = nextPrompt
        nextPrompt = nextPrompt == .max ? 1 : nextPrompt + 1
        let question: DaemonPairingPrompt = switch prompt {
        case .confirmPairing(let method): .confirmPairing(method: method.wire)
        case .displayPasskey(let passkey): .displayPasskey(passkey)
        case .enterPasskey: .enterPasskey
        case .confirmNumber(let value): .confirmNumber(value)
        case .outOfBandData: .outOfBandData
        }
        pending[id] = reply
        guard emit({ .pairingPrompt(session: $0, prompt: id, peer: peer, question: question) }) else {
            pending[id] = nil
            return reply(.reject)
        }
    }

    func answer(_ id: UInt32, _ reply: DaemonPairingReply) {
        guard let waiting = pending.removeValue(forKey: id) else { return }
        switch reply {
        case .accept: waiting(.accept)
        case .reject: waiting(.reject)
        case .passkey(let passkey): waiting(.passkey(passkey))
        case .outOfBand(let confirm, let random, let key):
            waiting(.outOfBand(PairingOOBData(peerConfirm: confirm, peerRandom: random, legacyTemporaryKey: key)))
        }
    }

    /// The client went: every question still open is answered no.
    func cancelAll() {
        let waiting = pending
        pending = [:]
        for reply in waiting.values { reply(.reject) }
    }
}

extension PairingMethod {
    /// `confirmPairing`'s method byte.
    var wire: UInt8 {
        switch self {
        case .justWorks: 0
        case .numericComparison: 1
        case .passkeyDisplay: 2
        case .passkeyInput: 3
        case .outOfBand: 4
        }
    }
}

/// What the daemon's sessions share for channels and pairing: one place for both roles.
protocol ChannelSession: AnyObject {
    var channels: SessionChannels { get }
    var pairing: SessionPairingAgent? { get set }
}

extension ChannelSession {
    /// Acts on a pairing message; false if it is not one. `install` gives the role service the
    /// agent (nil: the device's own answers).
    func handlePairing(_ message: DaemonMessage, emit: @escaping ((UInt32) -> DaemonMessage) -> Bool,
                       install: (SessionPairingAgent?) -> Void) -> Bool {
        switch message {
        case .setPairingAgent(_, let capability):
            pairing?.cancelAll()
            pairing = capability.map { SessionPairingAgent(ioCapability: SMPIOCapability(rawValue: $0) ?? .noInputNoOutput, emit: emit) }
            install(pairing)
        case .pairingReply(_, let prompt, let reply):
            pairing?.answer(prompt, reply)
        default:
            return false
        }
        return true
    }
}
