import HCI
import LECrypto
import Scheduling

/// Link-layer control procedures (Core spec Vol 6 Part B §5.1) and the HCI commands that start them.
extension VirtualController {
    /// Reasons the Disconnect command accepts (Vol 4 Part E §7.1.6).
    static let validDisconnectReasons: Set<UInt8> = [0x05, 0x13, 0x14, 0x15, 0x1A, 0x29, 0x3B]

    /// When a procedure with an instant takes effect: at once in instant mode, after six
    /// connection events in timed mode.
    func atInstant(_ connection: Connection, _ work: @escaping @Sendable () -> Void) {
        if radio.airTime == .instant { work() } else { loop.schedule(after: connection.intervalDuration * 6, work) }
    }

    func handleControl(_ pdu: LLControlPDU, on connection: Connection) {
        switch pdu {
        case .terminateInd(let code):
            teardown(connection, reason: HCIStatus(code))

        case .connectionUpdateInd(_, _, let interval, let latency, let timeout, _):
            // Only the central sends it, and only with parameters in range (Vol 6 Part B
            // §5.1.1): anything else is ignored rather than applied (an interval of 0 would
            // stall the connection event timer).
            guard connection.role == .peripheral,
                  validConnectionParameters(intervalMin: interval, intervalMax: interval, latency: latency, timeout: timeout) else { return }
            atInstant(connection) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
                let `self` = weakSelf.object
                let connection = weakConnection.object
                guard let self, let connection else { return }
                self.applyConnectionUpdate(connection, interval: interval, latency: latency, timeout: timeout, status: .success)
            }

        case .connectionParamReq(let p):
            guard connection.role == .central else { return queueControl(connection, .unknownRsp(unknownType: pdu.opcode)) }
            if isLEEventEnabled(LERemoteConnectionParameterRequest.subeventCode) {
                connection.remoteParameterRequest = p
                sendLEEvent(LERemoteConnectionParameterRequest(
                    connectionHandle: connection.handle, intervalMin: p.intervalMin, intervalMax: p.intervalMax,
                    maxLatency: p.latency, timeout: p.timeout))
            } else {
                centralUpdate(connection, interval: p.intervalMin, latency: p.latency, timeout: p.timeout)
            }
        case .connectionParamRsp:
            break

        case .rejectExtInd(let opcode, let code):
            handleReject(opcode: opcode, code: HCIStatus(code), on: connection)
        case .rejectInd(let code):
            // Without the opcode, it answers whatever procedure is pending.
            if connection.encryptionInProgress { handleReject(opcode: 0x03, code: HCIStatus(code), on: connection) }
            else if connection.localParameterRequestPending { handleReject(opcode: 0x0F, code: HCIStatus(code), on: connection) }
        case .unknownRsp(let type):
            handleReject(opcode: type, code: .unsupportedRemoteFeature, on: connection)

        case .featureReq(let features), .peripheralFeatureReq(let features):
            connection.remoteFeatures = features
            queueControl(connection, .featureRsp(features: leFeatures.rawValue))
        case .featureRsp(let features):
            connection.remoteFeatures = features
            if connection.hostWantsRemoteFeatures {
                connection.hostWantsRemoteFeatures = false
                sendLEEvent(LEReadRemoteFeaturesComplete(status: .success, connectionHandle: connection.handle, leFeatures: features))
            }

        case .versionInd(let version, let company, let subversion):
            connection.remoteVersion = (version, company, subversion)
            if !connection.versionSent {
                connection.versionSent = true
                queueControl(connection, .versionInd(version: Self.hciVersion, companyID: Self.companyIdentifier, subversion: Self.subversion))
            }
            if connection.hostWantsRemoteVersion {
                connection.hostWantsRemoteVersion = false
                sendRemoteVersion(connection)
            }

        case .lengthReq(let remote):
            queueControl(connection, .lengthRsp(localDataLength(connection)))
            applyDataLength(connection, remote: remote)
        case .lengthRsp(let remote):
            applyDataLength(connection, remote: remote)

        case .phyReq(let tx, let rx):
            if connection.role == .peripheral {
                queueControl(connection, .phyRsp(txPhys: connection.txPHYPreference, rxPhys: connection.rxPHYPreference))
            } else {
                centralDecidePHY(connection, peerTx: tx, peerRx: rx)
            }
        case .phyRsp(let tx, let rx):
            if connection.role == .central { centralDecidePHY(connection, peerTx: tx, peerRx: rx) }
        case .phyUpdateInd(let c2p, let p2c, _):
            atInstant(connection) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
                let `self` = weakSelf.object
                let connection = weakConnection.object
                guard let self, let connection else { return }
                // Zero for a direction means "unchanged".
                let tx = connection.role == .central ? c2p : p2c
                let rx = connection.role == .central ? p2c : c2p
                self.applyPHY(connection, txMask: tx, rxMask: rx)
            }

        case .pingReq:
            queueControl(connection, .pingRsp)
        case .pingRsp:
            break

        case .encReq(let rand, let ediv, let skdm, let ivm):
            guard connection.role == .peripheral else { return }
            connection.encryptionInProgress = true
            connection.pendingRand = rand
            connection.pendingEDIV = ediv
            connection.skdm = skdm
            connection.ivm = ivm
            if isLEEventEnabled(LELongTermKeyRequest.subeventCode) {
                sendLEEvent(LELongTermKeyRequest(connectionHandle: connection.handle, randomNumber: rand, encryptedDiversifier: ediv))
            } else {
                rejectEncryption(connection)
            }
        case .encRsp(let skds, _):
            guard connection.role == .central else { return }
            connection.micValue = Self.micValue(ltk: connection.centralLTK, skdm: connection.skdm, skds: skds)
        case .startEncReq:
            guard connection.role == .central else { return }
            // From now on the central sends and expects encrypted PDUs.
            connection.txEncrypted = true
            connection.rxEncrypted = true
            queueControl(connection, .startEncRsp)
        case .startEncRsp:
            connection.encryptionInProgress = false
            if connection.role == .peripheral {
                connection.txEncrypted = true
                queueControl(connection, .startEncRsp)
            }
            reportEncryption(connection, status: .success)
            pump(connection)
        case .pauseEncReq:
            // Encryption pause (Vol 6 Part B §5.1.3.2): the peripheral answers still encrypted,
            // then expects the central's unencrypted LL_PAUSE_ENC_RSP.
            guard connection.role == .peripheral else { return }
            connection.encryptionInProgress = true
            connection.refreshingKey = true
            connection.rxEncrypted = false
            queueControl(connection, .pauseEncRsp)
        case .pauseEncRsp where connection.role == .peripheral:
            connection.txEncrypted = false
        case .pauseEncRsp:
            guard connection.refreshingKey else { return }
            connection.txEncrypted = false
            connection.rxEncrypted = false
            queueControl(connection, .pauseEncRsp)
            connection.skdm = radio.randomUInt64()
            connection.ivm = UInt32(truncatingIfNeeded: radio.randomUInt64())
            queueControl(connection, .encReq(rand: connection.pendingRand, ediv: connection.pendingEDIV,
                                             skdm: connection.skdm, ivm: connection.ivm))
        }
    }

    private func handleReject(opcode: UInt8, code: HCIStatus, on connection: Connection) {
        switch opcode {
        case 0x03, 0x0A:  // LL_ENC_REQ, LL_PAUSE_ENC_REQ
            connection.encryptionInProgress = false
            connection.txEncrypted = false
            connection.rxEncrypted = false
            reportEncryption(connection, status: code)
            pump(connection)
        case 0x0F:  // LL_CONNECTION_PARAM_REQ
            if connection.localParameterRequestPending {
                connection.localParameterRequestPending = false
                sendLEEvent(LEConnectionUpdateComplete(status: code, connectionHandle: connection.handle,
                                                       connectionInterval: connection.interval,
                                                       peripheralLatency: connection.latency,
                                                       supervisionTimeout: connection.timeout))
            }
        case 0x16:  // LL_PHY_REQ
            if connection.hostRequestedPHY {
                connection.hostRequestedPHY = false
                sendLEEvent(LEPHYUpdateComplete(status: code, connectionHandle: connection.handle,
                                                txPhy: connection.txPHY.rawValue, rxPhy: connection.rxPHY.rawValue))
            }
        case 0x08, 0x0E:  // feature exchange
            if connection.hostWantsRemoteFeatures {
                connection.hostWantsRemoteFeatures = false
                sendLEEvent(LEReadRemoteFeaturesComplete(status: code, connectionHandle: connection.handle, leFeatures: 0))
            }
        default:
            break
        }
    }

    // MARK: Disconnect

    func disconnectCommand(_ c: Disconnect) {
        let opcode = Disconnect.opcode
        guard let connection = connections[c.connectionHandle] else { return commandStatus(opcode, .unknownConnectionIdentifier) }
        guard Self.validDisconnectReasons.contains(c.reason.rawValue) else { return commandStatus(opcode, .invalidHCICommandParameters) }
        guard !connection.terminating else { return commandStatus(opcode, .commandDisallowed) }
        commandStatus(opcode, .success)
        connection.terminating = true
        // Queued even when the peer is out of reach: it goes out if the peer comes back before
        // the supervision timer ends the procedure.
        queueControl(connection, .terminateInd(errorCode: c.reason.rawValue))
        if !radio.isLinkReachable(connection.accessAddress) { armSupervision(connection) }
    }

    // MARK: Connection parameters

    func connectionUpdateCommand(_ c: LEConnectionUpdate) {
        let opcode = LEConnectionUpdate.opcode
        guard let connection = connections[c.connectionHandle] else { return commandStatus(opcode, .unknownConnectionIdentifier) }
        guard validConnectionParameters(intervalMin: c.connectionIntervalMin, intervalMax: c.connectionIntervalMax,
                                        latency: c.maxLatency, timeout: c.supervisionTimeout) else {
            return commandStatus(opcode, .invalidHCICommandParameters)
        }
        switch connection.role {
        case .central:
            commandStatus(opcode, .success)
            centralUpdate(connection, interval: c.connectionIntervalMin, latency: c.maxLatency, timeout: c.supervisionTimeout)
        case .peripheral:
            guard !connection.localParameterRequestPending else { return commandStatus(opcode, .commandDisallowed) }
            commandStatus(opcode, .success)
            connection.localParameterRequestPending = true
            queueControl(connection, .connectionParamReq(.init(intervalMin: c.connectionIntervalMin, intervalMax: c.connectionIntervalMax,
                                                               latency: c.maxLatency, timeout: c.supervisionTimeout)))
        @unknown default:
            commandStatus(opcode, .commandDisallowed)
        }
    }

    /// The central announces new parameters; both sides switch at the instant.
    func centralUpdate(_ connection: Connection, interval: UInt16, latency: UInt16, timeout: UInt16) {
        queueControl(connection, .connectionUpdateInd(windowSize: 1, windowOffset: 0, interval: interval, latency: latency,
                                                      timeout: timeout, instant: connection.eventCounter &+ 6))
        atInstant(connection) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            self.applyConnectionUpdate(connection, interval: interval, latency: latency, timeout: timeout, status: .success)
        }
    }

    func applyConnectionUpdate(_ connection: Connection, interval: UInt16, latency: UInt16, timeout: UInt16, status: HCIStatus) {
        guard connections[connection.handle] === connection else { return }
        connection.interval = interval
        connection.latency = latency
        connection.timeout = timeout
        connection.localParameterRequestPending = false
        sendLEEvent(LEConnectionUpdateComplete(status: status, connectionHandle: connection.handle, connectionInterval: interval,
                                               peripheralLatency: latency, supervisionTimeout: timeout))
    }

    func remoteConnectionParameterRequestReply(_ c: LERemoteConnectionParameterRequestReply) {
        let opcode = LERemoteConnectionParameterRequestReply.opcode
        guard let connection = connections[c.connectionHandle] else {
            return completeWithHandle(opcode, .unknownConnectionIdentifier, c.connectionHandle)
        }
        guard connection.remoteParameterRequest != nil else { return completeWithHandle(opcode, .commandDisallowed, c.connectionHandle) }
        guard validConnectionParameters(intervalMin: c.intervalMin, intervalMax: c.intervalMax, latency: c.maxLatency, timeout: c.timeout) else {
            return completeWithHandle(opcode, .invalidHCICommandParameters, c.connectionHandle)
        }
        connection.remoteParameterRequest = nil
        completeWithHandle(opcode, .success, c.connectionHandle)
        centralUpdate(connection, interval: c.intervalMin, latency: c.maxLatency, timeout: c.timeout)
    }

    func remoteConnectionParameterRequestNegativeReply(_ c: LERemoteConnectionParameterRequestNegativeReply) {
        let opcode = LERemoteConnectionParameterRequestNegativeReply.opcode
        guard let connection = connections[c.connectionHandle] else {
            return completeWithHandle(opcode, .unknownConnectionIdentifier, c.connectionHandle)
        }
        guard connection.remoteParameterRequest != nil else { return completeWithHandle(opcode, .commandDisallowed, c.connectionHandle) }
        connection.remoteParameterRequest = nil
        completeWithHandle(opcode, .success, c.connectionHandle)
        queueControl(connection, .rejectExtInd(rejectOpcode: 0x0F, errorCode: c.reason.rawValue))
    }

    // MARK: Features and version

    func readRemoteFeatures(_ handle: ConnectionHandle) {
        let opcode = LEReadRemoteFeatures.opcode
        guard let connection = connections[handle] else { return commandStatus(opcode, .unknownConnectionIdentifier) }
        guard !connection.hostWantsRemoteFeatures else { return commandStatus(opcode, .commandDisallowed) }
        commandStatus(opcode, .success)
        if let features = connection.remoteFeatures {
            sendLEEvent(LEReadRemoteFeaturesComplete(status: .success, connectionHandle: handle, leFeatures: features))
            return
        }
        connection.hostWantsRemoteFeatures = true
        queueControl(connection, connection.role == .central
                     ? .featureReq(features: leFeatures.rawValue)
                     : .peripheralFeatureReq(features: leFeatures.rawValue))
    }

    func readRemoteVersion(_ handle: ConnectionHandle) {
        let opcode = ReadRemoteVersionInformation.opcode
        guard let connection = connections[handle] else { return commandStatus(opcode, .unknownConnectionIdentifier) }
        commandStatus(opcode, .success)
        if connection.remoteVersion != nil { return sendRemoteVersion(connection) }
        connection.hostWantsRemoteVersion = true
        if !connection.versionSent {
            connection.versionSent = true
            queueControl(connection, .versionInd(version: Self.hciVersion, companyID: Self.companyIdentifier, subversion: Self.subversion))
        }
    }

    private func sendRemoteVersion(_ connection: Connection) {
        guard let v = connection.remoteVersion else { return }
        sendEvent(ReadRemoteVersionInformationComplete(status: .success, connectionHandle: connection.handle,
                                                       version: v.version, companyIdentifier: v.company, subversion: v.subversion))
    }

    // MARK: Data length

    func localDataLength(_ connection: Connection) -> LLControlPDU.DataLength {
        let rx = configuration.supportedMaxRxOctets
        let tx = connection.preferredMaxTxOctets
        return .init(maxRxOctets: rx, maxRxTime: maxTime(octets: rx), maxTxOctets: tx, maxTxTime: maxTime(octets: tx))
    }

    func setDataLength(_ c: LESetDataLength) {
        let opcode = LESetDataLength.opcode
        guard let connection = connections[c.connectionHandle] else {
            return completeWithHandle(opcode, .unknownConnectionIdentifier, c.connectionHandle)
        }
        guard (0x001B...0x00FB).contains(c.txOctets), (0x0148...0x4290).contains(c.txTime) else {
            return completeWithHandle(opcode, .invalidHCICommandParameters, c.connectionHandle)
        }
        completeWithHandle(opcode, .success, c.connectionHandle)
        connection.preferredMaxTxOctets = min(c.txOctets, configuration.supportedMaxTxOctets)
        queueControl(connection, .lengthReq(localDataLength(connection)))
    }

    private func applyDataLength(_ connection: Connection, remote: LLControlPDU.DataLength) {
        let tx = max(27, min(connection.preferredMaxTxOctets, remote.maxRxOctets))
        let rx = max(27, min(configuration.supportedMaxRxOctets, remote.maxTxOctets))
        guard tx != connection.maxTxOctets || rx != connection.maxRxOctets else { return }
        connection.maxTxOctets = tx
        connection.maxRxOctets = rx
        connection.maxTxTime = maxTime(octets: tx)
        connection.maxRxTime = maxTime(octets: rx)
        sendLEEvent(LEDataLengthChange(connectionHandle: connection.handle, maxTxOctets: tx, maxTxTime: connection.maxTxTime,
                                       maxRxOctets: rx, maxRxTime: connection.maxRxTime))
    }

    // MARK: PHY

    func setPHY(_ c: LESetPHY) {
        let opcode = LESetPHY.opcode
        guard let connection = connections[c.connectionHandle] else { return commandStatus(opcode, .unknownConnectionIdentifier) }
        guard validPHYPreferences(allPhys: c.allPHYs, txPhys: c.txPHYs, rxPhys: c.rxPHYs) else {
            return commandStatus(opcode, .unsupportedFeatureOrParameterValue)
        }
        guard !connection.hostRequestedPHY else { return commandStatus(opcode, .commandDisallowed) }
        commandStatus(opcode, .success)
        connection.hostRequestedPHY = true
        connection.txPHYPreference = c.allPHYs & 0b01 != 0 ? 0b111 : c.txPHYs
        connection.rxPHYPreference = c.allPHYs & 0b10 != 0 ? 0b111 : c.rxPHYs
        queueControl(connection, .phyReq(txPhys: connection.txPHYPreference, rxPhys: connection.rxPHYPreference))
    }

    /// The central picks each direction's PHY from what both ends allow, fastest first.
    private func centralDecidePHY(_ connection: Connection, peerTx: UInt8, peerRx: UInt8) {
        func pick(_ mask: UInt8, current: LEPHY) -> UInt8 {
            for phy in [LEPHY.le2M, .le1M, .leCoded] where mask & phy.maskBit != 0 {
                return phy == current ? 0 : phy.maskBit
            }
            return 0
        }
        let c2p = pick(connection.txPHYPreference & peerRx, current: connection.txPHY)
        let p2c = pick(peerTx & connection.rxPHYPreference, current: connection.rxPHY)
        queueControl(connection, .phyUpdateInd(centralToPeripheral: c2p, peripheralToCentral: p2c, instant: connection.eventCounter &+ 6))
        atInstant(connection) { [weakSelf = WeakHandle(self), weakConnection = WeakHandle(connection)] in
            let `self` = weakSelf.object
            let connection = weakConnection.object
            guard let self, let connection else { return }
            self.applyPHY(connection, txMask: c2p, rxMask: p2c)
        }
    }

    private func applyPHY(_ connection: Connection, txMask: UInt8, rxMask: UInt8) {
        guard connections[connection.handle] === connection else { return }
        let old = (connection.txPHY, connection.rxPHY)
        if let phy = LEPHY.allCases.first(where: { $0.maskBit == txMask }) { connection.txPHY = phy }
        if let phy = LEPHY.allCases.first(where: { $0.maskBit == rxMask }) { connection.rxPHY = phy }
        let changed = old != (connection.txPHY, connection.rxPHY)
        // The host that asked always hears; the other only of a change (Vol 4 Part E §7.7.65.12).
        if changed || connection.hostRequestedPHY {
            connection.hostRequestedPHY = false
            sendLEEvent(LEPHYUpdateComplete(status: .success, connectionHandle: connection.handle,
                                            txPhy: connection.txPHY.rawValue, rxPhy: connection.rxPHY.rawValue))
        }
    }

    // MARK: Encryption

    func enableEncryption(_ c: LEEnableEncryption) {
        let opcode = LEEnableEncryption.opcode
        guard let connection = connections[c.connectionHandle] else { return commandStatus(opcode, .unknownConnectionIdentifier) }
        guard connection.role == .central, !connection.encryptionInProgress else { return commandStatus(opcode, .commandDisallowed) }
        guard c.longTermKey.count == 16 else { return commandStatus(opcode, .invalidHCICommandParameters) }
        commandStatus(opcode, .success)
        connection.encryptionInProgress = true
        connection.centralLTK = c.longTermKey
        connection.pendingRand = c.randomNumber
        connection.pendingEDIV = c.encryptedDiversifier
        if connection.isEncrypted {
            connection.refreshingKey = true
            queueControl(connection, .pauseEncReq)
        } else {
            connection.refreshingKey = false
            connection.skdm = radio.randomUInt64()
            connection.ivm = UInt32(truncatingIfNeeded: radio.randomUInt64())
            queueControl(connection, .encReq(rand: c.randomNumber, ediv: c.encryptedDiversifier, skdm: connection.skdm, ivm: connection.ivm))
        }
    }

    func longTermKeyReply(_ handle: ConnectionHandle, ltk: [UInt8]?, opcode: HCIOpcode) {
        guard let connection = connections[handle] else { return completeWithHandle(opcode, .unknownConnectionIdentifier, handle) }
        guard connection.role == .peripheral, connection.encryptionInProgress else {
            return completeWithHandle(opcode, .commandDisallowed, handle)
        }
        completeWithHandle(opcode, .success, handle)
        guard let ltk, ltk.count == 16 else { return rejectEncryption(connection) }
        let skds = radio.randomUInt64()
        connection.micValue = Self.micValue(ltk: ltk, skdm: connection.skdm, skds: skds)
        queueControl(connection, .encRsp(skds: skds, ivs: UInt32(truncatingIfNeeded: radio.randomUInt64())))
        // The peripheral expects encrypted PDUs once it has asked to start.
        connection.controlQueue.append(.control(.startEncReq))
        connection.rxEncrypted = true
        pump(connection)
    }

    private func rejectEncryption(_ connection: Connection) {
        connection.encryptionInProgress = false
        queueControl(connection, .rejectExtInd(rejectOpcode: 0x03, errorCode: HCIStatus.pinOrKeyMissing.rawValue))
    }

    private func reportEncryption(_ connection: Connection, status: HCIStatus) {
        if connection.refreshingKey && status.isSuccess {
            connection.refreshingKey = false
            sendEvent(EncryptionKeyRefreshComplete(status: .success, connectionHandle: connection.handle))
            return
        }
        connection.refreshingKey = false
        let enabled: UInt8 = status.isSuccess ? 0x01 : 0x00
        if eventMaskPage2 & (1 << 25) != 0 {
            sendEvent(EncryptionChangeV2(status: status, connectionHandle: connection.handle, encryptionEnabled: enabled,
                                         encryptionKeySize: 16))
        } else {
            sendEvent(EncryptionChange(status: status, connectionHandle: connection.handle, encryptionEnabled: enabled))
        }
    }

    /// SK = e(LTK, SKD) with SKD = SKDm ‖ SKDs, SKDm the least significant half (Vol 6 Part B
    /// §5.1.3.1). The LTK arrives from HCI least significant octet first.
    static func micValue(ltk: [UInt8], skdm: UInt64, skds: UInt64) -> UInt32 {
        var skd: [UInt8] = []
        for i in (0..<8).reversed() { skd.append(UInt8(truncatingIfNeeded: skds >> (8 * UInt64(i)))) }
        for i in (0..<8).reversed() { skd.append(UInt8(truncatingIfNeeded: skdm >> (8 * UInt64(i)))) }
        let sessionKey = LECrypto.e(key: Array(ltk.reversed()), plaintext: skd)
        let check = LECrypto.e(key: sessionKey, plaintext: [UInt8](repeating: 0, count: 16))
        return UInt32(check[0]) << 24 | UInt32(check[1]) << 16 | UInt32(check[2]) << 8 | UInt32(check[3])
    }
}
