import HCI
import Scheduling

/// Which advertising command family the host has used since the last reset: a controller
/// refuses the other family with Command Disallowed (Vol 4 Part E §3.1.1).
enum AdvertisingCommandFamily {
    case undecided, legacy, extended
}

/// One advertising set of LE Set Extended Advertising Parameters (Vol 4 Part E §7.8.53).
struct AdvertisingSet {
    typealias Properties = LESetExtendedAdvertisingParameters.EventProperties

    let handle: UInt8
    var parameters: LESetExtendedAdvertisingParameters
    var randomAddress: BluetoothAddress?
    var data: [UInt8] = []
    var scanResponseData: [UInt8] = []
    /// Fragments received so far between a first and a last fragment.
    var partialData: [UInt8]?
    var partialScanResponse: [UInt8]?
    var did: UInt16
    var selectedTxPower: Int8 = 0
    var enabled = false
    var ownAddress: LEAddress?
    /// TargetA of a directed set: the peer's identity, or an RPA made from its IRK.
    var targetAddress: LEAddress?
    var duration: UInt16 = 0
    var maxEvents: UInt8 = 0
    var completedEvents = 0
    var lastEventAt: LoopInstant?
    var eventTimer: TimerHandle?
    var durationTimer: TimerHandle?

    var properties: Properties { parameters.advertisingEventProperties }
    var isLegacy: Bool { properties.contains(.legacy) }
    var isConnectable: Bool { properties.contains(.connectable) }
    var isScannable: Bool { properties.contains(.scannable) }
    var isDirected: Bool { properties.contains(.directed) }
    var isHighDutyDirected: Bool { isLegacy && properties.contains(.highDutyDirected) }
    var peer: LEAddress { LEAddress(parameters.peerAddressType, parameters.peerAddress) }
    var mode: AdvertisingMode { isConnectable ? .connectable : isScannable ? .scannable : .nonConnectableNonScannable }

    /// The legacy PDU type a legacy set sends (Vol 4 Part E §7.8.53 Table 7.2).
    static func legacyType(_ properties: Properties) -> LESetAdvertisingParameters.AdvertisingType? {
        switch properties.rawValue {
        case 0x13: .advInd
        case 0x15: .advDirectIndLowDuty
        case 0x1D: .advDirectIndHighDuty
        case 0x12: .advScanInd
        case 0x10: .advNonconnInd
        default: nil
        }
    }

    var legacyType: LESetAdvertisingParameters.AdvertisingType? { isLegacy ? Self.legacyType(properties) : nil }

    mutating func cancelTimers() {
        eventTimer?.cancel()
        eventTimer = nil
        durationTimer?.cancel()
        durationTimer = nil
    }
}

/// Everything the extended advertising, scanning and initiating commands add to the controller.
struct ExtendedAdvertisingState {
    var family = AdvertisingCommandFamily.undecided
    var sets: [UInt8: AdvertisingSet] = [:]
    var scan = ExtendedScanState()
    /// The LE Extended Create Connection in progress (`initiating` holds its primary-PHY view).
    var initiating: LEExtendedCreateConnection?
    var pendingAuxConnect: PendingAuxConnect?
    /// Auxiliary PDUs being followed, per advertiser device and advertising set.
    var follows: [AuxFollowKey: AuxFollow] = [:]
    var nextFollowGeneration = 0

    mutating func cancelTimers() {
        for handle in sets.keys { sets[handle]?.cancelTimers() }
        scan.cancelTimers()
        pendingAuxConnect?.timer.cancel()
        for follow in follows.values { follow.timer?.cancel() }
    }
}

extension VirtualController {
    /// Advertising sets this controller keeps (LE Read Number of Supported Advertising Sets).
    static let supportedAdvertisingSets: UInt8 = 4
    /// The most advertising (or scan response) data a set holds (LE Read Maximum Advertising
    /// Data Length); chained over AUX_CHAIN_IND PDUs.
    static let maxAdvertisingDataLength = 1650
    /// T_MAFS, the minimum time between two auxiliary PDUs of one event (Vol 6 Part B §4.2).
    static let minimumAuxFrameSpace = 300

    /// The legacy advertising, scanning and initiating commands (Vol 4 Part E §3.1.1).
    static let legacyAdvertisingOpcodes: Set<HCIOpcode> = [
        LESetAdvertisingParameters.opcode, LESetAdvertisingData.opcode, LESetScanResponseData.opcode,
        LESetAdvertisingEnable.opcode, LESetScanParameters.opcode, LESetScanEnable.opcode, LECreateConnection.opcode,
    ]

    /// The extended ones, all answered in this file and VirtualController+ExtendedScanning.swift.
    static let extendedAdvertisingOpcodes: [HCIOpcode] = [
        LESetAdvertisingSetRandomAddress.opcode, LESetExtendedAdvertisingParameters.opcode,
        LESetExtendedAdvertisingData.opcode, LESetExtendedScanResponseData.opcode,
        LESetExtendedAdvertisingEnable.opcode, LEReadMaximumAdvertisingDataLength.opcode,
        LEReadNumberOfSupportedAdvertisingSets.opcode, LERemoveAdvertisingSet.opcode, LEClearAdvertisingSets.opcode,
        LESetExtendedScanParameters.opcode, LESetExtendedScanEnable.opcode, LEExtendedCreateConnection.opcode,
    ]

    // MARK: Commands

    /// Answers the extended advertising, scanning and initiating commands, and legacy ones the
    /// family rule forbids. Returns false for commands left to `handleCommand`.
    func handleAdvertisingFamilyCommand(_ packet: HCICommandPacket) -> Bool {
        let opcode = packet.opcode
        // A controller built without extended advertising doesn't know these commands.
        if !configuration.supportsExtendedAdvertising && Self.extendedAdvertisingOpcodes.contains(opcode) { return false }
        // Malformed parameters are Invalid HCI Command Parameters whatever the family, and they
        // do not choose one.
        if Self.legacyAdvertisingOpcodes.contains(opcode) || Self.extendedAdvertisingOpcodes.contains(opcode),
           let type = HCICommands.type(of: opcode), !parametersDecode(type, packet) {
            return true
        }
        if Self.legacyAdvertisingOpcodes.contains(opcode) {
            switch extended.family {
            case .extended:
                refuseOtherFamily(opcode)
                return true
            case .undecided: extended.family = .legacy
            case .legacy: break
            }
            return false
        }
        guard Self.extendedAdvertisingOpcodes.contains(opcode) else { return false }
        if extended.family == .legacy {
            refuseOtherFamily(opcode)
            return true
        }
        extended.family = .extended
        switch opcode {
        case LESetAdvertisingSetRandomAddress.opcode:
            guard let c = decode(LESetAdvertisingSetRandomAddress.self, packet) else { break }
            setAdvertisingSetRandomAddress(c)
        case LESetExtendedAdvertisingParameters.opcode:
            guard let c = decode(LESetExtendedAdvertisingParameters.self, packet) else { break }
            setExtendedAdvertisingParameters(c)
        case LESetExtendedAdvertisingData.opcode:
            guard let c = decode(LESetExtendedAdvertisingData.self, packet) else { break }
            commandComplete(opcode, status: setAdvertisingSetData(
                handle: c.advertisingHandle, operation: c.operation, fragment: c.advertisingData, scanResponse: false))
        case LESetExtendedScanResponseData.opcode:
            guard let c = decode(LESetExtendedScanResponseData.self, packet) else { break }
            commandComplete(opcode, status: setAdvertisingSetData(
                handle: c.advertisingHandle, operation: c.operation, fragment: c.scanResponseData, scanResponse: true))
        case LESetExtendedAdvertisingEnable.opcode:
            guard let c = decode(LESetExtendedAdvertisingEnable.self, packet) else { break }
            commandComplete(opcode, status: setExtendedAdvertisingEnable(c))
        case LEReadMaximumAdvertisingDataLength.opcode:
            guard decode(LEReadMaximumAdvertisingDataLength.self, packet) != nil else { break }
            commandComplete(opcode, LEReadMaximumAdvertisingDataLength.ReturnParameters(
                status: .success, maxAdvertisingDataLength: UInt16(Self.maxAdvertisingDataLength)))
        case LEReadNumberOfSupportedAdvertisingSets.opcode:
            guard decode(LEReadNumberOfSupportedAdvertisingSets.self, packet) != nil else { break }
            commandComplete(opcode, LEReadNumberOfSupportedAdvertisingSets.ReturnParameters(
                status: .success, numSupportedAdvertisingSets: Self.supportedAdvertisingSets))
        case LERemoveAdvertisingSet.opcode:
            guard let c = decode(LERemoveAdvertisingSet.self, packet) else { break }
            guard let set = extended.sets[c.advertisingHandle] else {
                commandComplete(opcode, status: .unknownAdvertisingIdentifier)
                break
            }
            guard !set.enabled else {
                commandComplete(opcode, status: .commandDisallowed)
                break
            }
            extended.sets[c.advertisingHandle] = nil
            commandComplete(opcode, status: .success)
        case LEClearAdvertisingSets.opcode:
            guard decode(LEClearAdvertisingSets.self, packet) != nil else { break }
            guard !extended.sets.values.contains(where: \.enabled) else {
                commandComplete(opcode, status: .commandDisallowed)
                break
            }
            extended.sets = [:]
            commandComplete(opcode, status: .success)
        case LESetExtendedScanParameters.opcode:
            guard let c = decode(LESetExtendedScanParameters.self, packet) else { break }
            commandComplete(opcode, status: setExtendedScanParameters(c))
        case LESetExtendedScanEnable.opcode:
            guard let c = decode(LESetExtendedScanEnable.self, packet) else { break }
            commandComplete(opcode, status: setExtendedScanEnable(c))
        case LEExtendedCreateConnection.opcode:
            guard let c = decode(LEExtendedCreateConnection.self, packet) else { break }
            commandStatus(opcode, extendedCreateConnection(c))
        default:
            return false
        }
        return true
    }

    /// Whether the parameters decode; when they don't, the command is answered with Invalid
    /// HCI Command Parameters.
    private func parametersDecode<C: HCICommand>(_: C.Type, _ packet: HCICommandPacket) -> Bool {
        decode(C.self, packet) != nil
    }

    /// Command Disallowed, with every return parameter present (zero after the status).
    private func refuseOtherFamily(_ opcode: HCIOpcode) {
        let returnOctetsAfterStatus: [HCIOpcode: Int] = [
            LESetExtendedAdvertisingParameters.opcode: 1, LEReadMaximumAdvertisingDataLength.opcode: 2,
            LEReadNumberOfSupportedAdvertisingSets.opcode: 1,
        ]
        if opcode == LECreateConnection.opcode || opcode == LEExtendedCreateConnection.opcode {
            return commandStatus(opcode, .commandDisallowed)
        }
        let returnParameters = [HCIStatus.commandDisallowed.rawValue]
            + [UInt8](repeating: 0, count: returnOctetsAfterStatus[opcode] ?? 0)
        send(.event(CommandComplete(numHCICommandPackets: configuration.commandCredits, opcode: opcode,
                                    returnParameters: returnParameters).packet))
    }

    func setAdvertisingSetRandomAddress(_ c: LESetAdvertisingSetRandomAddress) {
        let opcode = LESetAdvertisingSetRandomAddress.opcode
        guard let set = extended.sets[c.advertisingHandle] else {
            return commandComplete(opcode, status: .unknownAdvertisingIdentifier)
        }
        // A connectable set must not change address under a peer that may be connecting.
        if set.enabled && set.isConnectable { return commandComplete(opcode, status: .commandDisallowed) }
        extended.sets[c.advertisingHandle]?.randomAddress = c.randomAddress
        // An enabled non-connectable set uses it from its next advertising event (unless it
        // advertises with a local RPA).
        if set.enabled && set.parameters.ownAddressType.isRandomOwnAddress, let updated = extended.sets[c.advertisingHandle] {
            extended.sets[c.advertisingHandle]?.ownAddress = ownAddress(of: updated)
        }
        commandComplete(opcode, status: .success)
    }

    func setExtendedAdvertisingParameters(_ c: LESetExtendedAdvertisingParameters) {
        let opcode = LESetExtendedAdvertisingParameters.opcode
        func fail(_ status: HCIStatus) {
            commandComplete(opcode, LESetExtendedAdvertisingParameters.ReturnParameters(status: status, selectedTXPower: 0))
        }
        guard c.advertisingHandle <= 0xEF else { return fail(.invalidHCICommandParameters) }
        let existing = extended.sets[c.advertisingHandle]
        if existing?.enabled == true { return fail(.commandDisallowed) }
        let properties = c.advertisingEventProperties
        guard properties.rawValue & ~0x7F == 0 else { return fail(.invalidHCICommandParameters) }
        if properties.contains(.legacy) {
            guard let type = AdvertisingSet.legacyType(properties) else { return fail(.invalidHCICommandParameters) }
            // Data already in the set must suit the new type.
            let directed = type == .advDirectIndLowDuty || type == .advDirectIndHighDuty
            if let existing, existing.data.count > 31 || existing.scanResponseData.count > 31
                || (directed && !existing.data.isEmpty) {
                return fail(.invalidHCICommandParameters)
            }
        } else {
            if properties.isSuperset(of: [.connectable, .scannable]) || properties.contains(.highDutyDirected) {
                return fail(.invalidHCICommandParameters)
            }
            if properties.contains(.anonymous) && (properties.contains(.connectable) || properties.contains(.scannable)) {
                return fail(.invalidHCICommandParameters)
            }
            if let existing, properties.contains(.scannable) && !existing.data.isEmpty {
                return fail(.invalidHCICommandParameters)
            }
        }
        if !(properties.contains(.legacy) && properties.contains(.highDutyDirected)) {
            guard (0x20...0xFF_FFFF).contains(c.primaryAdvertisingIntervalMin),
                  (0x20...0xFF_FFFF).contains(c.primaryAdvertisingIntervalMax),
                  c.primaryAdvertisingIntervalMin <= c.primaryAdvertisingIntervalMax else {
                return fail(.invalidHCICommandParameters)
            }
        }
        guard (0x01...0x07).contains(c.primaryAdvertisingChannelMap), c.advertisingSID <= 0x0F else {
            return fail(.invalidHCICommandParameters)
        }
        if existing == nil && extended.sets.count >= Int(Self.supportedAdvertisingSets) {
            return fail(.memoryCapacityExceeded)
        }
        var set = existing ?? AdvertisingSet(handle: c.advertisingHandle, parameters: c, did: newDID(after: nil))
        set.parameters = c
        // The power this transmitter can give: −20…+10 dBm; no preference gets 0 dBm.
        set.selectedTxPower = c.advertisingTXPower == LESetExtendedAdvertisingParameters.noTXPowerPreference
            ? 0 : max(-20, min(10, c.advertisingTXPower))
        // Data that no longer fits one AUX_ADV_IND of a connectable set is dropped.
        if !set.isLegacy && set.isConnectable && set.data.count > singlePDUCapacity(set) { set.data = [] }
        extended.sets[c.advertisingHandle] = set
        commandComplete(opcode, LESetExtendedAdvertisingParameters.ReturnParameters(
            status: .success, selectedTXPower: set.selectedTxPower))
    }

    /// A fresh 12-bit Advertising DID, different from the last (Vol 6 Part B §4.4.2.11).
    func newDID(after old: UInt16?) -> UInt16 {
        while true {
            let did = UInt16(radio.randomInt(in: 0...0x0FFF))
            if did != old { return did }
        }
    }

    /// LE Set Extended Advertising Data and Scan Response Data (§7.8.54, §7.8.55).
    func setAdvertisingSetData(handle: UInt8, operation: LESetExtendedAdvertisingData.Operation,
                               fragment: [UInt8], scanResponse: Bool) -> HCIStatus {
        guard var set = extended.sets[handle] else { return .unknownAdvertisingIdentifier }
        if operation == .unchangedData {
            // Only re-announces the advertising data of an enabled extended set with a new DID.
            guard !scanResponse, !set.isLegacy, set.enabled, fragment.isEmpty else { return .invalidHCICommandParameters }
            extended.sets[handle]?.did = newDID(after: set.did)
            return .success
        }
        if set.isLegacy {
            let supportsData = scanResponse ? set.isScannable : !set.isDirected
            guard operation == .completeData, fragment.count <= 31, supportsData || fragment.isEmpty else {
                return .invalidHCICommandParameters
            }
        } else {
            // Scannable extended sets carry their data in the scan response only.
            let supportsData = scanResponse ? set.isScannable : !set.isScannable
            guard supportsData || fragment.isEmpty else { return .invalidHCICommandParameters }
            if operation != .completeData && fragment.isEmpty { return .invalidHCICommandParameters }
            // Fragments only while the set is disabled.
            if set.enabled && operation != .completeData { return .commandDisallowed }
        }
        var partial = scanResponse ? set.partialScanResponse : set.partialData
        var complete: [UInt8]?
        switch operation {
        case .completeData: partial = nil; complete = fragment
        case .firstFragment: partial = fragment
        case .intermediateFragment, .lastFragment:
            guard let soFar = partial else { return .commandDisallowed }
            partial = soFar + fragment
            if operation == .lastFragment { complete = partial; partial = nil }
        case .unchangedData: break
        }
        func discardAll(_ status: HCIStatus) -> HCIStatus {
            if scanResponse { set.scanResponseData = []; set.partialScanResponse = nil }
            else { set.data = []; set.partialData = nil }
            extended.sets[handle] = set
            return status
        }
        if (partial?.count ?? 0) > Self.maxAdvertisingDataLength || (complete?.count ?? 0) > Self.maxAdvertisingDataLength {
            return discardAll(.memoryCapacityExceeded)
        }
        if scanResponse { set.partialScanResponse = partial } else { set.partialData = partial }
        if let complete {
            if scanResponse {
                if set.enabled && set.isScannable && complete.isEmpty { return .commandDisallowed }
                set.scanResponseData = complete
            } else {
                // Connectable events end with their AUX_ADV_IND: no chain (Vol 6 Part B §4.4.2.3).
                if !set.isLegacy && set.isConnectable && complete.count > singlePDUCapacity(set) {
                    return discardAll(.packetTooLong)
                }
                set.data = complete
            }
            if set.enabled && !set.isLegacy && !eventFitsInterval(set) { return discardAll(.packetTooLong) }
            set.did = newDID(after: set.did)
        }
        extended.sets[handle] = set
        return .success
    }

    /// LE Set Extended Advertising Enable (§7.8.56).
    func setExtendedAdvertisingEnable(_ c: LESetExtendedAdvertisingEnable) -> HCIStatus {
        let handles = c.sets.map(\.advertisingHandle)
        guard !(c.enable && c.sets.isEmpty), c.sets.count <= Int(Self.supportedAdvertisingSets),
              Set(handles).count == handles.count else { return .invalidHCICommandParameters }
        if !c.enable && c.sets.isEmpty {
            for handle in extended.sets.keys { stopAdvertisingSet(handle) }
            return .success
        }
        for handle in handles where extended.sets[handle] == nil { return .unknownAdvertisingIdentifier }
        guard c.enable else {
            for handle in handles { stopAdvertisingSet(handle) }
            return .success
        }
        for entry in c.sets {
            guard let set = extended.sets[entry.advertisingHandle] else { return .unknownAdvertisingIdentifier }
            guard ownAddress(of: set) != nil else { return .invalidHCICommandParameters }
            if set.isHighDutyDirected && (entry.duration == 0 || entry.duration > 128) { return .invalidHCICommandParameters }
            if !set.isLegacy && set.isScannable && set.scanResponseData.isEmpty { return .commandDisallowed }
            if set.partialData != nil || set.partialScanResponse != nil { return .commandDisallowed }
            if !set.isLegacy && !eventFitsInterval(set) { return .packetTooLong }
            if set.isConnectable && !set.enabled && connections.count >= configuration.maxConnections {
                return .connectionLimitExceeded
            }
        }
        for entry in c.sets { startAdvertisingSet(entry) }
        return .success
    }

    /// The address a set advertises with: a local RPA for 0x02/0x03 when the resolving list has
    /// one for the set's peer (§7.8.53), else its own random address for the random types.
    func ownAddress(of set: AdvertisingSet) -> LEAddress? {
        let type = set.parameters.ownAddressType
        if let rpa = privateOwnAddress(type, toward: resolvingListIndex(of: set.peer)) { return rpa }
        guard type.isRandomOwnAddress else { return LEAddress(.publicDevice, publicAddress) }
        return set.randomAddress.map { LEAddress(.randomDevice, $0) }
    }

    // MARK: Advertising sets on the air

    func startAdvertisingSet(_ entry: LESetExtendedAdvertisingEnable.AdvertisingSet) {
        let handle = entry.advertisingHandle
        guard var set = extended.sets[handle] else { return }
        let restarting = set.enabled
        set.cancelTimers()
        set.enabled = true
        set.ownAddress = ownAddress(of: set)
        set.targetAddress = set.isDirected ? directedTarget(set.peer) : nil
        set.duration = entry.duration
        set.maxEvents = entry.maxExtendedAdvertisingEvents
        set.completedEvents = 0
        if restarting {
            // Enabling an enabled set restarts its duration and event count now.
            set.durationTimer = scheduleDuration(handle, set.duration)
        }
        extended.sets[handle] = set
        if restarting { scheduleSetEvent(handle, afterMicroseconds: 0) }
        else { scheduleSetEvent(handle, afterMicroseconds: Int64(radio.randomInt(in: 0...10_000))) }
    }

    func stopAdvertisingSet(_ handle: UInt8) {
        extended.sets[handle]?.cancelTimers()
        extended.sets[handle]?.enabled = false
    }

    /// Disables a set and tells the host why (§7.7.65.18).
    func terminateAdvertisingSet(_ handle: UInt8, status: HCIStatus, connection: ConnectionHandle = 0) {
        guard let set = extended.sets[handle], set.enabled else { return }
        stopAdvertisingSet(handle)
        sendLEEvent(LEAdvertisingSetTerminated(
            status: status, advertisingHandle: handle, connectionHandle: connection,
            numCompletedExtendedAdvertisingEvents: UInt8(min(set.completedEvents, 255))))
    }

    private func scheduleDuration(_ handle: UInt8, _ duration: UInt16) -> TimerHandle? {
        guard duration > 0 else { return nil }
        return loop.schedule(after: .milliseconds(Int64(duration) * 10)) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self, let set = self.extended.sets[handle], set.enabled else { return }
            // High duty cycle directed advertising also ends its connection attempt (§7.8.56).
            if set.isHighDutyDirected {
                self.sendConnectionComplete(status: .advertisingTimeout, handle: 0, role: .peripheral, peer: set.peer,
                                            interval: 0, latency: 0, timeout: 0, advertisingHandle: handle)
            }
            self.terminateAdvertisingSet(handle, status: .advertisingTimeout)
        }
    }

    private func scheduleSetEvent(_ handle: UInt8, afterMicroseconds delay: Int64) {
        guard let index = extended.sets.index(forKey: handle) else { return }
        // Through the index: `sets[handle]?.eventTimer = …` moved the whole set out of the
        // table and back in, once per advertising event.
        extended.sets.values[index].eventTimer = loop.schedule(afterNanoseconds: delay * 1000) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            self?.advertisingSetEvent(handle)
        }
    }

    /// What one advertising event of a set needs, read from the set in place.
    private struct SetEvent {
        let own: LEAddress
        let completed: Int
        let startsDuration: Bool
        let duration: UInt16
        /// The legacy PDU's type, peer and data; nil for an extended set (which reads the set).
        let legacy: (type: LESetAdvertisingParameters.AdvertisingType, peer: LEAddress, data: [UInt8])?
        let maxEvents: UInt8
        let intervalMicroseconds: Int64
        let isHighDutyDirected: Bool
    }

    private func advertisingSetEvent(_ handle: UInt8) {
        guard let index = extended.sets.index(forKey: handle) else { return }
        // Read and changed in place (the table's `_modify`), nothing else touching the table
        // meanwhile: a copy of the set (its arrays, timers and parameters), read through the
        // table's getter, cost more than the rest of a legacy event.
        let now = loop.now
        let taken = { (set: inout AdvertisingSet) -> SetEvent? in
            guard set.enabled, let own = set.ownAddress else { return nil }
            // The duration runs from the start of the first advertising event.
            let startsDuration = set.completedEvents == 0 && set.durationTimer == nil
            set.lastEventAt = now
            set.completedEvents += 1
            return SetEvent(own: own, completed: set.completedEvents, startsDuration: startsDuration, duration: set.duration,
                            legacy: set.legacyType.map { ($0, set.targetAddress ?? set.peer, set.data) }, maxEvents: set.maxEvents,
                            intervalMicroseconds: Int64(set.parameters.primaryAdvertisingIntervalMin) * 625,
                            isHighDutyDirected: set.isHighDutyDirected)
        }(&extended.sets.values[index])
        guard let event = taken else { return }
        if event.startsDuration { extended.sets.values[index].durationTimer = scheduleDuration(handle, event.duration) }
        if let legacy = event.legacy {
            radio.transmit(Self.legacyAdvertisingPDU(legacy.type, own: event.own, peer: legacy.peer, data: legacy.data), from: radioID)
        } else {
            transmitChain(extendedAdvertisingEvent(extended.sets.values[index], own: event.own))
        }
        if event.maxEvents > 0 && event.completed >= Int(event.maxEvents) {
            return terminateAdvertisingSet(handle, status: .limitReached)
        }
        let next: Int64 = event.isHighDutyDirected
            ? 3750
            : event.intervalMicroseconds + Int64(radio.randomInt(in: 0...10_000))  // advInterval + advDelay, µs
        scheduleSetEvent(handle, afterMicroseconds: next)
    }

    /// A legacy advertising PDU of `type` (shared with the legacy advertising commands).
    static func legacyAdvertisingPDU(_ type: LESetAdvertisingParameters.AdvertisingType, own: LEAddress,
                                     peer: LEAddress, data: [UInt8]) -> AdvertisingPDU {
        switch type {
        case .advInd: .advInd(advA: own, data: data)
        case .advDirectIndHighDuty, .advDirectIndLowDuty: .advDirectInd(advA: own, targetA: peer)
        case .advScanInd: .advScanInd(advA: own, data: data)
        case .advNonconnInd: .advNonconnInd(advA: own, data: data)
        }
    }

    /// One extended advertising event: ADV_EXT_IND on the primary PHY pointing to an
    /// AUX_ADV_IND (and AUX_CHAIN_INDs) on the secondary PHY.
    func extendedAdvertisingEvent(_ set: AdvertisingSet, own: LEAddress) -> [(ExtendedAdvertisingPDU, LEPHY)] {
        let aux = auxAdvIndHeader(set, own: own)
        let secondary = set.parameters.secondaryAdvertisingPHY
        let chain = auxiliaryChain(first: aux, data: set.isScannable ? [] : set.data, phy: secondary)
        // ADV_EXT_IND: ADI, AuxPtr and (if asked) TxPower; the addresses are in the AUX_ADV_IND.
        var indication = ExtendedAdvertisingPayload(mode: set.mode, adi: aux.adi, txPower: aux.txPower)
        indication.auxPtr = auxPointer(from: indication, on: set.parameters.primaryAdvertisingPHY, to: secondary)
        return [(.advExtInd(indication), set.parameters.primaryAdvertisingPHY)]
            + chain.enumerated().map { i, payload in (i == 0 ? .auxAdvInd(payload) : .auxChainInd(payload), secondary) }
    }

    /// The AUX_ADV_IND of a set without its data.
    func auxAdvIndHeader(_ set: AdvertisingSet, own: LEAddress) -> ExtendedAdvertisingPayload {
        ExtendedAdvertisingPayload(
            mode: set.mode, advA: set.properties.contains(.anonymous) ? nil : own,
            targetA: set.isDirected ? set.targetAddress ?? set.peer : nil,
            adi: AdvertisingDataInfo(did: set.did, sid: set.parameters.advertisingSID),
            txPower: set.properties.contains(.includeTxPower) ? set.selectedTxPower : nil)
    }

    /// Splits `data` over `first` (an AUX_ADV_IND or AUX_SCAN_RSP) and as many AUX_CHAIN_INDs as
    /// it needs, each pointing to the next.
    func auxiliaryChain(first: ExtendedAdvertisingPayload, data: [UInt8], phy: LEPHY) -> [ExtendedAdvertisingPayload] {
        var chain: [ExtendedAdvertisingPayload] = []
        var rest = data[...]
        var payload = first
        while true {
            if rest.count <= payload.advDataCapacity {
                payload.advData = Array(rest)
                chain.append(payload)
                return chain
            }
            payload.auxPtr = AuxiliaryPointer(channelIndex: 0, offsetUnits300us: false, auxOffset: 0, auxPHY: phy)
            payload.advData = Array(rest.prefix(payload.advDataCapacity))
            rest = rest.dropFirst(payload.advData.count)
            payload.auxPtr = auxPointer(from: payload, on: phy, to: phy)
            chain.append(payload)
            // AUX_CHAIN_IND: AdvMode 0, no AdvA or TxPower; the ADI stays (Vol 6 Part B §2.3.4).
            payload = ExtendedAdvertisingPayload(adi: first.adi)
        }
    }

    /// An AuxPtr from a packet to the next: its air time plus T_MAFS, on a random channel.
    func auxPointer(from payload: ExtendedAdvertisingPayload, on phy: LEPHY, to auxPHY: LEPHY) -> AuxiliaryPointer {
        var withPointer = payload
        withPointer.auxPtr = AuxiliaryPointer(channelIndex: 0, offsetUnits300us: false, auxOffset: 0, auxPHY: auxPHY)
        let airMicroseconds = Int(phy.airTimeNanoseconds(pduOctets: 2 + withPointer.length) / 1000)
        return AuxiliaryPointer(channelIndex: UInt8(radio.randomInt(in: 0...36)),
                                offsetAtLeastMicroseconds: airMicroseconds + Self.minimumAuxFrameSpace, auxPHY: auxPHY)
    }

    /// Sends PDUs that follow each other by AuxPtr: each at its predecessor's offset in timed
    /// mode, all at once (in order) in instant mode.
    func transmitChain(_ chain: [(ExtendedAdvertisingPDU, LEPHY)], to receiver: RadioDeviceID? = nil) {
        var offset = 0
        for (pdu, phy) in chain {
            if radio.airTime == .instant || offset == 0 {
                radio.transmit(pdu, phy: phy, from: radioID, to: receiver)
            } else {
                let radioID = self.radioID
                loop.schedule(after: .microseconds(Int64(offset))) { [radio] in
                    radio.transmit(pdu, phy: phy, from: radioID, to: receiver)
                }
            }
            offset += pdu.payload?.auxPtr?.offsetMicroseconds ?? 0
        }
    }

    /// How much AdvData a connectable set's single AUX_ADV_IND holds.
    func singlePDUCapacity(_ set: AdvertisingSet) -> Int {
        auxAdvIndHeader(set, own: ownAddress(of: set) ?? LEAddress(.publicDevice, publicAddress)).advDataCapacity
    }

    /// Whether an extended advertising event (with its chain) ends within the primary
    /// advertising interval; when it can't, the data is Packet Too Long (§7.8.54).
    func eventFitsInterval(_ set: AdvertisingSet) -> Bool {
        let own = ownAddress(of: set) ?? LEAddress(.publicDevice, publicAddress)
        let event = extendedAdvertisingEvent(set, own: own)
        var microseconds = 0
        for (pdu, phy) in event {
            microseconds += pdu.payload?.auxPtr?.offsetMicroseconds ?? Int(phy.airTimeNanoseconds(pduOctets: pdu.airOctets) / 1000)
        }
        return microseconds <= Int(set.parameters.primaryAdvertisingIntervalMin) * 625
    }

    // MARK: Requests to advertising sets

    /// The enabled set with this address that advertised most recently and takes `request`.
    func advertisingSet(for advA: LEAddress, legacy: Bool, where accepts: (AdvertisingSet) -> Bool) -> AdvertisingSet? {
        // No array of copies (a filter made one per scan request): each set is looked at once.
        var best: AdvertisingSet?
        for set in extended.sets.values where set.enabled && set.isLegacy == legacy && set.ownAddress == advA && accepts(set) {
            // The first of the most recent, as `max` picks.
            if let current = best, (current.lastEventAt ?? .zero) >= (set.lastEventAt ?? .zero) { continue }
            best = set
        }
        return best
    }

    func acceptsScanRequest(_ set: AdvertisingSet, from scanner: HeardAddress) -> Bool {
        guard set.isScannable else { return false }
        let policy = set.parameters.advertisingFilterPolicy
        return !(policy == .filterScanRequests || policy == .filterBoth) || isInFilterAcceptList(scanner)
    }

    func acceptsConnectRequest(_ set: AdvertisingSet, from initiator: HeardAddress) -> Bool {
        guard set.isConnectable, connection(to: initiator.reported) == nil else { return false }
        if set.isDirected {
            return matches(initiator, peerType: set.parameters.peerAddressType, peerAddress: set.parameters.peerAddress)
        }
        let policy = set.parameters.advertisingFilterPolicy
        return !(policy == .filterConnectionRequests || policy == .filterBoth) || isInFilterAcceptList(initiator)
    }

    /// SCAN_REQ and CONNECT_IND to legacy-PDU sets.
    func advertisingSetReceived(_ pdu: AdvertisingPDU, from sender: RadioDeviceID) {
        switch pdu {
        case .scanReq(let scanA, let advA):
            guard let scanner = heard(scanA),
                  let set = advertisingSet(for: advA, legacy: true, where: { acceptsScanRequest($0, from: scanner) }),
                  let own = set.ownAddress else { return }
            radio.transmit(.scanRsp(advA: own, data: set.scanResponseData), from: radioID, to: sender)
        case .connectInd(let initA, let advA, let ll):
            guard let initiator = heard(initA),
                  let set = advertisingSet(for: advA, legacy: true, where: { acceptsConnectRequest($0, from: initiator) }) else { return }
            connectAdvertisingSet(set.handle, initiator: initiator, peerDevice: sender, llData: ll, phy: .le1M)
        default:
            break
        }
    }

    /// AUX_SCAN_REQ and AUX_CONNECT_REQ to extended sets.
    func advertisingSetReceived(_ pdu: ExtendedAdvertisingPDU, from sender: RadioDeviceID) {
        switch pdu {
        case .auxScanReq(let scanA, let advA):
            guard let scanner = heard(scanA),
                  let set = advertisingSet(for: advA, legacy: false, where: { acceptsScanRequest($0, from: scanner) }),
                  let own = set.ownAddress else { return }
            let phy = set.parameters.secondaryAdvertisingPHY
            let first = ExtendedAdvertisingPayload(
                advA: own, adi: AdvertisingDataInfo(did: set.did, sid: set.parameters.advertisingSID))
            let chain = auxiliaryChain(first: first, data: set.scanResponseData, phy: phy)
            transmitChain(chain.enumerated().map { i, p in (i == 0 ? .auxScanRsp(p) : .auxChainInd(p), phy) }, to: sender)
        case .auxConnectReq(let initA, let advA, let ll):
            guard let initiator = heard(initA),
                  let set = advertisingSet(for: advA, legacy: false, where: { acceptsConnectRequest($0, from: initiator) }),
                  let own = set.ownAddress else { return }
            let phy = set.parameters.secondaryAdvertisingPHY
            radio.transmit(.auxConnectRsp(ExtendedAdvertisingPayload(advA: own, targetA: initA)), phy: phy, from: radioID, to: sender)
            connectAdvertisingSet(set.handle, initiator: initiator, peerDevice: sender, llData: ll, phy: phy)
        default:
            break
        }
    }

    /// A connection made from a set: the peripheral's connection complete, then the set's
    /// termination with the new handle (§7.8.56).
    private func connectAdvertisingSet(_ handle: UInt8, initiator: HeardAddress, peerDevice: RadioDeviceID,
                                       llData: ConnectLLData, phy: LEPHY) {
        extended.sets[handle]?.cancelTimers()
        acceptConnection(from: initiator, peerDevice: peerDevice, llData: llData, advertisingHandle: handle,
                         localRPA: generatedLocalRPA(extended.sets[handle]?.ownAddress))
        guard let connectionHandle = handlesByAccessAddress[llData.accessAddress] else { return }
        connections[connectionHandle]?.txPHY = phy
        connections[connectionHandle]?.rxPHY = phy
        terminateAdvertisingSet(handle, status: .success, connection: connectionHandle)
    }

    var advertisingSetsUseFilterAcceptList: Bool {
        extended.sets.values.contains { $0.enabled && $0.parameters.advertisingFilterPolicy != .acceptAll }
    }
}

extension LEAddressType {
    /// Own_Address_Type values that advertise or scan with the random address.
    var isRandomOwnAddress: Bool { self == .randomDevice || self == .randomIdentity }
}
