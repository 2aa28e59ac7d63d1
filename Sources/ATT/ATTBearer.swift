import HCI
import L2CAP
import Logging
import Scheduling
import StackLogging

/// Why an ATT operation failed.
public enum ATTBearerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server answered the request with an Error Response.
    case errorResponse(ATTPDU.ErrorResponse)
    /// No response (or confirmation) within the transaction timeout (Vol 3 Part F §3.3.3). The
    /// bearer is closed.
    case timeout
    /// The link went down.
    case disconnected
    /// The bearer was closed by a transaction timeout earlier: nothing more goes over it, and a
    /// new ATT bearer needs a new link.
    case bearerClosed
    /// The peer broke the protocol: a response that does not answer the request, a malformed
    /// or oversized response.
    case protocolViolation(String)
    /// The client exchanges the MTU only once per connection (§3.4.2.1).
    case mtuAlreadyExchanged
    /// What was asked to be sent cannot be: not a request, or longer than ATT_MTU.
    case invalidRequest(String)
    /// The link refused the PDU (its queue is full, or it is going down).
    case cannotSend
    /// The request needed more security than the link had, and raising it failed.
    case securityFailed(ATTSecurityFailure)

    public var description: String {
        switch self {
        case .errorResponse(let e):
            "the server answered \(e.requestOpcode.name) with \(e.errorCode) on handle \(e.attributeHandle)"
        case .timeout: "the peer did not answer within the ATT transaction timeout; the bearer is closed"
        case .disconnected: "the link is disconnected"
        case .bearerClosed: "the ATT bearer was closed after a transaction timeout; a new connection is needed"
        case .protocolViolation(let what): "ATT protocol violation: \(what)"
        case .mtuAlreadyExchanged: "the ATT MTU was already exchanged on this connection"
        case .invalidRequest(let what): "cannot send: \(what)"
        case .cannotSend: "the link cannot send now"
        case .securityFailed(let failure): "the link's security could not be raised: \(failure)"
        }
    }
}

/// Why the link's owner could not give a request the security its server asked for (see
/// `ATTBearer.onInsufficientSecurity`).
public enum ATTSecurityFailure: Hashable, Sendable, CustomStringConvertible {
    /// Encryption with the bond's key failed: the peer no longer has it.
    case peerRemovedPairingInformation
    /// Encryption did not complete in time.
    case encryptionTimedOut

    public var description: String {
        switch self {
        case .peerRemovedPairingInformation: "the peer removed its pairing information"
        case .encryptionTimedOut: "encryption timed out"
        }
    }
}

/// The Attribute Protocol over one ATT bearer — the LE ATT fixed channel of one connection —
/// in both roles at once (Core spec Vol 3 Part F §3.3, §3.4):
///
/// - **Client**: `request(_:completion:)` queues requests and sends one at a time; commands go
///   out at once with back-pressure; notifications and indications go to their handlers, and
///   indications are confirmed after their handler returns.
/// - **Server**: each request goes to `onRequest` with an `ATTResponder` that answers exactly
///   once, possibly later; the next request waits meanwhile. Notifications go out at once,
///   indications one at a time.
/// - **Rules it enforces**: the MTU exchange (once per direction), Request Not Supported for
///   unknown requests, Invalid PDU for malformed or oversized ones, unknown commands ignored,
///   and the 30-second transaction timeout, after which the bearer is closed for good.
/// - **Its users** (server, client, the link's owner) hear MTU changes, readiness to send again
///   and the close through `addListener(_:)`.
///
/// Loop-confined: call it on its loop; every handler and completion is called there.
public final class ATTBearer: @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        loop.assertConfined("ATTBearer", file: file, line: line)
    }

    /// Why the bearer closed.
    public enum CloseReason: Hashable, Sendable {
        /// A request or indication went unanswered for `transactionTimeout` (§3.3.3). The owner
        /// should disconnect: a new ATT bearer needs a new link.
        case transactionTimeout
        /// The link went down.
        case disconnected
    }

    public let loop: EventLoop
    @WeakHeldExistential private var channel: (any ATTChannel)?
    /// `corebluetooth.att` (tagged with the link by its owner): timeouts, error responses, and
    /// what the bearer drops or rejects. Never a copy per PDU: messages are built only when
    /// their level is on. Made when first used (``logSource``): a bearer that never logs makes
    /// none.
    public var logger: Logger {
        get { logSource.logger }
        set { logSource.logger = newValue }
    }
    /// Where `logger` comes from: the owner sets its link's (``LazyLogger/init(_:link:)``).
    public var logSource: LazyLogger

    // MARK: Configuration

    /// The Rx MTU this side offers, as client and as server (the same both ways, §3.4.2.2).
    /// Values below 23 count as 23.
    public var preferredMTU = ATTMTU.preferred
    /// How long a request waits for its response and an indication for its confirmation.
    public var transactionTimeout: Duration = .seconds(30)
    /// `sendCommand` and `notify` refuse while the link has this many PDUs waiting for
    /// controller buffers.
    @exclusivity(unchecked) public var maximumQueuedPDUsForUnacknowledged = 8  // exclusivity checks: 0.3 % of notify
    /// Requests a misbehaving client may pile up while one is being served; more are dropped.
    public var maximumWaitingRequests = 8

    // MARK: State

    /// ATT_MTU: 23 until an exchange.
    @exclusivity(unchecked) public private(set) var mtu = ATTMTU.leDefault  // exclusivity checks: 0.6 % of notify
    /// Whether this side sent its Exchange MTU Request.
    public private(set) var hasRequestedMTUExchange = false
    /// Whether this side answered the peer's Exchange MTU Request.
    public private(set) var hasAnsweredMTUExchange = false
    /// Set once the bearer has closed; nothing is sent or accepted after that.
    @exclusivity(unchecked) public private(set) var closeReason: CloseReason?  // exclusivity checks: 0.6 % of notify
    public var isOpen: Bool { closeReason == nil }
    /// The link's security level, for the server's permission checks.
    public var securityLevel: LESecurityLevel { channel?.securityLevel ?? .noSecurity }

    // MARK: Client side

    /// A Handle Value Notification: handle, value.
    @exclusivity(unchecked) public var onNotification: ((ATTHandle, [UInt8]) -> Void)?  // exclusivity checks: 0.28 % of notify
    /// A Multiple Handle Value Notification: its handle/value pairs in order.
    public var onMultipleNotification: (([(handle: ATTHandle, value: [UInt8])]) -> Void)?
    /// A Handle Value Indication: handle, value. The bearer confirms it when this returns.
    public var onIndication: ((ATTHandle, [UInt8]) -> Void)?

    private struct PendingRequest {
        var pdu: ATTPDU
        var completion: (Result<ATTPDU, ATTBearerError>) -> Void
        /// Sent again after the link's security was raised; not retried a second time.
        var isRetry = false
    }
    private var waitingRequests = RingBuffer<PendingRequest>(capacity: 4)
    private var outstandingRequest: (request: PendingRequest, timer: TimerHandle)?
    private var refusedUnacknowledged = false

    /// The bearer's owner, who can end the link, hears here that a request or indication went
    /// unanswered for `transactionTimeout` (§3.3.3: the bearer is dead; a new one needs a new
    /// link). One owner: not chained, and not a listener (listeners hear every readiness on the
    /// notification path, and this one needs only the timeout).
    public var onTransactionTimeout: (() -> Void)?

    /// The link's owner raises its security here when the server refused a request for want of
    /// it (Insufficient Authentication, Encryption or Encryption Key Size — Vol 3 Part C
    /// §10.3.2: the client may pair or encrypt, then retry). It calls `done` once on the loop:
    /// nil, and the request goes out again, once; an error (`.errorResponse` of the refusal to
    /// let it stand), and the request fails with it. Requests queued behind wait meanwhile, so
    /// they keep their order. Nil: the Error Response is the request's result.
    public var onInsufficientSecurity:
        ((ATTPDU.ErrorResponse, _ done: @escaping (ATTBearerError?) -> Void) -> Void)?
    /// The request waiting for the owner to raise the link's security; then the one to send
    /// again before any other.
    private var heldForSecurity: PendingRequest?
    private var retryNext: PendingRequest?

    // MARK: Listeners

    private var listeners: [ATTBearerListenerSlot] = []

    /// Adds a listener (held weakly) for MTU changes, readiness to send and the close. Adding
    /// one already listening does nothing.
    public func addListener(_ listener: any ATTBearerListener) {
        assertOnLoop()
        listeners.removeAll { $0.listener == nil }
        guard !listeners.contains(where: { $0.listener === listener }) else { return }
        listeners.append(ATTBearerListenerSlot(listener: listener))
    }

    public func removeListener(_ listener: any ATTBearerListener) {
        assertOnLoop()
        listeners.removeAll { $0.listener == nil || $0.listener === listener }
    }

    /// Calls `body` with each listener, in the order they were added. The list is read as it
    /// was when the call began: a listener added or removed meanwhile does not change it.
    private func forEachListener(_ body: (any ATTBearerListener) -> Void) {
        let current = listeners
        for slot in current {
            if let listener = slot.listener { body(listener) }
        }
    }

    // MARK: Server side

    /// Each request from the peer (except Exchange MTU, which the bearer answers), with the
    /// responder that must answer it. The next request waits until it has. When nil, requests
    /// get Request Not Supported.
    public var onRequest: ((ATTPDU, ATTResponder) -> Void)?
    /// Each Write Command. (Signed Write Commands are dropped until signing exists.)
    @exclusivity(unchecked) public var onCommand: ((ATTPDU) -> Void)?  // exclusivity checks: 0.05 % of pair

    private var incomingRequests = RingBuffer<[UInt8]>(capacity: 4)
    private var servingRequest: UInt64?
    private var nextRequestID: UInt64 = 0
    private var isDispatchingRequests = false

    private struct PendingIndication {
        var handle: ATTHandle
        var value: [UInt8]
        var completion: (Result<Void, ATTBearerError>) -> Void
    }
    private var waitingIndications = RingBuffer<PendingIndication>(capacity: 4)
    private var outstandingIndication: (indication: PendingIndication, timer: TimerHandle)?

    /// A bearer on `channel`, which it takes over (its `onReceive`, `onClose`, `onCanSendMore`).
    /// The channel is held weakly: its link owns it. `logger`: the owner's, tagged with the link
    /// (nil: ``StackLogging/standard``'s, made if the bearer logs).
    public init(channel: any ATTChannel, loop: EventLoop, logger: Logger? = nil) {
        self.channel = channel
        self.loop = loop
        logSource = logger.map { LazyLogger($0) } ?? LazyLogger(standard: .att)
        // Not `[weak self]`: see `WeakHandle` (a weakly referenced object pays on every retain).
        let weakSelf = WeakHandle(self)
        channel.onReceive = { weakSelf.object?.receive($0) }
        channel.onClose = { weakSelf.object?.shutDown(.disconnected) }
        channel.onCanSendMore = { weakSelf.object?.channelCanSendMore() }
    }

    /// The failure of anything tried after the bearer closed.
    private var closedError: ATTBearerError {
        closeReason == .transactionTimeout ? .bearerClosed : .disconnected
    }

    private var ourRxMTU: UInt16 { UInt16(clamping: max(ATTMTU.leDefault, preferredMTU)) }

    // MARK: - Client

    /// Queues a request; it goes out when those before it have been answered (one outstanding
    /// request per bearer, §3.3.2). Completes with the response — the request's own response
    /// opcode — or `.errorResponse` when the server answered with an Error Response for it.
    /// A request longer than ATT_MTU when its turn comes fails with `.invalidRequest`.
    public func request(_ pdu: ATTPDU, completion: @escaping (Result<ATTPDU, ATTBearerError>) -> Void) {
        assertOnLoop()
        guard isOpen else { return completion(.failure(closedError)) }
        guard pdu.isRequest else { return completion(.failure(.invalidRequest("\(pdu.opcode.name) is not a request"))) }
        if case .exchangeMTURequest = pdu {
            guard !hasRequestedMTUExchange else { return completion(.failure(.mtuAlreadyExchanged)) }
            hasRequestedMTUExchange = true
        }
        let request = PendingRequest(pdu: pdu, completion: completion)
        // An idle bearer sends at once: the queue's storage, made at its first use, would stay
        // with the link (a link's first request is the MTU exchange; fleets count every byte).
        guard outstandingRequest == nil, heldForSecurity == nil, retryNext == nil, waitingRequests.isEmpty else {
            waitingRequests.append(request)
            return sendNextRequest()
        }
        start(request)
    }

    /// Exchanges the MTU as client, offering `preferredMTU` (once per connection). Completes
    /// with the new ATT_MTU: the smaller of the two Rx MTUs, never below 23.
    public func exchangeMTU(completion: @escaping (Result<Int, ATTBearerError>) -> Void) {
        assertOnLoop()
        request(.exchangeMTURequest(.init(clientRxMTU: ourRxMTU))) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            completion(result.map { _ in self?.mtu ?? ATTMTU.leDefault })
        }
    }

    /// Sends a Write Command or Signed Write Command now. False when the bearer is closed, the
    /// PDU is not a command or is longer than ATT_MTU, or the link already has
    /// `maximumQueuedPDUsForUnacknowledged` PDUs waiting; in that last case listeners hear
    /// `attBearerIsReadyToSend()` when it can take more.
    public func sendCommand(_ pdu: ATTPDU) -> Bool {
        assertOnLoop()
        guard isOpen, pdu.isCommand else { return false }
        let bytes = pdu.encode()
        guard bytes.count <= mtu else {
            logger.warning("\(pdu.opcode.name) of \(bytes.count) octets exceeds ATT_MTU \(mtu); not sent")
            return false
        }
        return sendUnacknowledged(bytes)
    }

    private func sendNextRequest() {
        while isOpen, outstandingRequest == nil, heldForSecurity == nil, let next = nextRequest() { start(next) }
    }

    /// Sends `next` as the outstanding request, or fails it.
    private func start(_ next: PendingRequest) {
        let bytes = next.pdu.encode()
        guard bytes.count <= mtu else {
            return next.completion(.failure(.invalidRequest("\(next.pdu.opcode.name) of \(bytes.count) octets exceeds ATT_MTU \(mtu)")))
        }
        // Outstanding before the send: a channel may answer synchronously.
        let timer = loop.schedule(after: transactionTimeout) { [weakSelf = WeakHandle(self)] in weakSelf.object?.requestTimedOut() }
        outstandingRequest = (next, timer)
        guard channel?.send(bytes) == true else {
            timer.cancel()
            outstandingRequest = nil
            return next.completion(.failure(.cannotSend))
        }
    }

    private func requestTimedOut() {
        guard let request = outstandingRequest?.request else { return }
        outstandingRequest = nil
        logger.warning("\(request.pdu.opcode.name) got no response within \(transactionTimeout); bearer closed")
        shutDown(.transactionTimeout) { request.completion(.failure(.timeout)) }
    }

    private func receiveResponse(_ bytes: [UInt8], _ opcode: ATTOpcode) {
        guard let outstanding = outstandingRequest else {
            logger.debug("protocol violation: \(opcode.name) with no request outstanding; dropped")
            return
        }
        outstanding.timer.cancel()
        outstandingRequest = nil
        let request = outstanding.request
        let result = match(bytes, opcode, to: request.pdu)
        if case .failure(.errorResponse(let error)) = result, !request.isRetry, Self.asksForSecurity(error.errorCode),
           let raise = onInsufficientSecurity {
            logger.debug("\(request.pdu.opcode.name) needs more security (\(error.errorCode)); raising it, then retrying")
            var held = request
            held.isRetry = true
            heldForSecurity = held
            raise(error) { [weakSelf = WeakHandle(self)] failure in
                let `self` = weakSelf.object
                // Nothing held: the bearer closed meanwhile and failed the request itself.
                guard let self, let held = self.heldForSecurity else { return }
                self.heldForSecurity = nil
                if let failure { held.completion(.failure(failure)) } else { self.retryNext = held }
                self.sendNextRequest()
            }
            return
        }
        if case .failure(let error) = result, logSource.allows(.debug) { logger.debug("\(request.pdu.opcode.name): \(error)") }
        request.completion(result)
        sendNextRequest()
    }

    private func nextRequest() -> PendingRequest? {
        if let retry = retryNext {
            retryNext = nil
            return retry
        }
        return waitingRequests.popFirst()
    }

    /// The Error Response codes a client answers by pairing or encrypting (Vol 3 Part C §10.3.2).
    static func asksForSecurity(_ code: ATTErrorCode) -> Bool {
        code == .insufficientAuthentication || code == .insufficientEncryption || code == .encryptionKeySizeTooShort
    }

    /// The outcome of `request` given the PDU that arrived while it was outstanding.
    private func match(_ bytes: [UInt8], _ opcode: ATTOpcode, to request: ATTPDU) -> Result<ATTPDU, ATTBearerError> {
        guard bytes.count <= mtu else {
            return .failure(.protocolViolation("\(opcode.name) of \(bytes.count) octets exceeds ATT_MTU \(mtu)"))
        }
        let response: ATTPDU
        do { response = try ATTPDU(decoding: bytes) } catch {
            return .failure(.protocolViolation("malformed \(opcode.name) answering \(request.opcode.name): \(error)"))
        }
        switch response {
        case .errorResponse(let error) where error.requestOpcode == request.opcode:
            return .failure(.errorResponse(error))
        case .errorResponse(let error):
            return .failure(.protocolViolation("an Error Response for \(error.requestOpcode.name) answers \(request.opcode.name)"))
        case _ where response.opcode == request.expectedResponseOpcode:
            if case .exchangeMTURequest(let ours) = request, case .exchangeMTUResponse(let theirs) = response {
                // Applied on receipt, before anything else is sent (§3.4.2.2).
                apply(mtu: ATTMTU.negotiated(clientRxMTU: ours.clientRxMTU, serverRxMTU: theirs.serverRxMTU))
            }
            return .success(response)
        default:
            return .failure(.protocolViolation("\(response.opcode.name) does not answer \(request.opcode.name)"))
        }
    }

    // Notifications and indications are decoded by their own type's decoder, not through the
    // `ATTPDU` enum: the hottest PDUs, and wrapping and unwrapping the enum cost more than
    // reading them.
    private func receiveNotification(_ bytes: consuming [UInt8], _ opcode: ATTOpcode) {
        switch opcode {
        case .handleValueNotification:
            // Handed over from the channel: the value is the PDU's buffer (no copy).
            guard let n = decodeUnanswered(bytes, opcode, ATTPDU.HandleValueNotification.init(decoding:)) else { return }
            onNotification?(n.attributeHandle, n.attributeValue)
        case .multipleHandleValueNotification:
            guard let n = decodeUnanswered(bytes, opcode, ATTPDU.MultipleHandleValueNotification.init(decoding:)) else { return }
            onMultipleNotification?(n.handleLengthValueTupleList.map { ($0.attributeHandle, $0.attributeValue) })
        default: break
        }
    }

    private func receiveIndication(_ bytes: [UInt8], _ opcode: ATTOpcode) {
        guard let indication = decodeUnanswered(bytes, opcode, ATTPDU.HandleValueIndication.init(decoding:)) else { return }
        onIndication?(indication.attributeHandle, indication.attributeValue)
        // The handler may have closed the bearer.
        guard isOpen else { return }
        if channel?.send(ATTPDU.HandleValueConfirmation().encode()) != true {
            logger.debug("could not send ATT_HANDLE_VALUE_CFM")
        }
    }

    /// Decodes a PDU nobody answers with an error (with `decode`, `ATTPDU`'s decoder unless the
    /// type is known): oversized or malformed ones are dropped.
    private func decodeUnanswered<PDU>(_ bytes: consuming [UInt8], _ opcode: ATTOpcode,
                                       _ decode: (consuming [UInt8]) throws -> PDU = ATTPDU.init(decoding:)) -> PDU? {
        guard bytes.count <= mtu else {
            logger.debug("\(opcode.name) of \(bytes.count) octets exceeds ATT_MTU \(mtu); dropped")
            return nil
        }
        do { return try decode(bytes) } catch {
            logger.debug("malformed \(opcode.name) dropped: \(error)")
            return nil
        }
    }

    // MARK: - Server

    /// Sends a Handle Value Notification, its value cut to ATT_MTU − 3. False when the bearer is
    /// closed or the link's queue is over its bound (then `attBearerIsReadyToSend()` follows).
    public func notify(handle: ATTHandle, value: [UInt8]) -> Bool {
        assertOnLoop()
        return value.withUnsafeBytes { notify(handle: handle, bytes: $0) }
    }

    /// `notify(handle:value:)` for a value in memory the caller owns (no array of it needed).
    public func notify(handle: ATTHandle, bytes value: UnsafeRawBufferPointer) -> Bool {
        assertOnLoop()
        guard isOpen else { return false }
        // Encoded here, behind the channel's header room, in one allocation (the hottest PDU;
        // the bytes are ATTPDU.HandleValueNotification's encoding).
        let length = min(value.count, ATTMTU.maximumNotificationValueLength(mtu: mtu))
        return sendUnacknowledged { channel in
            let headroom = channel.sduHeadroom
            var bytes: [UInt8] = []
            bytes.reserveCapacity(headroom + 3 + length)
            for _ in 0..<headroom { bytes.append(0) }
            bytes.append(ATTOpcode.handleValueNotification.rawValue)
            bytes.append(UInt8(truncatingIfNeeded: handle.rawValue))
            bytes.append(UInt8(truncatingIfNeeded: handle.rawValue >> 8))
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[..<length]))
            return channel.send(reserved: consume bytes, ifQueuedBelow: maximumQueuedPDUsForUnacknowledged)
        }
    }

    /// Sends a Multiple Handle Value Notification (only to a client that said it supports them).
    /// False when there are fewer than two values, they do not fit in ATT_MTU (values are never
    /// cut here), the bearer is closed or the link's queue is over its bound.
    public func notifyMultiple(_ values: [(handle: ATTHandle, value: [UInt8])]) -> Bool {
        assertOnLoop()
        guard isOpen, values.count >= 2 else { return false }
        let pdu = ATTPDU.MultipleHandleValueNotification(handleLengthValueTupleList: values.map {
            .init(attributeHandle: $0.handle, attributeValue: $0.value)
        })
        guard pdu.encodedLength <= mtu else {
            logger.warning("ATT_MULTIPLE_HANDLE_VALUE_NTF of \(pdu.encodedLength) octets exceeds ATT_MTU \(mtu); not sent")
            return false
        }
        return sendUnacknowledged(pdu.encode())
    }

    /// Queues a Handle Value Indication; it goes out (its value cut to ATT_MTU − 3) when those
    /// before it are confirmed, one outstanding at a time (§3.3.2). Completes on the client's
    /// confirmation, or with `.timeout` after `transactionTimeout` (the bearer then closes).
    public func indicate(handle: ATTHandle, value: [UInt8], completion: @escaping (Result<Void, ATTBearerError>) -> Void) {
        assertOnLoop()
        guard isOpen else { return completion(.failure(closedError)) }
        waitingIndications.append(PendingIndication(handle: handle, value: value, completion: completion))
        sendNextIndication()
    }

    private func sendNextIndication() {
        while isOpen, outstandingIndication == nil, let next = waitingIndications.popFirst() {
            let value = Array(next.value.prefix(ATTMTU.maximumNotificationValueLength(mtu: mtu)))
            let timer = loop.schedule(after: transactionTimeout) { [weakSelf = WeakHandle(self)] in weakSelf.object?.indicationTimedOut() }
            outstandingIndication = (next, timer)
            guard channel?.send(ATTPDU.HandleValueIndication(attributeHandle: next.handle, attributeValue: value).encode()) == true else {
                timer.cancel()
                outstandingIndication = nil
                next.completion(.failure(.cannotSend))
                continue
            }
        }
    }

    private func indicationTimedOut() {
        guard let indication = outstandingIndication?.indication else { return }
        outstandingIndication = nil
        logger.warning("indication of \(indication.handle) not confirmed within \(transactionTimeout); bearer closed")
        shutDown(.transactionTimeout) { indication.completion(.failure(.timeout)) }
    }

    private func receiveConfirmation(_ bytes: [UInt8]) {
        guard bytes.count == 1 else {
            logger.debug("malformed ATT_HANDLE_VALUE_CFM of \(bytes.count) octets dropped")
            return
        }
        guard let outstanding = outstandingIndication else {
            logger.debug("protocol violation: ATT_HANDLE_VALUE_CFM with no indication outstanding; dropped")
            return
        }
        outstanding.timer.cancel()
        outstandingIndication = nil
        outstanding.indication.completion(.success(()))
        sendNextIndication()
    }

    private func receiveCommand(_ bytes: [UInt8], _ opcode: ATTOpcode) {
        guard let pdu = decodeUnanswered(bytes, opcode) else { return }
        switch pdu {
        case .writeCommand: onCommand?(pdu)
        case .signedWriteCommand: logger.debug("ATT_SIGNED_WRITE_CMD dropped: signing is not supported")
        default: logger.debug("unknown command \(opcode.name) ignored")
        }
    }

    /// A request from the peer: served now, or after the one being served (a client must not
    /// send it yet, §3.3.2, but one that does is answered in order rather than dropped).
    private func receiveRequest(_ bytes: [UInt8]) {
        if servingRequest != nil || !incomingRequests.isEmpty {
            guard incomingRequests.count < maximumWaitingRequests else {
                logger.warning("protocol violation: too many requests while one is served; \(ATTOpcode(bytes[0]).name) dropped")
                return
            }
            logger.debug("protocol violation: \(ATTOpcode(bytes[0]).name) before the previous request was answered; it waits")
        }
        incomingRequests.append(bytes)
        serveRequests()
    }

    private func serveRequests() {
        // A responder answering inside `onRequest` lands back here: the outer loop goes on.
        guard !isDispatchingRequests else { return }
        isDispatchingRequests = true
        defer { isDispatchingRequests = false }
        while isOpen, servingRequest == nil, let bytes = incomingRequests.popFirst() { serve(bytes) }
    }

    private func serve(_ bytes: [UInt8]) {
        let opcode = ATTOpcode(bytes[0])
        guard bytes.count <= mtu else {
            logger.debug("\(opcode.name) of \(bytes.count) octets exceeds ATT_MTU \(mtu): Invalid PDU")
            return sendError(opcode, .invalidPDU)
        }
        let pdu: ATTPDU
        do { pdu = try ATTPDU(decoding: bytes) } catch {
            logger.debug("malformed \(opcode.name): \(error)")
            return sendError(opcode, .invalidPDU)
        }
        switch pdu {
        case .unknown:
            sendError(opcode, .requestNotSupported)
        case .exchangeMTURequest(let request):
            answerExchangeMTU(request)
        default:
            guard let onRequest else { return sendError(opcode, .requestNotSupported) }
            nextRequestID &+= 1
            servingRequest = nextRequestID
            onRequest(pdu, ATTResponder(request: pdu, id: nextRequestID, bearer: self))
        }
    }

    /// The server answers the first Exchange MTU Request with its Rx MTU and applies the new
    /// ATT_MTU after sending. The client may send it only once per connection (§3.4.2.1) and
    /// the spec gives a second one no meaning: it gets Request Not Supported, and ATT_MTU stays
    /// what both sides already use.
    private func answerExchangeMTU(_ request: ATTPDU.ExchangeMTURequest) {
        guard !hasAnsweredMTUExchange else {
            logger.debug("a second ATT_EXCHANGE_MTU_REQ: Request Not Supported")
            return sendError(.exchangeMTURequest, .requestNotSupported)
        }
        hasAnsweredMTUExchange = true
        send(.exchangeMTUResponse(.init(serverRxMTU: ourRxMTU)))
        apply(mtu: ATTMTU.negotiated(clientRxMTU: request.clientRxMTU, serverRxMTU: ourRxMTU))
    }

    private func sendError(_ opcode: ATTOpcode, _ code: ATTErrorCode, handle: ATTHandle = .invalid) {
        send(.errorResponse(.init(requestOpcode: opcode, attributeHandle: handle, errorCode: code)))
    }

    /// The responder `id` answered `request` with `response`.
    fileprivate func finishServing(_ id: UInt64, request: ATTPDU, response: ATTPDU) {
        guard isOpen, servingRequest == id else { return }
        servingRequest = nil
        var bytes = response.encode()
        if response.opcode != .errorResponse && response.opcode != request.expectedResponseOpcode {
            logger.warning("\(response.opcode.name) cannot answer \(request.opcode.name): Unlikely Error sent instead")
            bytes = ATTPDU.ErrorResponse(requestOpcode: request.opcode, attributeHandle: .invalid,
                                         errorCode: .unlikelyError).encode()
        } else if bytes.count > mtu {
            switch response {
            case .readResponse, .readBlobResponse, .readMultipleResponse, .readMultipleVariableResponse:
                // Their values are cut to what fits (§3.4.4.4, §3.4.4.6, §3.4.4.8, §3.4.4.10).
                bytes = Array(bytes.prefix(mtu))
            default:
                logger.warning("\(response.opcode.name) of \(bytes.count) octets exceeds ATT_MTU \(mtu): Unlikely Error sent instead")
                bytes = ATTPDU.ErrorResponse(requestOpcode: request.opcode, attributeHandle: .invalid,
                                             errorCode: .unlikelyError).encode()
            }
        }
        if channel?.send(bytes) != true { logger.debug("could not send \(ATTOpcode(bytes[0]).name)") }
        serveRequests()
    }

    // MARK: - Both

    private func receive(_ bytes: consuming [UInt8]) {
        guard isOpen, let first = bytes.first else { return }
        let opcode = ATTOpcode(first)
        switch opcode.kind {
        case .request?: receiveRequest(bytes)
        case .command?: receiveCommand(bytes, opcode)
        case .response?: receiveResponse(bytes, opcode)
        case .notification?: receiveNotification(bytes, opcode)
        case .indication?: receiveIndication(bytes, opcode)
        case .confirmation?: receiveConfirmation(bytes)
        case nil:
            // An unknown command is ignored; anything else unknown is taken for a request the
            // server does not support (§3.4.1.1, §3.3.1).
            if opcode.isCommand {
                logger.debug("unknown command \(opcode.name) ignored")
            } else {
                receiveRequest(bytes)
            }
        }
    }

    private func send(_ pdu: ATTPDU) {
        if channel?.send(pdu.encode()) != true { logger.debug("could not send \(pdu.opcode.name)") }
    }

    private func sendUnacknowledged(_ bytes: [UInt8]) -> Bool {
        sendUnacknowledged { $0.queuedPDUs < maximumQueuedPDUsForUnacknowledged && $0.send(bytes) }
    }

    /// A PDU nobody acknowledges, which `send` hands to the channel unless the link's queue is
    /// over its bound; a refusal is remembered, so `attBearerIsReadyToSend()` follows the drain.
    private func sendUnacknowledged(_ send: (any ATTChannel) -> Bool) -> Bool {
        guard let channel, send(channel) else {
            refusedUnacknowledged = true
            return false
        }
        return true
    }

    private func channelCanSendMore() {
        guard isOpen, refusedUnacknowledged else { return }
        refusedUnacknowledged = false
        forEachListener { $0.attBearerIsReadyToSend() }
    }

    private func apply(mtu newMTU: Int) {
        guard newMTU != mtu else { return }
        mtu = newMTU
        forEachListener { $0.attBearerMTUDidChange(to: newMTU) }
    }

    /// Closes the bearer: `first` (the timed-out operation's failure) runs, then every other
    /// pending operation fails, then the listeners hear it.
    private func shutDown(_ reason: CloseReason, first: (() -> Void)? = nil) {
        guard isOpen else { return }
        closeReason = reason
        let error = closedError
        first?()
        if let outstanding = outstandingRequest {
            outstanding.timer.cancel()
            outstandingRequest = nil
            outstanding.request.completion(.failure(error))
        }
        for request in [heldForSecurity, retryNext].compactMap({ $0 }) { request.completion(.failure(error)) }
        heldForSecurity = nil
        retryNext = nil
        while let request = waitingRequests.popFirst() { request.completion(.failure(error)) }
        if let outstanding = outstandingIndication {
            outstanding.timer.cancel()
            outstandingIndication = nil
            outstanding.indication.completion(.failure(error))
        }
        while let indication = waitingIndications.popFirst() { indication.completion(.failure(error)) }
        incomingRequests.removeAll()
        servingRequest = nil
        forEachListener { $0.attBearerDidClose(reason) }
        if reason == .transactionTimeout { onTransactionTimeout?() }
    }
}

/// Answers one request an `ATTBearer` handed to its server, exactly once, now or later (on the
/// bearer's loop). A second answer, or one after the bearer closed, is ignored. A responder
/// dropped without answering answers Unlikely Error, so the client is never left waiting.
public final class ATTResponder: @unchecked Sendable {
    /// The request to answer.
    public let request: ATTPDU
    private let id: UInt64
    @WeakHeld private var bearer: ATTBearer?
    public private(set) var hasResponded = false

    fileprivate init(request: ATTPDU, id: UInt64, bearer: ATTBearer) {
        self.request = request
        self.id = id
        self.bearer = bearer
    }

    /// The bearer's ATT_MTU now, to size the response.
    public var mtu: Int { bearer?.mtu ?? ATTMTU.leDefault }
    /// The link's security level, for permission checks.
    public var securityLevel: LESecurityLevel { bearer?.securityLevel ?? .noSecurity }

    /// Answers with `response`: the request's response PDU or an Error Response. Read-type
    /// responses longer than ATT_MTU are cut to it; any other wrong answer (another opcode, an
    /// oversized list) is replaced by Unlikely Error.
    public func respond(_ response: ATTPDU) {
        guard !hasResponded else {
            bearer?.logger.warning("\(request.opcode.name) answered twice; \(response.opcode.name) ignored")
            return
        }
        hasResponded = true
        bearer?.finishServing(id, request: request, response: response)
    }

    /// Answers with an Error Response for `requestOpcode` (normally the request's), naming
    /// `handle` (0x0000 when no handle is at fault).
    public func respondError(_ requestOpcode: ATTOpcode, _ handle: ATTHandle, _ code: ATTErrorCode) {
        respond(.errorResponse(.init(requestOpcode: requestOpcode, attributeHandle: handle, errorCode: code)))
    }

    /// Answers with an Error Response for this request.
    public func respondError(_ code: ATTErrorCode, handle: ATTHandle = .invalid) {
        respondError(request.opcode, handle, code)
    }

    deinit {
        guard !hasResponded, let bearer else { return }
        bearer.logger.warning("\(request.opcode.name) was never answered: Unlikely Error")
        bearer.finishServing(id, request: request, response: .errorResponse(.init(
            requestOpcode: request.opcode, attributeHandle: .invalid, errorCode: .unlikelyError)))
    }
}
