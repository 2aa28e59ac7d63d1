import HCI
import Logging
import Scheduling

struct AdvertisingState {
    var parameters = LESetAdvertisingParameters(
        advertisingIntervalMin: 0x0800, advertisingIntervalMax: 0x0800, advertisingType: .advInd,
        ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
        advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)
    var data: [UInt8] = []
    var scanResponseData: [UInt8] = []
    var enabled = false
    var timer: TimerHandle?
    /// High duty cycle directed advertising stops after 1.28 s (Vol 6 Part B §4.4.2.4.3).
    var directedDeadline: LoopInstant?
    var ownAddress: LEAddress?
    /// TargetA of directed advertising: the peer's identity, or an RPA made from its IRK.
    var targetAddress: LEAddress?
}

struct ScanningState {
    var parameters = LESetScanParameters(
        leScanType: .passive, leScanInterval: 0x0010, leScanWindow: 0x0010,
        ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)
    var enabled = false
    var filterDuplicates = false
    var startedAt = LoopInstant.zero
    var timer: TimerHandle?
    /// Reported (address, event type) pairs, for the duplicate filter.
    var reported: Set<DuplicateKey> = []
    var ownAddress: LEAddress?

    struct DuplicateKey: Hashable {
        var address: LEAddress
        var eventType: UInt8
    }
}

extension VirtualController {
    // MARK: Advertising

    func setAdvertisingParameters(_ c: LESetAdvertisingParameters) {
        let opcode = LESetAdvertisingParameters.opcode
        guard !advertising.enabled else { return commandComplete(opcode, status: .commandDisallowed) }
        if c.advertisingType != .advDirectIndHighDuty {
            guard (0x0020...0x4000).contains(c.advertisingIntervalMin),
                  (0x0020...0x4000).contains(c.advertisingIntervalMax),
                  c.advertisingIntervalMin <= c.advertisingIntervalMax else {
                return commandComplete(opcode, status: .invalidHCICommandParameters)
            }
        }
        guard (0x01...0x07).contains(c.advertisingChannelMap) else {
            return commandComplete(opcode, status: .invalidHCICommandParameters)
        }
        advertising.parameters = c
        commandComplete(opcode, status: .success)
    }

    func setAdvertisingEnable(_ enable: Bool) {
        let opcode = LESetAdvertisingEnable.opcode
        if !enable {
            stopAdvertising()
            return commandComplete(opcode, status: .success)
        }
        if advertising.enabled { return commandComplete(opcode, status: .success) }
        let p = advertising.parameters
        // Own_Address_Type 0x02/0x03: Peer_Address finds the local IRK, directed or not (§7.8.5).
        refreshLegacyAdvertisingAddresses()
        guard let own = advertising.ownAddress else {
            return commandComplete(opcode, status: .invalidHCICommandParameters)
        }
        let connectable = p.advertisingType == .advInd || p.advertisingType == .advDirectIndHighDuty
            || p.advertisingType == .advDirectIndLowDuty
        if connectable && connections.count >= configuration.maxConnections {
            return commandComplete(opcode, status: .connectionLimitExceeded)
        }
        advertising.enabled = true
        advertising.ownAddress = own
        advertising.directedDeadline = p.advertisingType == .advDirectIndHighDuty ? loop.now + .milliseconds(1280) : nil
        commandComplete(opcode, status: .success)
        scheduleAdvertisingEvent(after: .nanoseconds(Int64(radio.randomInt(in: 0...10_000)) * 1000))
    }

    func stopAdvertising() {
        advertising.enabled = false
        advertising.timer?.cancel()
        advertising.timer = nil
        advertising.directedDeadline = nil
    }

    private func scheduleAdvertisingEvent(after delay: Duration) {
        advertising.timer = loop.schedule(after: delay) { [weakSelf = WeakHandle(self)] in weakSelf.object?.advertisingEvent() }
    }

    private func advertisingEvent() {
        guard advertising.enabled, let own = advertising.ownAddress else { return }
        let p = advertising.parameters
        let peer = LEAddress(p.peerAddressType, p.peerAddress)
        if let deadline = advertising.directedDeadline, loop.now >= deadline {
            stopAdvertising()
            sendConnectionComplete(status: .advertisingTimeout, handle: 0, role: .peripheral, peer: peer,
                                   interval: 0, latency: 0, timeout: 0)
            return
        }
        radio.transmit(Self.legacyAdvertisingPDU(p.advertisingType, own: own, peer: advertising.targetAddress ?? peer,
                                                 data: advertising.data), from: radioID)
        // advInterval plus the 0–10 ms advDelay (Vol 6 Part B §4.4.2.2.1).
        let next: Duration = p.advertisingType == .advDirectIndHighDuty
            ? .microseconds(3750)
            : .microseconds(Int64(p.advertisingIntervalMin) * 625 + Int64(radio.randomInt(in: 0...10_000)))
        scheduleAdvertisingEvent(after: next)
    }

    /// What an advertiser does with SCAN_REQ and CONNECT_IND addressed to it.
    func advertiserReceived(_ pdu: AdvertisingPDU, from sender: RadioDeviceID) {
        guard advertising.enabled, let own = advertising.ownAddress, pdu.advA == own else { return }
        let p = advertising.parameters
        switch pdu {
        case .scanReq(let scanA, _):
            guard p.advertisingType == .advInd || p.advertisingType == .advScanInd, let scanner = heard(scanA) else { return }
            if p.advertisingFilterPolicy == .filterScanRequests || p.advertisingFilterPolicy == .filterBoth {
                guard isInFilterAcceptList(scanner) else { return }
            }
            radio.transmit(.scanRsp(advA: own, data: advertising.scanResponseData), from: radioID, to: sender)
        case .connectInd(let initA, _, let ll):
            guard isValid(ll) else { logger.debug("ignoring CONNECT_IND with invalid LLData \(ll)"); return }
            guard let initiator = heard(initA) else { return }
            switch p.advertisingType {
            case .advInd:
                if p.advertisingFilterPolicy == .filterConnectionRequests || p.advertisingFilterPolicy == .filterBoth {
                    guard isInFilterAcceptList(initiator) else { return }
                }
            case .advDirectIndHighDuty, .advDirectIndLowDuty:
                guard matches(initiator, peerType: p.peerAddressType, peerAddress: p.peerAddress) else { return }
            case .advScanInd, .advNonconnInd:
                return
            }
            guard connection(to: initiator.reported) == nil else { return }
            stopAdvertising()
            acceptConnection(from: initiator, peerDevice: sender, llData: ll, localRPA: generatedLocalRPA(own))
        default:
            break
        }
    }

    /// LLData within the ranges of Vol 6 Part B §2.3.3.1: an advertiser does not enter a
    /// connection it could not keep.
    func isValid(_ ll: ConnectLLData) -> Bool {
        guard (1...min(8, max(1, Int(ll.interval) - 1))).contains(Int(ll.windowSize)), ll.windowOffset <= ll.interval,
              (5...16).contains(ll.hop), (ll.channelMap & 0x1F_FFFF_FFFF).nonzeroBitCount >= 2 else { return false }
        return validConnectionParameters(intervalMin: ll.interval, intervalMax: ll.interval, latency: ll.latency, timeout: ll.timeout)
    }

    // MARK: Scanning

    func setScanParameters(_ c: LESetScanParameters) {
        let opcode = LESetScanParameters.opcode
        guard !scanning.enabled else { return commandComplete(opcode, status: .commandDisallowed) }
        guard (0x0004...0x4000).contains(c.leScanInterval), (0x0004...0x4000).contains(c.leScanWindow),
              c.leScanWindow <= c.leScanInterval else {
            return commandComplete(opcode, status: .invalidHCICommandParameters)
        }
        scanning.parameters = c
        commandComplete(opcode, status: .success)
    }

    func setScanEnable(_ enable: Bool, filterDuplicates: Bool) {
        let opcode = LESetScanEnable.opcode
        guard enable else {
            scanning.enabled = false
            return commandComplete(opcode, status: .success)
        }
        guard let own = ownAddress(scanning.parameters.ownAddressType) else {
            return commandComplete(opcode, status: .invalidHCICommandParameters)
        }
        if !scanning.enabled || scanning.filterDuplicates != filterDuplicates { scanning.reported = [] }
        if !scanning.enabled { scanning.startedAt = loop.now }
        scanning.enabled = true
        scanning.filterDuplicates = filterDuplicates
        scanning.ownAddress = own
        commandComplete(opcode, status: .success)
    }

    /// Whether the scanner's receiver is on now: it listens `window` out of every `interval`.
    private var scanWindowOpen: Bool {
        Self.scanWindowOpen(interval: scanning.parameters.leScanInterval, window: scanning.parameters.leScanWindow,
                            since: scanning.startedAt, now: loop.now)
    }

    func scannerReceived(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID) {
        guard scanning.enabled, let own = scanning.ownAddress else { return }
        let eventType: LegacyAdvertisingEventType
        var data: [UInt8] = []
        switch pdu {
        case .advInd(_, let d): eventType = .advInd; data = d
        case .advNonconnInd(_, let d): eventType = .advNonconnInd; data = d
        case .advScanInd(_, let d): eventType = .advScanInd; data = d
        case .advDirectInd(_, let target):
            guard isAddressedToUs(target, own: own) else { return }
            eventType = .advDirectInd
        case .scanRsp(_, let d): eventType = .scanRsp; data = d
        case .scanReq, .connectInd: return
        }
        // Scan responses answer our own request; everything else needs the receiver on.
        if eventType != .scanRsp && !scanWindowOpen { return }
        guard let heard = heard(pdu.advA) else { return }
        let policy = scanning.parameters.scanningFilterPolicy
        if policy == .basicFiltered || policy == .extendedFiltered {
            guard isInFilterAcceptList(heard) else { return }
        }
        // A resolved advertiser is reported, and filtered as a duplicate, by its identity.
        let advertiser = heard.reported
        let key = ScanningState.DuplicateKey(address: advertiser, eventType: eventType.rawValue)
        let duplicate = scanning.filterDuplicates && scanning.reported.contains(key)
        if !duplicate {
            if scanning.filterDuplicates { scanning.reported.insert(key) }
            sendLEEvent(LEAdvertisingReport(reports: [LEAdvertisingReport.Report(
                eventType: eventType, addressType: advertiser.type, address: advertiser.address, data: data, rssi: rssi)]))
        }
        // Active scanning asks scannable advertisers for their scan response, until (with the
        // duplicate filter on) it has one.
        if scanning.parameters.leScanType == .active && (eventType == .advInd || eventType == .advScanInd) {
            let rspKey = ScanningState.DuplicateKey(address: advertiser, eventType: LegacyAdvertisingEventType.scanRsp.rawValue)
            if !(scanning.filterDuplicates && scanning.reported.contains(rspKey)) {
                // ScanA: the local RPA for a listed advertiser (Vol 6 Part B §6.3).
                let scanA = privateOwnAddress(scanning.parameters.ownAddressType, toward: heard.entry) ?? own
                radio.transmit(.scanReq(scanA: scanA, advA: heard.onAir), from: radioID, to: sender)
            }
        }
    }

    // MARK: Initiating

    func createConnection(_ c: LECreateConnection) {
        let opcode = LECreateConnection.opcode
        guard initiating == nil else { return commandStatus(opcode, .commandDisallowed) }
        guard (0x0004...0x4000).contains(c.leScanInterval), (0x0004...0x4000).contains(c.leScanWindow),
              c.leScanWindow <= c.leScanInterval,
              validConnectionParameters(intervalMin: c.connectionIntervalMin, intervalMax: c.connectionIntervalMax,
                                        latency: c.maxLatency, timeout: c.supervisionTimeout),
              ownAddress(c.ownAddressType) != nil else {
            return commandStatus(opcode, .invalidHCICommandParameters)
        }
        if c.initiatorFilterPolicy == .peerAddress, connection(to: LEAddress(c.peerAddressType, c.peerAddress)) != nil {
            return commandStatus(opcode, .connectionAlreadyExists)
        }
        guard connections.count < configuration.maxConnections else {
            return commandStatus(opcode, .connectionLimitExceeded)
        }
        initiating = c
        commandStatus(opcode, .success)
    }

    func cancelCreateConnection() {
        guard let c = initiating else {
            return commandComplete(LECreateConnectionCancel.opcode, status: .commandDisallowed)
        }
        let peer = LEAddress(c.peerAddressType, c.peerAddress)
        switch configuration.createConnectionCancel {
        case .standard:
            initiating = nil
            commandComplete(LECreateConnectionCancel.opcode, status: .success)
            sendConnectionComplete(status: .unknownConnectionIdentifier, handle: 0, role: .central,
                                   peer: peer, interval: 0, latency: 0, timeout: 0)
        case .keepsInitiating:
            commandComplete(LECreateConnectionCancel.opcode, status: .success)
        case .late(let delay):
            initiating = nil
            commandComplete(LECreateConnectionCancel.opcode, status: .success)
            _ = loop.schedule(after: delay) { [weakSelf = WeakHandle(self)] in
                let `self` = weakSelf.object
                self?.sendConnectionComplete(status: .unknownConnectionIdentifier, handle: 0, role: .central,
                                             peer: peer, interval: 0, latency: 0, timeout: 0)
            }
        }
    }

    /// Connection parameter ranges (Vol 4 Part E §7.8.12): interval 7.5 ms–4 s, latency ≤ 499,
    /// timeout 100 ms–32 s and longer than (1 + latency) × interval × 2.
    func validConnectionParameters(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16) -> Bool {
        guard (0x0006...0x0C80).contains(intervalMin), (0x0006...0x0C80).contains(intervalMax),
              intervalMin <= intervalMax, latency <= 0x01F3, (0x000A...0x0C80).contains(timeout) else { return false }
        // timeout (10 ms units) × 4 > (1 + latency) × intervalMax (1.25 ms units) × 2 × ... in µs:
        return Int(timeout) * 10_000 > (1 + Int(latency)) * Int(intervalMax) * 1250 * 2
    }

    func initiatorReceived(_ pdu: AdvertisingPDU, from sender: RadioDeviceID) {
        guard let c = initiating, let fallback = ownAddress(c.ownAddressType) else { return }
        let advA: LEAddress
        var target: LEAddress?
        switch pdu {
        case .advInd(let a, _): advA = a
        case .advDirectInd(let a, let t): advA = a; target = t
        default: return
        }
        guard let advertiser = heard(advA) else { return }
        // InitA: the local RPA for the advertiser's entry, when it has one (Vol 6 Part B §6.4).
        let own = ownAddress(c.ownAddressType, toward: advertiser.entry) ?? fallback
        if let target, !isAddressedToUs(target, own: own) && target.address != fallback.address { return }
        switch c.initiatorFilterPolicy {
        case .peerAddress:
            guard matches(advertiser, peerType: c.peerAddressType, peerAddress: c.peerAddress) else { return }
        case .filterAcceptList:
            guard isInFilterAcceptList(advertiser) else { return }
        }
        guard connection(to: advertiser.reported) == nil else { return }
        initiating = nil
        let ll = ConnectLLData(accessAddress: radio.newAccessAddress(), interval: c.connectionIntervalMin,
                               latency: c.maxLatency, timeout: c.supervisionTimeout)
        radio.transmit(.connectInd(initA: own, advA: advA, llData: ll), from: radioID, to: sender)
        radio.openLink(ll.accessAddress, between: radioID, and: sender)
        establishConnection(role: .central, peer: advertiser.reported, peerDevice: sender, llData: ll,
                            localRPA: generatedLocalRPA(own), peerRPA: advertiser.rpa)
    }

    // MARK: Radio callbacks

    /// Scanning or initiating (legacy or extended): only then do broadcast advertising PDUs
    /// matter here, so only then does the radio deliver them.
    public var listensForAdvertising: Bool { scanning.enabled || initiating != nil }

    /// An initiator for one peer that does not scan hears only that advertiser's legacy PDUs
    /// (`initiatorReceived` drops the others), unless an advertiser's RPA might resolve to the
    /// peer: then every address matters. The resolving list and address resolution cannot
    /// change while initiating (they are in use), so `initiating`'s changes are the ones to tell.
    public var advertiserOfInterest: BluetoothAddress? {
        guard !scanning.enabled, let c = initiating, c.initiatorFilterPolicy == .peerAddress,
              !(addressResolutionEnabled && resolvingList.contains { $0.peerKey != nil }) else { return nil }
        return c.peerAddress
    }

    public func radioDidReceive(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID) {
        if extended.family == .extended { return extendedFamilyReceived(pdu, rssi: rssi, from: sender) }
        switch pdu {
        case .scanReq, .connectInd:
            advertiserReceived(pdu, from: sender)
        default:
            scannerReceived(pdu, rssi: rssi, from: sender)
            initiatorReceived(pdu, from: sender)
        }
    }

    /// `advertisingHandle`: the advertising set a peripheral's connection came from (v2 only).
    /// `localRPA` and `peerRPA`: the resolvable private addresses the connection was made with,
    /// reported by the enhanced events (zero when none).
    func sendConnectionComplete(status: HCIStatus, handle: ConnectionHandle, role: LERole, peer: LEAddress,
                                interval: UInt16, latency: UInt16, timeout: UInt16, advertisingHandle: UInt8 = 0xFF,
                                localRPA: BluetoothAddress? = nil, peerRPA: BluetoothAddress? = nil) {
        if isLEEventEnabled(LEEnhancedConnectionCompleteV2.subeventCode) {
            sendLEEvent(LEEnhancedConnectionCompleteV2(
                status: status, connectionHandle: handle, role: role, peerAddressType: peer.type,
                peerAddress: peer.address, localResolvablePrivateAddress: localRPA ?? .zero,
                peerResolvablePrivateAddress: peerRPA ?? .zero,
                connectionInterval: interval, peripheralLatency: latency, supervisionTimeout: timeout,
                centralClockAccuracy: 0, advertisingHandle: advertisingHandle, syncHandle: 0xFFFF))
        } else if isLEEventEnabled(LEEnhancedConnectionComplete.subeventCode) {
            sendLEEvent(LEEnhancedConnectionComplete(
                status: status, connectionHandle: handle, role: role, peerAddressType: peer.type,
                peerAddress: peer.address, localResolvablePrivateAddress: localRPA ?? .zero,
                peerResolvablePrivateAddress: peerRPA ?? .zero,
                connectionInterval: interval, peripheralLatency: latency, supervisionTimeout: timeout,
                centralClockAccuracy: 0))
        } else {
            // This event has no identity address types: a resolved peer is its public or random identity.
            sendLEEvent(LEConnectionComplete(
                status: status, connectionHandle: handle, role: role, peerAddressType: peer.isRandom ? .randomDevice : .publicDevice,
                peerAddress: peer.address, connectionInterval: interval, peripheralLatency: latency,
                supervisionTimeout: timeout, centralClockAccuracy: 0))
        }
    }
}
