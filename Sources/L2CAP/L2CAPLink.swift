import ByteCoding
import HCI
import Logging
import Scheduling
import StackLogging

/// What L2CAP needs from the layer below: whole PDUs out on a connection, and how many wait.
/// `HCIDriver` is it (the conformance is in HostStack, which has both); tests use a double.
public protocol L2CAPLowerLayer: AnyObject {
    /// Moves the PDU down (a borrowed one was copied into the packet: a retain and a release).
    func sendACL(handle: ConnectionHandle, pdu: consuming [UInt8]) -> Bool
    func queuedPDUs(handle: ConnectionHandle) -> Int
}

public enum L2CAPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer answered with Command Reject (reason code).
    case rejected(reason: UInt16)
    /// No answer within the signalling timeout (RTX).
    case timeout
    /// The link went down.
    case disconnected
    /// Only the other role may do this.
    case wrongRole
    /// The controller's queue for this link is full or the link is unknown below.
    case cannotSend

    public var description: String {
        switch self {
        case .rejected(let reason): "the peer rejected the request (reason 0x\(String(reason, radix: 16)))"
        case .timeout: "the peer did not answer the L2CAP request in time"
        case .disconnected: "the link is disconnected"
        case .wrongRole: "this request is for the other role"
        case .cannotSend: "the link cannot send now"
        }
    }
}

/// Decisions the layer above makes for a link.
public protocol L2CAPLinkDelegate: AnyObject {
    /// A peripheral asks the central for new parameters. Return true to accept; the delegate
    /// then issues the HCI LE Connection Update itself.
    func link(_ link: L2CAPLink, acceptsConnectionParameterUpdate parameters: ConnectionParameters) -> Bool
}

/// A fixed L2CAP channel of a link (ATT, SMP, LE signalling, or one a later layer registers
/// with `L2CAPLink.register(fixedChannel:)`): whole SDUs in and out.
public final class L2CAPFixedChannel: @unchecked Sendable {
    public let channelID: UInt16
    unowned let link: L2CAPLink
    /// Called on the link's loop with each SDU the peer sent, handed over (the only reference
    /// to its buffer on the receive path, so that the next layer can keep it without a copy).
    @exclusivity(unchecked) public var onReceive: ((consuming [UInt8]) -> Void)?  // exclusivity checks: 0.28 % of notify
    /// Called when the link goes down.
    public var onClose: (() -> Void)?
    /// Called when the link's outbound queue drained after PDUs had to wait for controller
    /// buffers: a user refused by its own bound on `queuedPDUs` may send again.
    @exclusivity(unchecked) public var onCanSendMore: (() -> Void)?  // exclusivity checks: 0.1 % of channel

    init(channelID: UInt16, link: L2CAPLink) {
        self.channelID = channelID
        self.link = link
    }

    public var connectionHandle: ConnectionHandle { link.handle }

    /// Sends one SDU; false when the link is down or the controller queue refuses it.
    @discardableResult
    public func send(_ sdu: [UInt8]) -> Bool { link.send(BasicFrame(channelID: channelID, payload: sdu)) }

    /// The basic header's four octets, which `send(reserved:)` writes in place.
    public var sduHeadroom: Int { 4 }

    /// Sends an SDU whose first four octets are room for the basic header (written here): the
    /// notification path builds its PDU once instead of encoding it and then copying it behind
    /// a header.
    @discardableResult
    public func send(reserved sdu: consuming [UInt8]) -> Bool { send(reserved: sdu, ifQueuedBelow: .max) }

    /// `send(reserved:)` when fewer than `limit` PDUs of the link wait for controller buffers.
    /// The SDU is consumed, so the header goes into the sender's buffer without a copy.
    public func send(reserved sdu: consuming [UInt8], ifQueuedBelow limit: Int) -> Bool {
        guard sdu.count >= 4 else { return false }
        var pdu = consume sdu
        let length = UInt16(truncatingIfNeeded: pdu.count - 4)
        pdu[0] = UInt8(truncatingIfNeeded: length)
        pdu[1] = UInt8(truncatingIfNeeded: length >> 8)
        pdu[2] = UInt8(truncatingIfNeeded: channelID)
        pdu[3] = UInt8(truncatingIfNeeded: channelID >> 8)
        return link.send(framed: pdu, ifQueuedBelow: limit)
    }

    /// PDUs waiting for controller buffers on this link (all channels): the back-pressure signal.
    public var queuedPDUs: Int { link.lower.queuedPDUs(handle: link.handle) }

    /// The link's security level, for permission checks on what arrives on this channel.
    public var securityLevel: LESecurityLevel { link.securityLevel }
}

/// L2CAP on one LE-U logical link (Core spec Vol 3 Part A): the fixed channels, LE signalling
/// and, until the security manager exists, an SMP stub that refuses pairing.
///
/// Each link keeps a registry of its channels by CID (§2.1): the fixed ones (ATT 0x0004, LE
/// signalling 0x0005, SMP 0x0006, and any a later layer registers in 0x0020–0x003E) in a small
/// table indexed by CID, so that dispatching a PDU costs an array read; the dynamic range
/// (0x0040–0x007F) holds the credit-based channels LE signalling opens (L2CAPCreditChannel.swift).
/// A PDU for a CID with no channel is dropped (§3.1).
///
/// Loop-confined: call it on its loop.
public final class L2CAPLink: @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        loop.assertConfined("L2CAPLink", file: file, line: line)
    }

    public let handle: ConnectionHandle
    public let role: LERole
    public let loop: EventLoop
    /// Held strongly, and never replaced: loaded for every PDU sent, and a weak load costs
    /// side-table work each time. No cycle: the layer below (the HCI driver) keeps no reference
    /// to its links; the host owns both, and the driver merely lives as long as its last link.
    let lower: L2CAPLowerLayer
    @WeakHeldExistential public var delegate: L2CAPLinkDelegate?
    @exclusivity(unchecked) public var securityLevel: LESecurityLevel = .noSecurity  // exclusivity checks: 0.06 % of pair
    /// `corebluetooth.l2cap`, tagged with the link (`connection`, `role`, and `peer` when the
    /// host knows it): what the link drops or rejects. Made when first used, never per PDU.
    public var logger: Logger {
        get { lazyLogger.logger }
        set { lazyLogger.logger = newValue }
    }
    private var lazyLogger: LazyLogger
    /// What the link's loggers share (its layers above take theirs from it too).
    public let logContext: LinkLogContext

    /// The Attribute Protocol's channel.
    @exclusivity(unchecked) public private(set) var att: L2CAPFixedChannel!  // exclusivity checks: 0.28 % of notify
    /// The Security Manager's channel. Until SMP takes it over (by setting `onReceive`), pairing
    /// requests are answered with Pairing Failed "Pairing Not Supported".
    @exclusivity(unchecked) public private(set) var securityManager: L2CAPFixedChannel!  // exclusivity checks: 0.05 % of channel
    /// The LE signalling channel: the link's own (its handlers are the link's).
    private var signalingStorage: L2CAPFixedChannel?

    /// Fixed channels a layer above registered besides ATT, LE signalling and SMP (kept in the
    /// properties above), in CID order. Empty, and so without storage, on most links: a table
    /// per link would cost memory fleets of thousands of links feel.
    @exclusivity(unchecked) private var otherChannels: [L2CAPFixedChannel] = []  // exclusivity checks: 0.05 % of channel
    /// CIDs below this are fixed channels on LE-U (§2.1, Table 2.3); 0x0040 starts the dynamic range.
    public static let fixedChannelLimit: UInt16 = 0x0040

    /// The LE signalling MTU this side accepts (Vol 3 Part A §4: at least 23).
    public static let signalingMTU = 23
    /// How long a signalling request waits for its response (RTX, 1–60 s).
    public var requestTimeout: Duration = .seconds(30)

    private var nextIdentifier: UInt8 = 1
    private var pending: [UInt8: (timer: TimerHandle, completion: (Result<SignalingCommand, L2CAPError>) -> Void)] = [:]
    @exclusivity(unchecked) public private(set) var isOpen = true  // exclusivity checks: 0.6 % of notify

    /// `peer` (described in the logs' `peer` only when a logger is made) and `logging` tag and
    /// make the link's loggers.
    public init(handle: ConnectionHandle, role: LERole, lower: L2CAPLowerLayer, loop: EventLoop,
                peer: (any CustomStringConvertible & Sendable)? = nil, logging: StackLogging = .standard) {
        self.handle = handle
        self.role = role
        logContext = LinkLogContext(logging: logging, connection: handle, peer: peer, role: role == .central ? "central" : "peripheral")
        lazyLogger = LazyLogger(.l2cap, link: logContext)
        self.lower = lower
        self.loop = loop
        // The fixed channels every LE-U link has. LE signalling is the link's own business: its
        // channel object is made only if a user asks for it (`channel(for:)`), and SMP with no
        // handler refuses pairing here; no closure per link (thousands of links in a fleet).
        att = L2CAPFixedChannel(channelID: L2CAPChannelID.att, link: self)
        securityManager = L2CAPFixedChannel(channelID: L2CAPChannelID.securityManager, link: self)
    }

    /// The LE signalling channel's object, made when a user first asks for it.
    private var signaling: L2CAPFixedChannel {
        if let signalingStorage { return signalingStorage }
        let channel = L2CAPFixedChannel(channelID: L2CAPChannelID.leSignaling, link: self)
        channel.onReceive = { [weakSelf = WeakHandle(self)] payload in weakSelf.object?.receiveSignaling(payload) }
        signalingStorage = channel
        return channel
    }

    // MARK: Channels

    /// Opens the fixed channel `channelID` on this link, for a layer above to set its handlers.
    /// Nil when the CID is not a fixed one (0x0001–0x003F), already has a channel, or the link
    /// is closed. ATT, LE signalling and SMP are registered when the link is made.
    @discardableResult
    public func register(fixedChannel channelID: UInt16) -> L2CAPFixedChannel? {
        assertOnLoop()
        guard isOpen, channelID != 0, channelID < Self.fixedChannelLimit, channel(for: channelID) == nil else {
            return nil
        }
        let channel = L2CAPFixedChannel(channelID: channelID, link: self)
        otherChannels.append(channel)
        otherChannels.sort { $0.channelID < $1.channelID }
        return channel
    }

    /// The channel registered for `channelID`, if any.
    public func channel(for channelID: UInt16) -> L2CAPFixedChannel? {
        assertOnLoop()
        switch channelID {
        case L2CAPChannelID.att: return att
        case L2CAPChannelID.leSignaling: return signaling
        case L2CAPChannelID.securityManager: return securityManager
        default:
            for channel in otherChannels where channel.channelID == channelID { return channel }
            return nil
        }
    }

    /// The CIDs that have a channel, in order.
    public var channelIDs: [UInt16] {
        (otherChannels.map(\.channelID) + [L2CAPChannelID.att, L2CAPChannelID.leSignaling, L2CAPChannelID.securityManager]).sorted()
    }

    /// Every channel object made, in CID order.
    private var allChannelsInOrder: [L2CAPFixedChannel] {
        (otherChannels + [att, signalingStorage, securityManager].compactMap { $0 }).sorted { $0.channelID < $1.channelID }
    }

    // MARK: Credit-based channels (their logic is in L2CAPCreditChannel.swift)

    /// Decides incoming credit-based connection requests (both the LE one, 0x14, and the
    /// enhanced one, 0x17) for an SPSM. Nil: every SPSM is refused with `spsmNotSupported`.
    /// The closure may look at `securityLevel` and refuse with an authentication result.
    public var creditBasedServer: ((_ psm: UInt16) -> CreditBasedChannelDecision)?

    /// Credit-based channels with a CID of ours, open or waiting for their Disconnection
    /// Response (the CID stays taken until then), in local CID order. A plain array: links
    /// have few such channels, and most links none (no storage then).
    @exclusivity(unchecked) var dynamicChannels: [L2CAPCreditChannel] = []  // exclusivity checks: 0.19 % of channel
    /// CIDs taken by our connection requests still waiting for their response.
    var reservedCIDs: [UInt16] = []
    /// Where the round robin between channels continues (an index into `dynamicChannels`).
    var nextChannelToServe = 0
    /// Re-entrancy guard of `serveCreditChannels` (a channel's callback may send again).
    var isServingChannels = false
    var serveAgain = false

    func send(_ frame: BasicFrame) -> Bool { send(framed: frame.encode()) }

    /// Sends a whole, encoded basic frame, if fewer than `limit` PDUs of the link wait for
    /// controller buffers (one look at the layer below for both).
    func send(framed pdu: consuming [UInt8], ifQueuedBelow limit: Int = .max) -> Bool {
        guard isOpen, limit == .max || lower.queuedPDUs(handle: handle) < limit else { return false }
        return lower.sendACL(handle: handle, pdu: pdu)
    }

    // MARK: Receiving

    /// A whole L2CAP PDU from the link (the HCI driver reassembles fragments).
    public func receive(_ pdu: consuming [UInt8]) {
        assertOnLoop()
        guard isOpen else { return }
        let frame: BasicFrame
        do { frame = try BasicFrame(decoding: consume pdu) } catch {
            logger.debug("dropped: \(error)")
            return
        }
        let cid = frame.channelID
        if cid == L2CAPChannelID.leSignaling, signalingStorage == nil {
            receiveSignaling(frame.payload)
        } else if cid < Self.fixedChannelLimit, let channel = channel(for: cid) {
            if let onReceive = channel.onReceive {
                onReceive(frame.takePayload())
            } else if cid == L2CAPChannelID.securityManager {
                refusePairing(frame.payload)
            }
        } else if let channel = creditChannel(localCID: cid) {
            channel.receiveKFrame(frame.payload)
        } else {
            // No such channel here: dropped (Vol 3 Part A §3.1).
            logger.debug("dropped a PDU for unknown channel \(Logger.hex(cid))")
        }
    }

    func sendSignaling(_ identifier: UInt8, _ command: SignalingCommand) {
        _ = send(BasicFrame(channelID: L2CAPChannelID.leSignaling, payload: SignalingPacket(identifier: identifier, command: command).encode()))
    }

    /// A fresh identifier (1–255, never 0) for a command we originate.
    func takeIdentifier() -> UInt8 {
        let id = nextIdentifier
        nextIdentifier = nextIdentifier == 0xFF ? 1 : nextIdentifier + 1
        return id
    }

    func reject(_ identifier: UInt8, _ reason: CommandRejectReason, data: [UInt8] = []) {
        sendSignaling(identifier, .commandReject(reason: reason.rawValue, data: data))
    }

    private func receiveSignaling(_ payload: [UInt8]) {
        if payload.count > Self.signalingMTU, payload.count >= 2 {
            // Vol 3 Part A §4.1: too big for our signalling MTU; the data carries that MTU.
            return reject(payload[1], .signalingMTUExceeded, data: [UInt8(Self.signalingMTU), 0])
        }
        let packet: SignalingPacket
        do {
            packet = try SignalingPacket(decoding: payload)
        } catch let error as SignalingDecodeError {
            logger.debug("malformed signalling command: \(error)")
            if error.identifier != 0 { reject(error.identifier, .commandNotUnderstood) }
            return
        } catch {
            logger.debug("dropped signalling PDU: \(error)")
            return
        }
        // Identifier 0 is never valid (Vol 3 Part A §4).
        guard packet.identifier != 0 else {
            logger.debug("dropped a signalling command with identifier 0")
            return
        }
        let id = packet.identifier
        switch packet.command {
        case .connectionParameterUpdateRequest(let min, let max, let latency, let timeout):
            // Only a central answers this; a peripheral rejects it (§4.20).
            guard role == .central else { return reject(id, .commandNotUnderstood) }
            let parameters = ConnectionParameters(intervalMin: min, intervalMax: max, latency: latency, timeout: timeout)
            let accepted = parameters.isValid && (delegate?.link(self, acceptsConnectionParameterUpdate: parameters) ?? false)
            sendSignaling(id, .connectionParameterUpdateResponse(result: accepted ? 0x0000 : 0x0001))
        case .leCreditBasedConnectionRequest(let spsm, let source, let mtu, let mps, let credits):
            receiveCreditBasedRequest(id, enhanced: false, spsm: spsm, mtu: mtu, mps: mps, initialCredits: credits,
                                      sourceCIDs: [source])
        case .creditBasedConnectionRequest(let spsm, let mtu, let mps, let credits, let sourceCIDs):
            receiveCreditBasedRequest(id, enhanced: true, spsm: spsm, mtu: mtu, mps: mps, initialCredits: credits,
                                      sourceCIDs: sourceCIDs)
        case .creditBasedReconfigureRequest:
            // Reconfiguration is not supported: answered "a destination CID is invalid".
            sendSignaling(id, .creditBasedReconfigureResponse(result: 0x0003))
        case .disconnectionRequest(let destination, let source):
            receiveDisconnectionRequest(id, destinationCID: destination, sourceCID: source)
        case .unknown:
            reject(id, .commandNotUnderstood)
        case .connectionParameterUpdateResponse, .commandReject, .leCreditBasedConnectionResponse,
             .creditBasedConnectionResponse, .creditBasedReconfigureResponse, .disconnectionResponse:
            guard let request = pending.removeValue(forKey: id) else {
                logger.debug("dropped a response to no request (identifier \(id))")
                return
            }
            request.timer.cancel()
            if case .commandReject(let reason, _) = packet.command {
                request.completion(.failure(.rejected(reason: reason)))
            } else {
                request.completion(.success(packet.command))
            }
        case .flowControlCredit(let cid, let credits):
            receiveCredits(cid: cid, credits: credits)
        }
    }

    // MARK: Requests

    func request(_ command: SignalingCommand, completion: @escaping (Result<SignalingCommand, L2CAPError>) -> Void) {
        guard isOpen else { return completion(.failure(.disconnected)) }
        let id = takeIdentifier()
        let timer = loop.schedule(after: requestTimeout) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, let request = self.pending.removeValue(forKey: id) else { return }
            request.completion(.failure(.timeout))
        }
        pending[id] = (timer, completion)
        sendSignaling(id, command)
    }

    /// As peripheral, asks the central for new connection parameters (Vol 3 Part A §4.20).
    /// Completes with whether the central accepted them.
    public func requestConnectionParameterUpdate(_ parameters: ConnectionParameters,
                                                 completion: @escaping (Result<Bool, L2CAPError>) -> Void) {
        assertOnLoop()
        guard role == .peripheral else { return completion(.failure(.wrongRole)) }
        request(.connectionParameterUpdateRequest(intervalMin: parameters.intervalMin, intervalMax: parameters.intervalMax,
                                                  latency: parameters.latency, timeout: parameters.timeout)) { result in
            completion(result.flatMap { response in
                if case .connectionParameterUpdateResponse(let r) = response { return .success(r == 0x0000) }
                return .failure(.rejected(reason: CommandRejectReason.commandNotUnderstood.rawValue))
            })
        }
    }

    /// The layer below drained this link's outbound queue: tells the channels' users.
    public func lowerLayerCanSendMore() {
        assertOnLoop()
        guard isOpen else { return }
        // In CID order, without making a list (this runs as the controller's buffers drain).
        for channel in otherChannels where channel.channelID < L2CAPChannelID.att { channel.onCanSendMore?() }
        att.onCanSendMore?()
        signalingStorage?.onCanSendMore?()
        securityManager.onCanSendMore?()
        for channel in otherChannels where channel.channelID > L2CAPChannelID.securityManager { channel.onCanSendMore?() }
        // After the fixed channels (ATT first in line), channels' K-frames fill what is left.
        serveCreditChannels()
    }

    // MARK: Closing

    /// The link went down: pending requests fail, channel users are told, nothing more is sent.
    public func close() {
        assertOnLoop()
        guard isOpen else { return }
        isOpen = false
        closeCreditChannels()
        let waiting = pending
        pending = [:]
        for (_, request) in waiting.sorted(by: { $0.key < $1.key }) {
            request.timer.cancel()
            request.completion(.failure(.disconnected))
        }
        for channel in allChannelsInOrder { channel.onClose?() }
    }

    // MARK: SMP until pairing exists

    /// While the SMP channel has no handler: Pairing Request (0x01) and Security Request (0x0B) get Pairing Failed (0x05) with reason
    /// Pairing Not Supported (0x05) (Vol 3 Part H §3.5.5); anything else is ignored.
    private func refusePairing(_ sdu: [UInt8]) {
        guard let code = sdu.first, code == 0x01 || code == 0x0B else { return }
        securityManager.send([0x05, 0x05])
    }
}
