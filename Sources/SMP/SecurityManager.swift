import HCI
import LECrypto
import Logging
import Scheduling
import StackLogging

/// One link's Security Manager (Vol 3 Part H), in either role: pairing (LE legacy and LE Secure
/// Connections, every association model), key distribution and the SMP timeout.
///
/// The host makes one per link, wires `receive` to the SMP fixed channel and `send` to it, and
/// tells it about encryption changes. Loop-confined.
///
/// `@unchecked Sendable`: every stored property is read and written on `loop` only (the public
/// entry points assert it in debug builds); agent replies and timers, which may come from other
/// threads or late, hop back to the loop and are matched against the pairing they belong to.
public final class SecurityManager: @unchecked Sendable {
    public let role: LERole
    public let localAddress: LEAddress
    public let peerAddress: LEAddress
    public let configuration: SMPConfiguration
    public let agent: PairingAgent
    public let loop: EventLoop
    public weak var delegate: SecurityManagerDelegate?
    /// `corebluetooth.smp`, tagged with the link by the host: the protocol's progress and
    /// outcome. Never a key (LTK, IRK, CSRK, DHKey), a confirm or random value, or a passkey:
    /// only facts such as the method and whether the peer bonded.
    public var logger: Logger {
        get { logSource.logger }
        set { logSource.logger = newValue }
    }
    /// Where `logger` comes from, made when first used: the standard one unless the owner sets
    /// its link's (``LazyLogger/init(_:link:)``).
    public var logSource = LazyLogger(standard: .smp)
    /// Whether this device holds out-of-band data from the peer: the OOB data flag of our
    /// Pairing Request/Response. When OOB is then chosen, the agent is asked `.outOfBandData`.
    /// Set before pairing.
    public var hasPeerOutOfBandData = false
    /// LE Secure Connections OOB: the data this device handed the peer out of band. A pairing in
    /// which the peer says it has our OOB data uses this key pair and random value, then clears
    /// it (single use). Set before pairing.
    public var localOutOfBandData: SMPLocalOOBData?

    private let sendSDU: ([UInt8]) -> Void
    private var session: PairingSession?
    private var link = LinkState.open
    private var timer: TimerHandle?
    /// Tags pairings and prompts, so that a stale agent reply is recognised and ignored.
    private var serial = 0
    /// Moves on with every timer restart and stop: only the last armed timer may fire.
    private var timerTag = 0

    private enum LinkState {
        case open
        /// The SMP timeout expired: no SMP on this link any more (Vol 3 Part H §3.4).
        case timedOut
        case closed
    }

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

    /// Whether a pairing is under way (including a Security Request we sent that the central
    /// has not answered yet).
    public var isPairing: Bool {
        loop.assertConfined("SecurityManager.isPairing")
        return session != nil
    }

    /// An SMP PDU from the peer.
    ///
    /// Keep HCI's order between this and `encryptionChanged`: the peer's distributed keys are
    /// taken only after the session heard that the link is encrypted, and refused (Pairing
    /// Failed, Unspecified Reason) before.
    public func receive(_ sdu: [UInt8]) {
        loop.assertConfined("SecurityManager.receive")
        guard link == .open else { return }
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU(decoding: sdu)
        } catch {
            switch error {
            case .unknownCommand: fail(.commandNotSupported)
            // Never answer a Pairing Failed, even a malformed one.
            case .invalidLength(.pairingFailed, _, _), .invalidValue(.pairingFailed, _, _):
                end(.failure(.remoteFailure(.unspecifiedReason)))
            default: fail(.invalidParameters)
            }
            return
        }
        switch pdu {
        case .pairingFailed(let reason):
            end(.failure(.remoteFailure(reason)))
        case .pairingRequest(let features):
            guard role == .peripheral else { return fail(.commandNotSupported) }
            if let session, session.stage != .securityRequested { return fail(.unspecifiedReason) }
            respond(to: features, pdu: sdu)
        case .securityRequest(let requirements):
            guard role == .central else { return fail(.commandNotSupported) }
            // A pairing under way already answers it.
            guard session == nil else { return }
            logger.debug("security request received")
            guard delegate?.securityManagerShouldAllowPairing(self) ?? true else {
                return sendPDU(.pairingFailed(.repeatedAttempts))
            }
            delegate?.securityManager(self, didReceiveSecurityRequest: requirements)
        case .pairingResponse where role == .peripheral:
            // Only a responder sends it, as only a central sends a Pairing Request.
            fail(.commandNotSupported)
        case .keypressNotification:
            guard let session, session.stage == .authenticating, case .passkey = session.model else {
                return fail(.unspecifiedReason)
            }
            restartTimer()
        default:
            // Keys are taken only once the link is reported encrypted: a key PDU before that
            // may have come over the air in the clear (the host hands us Encryption Change
            // before the SMP data received after it, in HCI's order).
            guard let session, session.expecting == pdu.code else { return fail(.unspecifiedReason) }
            session.expecting = nil
            restartTimer()
            handle(pdu, session)
        }
    }

    /// Starts pairing: as central a Pairing Request, as peripheral a Security Request.
    ///
    /// The delegate hears `didFinishPairing` once for the pairing, except in one case: a
    /// peripheral whose Security Request the central answers by encrypting the link with a
    /// bond's key (reported through `encryptionChanged`) stops waiting without a callback, as
    /// no pairing took place. After the SMP timeout or link loss this fails at once.
    public func pair() {
        loop.assertConfined("SecurityManager.pair")
        switch link {
        case .timedOut: return delegate?.securityManager(self, didFinishPairing: .failure(.timeout)) ?? ()
        case .closed: return delegate?.securityManager(self, didFinishPairing: .failure(.disconnected)) ?? ()
        case .open: break
        }
        guard session == nil else { return }
        let session = startSession()
        if role == .central {
            logger.info("pairing started (we ask, as central)")
            let request = localFeatures(answering: nil)
            session.request = request
            session.preq = SMPPDU.pairingRequest(request).encode()
            session.stage = .featureExchange
            session.expecting = .pairingResponse
            send(session.preq)
        } else {
            logger.info("asking the central to pair (Security Request)")
            session.stage = .securityRequested
            session.expecting = .pairingRequest
            sendPDU(.securityRequest(localAuthRequirements))
        }
    }

    /// The link's encryption changed (Encryption Change or Key Refresh Complete).
    public func encryptionChanged(status: HCIStatus, enabled: Bool) {
        loop.assertConfined("SecurityManager.encryptionChanged")
        guard link == .open, let session else { return }
        if session.stage == .securityRequested && status.isSuccess && enabled {
            // The central answered our Security Request with a bond's key: no pairing.
            logger.debug("encrypted with an existing key, no pairing")
            self.session = nil
            stopTimer()
            return
        }
        guard session.stage == .encrypting else { return }
        guard status.isSuccess else {
            logger.warning("encryption failed")
            return end(.failure(.encryptionFailed(status)))
        }
        guard enabled else { return }
        distributeKeys(session)
    }

    /// Peripheral: the controller asks for the key of a link being encrypted during pairing
    /// (the STK of legacy pairing, the LTK of Secure Connections, with EDIV and Rand zero), as
    /// HCI carries it. Nil when this session has no key for that request.
    public func longTermKeyRequest(rand: UInt64, ediv: UInt16) -> [UInt8]? {
        loop.assertConfined("SecurityManager.longTermKeyRequest")
        guard role == .peripheral, rand == 0, ediv == 0, let session,
              session.stage == .encrypting || session.stage == .distributing
        else { return nil }
        return session.linkKey?.key
    }

    /// The link went down: a pairing under way ends with `.disconnected`; timers stop.
    public func linkClosed() {
        loop.assertConfined("SecurityManager.linkClosed")
        guard link != .closed else { return }
        link = .closed
        stopTimer()
        end(.failure(.disconnected))
    }

    // MARK: - Sessions, failures, timer

    private func startSession() -> PairingSession {
        serial += 1
        let session = PairingSession(id: serial, isInitiator: role == .central)
        self.session = session
        restartTimer()
        return session
    }

    /// Sends Pairing Failed and ends the pairing under way, if any.
    private func fail(_ reason: SMPPairingFailedReason) {
        sendPDU(.pairingFailed(reason))
        end(.failure(.localFailure(reason)))
    }

    /// Ends the pairing under way (no-op without one): the session and its secrets are dropped
    /// before the delegate hears of it, so that it may start another pairing.
    private func end(_ result: Result<PairingOutcome, SMPError>) {
        guard session != nil else { return }
        session = nil
        stopTimer()
        switch result {
        case .success(let outcome):
            logger.info("pairing succeeded, \(outcome.bonded ? "bonded" : "not bonded"), method \(outcome.method.rawValue)")
        case .failure(let error): logger.warning("pairing failed: \(error)")
        }
        delegate?.securityManager(self, didFinishPairing: result)
    }

    private func restartTimer() {
        timer?.cancel()
        timerTag += 1
        let tag = timerTag
        timer = loop.schedule(after: configuration.timeout) { [weak self] in self?.timerFired(tag) }
    }

    private func stopTimer() {
        timer?.cancel()
        timer = nil
        timerTag += 1
    }

    private func timerFired(_ tag: Int) {
        guard tag == timerTag, link == .open, session != nil else { return }
        link = .timedOut
        timer = nil
        end(.failure(.timeout))
    }

    private func sendPDU(_ pdu: SMPPDU) { send(pdu.encode()) }

    private func send(_ sdu: [UInt8]) {
        guard link == .open else { return }
        if session != nil { restartTimer() }
        sendSDU(sdu)
    }

    // MARK: - Feature exchange

    private var localAuthRequirements: SMPAuthRequirements {
        var auth: SMPAuthRequirements = configuration.supportsSecureConnections ? [.secureConnections] : []
        if configuration.bondable { auth.insert(.bonding) }
        // Ask for MITM protection whenever the agent can take part in it.
        if configuration.requireMITM || agent.ioCapability != .noInputNoOutput { auth.insert(.mitm) }
        return auth
    }

    /// Our Pairing Request (`request` nil) or our Pairing Response to `request`.
    private func localFeatures(answering request: SMPPairingFeatures?) -> SMPPairingFeatures {
        // Keys only with bonding: without it nobody stores them.
        var offer: SMPKeyDistribution = []
        var accept: SMPKeyDistribution = []
        if configuration.bondable {
            offer.insert(.encryptionKey)
            if configuration.localIdentity != nil { offer.insert(.identityKey) }
            if configuration.distributeSigningKey { offer.insert(.signingKey) }
            accept = [.encryptionKey, .identityKey, .signingKey]
        }
        let maximumKeySize = UInt8(min(max(configuration.maximumKeySize, 7), 16))
        var features = SMPPairingFeatures(
            ioCapability: agent.ioCapability, oobDataPresent: hasPeerOutOfBandData,
            authRequirements: localAuthRequirements, maximumKeySize: maximumKeySize,
            initiatorKeys: offer, responderKeys: accept)
        if let request {
            features.initiatorKeys = request.initiatorKeys.intersection(accept)
            features.responderKeys = request.responderKeys.intersection(offer)
            if request.authRequirements.contains(.secureConnections)
                && features.authRequirements.contains(.secureConnections) {
                // LE Secure Connections derives the LTK; EncKey means nothing there.
                features.initiatorKeys.remove(.encryptionKey)
                features.responderKeys.remove(.encryptionKey)
            }
        }
        return features
    }

    /// Peripheral: a Pairing Request arrived (unprompted or after our Security Request).
    private func respond(to request: SMPPairingFeatures, pdu: [UInt8]) {
        guard delegate?.securityManagerShouldAllowPairing(self) ?? true else {
            logger.warning("pairing refused (repeated attempts)")
            return fail(.repeatedAttempts)
        }
        let session = self.session ?? startSession()
        restartTimer()
        logger.info("pairing started (the central asks)")
        guard (7...16).contains(request.maximumKeySize) else { return fail(.invalidParameters) }
        let response = localFeatures(answering: request)
        session.request = request
        session.response = response
        session.preq = pdu
        session.pres = SMPPDU.pairingResponse(response).encode()
        if let reason = negotiate(session) { return fail(reason) }
        session.stage = .authenticating
        session.expecting = session.secureConnections ? .pairingPublicKey : .pairingConfirm
        send(session.pres)
        if !session.secureConnections { askForUserInput(session) }
    }

    /// Central: the Pairing Response to our request.
    private func handleResponse(_ response: SMPPairingFeatures, pdu: [UInt8], _ session: PairingSession) {
        guard (7...16).contains(response.maximumKeySize) else { return fail(.invalidParameters) }
        session.response = response
        session.pres = pdu
        if let reason = negotiate(session) { return fail(reason) }
        session.stage = .authenticating
        if session.secureConnections {
            session.expecting = .pairingPublicKey
            sendPublicKey(session)
        } else {
            askForUserInput(session)
        }
    }

    /// Picks LE Secure Connections or legacy, the association model, the key size and the keys
    /// to distribute from both feature sets. Returns the reason to fail with, if any.
    private func negotiate(_ session: PairingSession) -> SMPPairingFailedReason? {
        guard let request = session.request, let response = session.response else { return .unspecifiedReason }
        let sc = request.authRequirements.contains(.secureConnections)
            && response.authRequirements.contains(.secureConnections)
        if !sc && configuration.secureConnectionsOnly { return .authenticationRequirements }
        let model = AssociationModel(request: request, response: response, secureConnections: sc)
        if configuration.requireMITM && model == .justWorks { return .authenticationRequirements }
        let keySize = min(Int(request.maximumKeySize), Int(response.maximumKeySize))
        if keySize < max(configuration.minimumKeySize, 7) { return .encryptionKeySize }

        session.secureConnections = sc
        session.model = model
        session.method = model.method(for: role)
        session.keySize = keySize
        session.bonded = request.authRequirements.contains(.bonding) && response.authRequirements.contains(.bonding)
        var supported: SMPKeyDistribution = [.encryptionKey, .identityKey, .signingKey]
        if sc { supported.remove(.encryptionKey) }
        let initiatorKeys = request.initiatorKeys.intersection(response.initiatorKeys).intersection(supported)
        let responderKeys = request.responderKeys.intersection(response.responderKeys).intersection(supported)
        session.localKeys = role == .central ? initiatorKeys : responderKeys
        session.peerKeys = role == .central ? responderKeys : initiatorKeys
        logger.info("\(sc ? "LE Secure Connections" : "LE legacy pairing"), method \(session.method.rawValue)")
        return nil
    }

    // MARK: - PDUs in order

    private func handle(_ pdu: SMPPDU, _ session: PairingSession) {
        switch pdu {
        case .pairingResponse(let features):
            handleResponse(features, pdu: pdu.encode(), session)
        case .pairingPublicKey(let key):
            handlePublicKey(key, session)
        case .pairingConfirm(let value):
            session.peerConfirm = Array(value.reversed())
            if session.secureConnections { scConfirmReceived(session) } else { legacyConfirmReceived(session) }
        case .pairingRandom(let value):
            session.peerRandom = Array(value.reversed())
            if session.secureConnections { scRandomReceived(session) } else { legacyRandomReceived(session) }
        case .pairingDHKeyCheck(let value):
            session.peerCheck = Array(value.reversed())
            if role == .central { verifyResponderCheck(session) } else { proceed(session) }
        case .encryptionInformation, .centralIdentification, .identityInformation, .identityAddressInformation,
            .signingInformation:
            keyReceived(pdu, session)
        case .pairingRequest, .pairingFailed, .securityRequest, .keypressNotification:
            // Handled in `receive` before a session's expectations are consulted.
            fail(.unspecifiedReason)
        }
    }

    // MARK: - The agent

    private func ask(_ prompt: PairingPrompt, _ session: PairingSession) {
        serial += 1
        let tag = serial, pairing = session.id
        session.prompt = (tag, prompt)
        agent.prompt(prompt, peer: peerAddress) { [weak self] reply in
            // Any thread, any time: back to the loop, where the tag tells a stale reply.
            guard let self else { return }
            self.loop.execute { [weak self] in self?.agentReplied(reply, pairing: pairing, tag: tag) }
        }
    }

    private func agentReplied(_ reply: PairingReply, pairing: Int, tag: Int) {
        guard let session, session.id == pairing, let pending = session.prompt, pending.tag == tag else { return }
        session.prompt = nil
        let prompt = pending.prompt
        switch (prompt, reply) {
        case (.confirmPairing, .accept), (.confirmNumber, .accept), (.displayPasskey, .accept):
            session.agentDone = true
        case (.enterPasskey, .passkey(let passkey)) where passkey <= 999_999:
            session.passkey = passkey
            session.agentDone = true
        case (.outOfBandData, .outOfBand(let data)):
            guard takeOutOfBandData(data, session) else { return fail(.oobNotAvailable) }
            session.agentDone = true
        default:
            logger.info("the pairing agent declined")
            switch prompt {
            case .confirmPairing: return fail(.unspecifiedReason)
            case .confirmNumber: return fail(.numericComparisonFailed)
            case .displayPasskey, .enterPasskey: return fail(.passkeyEntryFailed)
            case .outOfBandData: return fail(.oobNotAvailable)
            }
        }
        proceed(session)
    }

    private func takeOutOfBandData(_ data: PairingOOBData, _ session: PairingSession) -> Bool {
        if session.secureConnections {
            guard let confirm = data.peerConfirm, let random = data.peerRandom, confirm.count == 16, random.count == 16
            else { return false }
            session.peerOOBConfirm = Array(confirm.reversed())
            session.peerOOBRandom = Array(random.reversed())
        } else {
            guard let tk = data.legacyTemporaryKey, tk.count == 16 else { return false }
            session.temporaryKey = Array(tk.reversed())
        }
        return true
    }

    /// Asks for what the association model needs from this side's user: a Just Works or
    /// numeric comparison confirmation, a passkey to show or to type, or OOB data.
    private func askForUserInput(_ session: PairingSession) {
        switch session.method {
        case .justWorks: ask(.confirmPairing(method: .justWorks), session)
        case .numericComparison:
            guard let initiatorKey = session.initiatorKey, let responderKey = session.responderKey else {
                return fail(.unspecifiedReason)
            }
            // Va = Vb = g2(PKax, PKbx, Na, Nb) mod 10^6.
            let value = LECrypto.g2(u: initiatorKey.x, v: responderKey.x, x: session.initiatorNonce,
                                    y: session.responderNonce)
            ask(.confirmNumber(value % 1_000_000), session)
        case .passkeyDisplay:
            let passkey = UInt32.random(in: 0...999_999)
            session.passkey = passkey
            ask(.displayPasskey(passkey), session)
        case .passkeyInput: ask(.enterPasskey, session)
        case .outOfBand:
            if hasPeerOutOfBandData {
                ask(.outOfBandData, session)
            } else {
                // Only the peer holds OOB data (ours): nothing to ask here.
                session.agentDone = true
                proceed(session)
            }
        }
    }

    /// Does what has become possible after the agent answered or a PDU was put aside while
    /// waiting for it.
    private func proceed(_ session: PairingSession) {
        guard self.session === session, session.agentDone, session.stage == .authenticating else { return }
        if !session.secureConnections { return legacyProceed(session) }
        switch (role, session.model) {
        case (.central, .passkey):
            if !session.localConfirmSent { sendPasskeyRoundConfirm(session) }
        case (.peripheral, .passkey):
            if !session.localConfirmSent, session.peerConfirm != nil { sendPasskeyRoundConfirm(session) }
            if session.stage1Done, session.peerCheck != nil { verifyInitiatorCheck(session) }
        case (.central, .outOfBand):
            if session.localNonce.isEmpty { sendOutOfBandNonce(session) }
        case (.peripheral, .outOfBand):
            if !session.stage1Done, session.peerRandom != nil { sendOutOfBandNonce(session) }
            if session.stage1Done, session.peerCheck != nil { verifyInitiatorCheck(session) }
        case (.central, _):
            if session.stage1Done, !session.localCheckSent { sendInitiatorCheck(session) }
        case (.peripheral, _):
            if session.stage1Done, session.peerCheck != nil { verifyInitiatorCheck(session) }
        }
    }

    // MARK: - LE legacy pairing

    private func legacyProceed(_ session: PairingSession) {
        if session.temporaryKey == nil {
            switch session.model {
            case .passkey: session.temporaryKey = passkeyBlock(session.passkey ?? 0)
            case .outOfBand: return  // set from the agent's reply
            default: session.temporaryKey = [UInt8](repeating: 0, count: 16)
            }
        }
        guard !session.localConfirmSent else { return }
        // The initiator confirms first; the responder once the initiator's confirm is in.
        if role == .peripheral && session.peerConfirm == nil { return }
        sendLegacyConfirm(session)
    }

    private func sendLegacyConfirm(_ session: PairingSession) {
        guard let tk = session.temporaryKey else { return }
        session.localNonce = randomBytes(16)
        session.localConfirmSent = true
        session.expecting = role == .central ? .pairingConfirm : .pairingRandom
        sendPDU(.pairingConfirm(reversed(legacyConfirm(tk: tk, random: session.localNonce, session))))
    }

    private func legacyConfirmReceived(_ session: PairingSession) {
        if role == .central {
            session.expecting = .pairingRandom
            sendPDU(.pairingRandom(reversed(session.localNonce)))
        } else {
            proceed(session)
        }
    }

    private func legacyRandomReceived(_ session: PairingSession) {
        guard let tk = session.temporaryKey, let peerConfirm = session.peerConfirm, let peerRandom = session.peerRandom
        else { return fail(.unspecifiedReason) }
        guard constantTimeEqual(legacyConfirm(tk: tk, random: peerRandom, session), peerConfirm) else {
            return fail(.confirmValueFailed)
        }
        // STK = s1(TK, Srand, Mrand).
        let stk = LECrypto.s1(k: tk, r1: session.responderNonce, r2: session.initiatorNonce)
        session.linkKey = SMPLongTermKey(key: reversed(masked(stk, to: session.keySize)), ediv: 0, rand: 0,
                                         keySize: session.keySize, authenticated: session.method.isAuthenticated,
                                         secureConnections: false)
        session.stage = .encrypting
        if role == .central {
            startEncryption(session)
        } else {
            sendPDU(.pairingRandom(reversed(session.localNonce)))
        }
    }

    private func legacyConfirm(tk: [UInt8], random: [UInt8], _ session: PairingSession) -> [UInt8] {
        let (initiator, responder) = role == .central ? (localAddress, peerAddress) : (peerAddress, localAddress)
        return LECrypto.c1(k: tk, r: random, preq: reversed(session.preq), pres: reversed(session.pres),
                           iat: initiator.isRandom ? 1 : 0, ia: reversed(initiator.address.wire),
                           rat: responder.isRandom ? 1 : 0, ra: reversed(responder.address.wire))
    }

    // MARK: - LE Secure Connections

    private func sendPublicKey(_ session: PairingSession) {
        guard let keyPair = session.keyPair ?? chooseKeyPair(session) else { return }
        sendPDU(.pairingPublicKey(keyPair.publicKey.smpEncoding))
    }

    /// A fresh key pair for every pairing, except the one whose public key the peer already
    /// holds from our OOB data. Nil after failing the pairing.
    private func chooseKeyPair(_ session: PairingSession) -> LECrypto.P256KeyPair? {
        var keyPair = LECrypto.P256KeyPair()
        session.localOOBRandom = [UInt8](repeating: 0, count: 16)
        if session.model == .outOfBand && peerHasOurOutOfBandData(session) {
            guard let oob = localOutOfBandData else {
                fail(.oobNotAvailable)
                return nil
            }
            localOutOfBandData = nil
            keyPair = oob.keyPair
            session.localOOBRandom = reversed(oob.random)
        }
        session.keyPair = keyPair
        return keyPair
    }

    private func peerHasOurOutOfBandData(_ session: PairingSession) -> Bool {
        (role == .central ? session.response : session.request)?.oobDataPresent ?? false
    }

    private func handlePublicKey(_ encoding: [UInt8], _ session: PairingSession) {
        // Validate before anything of ours depends on the key (invalid curve attacks).
        guard let peerKey = try? LECrypto.P256PublicKey(smpEncoding: encoding) else {
            logger.warning("the peer's public key is not on the curve")
            return fail(.dhKeyCheckFailed)
        }
        guard let keyPair = session.keyPair ?? chooseKeyPair(session) else { return }
        if peerKey == keyPair.publicKey {
            logger.warning("the peer reflected our own public key")
            return fail(.invalidParameters)
        }
        if peerKey.isDebugKey && !configuration.allowDebugKeys {
            logger.warning("the peer's debug public key refused")
            return fail(.keyRejected)
        }
        session.peerKey = peerKey
        session.dhKey = keyPair.dhKey(with: peerKey)
        if role == .peripheral { sendPublicKey(session) }
        switch session.model {
        case .justWorks, .numericComparison:
            if role == .central {
                session.expecting = .pairingConfirm
            } else {
                // Cb = f4(PKbx, PKax, Nb, 0).
                session.localNonce = randomBytes(16)
                session.localConfirmSent = true
                session.expecting = .pairingRandom
                let cb = LECrypto.f4(u: keyPair.publicKey.x, v: peerKey.x, x: session.localNonce, z: 0)
                sendPDU(.pairingConfirm(reversed(cb)))
            }
        case .passkey:
            session.expecting = role == .central ? nil : .pairingConfirm
            askForUserInput(session)
        case .outOfBand:
            session.expecting = role == .central ? nil : .pairingRandom
            askForUserInput(session)
        }
    }

    /// This round's passkey bit, as f4's Z: 0x80 | bit `round` of the passkey.
    private func passkeyBit(_ session: PairingSession) -> UInt8 {
        0x80 | UInt8(truncatingIfNeeded: ((session.passkey ?? 0) >> UInt32(session.round)) & 1)
    }

    /// Passkey entry, one of the 20 rounds: Ca_i = f4(PKax, PKbx, Na_i, rai) or
    /// Cb_i = f4(PKbx, PKax, Nb_i, rbi).
    private func sendPasskeyRoundConfirm(_ session: PairingSession) {
        guard let keyPair = session.keyPair, let peerKey = session.peerKey else { return fail(.unspecifiedReason) }
        session.localNonce = randomBytes(16)
        session.localConfirmSent = true
        session.expecting = role == .central ? .pairingConfirm : .pairingRandom
        let confirm = LECrypto.f4(u: keyPair.publicKey.x, v: peerKey.x, x: session.localNonce, z: passkeyBit(session))
        sendPDU(.pairingConfirm(reversed(confirm)))
    }

    private func scConfirmReceived(_ session: PairingSession) {
        switch (role, session.model) {
        case (.central, .justWorks), (.central, .numericComparison):
            session.localNonce = randomBytes(16)
            session.expecting = .pairingRandom
            sendPDU(.pairingRandom(reversed(session.localNonce)))
        case (.central, .passkey):
            session.expecting = .pairingRandom
            sendPDU(.pairingRandom(reversed(session.localNonce)))
        case (.peripheral, .passkey):
            proceed(session)
        default:
            // No Pairing Confirm is exchanged in the others (`expecting` never names it).
            fail(.unspecifiedReason)
        }
    }

    private func scRandomReceived(_ session: PairingSession) {
        guard let keyPair = session.keyPair, let peerKey = session.peerKey, let peerRandom = session.peerRandom else {
            return fail(.unspecifiedReason)
        }
        switch (role, session.model) {
        case (.central, .justWorks), (.central, .numericComparison):
            // Cb = f4(PKbx, PKax, Nb, 0).
            guard let cb = session.peerConfirm,
                  constantTimeEqual(LECrypto.f4(u: peerKey.x, v: keyPair.publicKey.x, x: peerRandom, z: 0), cb)
            else { return fail(.confirmValueFailed) }
            session.stage1Done = true
            askForUserInput(session)
        case (.peripheral, .justWorks), (.peripheral, .numericComparison):
            session.stage1Done = true
            session.expecting = .pairingDHKeyCheck
            sendPDU(.pairingRandom(reversed(session.localNonce)))
            askForUserInput(session)
        case (_, .passkey):
            guard let peerConfirm = session.peerConfirm,
                  constantTimeEqual(LECrypto.f4(u: peerKey.x, v: keyPair.publicKey.x, x: peerRandom,
                                                z: passkeyBit(session)), peerConfirm)
            else { return fail(.confirmValueFailed) }
            if role == .peripheral { sendPDU(.pairingRandom(reversed(session.localNonce))) }
            // Exactly 20 rounds, one per passkey bit.
            if session.round < 19 {
                session.round += 1
                session.localConfirmSent = false
                session.peerConfirm = nil
                if role == .central {
                    sendPasskeyRoundConfirm(session)
                } else {
                    session.expecting = .pairingConfirm
                }
            } else {
                session.stage1Done = true
                if role == .central {
                    sendInitiatorCheck(session)
                } else {
                    session.expecting = .pairingDHKeyCheck
                }
            }
        case (.central, .outOfBand):
            session.stage1Done = true
            sendInitiatorCheck(session)
        case (.peripheral, .outOfBand):
            proceed(session)
        }
    }

    /// OOB: checks the peer's OOB confirm against its public key (when we hold its OOB data),
    /// then sends our nonce (Na first, Nb in answer).
    private func sendOutOfBandNonce(_ session: PairingSession) {
        guard let peerKey = session.peerKey else { return fail(.unspecifiedReason) }
        if hasPeerOutOfBandData {
            guard let confirm = session.peerOOBConfirm, let random = session.peerOOBRandom,
                  constantTimeEqual(LECrypto.f4(u: peerKey.x, v: peerKey.x, x: random, z: 0), confirm)
            else { return fail(.confirmValueFailed) }
        }
        session.localNonce = randomBytes(16)
        if role == .central {
            session.expecting = .pairingRandom
        } else {
            session.stage1Done = true
            session.expecting = .pairingDHKeyCheck
        }
        sendPDU(.pairingRandom(reversed(session.localNonce)))
    }

    /// The r inputs of f6: zero (Just Works, numeric comparison), the passkey, or each
    /// side's OOB random value (zero where the other side did not receive it).
    private func checkRandoms(_ session: PairingSession) -> (ra: [UInt8], rb: [UInt8]) {
        let zero = [UInt8](repeating: 0, count: 16)
        switch session.model {
        case .passkey:
            let block = passkeyBlock(session.passkey ?? 0)
            return (block, block)
        case .outOfBand:
            let local = peerHasOurOutOfBandData(session) ? session.localOOBRandom : zero
            let peer = hasPeerOutOfBandData ? (session.peerOOBRandom ?? zero) : zero
            return role == .central ? (local, peer) : (peer, local)
        case .justWorks, .numericComparison:
            return (zero, zero)
        }
    }

    /// f5's MacKey and LTK, and the two DHKey checks:
    /// Ea = f6(MacKey, Na, Nb, rb, IOcapA, A, B), Eb = f6(MacKey, Nb, Na, ra, IOcapB, B, A).
    private func dhKeyChecks(_ session: PairingSession) -> (ea: [UInt8], eb: [UInt8]) {
        let a = addressField(role == .central ? localAddress : peerAddress)
        let b = addressField(role == .central ? peerAddress : localAddress)
        let keys = LECrypto.f5(w: session.dhKey, n1: session.initiatorNonce, n2: session.responderNonce, a1: a, a2: b)
        session.scLTK = keys.ltk
        let (ra, rb) = checkRandoms(session)
        // IOcap: AuthReq, OOB data flag, IO capability, as the Pairing Request/Response sent them.
        let ioCapA = [session.preq[3], session.preq[2], session.preq[1]]
        let ioCapB = [session.pres[3], session.pres[2], session.pres[1]]
        let ea = LECrypto.f6(w: keys.macKey, n1: session.initiatorNonce, n2: session.responderNonce, r: rb,
                             ioCap: ioCapA, a1: a, a2: b)
        let eb = LECrypto.f6(w: keys.macKey, n1: session.responderNonce, n2: session.initiatorNonce, r: ra,
                             ioCap: ioCapB, a1: b, a2: a)
        return (ea, eb)
    }

    private func sendInitiatorCheck(_ session: PairingSession) {
        let (ea, _) = dhKeyChecks(session)
        session.localCheckSent = true
        session.expecting = .pairingDHKeyCheck
        sendPDU(.pairingDHKeyCheck(reversed(ea)))
    }

    private func verifyInitiatorCheck(_ session: PairingSession) {
        guard let peerCheck = session.peerCheck else { return }
        let (ea, eb) = dhKeyChecks(session)
        guard constantTimeEqual(ea, peerCheck) else { return fail(.dhKeyCheckFailed) }
        setSecureConnectionsKey(session)
        session.stage = .encrypting
        sendPDU(.pairingDHKeyCheck(reversed(eb)))
    }

    private func verifyResponderCheck(_ session: PairingSession) {
        guard let peerCheck = session.peerCheck else { return fail(.unspecifiedReason) }
        let (_, eb) = dhKeyChecks(session)
        guard constantTimeEqual(eb, peerCheck) else { return fail(.dhKeyCheckFailed) }
        setSecureConnectionsKey(session)
        session.stage = .encrypting
        startEncryption(session)
    }

    private func setSecureConnectionsKey(_ session: PairingSession) {
        session.linkKey = SMPLongTermKey(key: reversed(masked(session.scLTK, to: session.keySize)), ediv: 0, rand: 0,
                                         keySize: session.keySize, authenticated: session.method.isAuthenticated,
                                         secureConnections: true)
    }

    // MARK: - Encryption and key distribution

    private func startEncryption(_ session: PairingSession) {
        guard let key = session.linkKey else { return fail(.unspecifiedReason) }
        logger.debug("encrypting the link")
        delegate?.securityManager(self, startEncryptionWith: key)
    }

    private func distributeKeys(_ session: PairingSession) {
        guard let linkKey = session.linkKey else { return fail(.unspecifiedReason) }
        logger.debug("link encrypted, distributing keys")
        session.stage = .distributing
        var outcome = PairingOutcome(method: session.method, linkKeySecurity: linkKey.securityLevel,
                                     keySize: session.keySize, bonded: session.bonded)
        if session.secureConnections {
            outcome.centralLTK = linkKey
            outcome.peripheralLTK = linkKey
        }
        session.outcome = outcome
        var expected: [SMPCommandCode] = []
        if session.peerKeys.contains(.encryptionKey) { expected += [.encryptionInformation, .centralIdentification] }
        if session.peerKeys.contains(.identityKey) { expected += [.identityInformation, .identityAddressInformation] }
        if session.peerKeys.contains(.signingKey) { expected += [.signingInformation] }
        session.pendingKeys = expected
        // The responder's keys go first, then the initiator's.
        if role == .peripheral { sendLocalKeys(session) }
        guard self.session === session else { return }
        keysProgressed(session)
    }

    private func keysProgressed(_ session: PairingSession) {
        if let next = session.pendingKeys.first {
            session.expecting = next
            return
        }
        if role == .central { sendLocalKeys(session) }
        guard let outcome = session.outcome else { return fail(.unspecifiedReason) }
        end(.success(outcome))
    }

    private func keyReceived(_ pdu: SMPPDU, _ session: PairingSession) {
        guard session.stage == .distributing, !session.pendingKeys.isEmpty else { return fail(.unspecifiedReason) }
        session.pendingKeys.removeFirst()
        let authenticated = session.method.isAuthenticated
        switch pdu {
        case .encryptionInformation(let ltk):
            session.peerLTK = ltk
        case .centralIdentification(let ediv, let rand):
            // The peer's LTK, for when we are the central of a later link.
            session.outcome?.centralLTK = SMPLongTermKey(
                key: session.peerLTK, ediv: ediv, rand: rand, keySize: session.keySize, authenticated: authenticated,
                secureConnections: false)
        case .identityInformation(let irk):
            session.outcome?.peerIRK = irk
        case .identityAddressInformation(let address):
            // An identity address is public or static random, never a private one.
            guard !address.isRandom || address.address.randomSubtype == .staticAddress else {
                return fail(.keyRejected)
            }
            session.outcome?.peerIdentityAddress = address
        case .signingInformation(let csrk):
            session.outcome?.peerCSRK = csrk
        default:
            return fail(.unspecifiedReason)
        }
        keysProgressed(session)
    }

    private func sendLocalKeys(_ session: PairingSession) {
        let keys = session.localKeys
        if keys.contains(.encryptionKey) && !session.secureConnections {
            // A random LTK cut to the key size, and EDIV/Rand to find it again; Rand 0 with
            // EDIV 0 would read as the pairing's own key.
            let ltk = reversed(masked(randomBytes(16), to: session.keySize))
            let ediv = UInt16.random(in: .min ... .max)
            let rand = UInt64.random(in: 1 ... .max)
            session.outcome?.peripheralLTK = SMPLongTermKey(
                key: ltk, ediv: ediv, rand: rand, keySize: session.keySize,
                authenticated: session.method.isAuthenticated, secureConnections: false)
            sendPDU(.encryptionInformation(longTermKey: ltk))
            sendPDU(.centralIdentification(ediv: ediv, rand: rand))
        }
        if keys.contains(.identityKey), let identity = configuration.localIdentity {
            sendPDU(.identityInformation(identityResolvingKey: identity.irk))
            sendPDU(.identityAddressInformation(identity.address))
        }
        if keys.contains(.signingKey) {
            let csrk = randomBytes(16)
            session.outcome?.localCSRK = csrk
            sendPDU(.signingInformation(signatureKey: csrk))
        }
    }

    // MARK: - Helpers

    private func addressField(_ address: LEAddress) -> [UInt8] {
        LECrypto.addressField(type: address.isRandom ? 1 : 0, address: address.address.value)
    }
}

// MARK: - Association models

/// Vol 3 Part H §2.3.5.1: OOB first, then Just Works unless someone asked for MITM, then the
/// IO capability table (Table 2.8).
enum AssociationModel: Equatable {
    case justWorks
    case numericComparison
    /// Passkey entry: which side shows the passkey (neither: both users type the same one).
    case passkey(initiatorDisplays: Bool, responderDisplays: Bool)
    case outOfBand

    init(request: SMPPairingFeatures, response: SMPPairingFeatures, secureConnections sc: Bool) {
        let oob = sc
            ? request.oobDataPresent || response.oobDataPresent
            : request.oobDataPresent && response.oobDataPresent
        if oob {
            self = .outOfBand
        } else if !request.authRequirements.contains(.mitm) && !response.authRequirements.contains(.mitm) {
            self = .justWorks
        } else {
            self = Self.table(initiator: request.ioCapability, responder: response.ioCapability, sc: sc)
        }
    }

    private static func table(initiator: SMPIOCapability, responder: SMPIOCapability, sc: Bool) -> Self {
        let initiatorDisplays = Self.passkey(initiatorDisplays: true, responderDisplays: false)
        let responderDisplays = Self.passkey(initiatorDisplays: false, responderDisplays: true)
        switch (initiator, responder) {
        case (.noInputNoOutput, _), (_, .noInputNoOutput), (.displayOnly, .displayOnly), (.displayOnly, .displayYesNo),
            (.displayYesNo, .displayOnly):
            return .justWorks
        case (.displayYesNo, .displayYesNo):
            return sc ? .numericComparison : .justWorks
        case (.displayOnly, .keyboardOnly), (.displayOnly, .keyboardDisplay), (.displayYesNo, .keyboardOnly),
            (.keyboardDisplay, .keyboardOnly):
            return initiatorDisplays
        case (.displayYesNo, .keyboardDisplay), (.keyboardDisplay, .keyboardDisplay):
            return sc ? .numericComparison : initiatorDisplays
        case (.keyboardOnly, .displayOnly), (.keyboardOnly, .displayYesNo), (.keyboardOnly, .keyboardDisplay),
            (.keyboardDisplay, .displayOnly):
            return responderDisplays
        case (.keyboardDisplay, .displayYesNo):
            return sc ? .numericComparison : responderDisplays
        case (.keyboardOnly, .keyboardOnly):
            return .passkey(initiatorDisplays: false, responderDisplays: false)
        }
    }

    /// The method as this side sees it (which of the two passkey roles it has).
    func method(for role: LERole) -> PairingMethod {
        switch self {
        case .justWorks: .justWorks
        case .numericComparison: .numericComparison
        case .outOfBand: .outOfBand
        case .passkey(let initiatorDisplays, let responderDisplays):
            (role == .central ? initiatorDisplays : responderDisplays) ? .passkeyDisplay : .passkeyInput
        }
    }
}

// MARK: - One pairing's state

/// Everything one pairing holds, dropped (with its secrets) when it ends. Toolbox values
/// (nonces, confirms, keys) are kept most significant octet first; the PDUs reverse them.
/// Loop-confined, as its owner.
final class PairingSession {
    enum Stage {
        /// Peripheral: our Security Request is out, waiting for a Pairing Request.
        case securityRequested
        /// Central: our Pairing Request is out.
        case featureExchange
        /// Confirm/random (and public key, DHKey check) exchanges.
        case authenticating
        /// The STK or LTK is ready; waiting for the link to be encrypted with it.
        case encrypting
        case distributing
    }

    let id: Int
    /// The central initiates every LE pairing.
    let isInitiator: Bool
    var stage = Stage.featureExchange
    /// The one PDU code accepted next (nil: none, e.g. while the agent is asked).
    var expecting: SMPCommandCode?

    var request: SMPPairingFeatures?
    var response: SMPPairingFeatures?
    /// The Pairing Request and Response PDUs as sent, for c1 and f6.
    var preq: [UInt8] = []
    var pres: [UInt8] = []
    var secureConnections = false
    var model = AssociationModel.justWorks
    var method = PairingMethod.justWorks
    var keySize = 16
    var bonded = false
    var localKeys: SMPKeyDistribution = []
    var peerKeys: SMPKeyDistribution = []

    var prompt: (tag: Int, prompt: PairingPrompt)?
    /// The agent answered what this side's part of the method needs.
    var agentDone = false
    var passkey: UInt32?
    var temporaryKey: [UInt8]?
    var peerOOBConfirm: [UInt8]?
    var peerOOBRandom: [UInt8]?
    var localOOBRandom: [UInt8] = []

    /// Mrand/Srand, Na/Nb (this round's, in passkey entry).
    var localNonce: [UInt8] = []
    var localConfirmSent = false
    var peerConfirm: [UInt8]?
    var peerRandom: [UInt8]?

    var keyPair: LECrypto.P256KeyPair?
    var peerKey: LECrypto.P256PublicKey?
    var dhKey: [UInt8] = []
    /// Passkey entry: the round under way, 0…19.
    var round = 0
    var stage1Done = false
    var localCheckSent = false
    var peerCheck: [UInt8]?
    var scLTK: [UInt8] = []

    /// The STK or LTK the link is encrypted with, as HCI carries it.
    var linkKey: SMPLongTermKey?
    var pendingKeys: [SMPCommandCode] = []
    var peerLTK: [UInt8] = []
    var outcome: PairingOutcome?

    init(id: Int, isInitiator: Bool) {
        self.id = id
        self.isInitiator = isInitiator
    }
}

extension PairingSession {
    var initiatorNonce: [UInt8] { isInitiator ? localNonce : (peerRandom ?? []) }
    var responderNonce: [UInt8] { isInitiator ? (peerRandom ?? []) : localNonce }
    var initiatorKey: LECrypto.P256PublicKey? { isInitiator ? keyPair?.publicKey : peerKey }
    var responderKey: LECrypto.P256PublicKey? { isInitiator ? peerKey : keyPair?.publicKey }
}
