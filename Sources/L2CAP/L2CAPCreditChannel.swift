import ByteCoding
import HCI
import Scheduling

// Credit-based connection-oriented channels on LE-U (Core spec Vol 3 Part A §3.4 K-frames,
// §4.22–4.27 signalling, §10 credit-based flow control): LE Credit Based (0x14/0x15) and
// enhanced Credit Based (0x17/0x18) connections, Flow Control Credit (0x16), Disconnection
// (0x06/0x07).

/// One side's parameters for a credit-based channel.
public struct CreditBasedChannelParameters: Hashable, Sendable {
    /// The largest SDU this side receives (at least 23; at least 64 on enhanced channels).
    public var mtu: UInt16
    /// The largest K-frame payload this side receives (23–65533; 64–65533 on enhanced channels).
    public var mps: UInt16
    /// The credits this side gives the peer when the channel opens, and tops it back up to.
    public var initialCredits: UInt16

    public init(mtu: UInt16, mps: UInt16, initialCredits: UInt16) {
        self.mtu = mtu
        self.mps = mps
        self.initialCredits = initialCredits
    }

    /// MTU 4096, MPS 247 (a K-frame, 4 header bytes + 247, then fills one 251-byte LE data
    /// channel PDU), 64 credits.
    public static let `default` = CreditBasedChannelParameters(mtu: 4096, mps: 247, initialCredits: 64)

    /// Whether the values are in the spec's ranges: MTU ≥ 23 and MPS 23–65533 for LE Credit
    /// Based channels (§4.22), MTU ≥ 64 and MPS 64–65533 for enhanced ones (§4.25).
    func isValid(enhanced: Bool) -> Bool {
        let minimum: UInt16 = enhanced ? 64 : 23
        return mtu >= minimum && (minimum...65533).contains(mps)
    }
}

/// What a server decides for an incoming credit-based channel.
public enum CreditBasedChannelDecision {
    /// Accept with our parameters; `onOpen` is called once per channel opened (an enhanced
    /// request may open up to five), after the response is sent.
    case accept(CreditBasedChannelParameters, onOpen: (L2CAPCreditChannel) -> Void)
    /// Refuse with this result (not `.successful`, which is treated as `.spsmNotSupported`).
    case refuse(CreditBasedConnectionResult)
}

/// Why a credit-based channel closed.
public enum L2CAPChannelCloseReason: Equatable, Sendable {
    /// `close()` on this side.
    case local
    /// The peer sent a Disconnection Request.
    case remote
    /// The link went down.
    case linkLost
    /// The peer broke the channel's rules (§10.1); this side disconnected the channel.
    case protocolError(String)
}

/// Why opening a credit-based channel failed.
public enum L2CAPChannelOpenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer refused with this result. A Command Reject of the request (a peer without
    /// credit-based channels) is reported as `.refused(.spsmNotSupported)`.
    case refused(CreditBasedConnectionResult)
    /// The peer refused with a result code this host does not know.
    case refusedWithCode(UInt16)
    /// No response within the signalling timeout (`L2CAPLink.requestTimeout`).
    case timeout
    /// The link is (or went) down.
    case disconnected
    /// Every CID of the dynamic range (0x0040–0x007F) is in use on this link.
    case noFreeChannelIDs
    /// Our parameters are out of the spec's ranges, or the peer's response was malformed.
    case invalidParameters

    public var description: String {
        switch self {
        case .refused(let result): "the peer refused the channel (\(result))"
        case .refusedWithCode(let code): "the peer refused the channel (result 0x\(String(code, radix: 16)))"
        case .timeout: "the peer did not answer the connection request in time"
        case .disconnected: "the link is disconnected"
        case .noFreeChannelIDs: "no free channel ID on this link"
        case .invalidParameters: "invalid channel parameters"
        }
    }
}

/// A credit-based connection-oriented channel (LE Credit Based or enhanced Credit Based) on
/// one link: whole SDUs in and out, segmented into K-frames and paced by credits both ways.
///
/// Loop-confined, like its link: every property and method is used on the link's loop only.
/// That confinement (not a lock) is what makes the `@unchecked Sendable` safe; it lets the
/// channel be handed to code that is on the loop but not isolated to it in Swift's terms.
public final class L2CAPCreditChannel: @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        link?.loop.assertConfined("L2CAPCreditChannel", file: file, line: line)
    }

    /// The SPSM the channel was opened for.
    public let psm: UInt16
    /// Our CID: the peer sends K-frames to it.
    public let localCID: UInt16
    /// The peer's CID: our K-frames go to it.
    public let remoteCID: UInt16
    /// What this side announced.
    public let local: CreditBasedChannelParameters
    /// The largest SDU the peer receives.
    public let remoteMTU: Int
    /// The largest K-frame payload the peer receives.
    public let remoteMPS: Int
    /// Opened with the enhanced Credit Based Connection Request (0x17) rather than 0x14.
    public let isEnhanced: Bool
    /// The link's connection handle.
    public var connectionHandle: ConnectionHandle { handle }

    /// Open until `close()`, the peer's Disconnection Request, a protocol violation or the
    /// link's end.
    @exclusivity(unchecked) public private(set) var isOpen = true  // exclusivity checks: 0.33 % of channel
    /// Each whole SDU the peer sent, in order.
    public var onReceive: (([UInt8]) -> Void)?
    /// Called once when the channel closes; the callbacks are released after it.
    public var onClose: ((L2CAPChannelCloseReason) -> Void)?
    /// Called after `send` refused an SDU for the queue limit, once that SDU would fit.
    public var onCanSendMore: (() -> Void)?
    /// The most SDU bytes `send` queues (64 KiB by default: one SDU of the largest MTU fits).
    @exclusivity(unchecked) public var sendQueueLimit = 65536  // exclusivity checks: 0.05 % of channel
    /// SDU bytes accepted by `send` and not yet handed to the link.
    @exclusivity(unchecked) public private(set) var queuedBytes = 0  // exclusivity checks: 0.19 % of channel
    /// Credits we hold: K-frames we may still send before the peer gives more.
    @exclusivity(unchecked) public private(set) var peerCredits: Int  // exclusivity checks: 0.14 % of channel

    /// Receive-side back-pressure: while paused, no credits are returned to the peer, which
    /// stops once its credits run out; resuming tops its credits back up to
    /// `local.initialCredits`.
    public var isReceivePaused: Bool {
        get { receivePaused }
        set {
            guard newValue != receivePaused else { return }
            receivePaused = newValue
            if !newValue, isOpen { returnCredits(threshold: Int(local.initialCredits) - 1) }
        }
    }

    private let handle: ConnectionHandle
    /// Weak: a user may keep the channel after the link is gone.
    @WeakHeld var link: L2CAPLink?
    private var receivePaused = false
    /// Credits the peer holds: K-frames it may still send us.
    private(set) var creditsGiven: Int
    /// SDUs waiting, the first being sent from `sendOffset`.
    @exclusivity(unchecked) private var outbound = RingBuffer<[UInt8]>(capacity: 2)  // exclusivity checks: 0.28 % of channel
    private var sendOffset = 0
    /// The size of the SDU `send` refused for the limit; onCanSendMore is due once it fits.
    private var refusedSize: Int?
    /// The SDU being reassembled and the length its first K-frame announced.
    @exclusivity(unchecked) private var reassembly: [UInt8] = []  // exclusivity checks: 0.14 % of channel
    private var expectedLength: Int?
    /// onClose was called (it may be before the Disconnection Response frees the CID).
    private var closeReported = false

    init(link: L2CAPLink, psm: UInt16, localCID: UInt16, remoteCID: UInt16, local: CreditBasedChannelParameters,
         remoteMTU: UInt16, remoteMPS: UInt16, remoteCredits: UInt16, isEnhanced: Bool) {
        self.link = link
        self.handle = link.handle
        self.psm = psm
        self.localCID = localCID
        self.remoteCID = remoteCID
        self.local = local
        self.remoteMTU = Int(remoteMTU)
        self.remoteMPS = Int(remoteMPS)
        self.peerCredits = Int(remoteCredits)
        self.creditsGiven = Int(local.initialCredits)
        self.isEnhanced = isEnhanced
    }

    // MARK: Sending

    /// Queues one SDU (1…`remoteMTU` bytes). It is segmented into K-frames of at most
    /// `remoteMPS` payload bytes, the first starting with the 2-byte SDU length, and sent as
    /// the peer's credits and the link allow. False when the channel is closed, the SDU is
    /// empty or too long, or `queuedBytes` would exceed `sendQueueLimit` (then `onCanSendMore`
    /// follows once it fits).
    @discardableResult
    public func send(_ sdu: [UInt8]) -> Bool {
        assertOnLoop()
        guard isOpen, !sdu.isEmpty, sdu.count <= remoteMTU else { return false }
        guard queuedBytes + sdu.count <= sendQueueLimit else {
            refusedSize = min(refusedSize ?? .max, sdu.count)
            return false
        }
        outbound.append(sdu)
        queuedBytes += sdu.count
        link?.serveCreditChannels()
        return true
    }

    /// A K-frame is ready and a credit allows it.
    var canSendKFrame: Bool { isOpen && peerCredits > 0 && !outbound.isEmpty }

    /// The next K-frame (basic header included) and how many SDU bytes it carries; nothing
    /// changes until `didSend` says the link took it.
    func nextKFrame() -> (pdu: [UInt8], sduBytes: Int)? {
        guard let sdu = outbound.first else { return nil }
        let first = sendOffset == 0
        let count = min(remoteMPS - (first ? 2 : 0), sdu.count - sendOffset)
        guard count > 0 else { return nil }
        let payloadLength = count + (first ? 2 : 0)
        var w = ByteWriter(capacity: 4 + payloadLength)
        w.u16(UInt16(truncatingIfNeeded: payloadLength))
        w.u16(remoteCID)
        if first { w.u16(UInt16(truncatingIfNeeded: sdu.count)) }
        w.bytes(sdu[sendOffset..<(sendOffset + count)])
        return (w.bytes, count)
    }

    /// The link took the K-frame `nextKFrame` made: one credit and its bytes are spent.
    func didSend(sduBytes: Int) {
        peerCredits -= 1
        queuedBytes -= sduBytes
        sendOffset += sduBytes
        if let sdu = outbound.first, sendOffset >= sdu.count {
            _ = outbound.popFirst()
            sendOffset = 0
        }
    }

    /// Tells the user the refused SDU now fits, once.
    func notifyIfRoom() {
        guard isOpen, let size = refusedSize, queuedBytes + size <= sendQueueLimit else { return }
        refusedSize = nil
        onCanSendMore?()
    }

    // MARK: Receiving

    /// A K-frame for our CID (§3.4, §10.1): each costs the peer a credit; the rules broken
    /// disconnect the channel.
    func receiveKFrame(_ payload: [UInt8]) {
        guard isOpen else { return }  // closing: dropped
        guard creditsGiven > 0 else { return violation("K-frame received without a credit") }
        creditsGiven -= 1
        guard payload.count <= Int(local.mps) else {
            return violation("K-frame payload of \(payload.count) bytes exceeds MPS \(local.mps)")
        }
        var data = payload[...]
        if expectedLength == nil {
            guard payload.count >= 2 else { return violation("first K-frame of an SDU without its SDU length") }
            let length = Int(payload[0]) | Int(payload[1]) << 8
            guard length <= Int(local.mtu) else { return violation("SDU length \(length) exceeds MTU \(local.mtu)") }
            expectedLength = length
            reassembly.reserveCapacity(length)
            data = payload[2...]
        }
        let expected = expectedLength ?? 0
        guard reassembly.count + data.count <= expected else {
            return violation("K-frames carry more than the SDU length \(expected)")
        }
        reassembly.append(contentsOf: data)
        returnCredits(threshold: Int(local.initialCredits) / 2)
        if reassembly.count == expected {
            let sdu = reassembly
            reassembly = []
            expectedLength = nil
            onReceive?(sdu)
        }
    }

    /// Tops the peer's credits back up to `local.initialCredits` in one Flow Control Credit
    /// once they fell to `threshold`, unless receiving is paused.
    private func returnCredits(threshold: Int) {
        let target = Int(local.initialCredits)
        guard !receivePaused, creditsGiven <= threshold, creditsGiven < target, let link else { return }
        let credits = target - creditsGiven
        creditsGiven = target
        // The CID is ours: the peer's destination, whose credits these are (§4.24).
        link.sendSignaling(link.takeIdentifier(), .flowControlCredit(cid: localCID, credits: UInt16(credits)))
    }

    /// The peer gave `credits` more (§4.24): more than 65535 in total disconnects the channel.
    func receiveCredits(_ credits: UInt16) {
        guard isOpen else { return }
        guard peerCredits + Int(credits) <= 65535 else {
            return violation("credits exceed 65535 (\(peerCredits) + \(credits))")
        }
        peerCredits += Int(credits)
        link?.serveCreditChannels()
    }

    // MARK: Closing

    /// Sends a Disconnection Request; `onClose(.local)` follows its response (or the
    /// signalling timeout). Nothing is sent or delivered after this call.
    public func close() {
        assertOnLoop()
        guard isOpen else { return }
        disconnect(reason: .local, reportNow: false)
    }

    /// The peer broke a rule: the channel is disconnected and the user told at once.
    private func violation(_ what: String) {
        link?.logger.warning("credit-based channel 0x\(String(localCID, radix: 16)): \(what); disconnecting")
        disconnect(reason: .protocolError(what), reportNow: true)
    }

    /// Stops the channel and asks the peer to disconnect it (DCID its CID, SCID ours, §4.6).
    /// The CID stays taken until the response (or the timeout).
    private func disconnect(reason: L2CAPChannelCloseReason, reportNow: Bool) {
        isOpen = false
        dropQueues()
        if reportNow { report(reason) }
        guard let link, link.isOpen else { return finish(reason) }
        link.request(.disconnectionRequest(destinationCID: remoteCID, sourceCID: localCID)) { [weakSelf = WeakHandle(self)] _ in
            let `self` = weakSelf.object
            self?.finish(reason)
        }
    }

    /// The peer asked to disconnect (or answered our request crossing its own).
    func remoteDisconnected() {
        finish(isOpen ? .remote : .local)
    }

    /// The link went down.
    func linkClosed() {
        finish(.linkLost)
    }

    /// Closed for good: the CID is freed and the user told (once).
    private func finish(_ reason: L2CAPChannelCloseReason) {
        isOpen = false
        dropQueues()
        link?.removeCreditChannel(self)
        report(reason)
    }

    private func dropQueues() {
        outbound.removeAll()
        sendOffset = 0
        queuedBytes = 0
        refusedSize = nil
        reassembly = []
        expectedLength = nil
    }

    private func report(_ reason: L2CAPChannelCloseReason) {
        guard !closeReported else { return }
        closeReported = true
        let onClose = self.onClose
        // Released, so that closures holding the channel do not keep it alive.
        self.onClose = nil
        onReceive = nil
        onCanSendMore = nil
        onClose?(reason)
    }
}

// MARK: - The link's side

extension L2CAPLink {
    /// K-frames are handed to the layer below only while fewer than this many PDUs of the link
    /// wait there for controller buffers; the rest wait in their channels. Two keeps the
    /// controller busy between `lowerLayerCanSendMore` calls, while an ATT PDU (sent straight
    /// down) waits behind at most two K-frames rather than behind a whole SDU.
    public static let creditChannelQueueDepth = 2

    /// The open credit-based channels, in local CID order.
    public var creditChannels: [L2CAPCreditChannel] { dynamicChannels.filter(\.isOpen) }

    /// Opens a credit-based channel to `psm`: LE Credit Based Connection Request (0x14), or
    /// with `enhanced` the Credit Based Connection Request (0x17) for one channel, which falls
    /// back to 0x14 when the peer answers Command Reject "command not understood" (and is not
    /// tried when `parameters` are below the enhanced mode's minimum MTU and MPS of 64).
    /// `completion` runs on the loop with the open channel or why not.
    public func openCreditBasedChannel(psm: UInt16, parameters: CreditBasedChannelParameters = .default,
                                       enhanced: Bool = false,
                                       completion: @escaping (Result<L2CAPCreditChannel, L2CAPChannelOpenError>) -> Void) {
        assertOnLoop()
        guard isOpen else { return completion(.failure(.disconnected)) }
        let enhanced = enhanced && parameters.isValid(enhanced: true)
        guard parameters.isValid(enhanced: enhanced) else { return completion(.failure(.invalidParameters)) }
        guard let cid = freeCIDs(1).first else { return completion(.failure(.noFreeChannelIDs)) }
        reservedCIDs.append(cid)
        sendOpenRequest(psm: psm, cid: cid, parameters: parameters, enhanced: enhanced) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            self?.reservedCIDs.removeAll { $0 == cid }
            completion(result)
        }
    }

    private func sendOpenRequest(psm: UInt16, cid: UInt16, parameters: CreditBasedChannelParameters, enhanced: Bool,
                                 completion: @escaping (Result<L2CAPCreditChannel, L2CAPChannelOpenError>) -> Void) {
        let command: SignalingCommand =
            enhanced
            ? .creditBasedConnectionRequest(spsm: psm, mtu: parameters.mtu, mps: parameters.mps,
                                            initialCredits: parameters.initialCredits, sourceCIDs: [cid])
            : .leCreditBasedConnectionRequest(spsm: psm, sourceCID: cid, mtu: parameters.mtu, mps: parameters.mps,
                                              initialCredits: parameters.initialCredits)
        request(command) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return completion(.failure(.disconnected)) }
            switch result {
            case .failure(.timeout): completion(.failure(.timeout))
            case .failure(.rejected(let reason)):
                if enhanced, reason == CommandRejectReason.commandNotUnderstood.rawValue, self.isOpen {
                    self.logger.debug("enhanced credit-based connection not understood; trying LE Credit Based")
                    return self.sendOpenRequest(psm: psm, cid: cid, parameters: parameters, enhanced: false, completion: completion)
                }
                completion(.failure(.refused(.spsmNotSupported)))
            case .failure: completion(.failure(.disconnected))
            case .success(.leCreditBasedConnectionResponse(let dcid, let mtu, let mps, let credits, let code)):
                completion(self.openResponded(psm: psm, cid: cid, parameters: parameters, enhanced: false, result: code,
                                         remoteCID: dcid, mtu: mtu, mps: mps, credits: credits))
            case .success(.creditBasedConnectionResponse(let mtu, let mps, let credits, let code, let dcids)):
                completion(self.openResponded(psm: psm, cid: cid, parameters: parameters, enhanced: true, result: code,
                                         remoteCID: dcids.count == 1 ? dcids[0] : 0, mtu: mtu, mps: mps, credits: credits))
            case .success:
                completion(.failure(.invalidParameters))
            }
        }
    }

    /// The peer answered our connection request.
    private func openResponded(psm: UInt16, cid: UInt16, parameters: CreditBasedChannelParameters, enhanced: Bool,
                               result code: UInt16, remoteCID: UInt16, mtu: UInt16, mps: UInt16,
                               credits: UInt16) -> Result<L2CAPCreditChannel, L2CAPChannelOpenError> {
        guard isOpen else { return .failure(.disconnected) }
        // An enhanced response may say "some refused" with our one CID accepted (non-zero).
        let accepted = code == CreditBasedConnectionResult.successful.rawValue || (enhanced && remoteCID != 0)
        guard accepted else {
            return .failure(CreditBasedConnectionResult(rawValue: code).map { .refused($0) } ?? .refusedWithCode(code))
        }
        let peer = CreditBasedChannelParameters(mtu: mtu, mps: mps, initialCredits: credits)
        guard L2CAPChannelID.dynamicRange.contains(remoteCID), peer.isValid(enhanced: enhanced),
              !dynamicChannels.contains(where: { $0.remoteCID == remoteCID })
        else {
            logger.debug("malformed credit-based connection response (CID 0x\(String(remoteCID, radix: 16)), MTU \(mtu), MPS \(mps))")
            if L2CAPChannelID.dynamicRange.contains(remoteCID) {
                // The peer thinks the channel is open: ask it to free its side.
                request(.disconnectionRequest(destinationCID: remoteCID, sourceCID: cid)) { _ in }
            }
            return .failure(.invalidParameters)
        }
        let channel = L2CAPCreditChannel(link: self, psm: psm, localCID: cid, remoteCID: remoteCID, local: parameters,
                                         remoteMTU: mtu, remoteMPS: mps, remoteCredits: credits, isEnhanced: enhanced)
        addCreditChannel(channel)
        return .success(channel)
    }

    /// An LE (0x14, one source CID) or enhanced (0x17, 1–5) Credit Based Connection Request.
    /// Checked in the order of the result codes (§4.23, §4.26): SPSM, source CIDs,
    /// parameters; then the server's decision, then our CIDs. Every channel is accepted or
    /// all refused; a refusal carries destination CID(s) 0 and zero MTU, MPS and credits.
    func receiveCreditBasedRequest(_ id: UInt8, enhanced: Bool, spsm: UInt16, mtu: UInt16, mps: UInt16,
                                   initialCredits: UInt16, sourceCIDs: [UInt16]) {
        func refuse(_ result: CreditBasedConnectionResult) {
            let result = result == .successful ? CreditBasedConnectionResult.spsmNotSupported : result
            if enhanced {
                sendSignaling(id, .creditBasedConnectionResponse(mtu: 0, mps: 0, initialCredits: 0, result: result.rawValue,
                                                                 destinationCIDs: sourceCIDs.map { _ in 0 }))
            } else {
                sendSignaling(id, .leCreditBasedConnectionResponse(destinationCID: 0, mtu: 0, mps: 0, initialCredits: 0,
                                                                   result: result.rawValue))
            }
        }
        // No server: nothing is supported, whatever else the request says.
        guard let server = creditBasedServer else { return refuse(.spsmNotSupported) }
        // LE SPSMs: 0x0001–0x007F fixed (SIG), 0x0080–0x00FF dynamic (§4.22).
        guard (0x0001...0x00FF).contains(spsm) else { return refuse(.spsmNotSupported) }
        guard sourceCIDs.allSatisfy({ L2CAPChannelID.dynamicRange.contains($0) }) else { return refuse(.invalidSourceCID) }
        let taken = dynamicChannels.map(\.remoteCID)
        guard Set(sourceCIDs).count == sourceCIDs.count, !sourceCIDs.contains(where: taken.contains) else {
            return refuse(.sourceCIDAlreadyAllocated)
        }
        // LE: MTU ≥ 23, MPS 23–65533, else "unacceptable parameters" (§4.22–4.23); enhanced:
        // MTU and MPS ≥ 64, else "invalid parameters" (§4.25–4.26).
        let peer = CreditBasedChannelParameters(mtu: mtu, mps: mps, initialCredits: initialCredits)
        guard peer.isValid(enhanced: enhanced) else { return refuse(enhanced ? .invalidParameters : .unacceptableParameters) }
        let parameters: CreditBasedChannelParameters
        let onOpen: (L2CAPCreditChannel) -> Void
        switch server(spsm) {
        case .refuse(let result): return refuse(result)
        case .accept(let ours, let open):
            // Our own parameters must be valid too; we would announce nonsense otherwise.
            guard ours.isValid(enhanced: enhanced) else {
                logger.warning("server parameters for SPSM 0x\(String(spsm, radix: 16)) out of range; refused")
                return refuse(.noResourcesAvailable)
            }
            parameters = ours
            onOpen = open
        }
        // The server may have closed the link.
        guard isOpen else { return }
        let cids = freeCIDs(sourceCIDs.count)
        guard cids.count == sourceCIDs.count else { return refuse(.noResourcesAvailable) }
        let channels = zip(cids, sourceCIDs).map { local, remote in
            L2CAPCreditChannel(link: self, psm: spsm, localCID: local, remoteCID: remote, local: parameters,
                               remoteMTU: mtu, remoteMPS: mps, remoteCredits: initialCredits, isEnhanced: enhanced)
        }
        channels.forEach(addCreditChannel)
        if enhanced {
            sendSignaling(id, .creditBasedConnectionResponse(mtu: parameters.mtu, mps: parameters.mps,
                                                             initialCredits: parameters.initialCredits,
                                                             result: CreditBasedConnectionResult.successful.rawValue,
                                                             destinationCIDs: cids))
        } else {
            sendSignaling(id, .leCreditBasedConnectionResponse(destinationCID: cids[0], mtu: parameters.mtu, mps: parameters.mps,
                                                               initialCredits: parameters.initialCredits,
                                                               result: CreditBasedConnectionResult.successful.rawValue))
        }
        // After the response, so that K-frames the user sends at once follow it.
        for channel in channels where channel.isOpen { onOpen(channel) }
    }

    /// Disconnection Request (§4.6): DCID is our CID, SCID the peer's. Unknown DCID: Command
    /// Reject "invalid CID"; a SCID that does not match: silently discarded.
    func receiveDisconnectionRequest(_ id: UInt8, destinationCID: UInt16, sourceCID: UInt16) {
        guard let channel = creditChannel(localCID: destinationCID) else {
            var data = ByteWriter(capacity: 4)
            data.u16(destinationCID)
            data.u16(sourceCID)
            return reject(id, .invalidCIDInRequest, data: data.bytes)
        }
        guard channel.remoteCID == sourceCID else {
            logger.debug("Disconnection Request for 0x\(String(destinationCID, radix: 16)) with the wrong source CID dropped")
            return
        }
        sendSignaling(id, .disconnectionResponse(destinationCID: destinationCID, sourceCID: sourceCID))
        channel.remoteDisconnected()
    }

    /// Flow Control Credit (§4.24): the CID is the peer's, our destination.
    func receiveCredits(cid: UInt16, credits: UInt16) {
        guard let channel = dynamicChannels.first(where: { $0.remoteCID == cid && $0.isOpen }) else {
            logger.debug("credits for an unknown channel dropped")
            return
        }
        channel.receiveCredits(credits)
    }

    // MARK: Channel table

    func creditChannel(localCID: UInt16) -> L2CAPCreditChannel? {
        dynamicChannels.first { $0.localCID == localCID }
    }

    /// The lowest `count` CIDs of the dynamic range neither a channel nor a request holds.
    private func freeCIDs(_ count: Int) -> [UInt16] {
        var free: [UInt16] = []
        for cid in L2CAPChannelID.dynamicRange where free.count < count {
            if !reservedCIDs.contains(cid), creditChannel(localCID: cid) == nil { free.append(cid) }
        }
        return free
    }

    private func addCreditChannel(_ channel: L2CAPCreditChannel) {
        let index = dynamicChannels.firstIndex { $0.localCID > channel.localCID } ?? dynamicChannels.endIndex
        dynamicChannels.insert(channel, at: index)
        if index < nextChannelToServe { nextChannelToServe += 1 }
    }

    func removeCreditChannel(_ channel: L2CAPCreditChannel) {
        guard let index = dynamicChannels.firstIndex(where: { $0 === channel }) else { return }
        dynamicChannels.remove(at: index)
        if index < nextChannelToServe { nextChannelToServe -= 1 }
    }

    /// The link is closing: every channel is told `.linkLost`.
    func closeCreditChannels() {
        let channels = dynamicChannels
        dynamicChannels = []
        reservedCIDs = []
        for channel in channels { channel.linkClosed() }
    }

    // MARK: Scheduling

    /// Hands K-frames to the layer below while it holds fewer than
    /// `creditChannelQueueDepth` PDUs of this link, one K-frame per channel in turn (round
    /// robin), each needing a credit; then tells users whose refused SDU now fits. Runs after
    /// `send`, credit arrival and `lowerLayerCanSendMore`.
    func serveCreditChannels() {
        guard isOpen, !dynamicChannels.isEmpty else { return }
        guard !isServingChannels else {
            serveAgain = true
            return
        }
        isServingChannels = true
        defer { isServingChannels = false }
        repeat {
            serveAgain = false
            guard sendKFrames() else { break }
            for channel in dynamicChannels { channel.notifyIfRoom() }
        } while serveAgain && isOpen
    }

    /// One round-robin pass until nothing is ready or the layer below has enough. False when
    /// the layer below refused a PDU (tried again on the next occasion).
    private func sendKFrames() -> Bool {
        var idle = 0
        // The table is read afresh each turn: a send may re-enter the link.
        while isOpen, idle < dynamicChannels.count,
              lower.queuedPDUs(handle: handle) < Self.creditChannelQueueDepth {
            if nextChannelToServe >= dynamicChannels.count { nextChannelToServe = 0 }
            let channel = dynamicChannels[nextChannelToServe]
            nextChannelToServe += 1
            guard channel.canSendKFrame, let frame = channel.nextKFrame() else {
                idle += 1
                continue
            }
            guard lower.sendACL(handle: handle, pdu: frame.pdu) else { return false }
            channel.didSend(sduBytes: frame.sduBytes)
            idle = 0
        }
        return true
    }
}
