import HCI
import HostDevice
import L2CAP
import Scheduling

/// What a channel tells the API side (a `CBL2CAPChannel`'s streams, or a daemon's client
/// later): bytes and counts only. Called on the device's loop.
public protocol RoleChannelEvents: AnyObject {
    /// Bytes the peer sent (one SDU), in order.
    func channel(_ channel: RoleChannel, received bytes: [UInt8])
    /// This many bytes of what `write` took went to L2CAP: the API side's buffer has room again.
    func channel(_ channel: RoleChannel, sent count: Int)
    /// The channel is closed (the peer, the link, the API side, or a protocol error); nothing
    /// more is sent or received.
    func channel(_ channel: RoleChannel, closed reason: L2CAPChannelCloseReason)
}

/// What carries a ``RoleChannel``'s SDUs: an L2CAP credit-based channel in the process, or a
/// daemon's channel relayed over its socket (RemoteRoles). Loop-confined, like the channel.
public protocol RoleChannelTransport: AnyObject {
    /// The largest SDU the peer takes.
    var remoteMTU: Int { get }
    /// Withholds the peer's credits (true) or gives them back.
    var isReceivePaused: Bool { get set }
    /// Queues one SDU; false when the queue is full (`onCanSendMore` follows when it has room).
    func send(_ sdu: [UInt8]) -> Bool
    func close()
    var onReceive: (([UInt8]) -> Void)? { get set }
    var onCanSendMore: (() -> Void)? { get set }
    var onClose: ((L2CAPChannelCloseReason) -> Void)? { get set }
}

extension L2CAPCreditChannel: RoleChannelTransport {}

/// One credit-based channel of a role service, as a byte stream both ways: what the API side
/// writes is cut into SDUs of at most the peer's MTU and handed to L2CAP as its queue takes
/// them; what the peer sends goes up SDU by SDU. The boundary a daemon will carry: values only.
///
/// Loop-confined (the device's loop).
public final class RoleChannel: @unchecked Sendable {
    public let psm: UInt16
    /// The peer's identity address.
    public let peer: LEAddress
    /// Who hears of it; held strongly until the channel closes (the API side's streams live
    /// as long as the app holds them, and the channel must reach them until then).
    public var events: RoleChannelEvents? {
        didSet { flushEarlyEvents() }
    }
    private let channel: any RoleChannelTransport
    /// Bytes the API side wrote that L2CAP has not taken yet.
    private var outbound: [UInt8] = []
    private var outboundStart = 0
    /// What arrived before the API side listened (it hears of the channel after it opened).
    private var early: [Early] = []
    public private(set) var isOpen = true

    private enum Early {
        case received([UInt8])
        case closed(L2CAPChannelCloseReason)
    }

    public convenience init(channel: L2CAPCreditChannel, peer: LEAddress) {
        self.init(transport: channel, psm: channel.psm, peer: peer)
    }

    /// A channel over `transport` (a daemon's, relayed).
    public init(transport channel: any RoleChannelTransport, psm: UInt16, peer: LEAddress) {
        self.channel = channel
        self.psm = psm
        self.peer = peer
        // The channel holds this object until it closes (then the handlers go): L2CAP's
        // events must reach the API side as long as the channel is open.
        channel.onReceive = { [self] sdu in
            guard let events else { return early.append(.received(sdu)) }
            events.channel(self, received: sdu)
        }
        channel.onCanSendMore = { [self] in pump() }
        channel.onClose = { [self] reason in closed(reason) }
    }

    /// Queues bytes to send, in order.
    public func write(_ bytes: [UInt8]) {
        guard isOpen, !bytes.isEmpty else { return }
        outbound += bytes
        pump()
    }

    /// Withholds (true) or gives back (false) the peer's credits: the API side's receive
    /// buffer is full, or has room again.
    public func setReceivePaused(_ paused: Bool) {
        guard isOpen else { return }
        channel.isReceivePaused = paused
    }

    /// Disconnects the channel; `closed(.local)` follows.
    public func close() {
        guard isOpen else { return }
        channel.close()
    }

    /// Hands L2CAP whole SDUs (at most the peer's MTU) while its queue takes them.
    private func pump() {
        guard isOpen else { return }
        var taken = 0
        let limit = max(1, channel.remoteMTU)
        while outboundStart < outbound.count {
            let end = min(outbound.count, outboundStart + limit)
            guard channel.send(Array(outbound[outboundStart..<end])) else { break }
            taken += end - outboundStart
            outboundStart = end
        }
        if outboundStart == outbound.count {
            outbound.removeAll(keepingCapacity: true)
            outboundStart = 0
        } else if outboundStart > 64 * 1024 {
            outbound.removeFirst(outboundStart)
            outboundStart = 0
        }
        if taken > 0 { events?.channel(self, sent: taken) }
    }

    private func closed(_ reason: L2CAPChannelCloseReason) {
        guard isOpen else { return }
        isOpen = false
        outbound = []
        outboundStart = 0
        channel.onReceive = nil
        channel.onCanSendMore = nil
        channel.onClose = nil
        guard let events else { return early.append(.closed(reason)) }
        self.events = nil
        events.channel(self, closed: reason)
    }

    private func flushEarlyEvents() {
        guard let events, !early.isEmpty else { return }
        let waiting = early
        early = []
        for event in waiting {
            switch event {
            case .received(let bytes): events.channel(self, received: bytes)
            case .closed(let reason):
                self.events = nil
                events.channel(self, closed: reason)
            }
        }
    }
}
