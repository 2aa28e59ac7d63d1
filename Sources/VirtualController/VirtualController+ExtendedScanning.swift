import HCI
import Scheduling

/// Extended scanning (Vol 4 Part E §7.8.64–65): per-PHY parameters, duration and period.
/// While it runs, `scanning.enabled` is set too, so the checks shared with legacy scanning
/// (LE Set Random Address, the filter accept list, address resolution) see it.
struct ExtendedScanState {
    var parameters = LESetExtendedScanParameters()
    var enable: LESetExtendedScanEnable?
    /// Inside a scan duration (always, without a Duration); false between periods.
    var receiving = false
    /// When the current scan period started: the scan windows count from here.
    var periodStart = LoopInstant.zero
    var durationTimer: TimerHandle?
    var periodTimer: TimerHandle?
    var reported: Set<DuplicateKey> = []
    /// The legacy PDU each outstanding SCAN_REQ answered, to label the SCAN_RSP.
    var scanRequested: [LEAddress: ExtendedAdvertisingEventType] = [:]

    /// Duplicates are the same advertiser, kind of report and data version (ADI).
    struct DuplicateKey: Hashable {
        var address: LEAddress?
        var eventType: UInt16
        var adi: UInt16?
    }

    mutating func cancelTimers() {
        durationTimer?.cancel()
        durationTimer = nil
        periodTimer?.cancel()
        periodTimer = nil
    }
}

/// An AUX_CONNECT_REQ sent, waiting for its AUX_CONNECT_RSP.
struct PendingAuxConnect {
    /// AdvA as heard (what the AUX_CONNECT_RSP carries).
    var advertiser: LEAddress
    /// The advertiser as the host is told: its identity when its RPA resolved.
    var peer: LEAddress
    var peerRPA: BluetoothAddress?
    var localRPA: BluetoothAddress?
    var device: RadioDeviceID
    var llData: ConnectLLData
    var phy: LEPHY
    var timer: TimerHandle
}

struct AuxFollowKey: Hashable {
    var sender: RadioDeviceID
    var sid: UInt8
}

/// The auxiliary PDU a receiver waits for after an AuxPtr, and the report it is building.
struct AuxFollow {
    var expecting: ExtendedAdvertisingPDU.Kind
    var primaryPHY: LEPHY
    var mode: AdvertisingMode
    /// The report being assembled; nil while only initiating (nothing to report).
    var report: LEExtendedAdvertisingReport.Report?
    var data: [UInt8] = []
    var generation: Int
    /// For a scan response: its key in the duplicate filter.
    var duplicateKey: ExtendedScanState.DuplicateKey?
    var timer: TimerHandle?
}

extension VirtualController {
    /// Data in one LE Extended Advertising Report: 255 − subevent, Num_Reports and the
    /// 24 fixed octets of a report (Vol 4 Part E §7.7.65.13).
    static let maxExtendedReportData = 229

    // MARK: Commands

    func setExtendedScanParameters(_ c: LESetExtendedScanParameters) -> HCIStatus {
        guard !scanning.enabled else { return .commandDisallowed }
        guard !c.scanningPHYs.isEmpty else { return .invalidHCICommandParameters }
        for entry in c.scanningPHYs {
            guard entry.scanInterval >= 0x0004, entry.scanWindow >= 0x0004, entry.scanWindow <= entry.scanInterval else {
                return .invalidHCICommandParameters
            }
        }
        extended.scan.parameters = c
        return .success
    }

    func setExtendedScanEnable(_ c: LESetExtendedScanEnable) -> HCIStatus {
        guard c.enable else {
            stopExtendedScan()
            return .success
        }
        // Duration in 10 ms units must be shorter than the Period in 1.28 s units (§7.8.65).
        if c.duration != 0 && c.period != 0 && Int(c.duration) * 10 >= Int(c.period) * 1280 {
            return .invalidHCICommandParameters
        }
        if c.filterDuplicates == .enabledResetForEachPeriod && (c.duration == 0 || c.period == 0) {
            return .invalidHCICommandParameters
        }
        let p = extended.scan.parameters
        guard let own = ownAddress(p.ownAddressType) else { return .invalidHCICommandParameters }
        // Enabling again restarts duration and period with the new values.
        extended.scan.cancelTimers()
        extended.scan.enable = c
        extended.scan.scanRequested = [:]
        let first = p.scanningPHYs.first ?? LESetExtendedScanParameters.ScanningPHY()
        scanning.parameters = LESetScanParameters(
            leScanType: first.scanType, leScanInterval: first.scanInterval, leScanWindow: first.scanWindow,
            ownAddressType: p.ownAddressType, scanningFilterPolicy: p.scanningFilterPolicy)
        scanning.enabled = true
        scanning.ownAddress = own
        extended.scan.reported = []
        startScanPeriod()
        return .success
    }

    private func startScanPeriod() {
        guard let c = extended.scan.enable else { return }
        extended.scan.receiving = true
        extended.scan.periodStart = loop.now
        if c.filterDuplicates == .enabledResetForEachPeriod { extended.scan.reported = [] }
        if c.duration > 0 {
            extended.scan.durationTimer = loop.schedule(after: .milliseconds(Int64(c.duration) * 10)) { [weakSelf = WeakHandle(self)] in
                let `self` = weakSelf.object
                guard let self else { return }
                if c.period == 0 {
                    self.stopExtendedScan()
                    self.sendLEEvent(LEScanTimeout())
                } else {
                    self.extended.scan.receiving = false
                }
            }
        }
        if c.period > 0 {
            extended.scan.periodTimer = loop.schedule(after: .milliseconds(Int64(c.period) * 1280)) { [weakSelf = WeakHandle(self)] in
                let `self` = weakSelf.object
                self?.startScanPeriod()
            }
        }
    }

    func stopExtendedScan() {
        extended.scan.cancelTimers()
        extended.scan.enable = nil
        extended.scan.receiving = false
        scanning.enabled = false
    }

    /// LE Extended Create Connection (§7.8.66): answered with Command Status.
    func extendedCreateConnection(_ c: LEExtendedCreateConnection) -> HCIStatus {
        guard initiating == nil else { return .commandDisallowed }
        // LE 2M only gives connection parameters: some PHY must be scanned on.
        guard let primary = c.initiatingPHYs.first(where: { $0.phy != .le2M }) else { return .invalidHCICommandParameters }
        for entry in c.initiatingPHYs {
            if entry.phy != .le2M {
                guard entry.scanInterval >= 0x0004, entry.scanWindow >= 0x0004, entry.scanWindow <= entry.scanInterval else {
                    return .invalidHCICommandParameters
                }
            }
            guard validConnectionParameters(intervalMin: entry.connectionIntervalMin, intervalMax: entry.connectionIntervalMax,
                                            latency: entry.maxLatency, timeout: entry.supervisionTimeout) else {
                return .invalidHCICommandParameters
            }
        }
        guard ownAddress(c.ownAddressType) != nil else { return .invalidHCICommandParameters }
        if c.initiatorFilterPolicy == .peerAddress, connection(to: LEAddress(c.peerAddressType, c.peerAddress)) != nil {
            return .connectionAlreadyExists
        }
        guard connections.count < configuration.maxConnections else { return .connectionLimitExceeded }
        // The legacy initiator state, with the primary PHY's parameters, answers ADV_IND and
        // LE Create Connection Cancel as for LE Create Connection.
        let onePHY = c.initiatingPHYs.first { $0.phy == .le1M } ?? primary
        initiating = LECreateConnection(
            leScanInterval: onePHY.scanInterval, leScanWindow: onePHY.scanWindow, initiatorFilterPolicy: c.initiatorFilterPolicy,
            peerAddressType: c.peerAddressType, peerAddress: c.peerAddress, ownAddressType: c.ownAddressType,
            connectionIntervalMin: onePHY.connectionIntervalMin, connectionIntervalMax: onePHY.connectionIntervalMax,
            maxLatency: onePHY.maxLatency, supervisionTimeout: onePHY.supervisionTimeout,
            minCELength: onePHY.minCELength, maxCELength: onePHY.maxCELength)
        extended.initiating = c
        return .success
    }

    /// The extended initiator, if LE Extended Create Connection is in progress and not cancelled.
    private var extendedInitiator: LEExtendedCreateConnection? { initiating == nil ? nil : extended.initiating }

    // MARK: Reception

    /// Legacy PDUs heard by a controller the host drives with the extended commands.
    func extendedFamilyReceived(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID) {
        switch pdu {
        case .scanReq, .connectInd:
            advertisingSetReceived(pdu, from: sender)
        default:
            scannerReceivedLegacy(pdu, rssi: rssi, from: sender)
            if extendedInitiator?.initiatingPHYs.contains(where: { $0.phy == .le1M }) == true {
                initiatorReceived(pdu, from: sender)
            }
        }
    }

    public func radioDidReceive(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID) {
        // A host on the legacy commands sees nothing of extended advertising.
        guard extended.family == .extended else { return }
        switch pdu {
        case .advExtInd(let p): received(advExtInd: p, phy: phy, rssi: rssi, from: sender)
        case .auxAdvInd(let p): received(auxAdvInd: p, phy: phy, rssi: rssi, from: sender)
        case .auxScanRsp(let p), .auxChainInd(let p): received(continuation: p, kind: pdu.kind, from: sender)
        case .auxScanReq, .auxConnectReq: advertisingSetReceived(pdu, from: sender)
        case .auxConnectRsp(let p): received(auxConnectRsp: p, from: sender)
        }
    }

    /// Whether the scanner listens on `phy`'s primary channels now: inside a scan duration and
    /// that PHY's window (each PHY's windows count from the start of the scan period).
    /// The scan parameters for `phy`, read in place (a method of the scan state copied all of
    /// it, its duplicate set and outstanding requests, on every PDU heard).
    private func scanEntry(for phy: LEPHY) -> LESetExtendedScanParameters.ScanningPHY? {
        for entry in extended.scan.parameters.scanningPHYs where entry.phy == phy { return entry }
        return nil
    }

    private func scanReceiverOpen(_ phy: LEPHY) -> Bool {
        guard scanning.enabled, extended.scan.receiving, let entry = scanEntry(for: phy) else { return false }
        return Self.scanWindowOpen(interval: entry.scanInterval, window: entry.scanWindow,
                                   since: extended.scan.periodStart, now: loop.now)
    }

    /// Whether a receiver scanning `window` out of every `interval` (0.625 ms units), since
    /// `start`, is listening at `now`.
    static func scanWindowOpen(interval: UInt16, window: UInt16, since start: LoopInstant, now: LoopInstant) -> Bool {
        guard window < interval else { return true }
        let intervalNs = Int64(interval) * 625_000
        return (now.nanoseconds - start.nanoseconds) % intervalNs < Int64(window) * 625_000
    }

    private func initiatorListens(on phy: LEPHY) -> Bool {
        extendedInitiator?.initiatingPHYs.contains { $0.phy == phy } == true
    }

    /// Passes the scanner's filter policy (by identity) and, for directed PDUs, is addressed to us.
    private func scannerAccepts(advertiser: HeardAddress?, target: LEAddress?) -> Bool {
        if let target, !isAddressedToUs(target, own: scanning.ownAddress) { return false }
        let policy = scanning.parameters.scanningFilterPolicy
        if policy == .basicFiltered || policy == .extendedFiltered {
            guard let advertiser, isInFilterAcceptList(advertiser) else { return false }
        }
        return true
    }

    /// An extended PDU's AdvA resolved; `.some(nil)` without AdvA, nil when the PDU is ignored.
    private func heardAdvertiser(_ advA: LEAddress?) -> HeardAddress?? {
        guard let advA else { return .some(nil) }
        return heard(advA).map { .some($0) }
    }

    /// Reports a legacy PDU with an LE Extended Advertising Report (legacy event types of
    /// §7.7.65.13) and, scanning actively, asks scannable advertisers for their scan response.
    private func scannerReceivedLegacy(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID) {
        guard scanning.enabled, let own = scanning.ownAddress else { return }
        var eventType: ExtendedAdvertisingEventType
        var data: [UInt8] = []
        var target: LEAddress?
        switch pdu {
        case .advInd(_, let d): eventType = [.legacy, .connectable, .scannable]; data = d
        case .advScanInd(_, let d): eventType = [.legacy, .scannable]; data = d
        case .advNonconnInd(_, let d): eventType = [.legacy]; data = d
        case .advDirectInd(_, let t): eventType = [.legacy, .connectable, .directed]; target = t
        case .scanRsp(let a, let d):
            // Only the answer to our own request, labelled by what it answered.
            guard let requested = extended.scan.scanRequested.removeValue(forKey: a) else { return }
            eventType = requested.union(.scanResponse); data = d
        case .scanReq, .connectInd: return
        }
        if !eventType.contains(.scanResponse) && !scanReceiverOpen(.le1M) { return }
        guard let heard = heard(pdu.advA), scannerAccepts(advertiser: heard, target: target) else { return }
        let advertiser = heard.reported
        let report = LEExtendedAdvertisingReport.Report(
            eventType: eventType, addressType: advertiser.type, address: advertiser.address, rssi: rssi,
            directAddressType: target.map { $0.isRandom ? 0x01 : 0x00 } ?? 0, directAddress: target?.address ?? .zero, data: data)
        let key = ExtendedScanState.DuplicateKey(address: advertiser, eventType: eventType.rawValue, adi: nil)
        if !isDuplicate(key) { sendExtendedReports(report, data: data, truncated: false) }
        let scannable = eventType.contains(.scannable) && !eventType.contains(.scanResponse)
        if scannable && scanEntry(for: .le1M)?.scanType == .active {
            let responseKey = ExtendedScanState.DuplicateKey(
                address: advertiser, eventType: eventType.union(.scanResponse).rawValue, adi: nil)
            if !isReported(responseKey) {
                extended.scan.scanRequested[heard.onAir] = eventType
                let scanA = privateOwnAddress(extended.scan.parameters.ownAddressType, toward: heard.entry) ?? own
                radio.transmit(.scanReq(scanA: scanA, advA: heard.onAir), from: radioID, to: sender)
            }
        }
    }

    private func isReported(_ key: ExtendedScanState.DuplicateKey) -> Bool {
        extended.scan.enable?.filterDuplicates != .disabled && extended.scan.reported.contains(key)
    }

    /// Whether the duplicate filter drops this report; records it otherwise.
    private func isDuplicate(_ key: ExtendedScanState.DuplicateKey) -> Bool {
        guard let filter = extended.scan.enable?.filterDuplicates, filter != .disabled else { return false }
        return !extended.scan.reported.insert(key).inserted
    }

    private func received(advExtInd p: ExtendedAdvertisingPayload, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID) {
        let scanningHere = scanReceiverOpen(phy)
        guard scanningHere || initiatorListens(on: phy) else { return }
        guard let auxPtr = p.auxPtr else {
            // An event without auxiliary PDUs: the ADV_EXT_IND is all there is.
            guard scanningHere, let advertiser = heardAdvertiser(p.advA),
                  scannerAccepts(advertiser: advertiser, target: p.targetA) else { return }
            let report = extendedReport(p, advertiser: advertiser, mode: p.mode, primaryPHY: phy, secondaryPHY: nil, rssi: rssi)
            let key = ExtendedScanState.DuplicateKey(address: advertiser?.reported, eventType: report.eventType.rawValue,
                                                     adi: p.adi?.rawValue)
            if !isDuplicate(key) { sendExtendedReports(report, data: [], truncated: false) }
            return
        }
        let key = AuxFollowKey(sender: sender, sid: p.adi?.sid ?? 0xFF)
        finishFollow(key, truncated: true)
        // The report is built once the AUX_ADV_IND arrives; only scanning builds one.
        let report = scanningHere
            ? extendedReport(p, advertiser: nil, mode: p.mode, primaryPHY: phy, secondaryPHY: auxPtr.auxPHY, rssi: rssi) : nil
        follow(key, AuxFollow(expecting: .auxAdvInd, primaryPHY: phy, mode: p.mode, report: report, generation: 0), auxPtr: auxPtr)
    }

    private func received(auxAdvInd p: ExtendedAdvertisingPayload, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID) {
        let key = AuxFollowKey(sender: sender, sid: p.adi?.sid ?? 0xFF)
        guard var state = extended.follows[key], state.expecting == .auxAdvInd else { return }
        state.timer?.cancel()
        extended.follows[key] = nil
        guard let advertiser = heardAdvertiser(p.advA) else { return }
        if initiate(from: p, advertiser: advertiser, primaryPHY: state.primaryPHY, phy: phy, sender: sender) { return }
        guard let template = state.report, scannerAccepts(advertiser: advertiser, target: p.targetA) else { return }
        var report = extendedReport(p, advertiser: advertiser, mode: state.mode, primaryPHY: state.primaryPHY, secondaryPHY: phy,
                                    rssi: rssi)
        if report.txPower == 127 { report.txPower = template.txPower }
        let duplicateKey = ExtendedScanState.DuplicateKey(address: advertiser?.reported, eventType: report.eventType.rawValue,
                                                          adi: p.adi?.rawValue)
        if !isDuplicate(duplicateKey) {
            state.report = report
            state.data = p.advData
            state.expecting = .auxChainInd
            if let auxPtr = p.auxPtr { follow(key, state, auxPtr: auxPtr) } else { sendExtendedReports(report, data: p.advData, truncated: false) }
        }
        // Active scanning asks a scannable set for its scan response (AUX_SCAN_REQ).
        let primary = state.primaryPHY
        guard state.mode == .scannable, scanEntry(for: primary)?.scanType == .active,
              let advertiser, let fallback = scanning.ownAddress else { return }
        let advA = advertiser.onAir
        let own = privateOwnAddress(extended.scan.parameters.ownAddressType, toward: advertiser.entry) ?? fallback
        var responseType = report.eventType
        responseType.insert(.scanResponse)
        responseType.dataStatus = .complete
        let responseKey = ExtendedScanState.DuplicateKey(address: advertiser.reported, eventType: responseType.rawValue,
                                                         adi: p.adi?.rawValue)
        guard !isReported(responseKey), extended.follows[key] == nil else { return }
        var response = report
        response.eventType = responseType
        extended.follows[key] = AuxFollow(expecting: .auxScanRsp, primaryPHY: primary, mode: .nonConnectableNonScannable,
                                          report: response, generation: nextGeneration(), duplicateKey: responseKey)
        armFollowTimer(key, afterMicroseconds: 0)
        radio.transmit(.auxScanReq(scanA: own, advA: advA), phy: phy, from: radioID, to: sender)
    }

    /// AUX_SCAN_RSP and AUX_CHAIN_IND: more of the data being followed.
    private func received(continuation p: ExtendedAdvertisingPayload, kind: ExtendedAdvertisingPDU.Kind, from sender: RadioDeviceID) {
        let key = p.adi.map { AuxFollowKey(sender: sender, sid: $0.sid) }
            ?? extended.follows.first { $0.key.sender == sender && $0.value.expecting == kind }?.key
        guard let key, var state = extended.follows[key], state.expecting == kind else { return }
        state.timer?.cancel()
        // A scan response is reported once, like the advertising it answers.
        if kind == .auxScanRsp, let duplicateKey = state.duplicateKey {
            if isDuplicate(duplicateKey) {
                extended.follows[key] = nil
                return
            }
        }
        state.data += p.advData
        state.expecting = .auxChainInd
        extended.follows[key] = state
        if let auxPtr = p.auxPtr {
            follow(key, state, auxPtr: auxPtr)
        } else {
            finishFollow(key, truncated: false)
        }
    }

    private func nextGeneration() -> Int {
        extended.nextFollowGeneration += 1
        return extended.nextFollowGeneration
    }

    /// Waits for the PDU an AuxPtr announces; if it doesn't come, the data was truncated.
    private func follow(_ key: AuxFollowKey, _ state: AuxFollow, auxPtr: AuxiliaryPointer) {
        var state = state
        state.generation = nextGeneration()
        extended.follows[key] = state
        armFollowTimer(key, afterMicroseconds: auxPtr.offsetMicroseconds)
    }

    /// The longest auxiliary PDU (255 octets on LE Coded) ends about 17 ms after its offset.
    private func armFollowTimer(_ key: AuxFollowKey, afterMicroseconds offset: Int) {
        guard let generation = extended.follows[key]?.generation else { return }
        extended.follows[key]?.timer = loop.schedule(after: .microseconds(Int64(offset) + 30_000)) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, self.extended.follows[key]?.generation == generation else { return }
            self.finishFollow(key, truncated: true)
        }
    }

    /// Reports what a follow gathered, if it is building a report.
    private func finishFollow(_ key: AuxFollowKey, truncated: Bool) {
        guard let state = extended.follows.removeValue(forKey: key) else { return }
        state.timer?.cancel()
        // Nothing was reported before the AUX_ADV_IND (or scan response) arrived.
        guard state.expecting == .auxChainInd, let report = state.report else { return }
        sendExtendedReports(report, data: state.data, truncated: truncated)
    }

    /// The report for an extended PDU, without data status; a resolved advertiser as its identity.
    private func extendedReport(_ p: ExtendedAdvertisingPayload, advertiser: HeardAddress?, mode: AdvertisingMode,
                                primaryPHY: LEPHY, secondaryPHY: LEPHY?, rssi: Int8) -> LEExtendedAdvertisingReport.Report {
        var eventType: ExtendedAdvertisingEventType = []
        if mode == .connectable { eventType.insert(.connectable) }
        if mode == .scannable { eventType.insert(.scannable) }
        if p.targetA != nil { eventType.insert(.directed) }
        return LEExtendedAdvertisingReport.Report(
            eventType: eventType, addressType: advertiser?.reported.type, address: advertiser?.reported.address ?? .zero,
            primaryPHY: primaryPHY.rawValue, secondaryPHY: secondaryPHY?.rawValue ?? 0, advertisingSID: p.adi?.sid ?? 0xFF,
            txPower: p.txPower ?? 127, rssi: rssi, directAddressType: p.targetA.map { $0.isRandom ? 0x01 : 0x00 } ?? 0,
            directAddress: p.targetA?.address ?? .zero, data: [])
    }

    /// Sends `data` in reports of at most 229 octets: all but the last "incomplete, more to
    /// come"; the last complete, or truncated when the rest never arrived.
    func sendExtendedReports(_ report: LEExtendedAdvertisingReport.Report, data: [UInt8], truncated: Bool) {
        var offset = 0
        repeat {
            let end = min(offset + Self.maxExtendedReportData, data.count)
            var fragment = report
            // Data that fits one report goes as it is (no copy).
            fragment.data = offset == 0 && end == data.count ? data : Array(data[offset..<end])
            fragment.eventType.dataStatus = end < data.count ? .incompleteMoreToCome : truncated ? .incompleteTruncated : .complete
            sendLEEvent(LEExtendedAdvertisingReport(reports: [fragment]))
            offset = end
        } while offset < data.count
    }

    // MARK: Initiating from extended advertising

    /// Answers a connectable AUX_ADV_IND with AUX_CONNECT_REQ when it is the peer sought.
    /// Returns whether it did.
    private func initiate(from p: ExtendedAdvertisingPayload, advertiser: HeardAddress?, primaryPHY: LEPHY, phy: LEPHY,
                          sender: RadioDeviceID) -> Bool {
        guard let c = extendedInitiator, initiatorListens(on: primaryPHY), extended.pendingAuxConnect == nil,
              p.mode == .connectable, let advertiser, let fallback = ownAddress(c.ownAddressType) else { return false }
        let advA = advertiser.onAir
        let own = ownAddress(c.ownAddressType, toward: advertiser.entry) ?? fallback
        if let target = p.targetA, !isAddressedToUs(target, own: own) && target.address != fallback.address { return false }
        switch c.initiatorFilterPolicy {
        case .peerAddress:
            guard matches(advertiser, peerType: c.peerAddressType, peerAddress: c.peerAddress) else { return false }
        case .filterAcceptList:
            guard isInFilterAcceptList(advertiser) else { return false }
        }
        guard connection(to: advertiser.reported) == nil else { return false }
        // The connection starts on the secondary PHY, with the parameters given for it.
        guard let entry = c.initiatingPHYs.first(where: { $0.phy == phy })
                ?? c.initiatingPHYs.first(where: { $0.phy == primaryPHY }) else { return false }
        let ll = ConnectLLData(accessAddress: radio.newAccessAddress(), interval: entry.connectionIntervalMin,
                               latency: entry.maxLatency, timeout: entry.supervisionTimeout)
        radio.openLink(ll.accessAddress, between: radioID, and: sender)
        // Without an AUX_CONNECT_RSP the attempt failed and initiating goes on (Vol 6 Part B §4.5).
        let timer = loop.schedule(after: .milliseconds(10)) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, let pending = self.extended.pendingAuxConnect, pending.llData == ll else { return }
            self.extended.pendingAuxConnect = nil
            self.radio.closeLink(ll.accessAddress)
        }
        extended.pendingAuxConnect = PendingAuxConnect(
            advertiser: advA, peer: advertiser.reported, peerRPA: advertiser.rpa, localRPA: generatedLocalRPA(own),
            device: sender, llData: ll, phy: phy, timer: timer)
        radio.transmit(.auxConnectReq(initA: own, advA: advA, llData: ll), phy: phy, from: radioID, to: sender)
        return true
    }

    private func received(auxConnectRsp p: ExtendedAdvertisingPayload, from sender: RadioDeviceID) {
        guard let pending = extended.pendingAuxConnect, pending.device == sender, p.advA == pending.advertiser else { return }
        pending.timer.cancel()
        extended.pendingAuxConnect = nil
        guard initiating != nil else { return radio.closeLink(pending.llData.accessAddress) }
        initiating = nil
        extended.initiating = nil
        establishConnection(role: .central, peer: pending.peer, peerDevice: sender, llData: pending.llData,
                            localRPA: pending.localRPA, peerRPA: pending.peerRPA)
        if let handle = handlesByAccessAddress[pending.llData.accessAddress] {
            connections[handle]?.txPHY = pending.phy
            connections[handle]?.rxPHY = pending.phy
        }
    }
}
