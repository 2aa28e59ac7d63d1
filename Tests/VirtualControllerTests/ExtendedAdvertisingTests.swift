import ByteCoding
import HCI
import Scheduling
import Testing
@testable import VirtualController

@Suite("Extended advertising PDUs")
struct ExtendedAdvertisingPDUTests {
    static let random = LEAddress(.randomDevice, BluetoothAddress("C0:11:22:33:44:55")!)
    static let adi = AdvertisingDataInfo(did: 0x123, sid: 5)

    @Test func advExtIndBytes() throws {
        // AuxPtr: channel 10, CA 1 (0–50 ppm), 30 µs units, offset 20 (600 µs), LE 2M.
        let pointer = AuxiliaryPointer(channelIndex: 10, offsetUnits300us: false, auxOffset: 20, auxPHY: .le2M)
        let pdu = ExtendedAdvertisingPDU.advExtInd(ExtendedAdvertisingPayload(adi: Self.adi, auxPtr: pointer))
        // Header: PDU type 0b0111, TxAdd/RxAdd 0; Length 7.
        // Payload: extended header length 6 | AdvMode 0b00 << 6 = 06; flags ADI (bit 3) + AuxPtr
        // (bit 4) = 18; ADI = DID 0x123 | SID 5 << 12 = 0x5123 → 23 51; AuxPtr = 10 | CA << 6 |
        // 20 << 8 | PHY code 1 << 21 = 0x20144A → 4A 14 20.
        let bytes: [UInt8] = [0x07, 0x07, 0x06, 0x18, 0x23, 0x51, 0x4A, 0x14, 0x20]
        #expect(pdu.encode() == bytes)
        #expect(try ExtendedAdvertisingPDU(decoding: bytes, as: .advExtInd) == pdu)
        #expect(pointer.offsetMicroseconds == 600)
        #expect(pdu.airOctets == bytes.count)
    }

    @Test func auxAdvIndBytes() throws {
        let payload = ExtendedAdvertisingPayload(mode: .connectable, advA: Self.random, adi: Self.adi, txPower: -4,
                                                 advData: [0x02, 0x01, 0x06])
        let pdu = ExtendedAdvertisingPDU.auxAdvInd(payload)
        // Header: 0b0111 | TxAdd (random AdvA) 0x40 = 47; Length 1 + 10 + 3 = 14.
        // Extended header length 10 (flags, AdvA 6, ADI 2, TxPower 1) | AdvMode 0b01 << 6 = 4A;
        // flags AdvA (bit 0) + ADI (bit 3) + TxPower (bit 6) = 49; AdvA least significant byte
        // first; ADI 23 51; TxPower −4 = FC; AdvData.
        let bytes: [UInt8] = [0x47, 0x0E, 0x4A, 0x49, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, 0x23, 0x51, 0xFC, 0x02, 0x01, 0x06]
        #expect(pdu.encode() == bytes)
        #expect(try ExtendedAdvertisingPDU(decoding: bytes, as: .auxAdvInd) == pdu)
        // The same bytes are an AUX_CHAIN_IND when that is what the receiver waits for.
        #expect(try ExtendedAdvertisingPDU(decoding: bytes, as: .auxChainInd) == .auxChainInd(payload))
    }

    @Test func auxConnectRspAndRequests() throws {
        let initiator = LEAddress(.publicDevice, BluetoothAddress("00:00:00:00:00:01")!)
        let rsp = ExtendedAdvertisingPDU.auxConnectRsp(ExtendedAdvertisingPayload(advA: initiator, targetA: Self.random))
        // PDU type 0b1000 | RxAdd (random TargetA) 0x80 = 88; Length 14; header length 13, AdvMode
        // 0 = 0D; flags AdvA + TargetA = 03.
        let bytes: [UInt8] = [0x88, 0x0E, 0x0D, 0x03, 0x01, 0, 0, 0, 0, 0, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0]
        #expect(rsp.encode() == bytes)
        #expect(try ExtendedAdvertisingPDU(decoding: bytes, as: .auxConnectRsp) == rsp)
        // AUX_SCAN_REQ is SCAN_REQ's bytes on a secondary channel.
        let request = ExtendedAdvertisingPDU.auxScanReq(scanA: initiator, advA: Self.random)
        #expect(request.encode() == AdvertisingPDU.scanReq(scanA: initiator, advA: Self.random).encode())
        #expect(try ExtendedAdvertisingPDU(decoding: request.encode(), as: .auxScanReq) == request)
        #expect(throws: DecodeError.self) { try ExtendedAdvertisingPDU(decoding: request.encode(), as: .auxConnectReq) }
    }

    @Test func malformedExtendedPDUsAreRejected() {
        let cases: [([UInt8], ExtendedAdvertisingPDU.Kind)] = [
            ([0x07], .advExtInd),                                          // no length
            ([0x07, 0x02, 0x06, 0x18], .advExtInd),                        // length says 2, 2 bytes, header says 6
            ([0x07, 0x01, 0xC0], .advExtInd),                              // AdvMode 0b11
            ([0x07, 0x05, 0x04, 0x10, 0x00, 0x00, 0xE0], .auxAdvInd),      // AuxPtr PHY code 7
            ([0x07, 0x02, 0x01, 0x80], .auxChainInd),                      // reserved flag bit 7
            ([0x07, 0x03, 0x02, 0x01, 0x00], .auxAdvInd),                  // AdvA flag, 1 byte of it
            ([0x03, 0x01, 0x00], .auxAdvInd),                              // wrong PDU type
            ([0x07, 0x00], .auxChainInd),                                  // empty payload
        ]
        for (bytes, kind) in cases {
            #expect(throws: DecodeError.self, "\(bytes)") { try ExtendedAdvertisingPDU(decoding: bytes, as: kind) }
        }
    }

    @Test func auxPointerUnits() {
        // 245.73 ms is the most 30 µs units reach; beyond, 300 µs units (rounded up).
        #expect(AuxiliaryPointer(channelIndex: 0, offsetAtLeastMicroseconds: 601, auxPHY: .le1M).offsetMicroseconds == 630)
        let long = AuxiliaryPointer(channelIndex: 0, offsetAtLeastMicroseconds: 250_000, auxPHY: .leCoded)
        #expect(long.offsetUnits300us && long.offsetMicroseconds == 250_200)
    }
}

/// Records every extended advertising PDU on the radio, with the time it was heard.
final class ExtendedPDURecorder: RadioDevice, @unchecked Sendable {
    var heard: [(pdu: ExtendedAdvertisingPDU, phy: LEPHY, at: LoopInstant)] = []
    let loop: EventLoop
    init(loop: EventLoop) { self.loop = loop }
    func radioDidReceive(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID) {}
    func radioDidReceive(_ pdu: DataPDU, accessAddress: UInt32, rssi: Int8) {}
    func radioLink(_ accessAddress: UInt32, reachable: Bool) {}
    func radioDidReceive(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID) {
        heard.append((pdu, phy, loop.now))
    }
}

@Suite("Virtual controller: extended advertising and scanning")
struct ExtendedAdvertisingTests {
    typealias Properties = LESetExtendedAdvertisingParameters.EventProperties
    static let flags: [UInt8] = [0x02, 0x01, 0x06]

    /// `count` bytes of advertising data: manufacturer-specific AD structures of a counting pattern.
    static func data(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) } }

    func parameters(_ handle: UInt8 = 0, _ properties: Properties, secondaryPHY: LEPHY = .le1M, sid: UInt8 = 1,
                    interval: UInt32 = 0xA0, txPower: Int8 = 0x7F) -> LESetExtendedAdvertisingParameters {
        LESetExtendedAdvertisingParameters(
            advertisingHandle: handle, advertisingEventProperties: properties, primaryAdvertisingIntervalMin: interval,
            primaryAdvertisingIntervalMax: interval, advertisingTXPower: txPower, secondaryAdvertisingPHY: secondaryPHY,
            advertisingSID: sid)
    }

    /// Sets data in commands of at most 251 bytes: first/intermediate/last fragments.
    func setData(_ host: RawHost, handle: UInt8 = 0, _ data: [UInt8], scanResponse: Bool = false,
                 sourceLocation: SourceLocation = #_sourceLocation) {
        var chunks = stride(from: 0, to: data.count, by: 251).map { Array(data[$0..<min($0 + 251, data.count)]) }
        if chunks.isEmpty { chunks = [[]] }
        for (i, chunk) in chunks.enumerated() {
            let operation: LESetExtendedAdvertisingData.Operation =
                chunks.count == 1 ? .completeData : i == 0 ? .firstFragment : i == chunks.count - 1 ? .lastFragment : .intermediateFragment
            let status = scanResponse
                ? host.status(LESetExtendedScanResponseData(advertisingHandle: handle, operation: operation, scanResponseData: chunk))
                : host.status(LESetExtendedAdvertisingData(advertisingHandle: handle, operation: operation, advertisingData: chunk))
            #expect(status == .success, sourceLocation: sourceLocation)
        }
    }

    func enable(_ host: RawHost, _ sets: [LESetExtendedAdvertisingEnable.AdvertisingSet] = [.init(advertisingHandle: 0)],
                sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(host.status(LESetExtendedAdvertisingEnable(enable: true, sets: sets)) == .success, sourceLocation: sourceLocation)
    }

    func extendedScan(_ host: RawHost, active: Bool = false, filter: LESetExtendedScanEnable.FilterDuplicates = .enabled,
                      phys: [LEPHY] = [.le1M], duration: UInt16 = 0, period: UInt16 = 0,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        let entries = phys.map { LESetExtendedScanParameters.ScanningPHY(phy: $0, scanType: active ? .active : .passive) }
        #expect(host.status(LESetExtendedScanParameters(scanningPHYs: entries)) == .success, sourceLocation: sourceLocation)
        #expect(host.status(LESetExtendedScanEnable(enable: true, filterDuplicates: filter, duration: duration, period: period))
                == .success, sourceLocation: sourceLocation)
    }

    func reports(_ host: RawHost) -> [LEExtendedAdvertisingReport.Report] {
        host.takeLEEvents().flatMap { e -> [LEExtendedAdvertisingReport.Report] in
            if case .extendedAdvertisingReport(let r) = e { return r.reports }
            return []
        }
    }

    /// Joins reports' fragments into whole advertisements: (first report, data, statuses).
    func reassemble(_ reports: [LEExtendedAdvertisingReport.Report])
        -> [(report: LEExtendedAdvertisingReport.Report, data: [UInt8], statuses: [ExtendedAdvertisingEventType.DataStatus])] {
        var whole: [(LEExtendedAdvertisingReport.Report, [UInt8], [ExtendedAdvertisingEventType.DataStatus])] = []
        var current: (LEExtendedAdvertisingReport.Report, [UInt8], [ExtendedAdvertisingEventType.DataStatus])?
        for report in reports {
            var entry = current ?? (report, [], [])
            entry.1 += report.data
            entry.2.append(report.eventType.dataStatus)
            if report.eventType.dataStatus == .incompleteMoreToCome { current = entry } else { whole.append(entry); current = nil }
        }
        return whole
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func fourHundredBytesReassembledAcrossReports(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let data = Self.data(400)
        #expect(d.a.returning(parameters(0, [], secondaryPHY: .le2M, sid: 3, txPower: -8))?.selectedTXPower == -8)
        setData(d.a, data)
        enable(d.a)
        extendedScan(d.b)
        d.loop.run(for: .seconds(1))
        let seen = reports(d.b)
        // 400 bytes: 229 + 171, the first "incomplete, more to come", the second complete; the
        // duplicate filter (same ADI) keeps it to one advertisement.
        #expect(seen.map(\.data.count) == [229, 171])
        #expect(seen.map(\.eventType.dataStatus) == [.incompleteMoreToCome, .complete])
        let whole = try #require(reassemble(seen).first)
        #expect(whole.data == data)
        let first = whole.report
        #expect(first.address == TwoDevices.addressA && first.addressType == .publicDevice)
        #expect(first.primaryPHY == 0x01 && first.secondaryPHY == 0x02 && first.advertisingSID == 3)
        #expect(first.eventType.rawValue & 0x1F == 0)  // non-connectable, non-scannable, undirected, extended
        #expect(first.txPower == 127)  // not included: no TxPower field asked for
        #expect(first.rssi == -59)
    }

    @Test func extendedReportsWithoutDuplicateFilterRepeatPerEvent() {
        let d = TwoDevices()
        #expect(d.a.returning(parameters(0, [.includeTxPower], txPower: 4))?.selectedTXPower == 4)
        setData(d.a, Self.data(300))
        enable(d.a)
        extendedScan(d.b, filter: .disabled)
        d.loop.run(for: .seconds(1))
        let whole = reassemble(reports(d.b))
        // A 100 ms interval (+ up to 10 ms advDelay): 9 or 10 events in a second.
        #expect((9...10).contains(whole.count), "\(whole.count)")
        #expect(whole.allSatisfy { $0.data == Self.data(300) && $0.report.txPower == 4 })
    }

    @Test func legacySetSeenByALegacyScanner() {
        let d = TwoDevices()
        // A drives extended commands with a legacy ADV_IND set; B is a legacy host.
        #expect(d.a.returning(parameters(0, [.legacy, .connectable, .scannable]))?.status == .success)
        setData(d.a, Self.flags)
        setData(d.a, [0x03, 0x03, 0x0D, 0x18], scanResponse: true)
        enable(d.a)
        #expect(d.b.status(LESetScanParameters(leScanType: .active, leScanInterval: 0x10, leScanWindow: 0x10,
                                               ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) == .success)
        #expect(d.b.status(LESetScanEnable(leScanEnable: true, filterDuplicates: true)) == .success)
        d.loop.run(for: .seconds(1))
        let seen = d.b.takeLEEvents().flatMap { e -> [LEAdvertisingReport.Report] in
            if case .advertisingReport(let r) = e { return r.reports }
            return []
        }
        #expect(seen.map(\.eventType) == [.advInd, .scanRsp])
        #expect(seen.map(\.data) == [Self.flags, [0x03, 0x03, 0x0D, 0x18]])
    }

    @Test func extendedScannerReportsLegacyPDUsWithLegacyEventTypes() {
        let d = TwoDevices()
        // B advertises with the legacy commands: ADV_IND, then ADV_SCAN_IND, ADV_NONCONN_IND.
        for (type, expected) in [(LESetAdvertisingParameters.AdvertisingType.advInd, [UInt16(0x13), 0x1B]),
                                 (.advScanInd, [0x12, 0x1A]), (.advNonconnInd, [0x10])] {
            #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
            #expect(d.b.status(LESetAdvertisingParameters(
                advertisingIntervalMin: 0xA0, advertisingIntervalMax: 0xA0, advertisingType: type, ownAddressType: .publicDevice,
                peerAddressType: .publicDevice, peerAddress: .zero, advertisingChannelMap: 7, advertisingFilterPolicy: .acceptAll)) == .success)
            #expect(d.b.status(LESetAdvertisingData(advertisingData: Self.flags)) == .success)
            #expect(d.b.status(LESetScanResponseData(scanResponseData: [0x02, 0x0A, 0x00])) == .success)
            #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
            #expect(d.a.status(LESetExtendedScanEnable(enable: false)) == .success)
            extendedScan(d.a, active: true)
            d.loop.run(for: .seconds(1))
            let seen = reports(d.a)
            #expect(seen.map(\.eventType.rawValue) == expected, "\(type)")
            #expect(seen.allSatisfy { $0.primaryPHY == 1 && $0.secondaryPHY == 0 && $0.advertisingSID == 0xFF && $0.txPower == 127 })
            #expect(seen.first?.data == Self.flags)
        }
    }

    @Test func directedLegacyPDUReportedWithItsTarget() {
        let d = TwoDevices()
        #expect(d.b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0xA0, advertisingIntervalMax: 0xA0, advertisingType: .advDirectIndLowDuty,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: TwoDevices.addressA,
            advertisingChannelMap: 7, advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        extendedScan(d.a)
        d.loop.run(for: .seconds(1))
        let seen = reports(d.a)
        #expect(seen.map(\.eventType.rawValue) == [0x15])
        #expect(seen.first?.directAddress == TwoDevices.addressA && seen.first?.directAddressType == 0)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func scanResponseOfAScannableExtendedSet(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let response = Self.data(300)
        #expect(d.a.returning(parameters(0, [.scannable], secondaryPHY: .leCoded))?.status == .success)
        // A scannable extended set carries no advertising data, and needs a scan response to start.
        #expect(d.a.status(LESetExtendedAdvertisingData(advertisingData: Self.flags)) == .invalidHCICommandParameters)
        #expect(d.a.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 0)])) == .commandDisallowed)
        setData(d.a, response, scanResponse: true)
        enable(d.a)
        extendedScan(d.b, active: true)
        d.loop.run(for: .seconds(1))
        let whole = reassemble(reports(d.b))
        try #require(whole.count == 2)
        // The AUX_ADV_IND: scannable, no data. Then the scan response: scannable + scan response.
        #expect(whole[0].report.eventType == ExtendedAdvertisingEventType([.scannable], dataStatus: .complete))
        #expect(whole[0].data.isEmpty)
        #expect(whole[1].report.eventType.rawValue & 0x1F == 0b01010)
        #expect(whole[1].data == response && whole[1].statuses == [.incompleteMoreToCome, .complete])
        #expect(whole[1].report.secondaryPHY == 0x03 && whole[1].report.advertisingSID == 1)
    }

    @Test func passiveScanSendsNoScanRequest() {
        let d = TwoDevices()
        #expect(d.a.returning(parameters(0, [.scannable]))?.status == .success)
        setData(d.a, Self.flags, scanResponse: true)
        enable(d.a)
        extendedScan(d.b, active: false)
        d.loop.run(for: .seconds(1))
        #expect(reports(d.b).map { $0.eventType.contains(.scanResponse) } == [false])
    }

    @Test func terminationByDurationAndByEventCount() throws {
        let d = TwoDevices()
        #expect(d.a.returning(parameters(0, []))?.status == .success)
        #expect(d.a.returning(parameters(1, [.legacy]))?.status == .success)
        // Set 0 for 500 ms (units of 10 ms) at a 100 ms interval; set 1 for three events.
        enable(d.a, [.init(advertisingHandle: 0, duration: 50), .init(advertisingHandle: 1, maxExtendedAdvertisingEvents: 3)])
        let start = d.loop.now
        var terminated: [(LEAdvertisingSetTerminated, Duration)] = []
        d.loop.run(until: {
            for e in d.a.takeLEEvents() { if case .advertisingSetTerminated(let t) = e { terminated.append((t, d.loop.now - start)) } }
            return terminated.count == 2
        }, timeout: .seconds(2))
        try #require(terminated.count == 2)
        let byCount = try #require(terminated.first { $0.0.advertisingHandle == 1 })
        #expect(byCount.0.status == .limitReached && byCount.0.numCompletedExtendedAdvertisingEvents == 3)
        // Three events: at 0–10 ms, then two intervals of 100–110 ms.
        #expect(byCount.1 >= .milliseconds(200) && byCount.1 <= .milliseconds(230))
        let byDuration = try #require(terminated.first { $0.0.advertisingHandle == 0 })
        #expect(byDuration.0.status == .advertisingTimeout)
        // The duration runs from the first event (0–10 ms after enabling).
        #expect(byDuration.1 >= .milliseconds(500) && byDuration.1 <= .milliseconds(510))
        #expect((5...6).contains(byDuration.0.numCompletedExtendedAdvertisingEvents))
        // Terminated sets stay configured and can be enabled again.
        enable(d.a, [.init(advertisingHandle: 1)])
    }

    @Test func highDutyDirectedLegacySetTimesOut() throws {
        let d = TwoDevices()
        #expect(d.a.returning(LESetExtendedAdvertisingParameters(
            advertisingEventProperties: [.legacy, .connectable, .directed, .highDutyDirected],
            peerAddress: TwoDevices.addressB))?.status == .success)
        // High duty cycle: a Duration of at most 1.28 s, and not 0.
        #expect(d.a.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 0)])) == .invalidHCICommandParameters)
        enable(d.a, [.init(advertisingHandle: 0, duration: 50)])
        d.loop.run(for: .milliseconds(600))
        let events = d.a.takeLEEvents()
        try #require(events.count == 2)
        guard case .enhancedConnectionComplete(let c) = events[0], case .advertisingSetTerminated(let t) = events[1] else {
            Issue.record("\(events)"); return
        }
        #expect(c.status == .advertisingTimeout && c.peerAddress == TwoDevices.addressB)
        #expect(t.status == .advertisingTimeout && t.advertisingHandle == 0)
    }

    func connectExtended(_ d: TwoDevices, secondaryPHY: LEPHY, legacyAdvertiser: Bool = false)
        -> (central: LEMetaEvent?, peripheral: [LEMetaEvent]) {
        if legacyAdvertiser {
            #expect(d.b.status(LESetAdvertisingParameters(
                advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advInd, ownAddressType: .publicDevice,
                peerAddressType: .publicDevice, peerAddress: .zero, advertisingChannelMap: 7, advertisingFilterPolicy: .acceptAll)) == .success)
            #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        } else {
            #expect(d.b.returning(parameters(2, [.connectable], secondaryPHY: secondaryPHY, interval: 0x20))?.status == .success)
            setData(d.b, handle: 2, Self.flags)
            enable(d.b, [.init(advertisingHandle: 2)])
        }
        #expect(d.a.status(LEExtendedCreateConnection(
            peerAddress: TwoDevices.addressB,
            initiatingPHYs: [.init(phy: .le1M, connectionIntervalMin: 0x18, connectionIntervalMax: 0x18, supervisionTimeout: 0x48),
                             .init(phy: .le2M, connectionIntervalMin: 0x10, connectionIntervalMax: 0x10, supervisionTimeout: 0x48)]))
                == .success)
        var central: LEMetaEvent?
        var peripheral: [LEMetaEvent] = []
        d.loop.run(until: {
            for e in d.a.takeLEEvents() where central == nil {
                if case .enhancedConnectionComplete = e { central = e }
                if case .enhancedConnectionCompleteV2 = e { central = e }
            }
            peripheral += d.b.takeLEEvents().filter { if case .extendedAdvertisingReport = $0 { false } else { true } }
            return central != nil && peripheral.contains { if case .advertisingSetTerminated = $0 { true } else { legacyAdvertiser } }
        }, timeout: .seconds(2))
        return (central, peripheral)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func extendedCreateConnectionTerminatesTheSet(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, peripheral) = connectExtended(d, secondaryPHY: .le2M)
        guard case .enhancedConnectionComplete(let c)? = central else { Issue.record("no connection at the central"); return }
        #expect(c.status == .success && c.role == .central && c.peerAddress == TwoDevices.addressB)
        // The connection uses the parameters given for LE 2M, the PHY it was made on.
        #expect(c.connectionInterval == 0x10)
        // Peripheral: connection complete first, then the set's termination with its handle.
        try #require(peripheral.count == 2)
        guard case .enhancedConnectionComplete(let p) = peripheral[0], case .advertisingSetTerminated(let t) = peripheral[1] else {
            Issue.record("peripheral events \(peripheral)"); return
        }
        #expect(p.status == .success && p.role == .peripheral && p.peerAddress == TwoDevices.addressA)
        #expect(t.status == .success && t.advertisingHandle == 2 && t.connectionHandle == p.connectionHandle)
        let phy = try #require(d.a.returning(LEReadPHY(connectionHandle: c.connectionHandle)))
        #expect(phy.txPHY == .le2M && phy.rxPHY == .le2M)
        let peripheralPHY = try #require(d.b.returning(LEReadPHY(connectionHandle: p.connectionHandle)))
        #expect(peripheralPHY.txPHY == .le2M)
        // The link works: disconnect is seen on both sides.
        #expect(d.a.status(Disconnect(connectionHandle: c.connectionHandle, reason: .remoteUserTerminatedConnection)) == .success)
        d.loop.run(until: { d.b.events.contains { if case .disconnectionComplete = $0 { true } else { false } } }, timeout: .seconds(2))
        #expect(d.b.events.contains { if case .disconnectionComplete = $0 { true } else { false } })
    }

    @Test func enhancedConnectionCompleteV2CarriesTheAdvertisingHandle() throws {
        let d = TwoDevices()
        // Unmask LE Enhanced Connection Complete [v2] (subevent 0x29: bit 40) on the peripheral.
        #expect(d.b.status(LESetEventMask(leEventMask: 0x0000_0100_000F_FFFF)) == .success)
        let (_, peripheral) = connectExtended(d, secondaryPHY: .le1M)
        guard case .enhancedConnectionCompleteV2(let p)? = peripheral.first else { Issue.record("\(peripheral)"); return }
        #expect(p.advertisingHandle == 2)
    }

    @Test func extendedCreateConnectionToLegacyAdvertising() throws {
        let d = TwoDevices()
        let (central, _) = connectExtended(d, secondaryPHY: .le1M, legacyAdvertiser: true)
        guard case .enhancedConnectionComplete(let c)? = central else { Issue.record("no connection"); return }
        // ADV_IND answered with CONNECT_IND on LE 1M, with the LE 1M parameters.
        #expect(c.status == .success && c.connectionInterval == 0x18)
        let phy = try #require(d.a.returning(LEReadPHY(connectionHandle: c.connectionHandle)))
        #expect(phy.txPHY == .le1M)
    }

    @Test func cancelExtendedCreateConnection() {
        let d = TwoDevices()
        #expect(d.a.status(LEExtendedCreateConnection(peerAddress: TwoDevices.addressB)) == .success)
        #expect(d.a.status(LEExtendedCreateConnection(peerAddress: TwoDevices.addressB)) == .commandDisallowed)
        #expect(d.a.status(LECreateConnectionCancel()) == .success)
        d.loop.run(for: .milliseconds(1))
        let events = d.a.takeLEEvents()
        guard case .enhancedConnectionComplete(let c)? = events.first else { Issue.record("\(events)"); return }
        #expect(c.status == .unknownConnectionIdentifier)
        // Only LE 2M: nothing to scan on.
        #expect(d.a.status(LEExtendedCreateConnection(peerAddress: TwoDevices.addressB, initiatingPHYs: [.init(phy: .le2M)]))
                == .invalidHCICommandParameters)
    }

    @Test func legacyAndExtendedCommandsDoNotMix() {
        let d = TwoDevices()
        // Legacy first: extended commands are refused until reset.
        #expect(d.a.status(LESetAdvertisingData(advertisingData: Self.flags)) == .success)
        #expect(d.a.returning(parameters(0, []))?.status == .commandDisallowed)
        #expect(d.a.status(LESetExtendedScanEnable(enable: false)) == .commandDisallowed)
        #expect(d.a.status(LEReadNumberOfSupportedAdvertisingSets()) == .commandDisallowed)
        #expect(d.a.status(LEExtendedCreateConnection(peerAddress: TwoDevices.addressB)) == .commandDisallowed)
        d.a.initialize()
        // Extended first: legacy commands are refused, LE Create Connection by Command Status.
        #expect(d.a.returning(LEReadNumberOfSupportedAdvertisingSets())?.numSupportedAdvertisingSets == 4)
        #expect(d.a.returning(LEReadMaximumAdvertisingDataLength())?.maxAdvertisingDataLength == 1650)
        #expect(d.a.status(LESetAdvertisingEnable(advertisingEnable: false)) == .commandDisallowed)
        #expect(d.a.status(LESetScanParameters(leScanType: .passive, leScanInterval: 0x10, leScanWindow: 0x10,
                                               ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered)) == .commandDisallowed)
        guard case .commandStatus(let s)? = d.a.command(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicDevice,
            peerAddress: TwoDevices.addressB, ownAddressType: .publicDevice, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0)) else {
            Issue.record("expected Command Status"); return
        }
        #expect(s.status == .commandDisallowed)
        // Commands outside both families keep working.
        #expect(d.a.status(LESetRandomAddress(randomAddress: BluetoothAddress("C1:00:00:00:00:01")!)) == .success)
    }

    @Test func unknownAdvertisingSetsAndStatuses() {
        let d = TwoDevices()
        let h = d.a
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 3, advertisingData: Self.flags)) == .unknownAdvertisingIdentifier)
        #expect(h.status(LESetExtendedScanResponseData(advertisingHandle: 3, scanResponseData: [])) == .unknownAdvertisingIdentifier)
        #expect(h.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 3)])) == .unknownAdvertisingIdentifier)
        #expect(h.status(LERemoveAdvertisingSet(advertisingHandle: 3)) == .unknownAdvertisingIdentifier)
        #expect(h.status(LESetAdvertisingSetRandomAddress(advertisingHandle: 3, randomAddress: BluetoothAddress("C1:00:00:00:00:01")!))
                == .unknownAdvertisingIdentifier)
        // Four sets; a fifth does not fit.
        for handle: UInt8 in 0..<4 { #expect(h.returning(parameters(handle, []))?.status == .success) }
        #expect(h.returning(parameters(4, []))?.status == .memoryCapacityExceeded)
        // Bad parameters.
        #expect(h.returning(parameters(0, [.connectable, .scannable]))?.status == .invalidHCICommandParameters)
        #expect(h.returning(parameters(0, [.legacy, .directed]))?.status == .invalidHCICommandParameters)
        #expect(h.returning(parameters(0, [], sid: 0x10))?.status == .invalidHCICommandParameters)
        #expect(h.returning(parameters(0, [], interval: 0x10))?.status == .invalidHCICommandParameters)
        #expect(h.returning(parameters(0xF0, []))?.status == .invalidHCICommandParameters)
        // Legacy sets: 31 bytes at most, in one command.
        #expect(h.returning(parameters(1, [.legacy]))?.status == .success)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 1, advertisingData: Self.data(32))) == .invalidHCICommandParameters)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 1, operation: .firstFragment, advertisingData: Self.flags))
                == .invalidHCICommandParameters)
        // More than 1650 bytes: Memory Capacity Exceeded, and the data is discarded.
        let chunk = Self.data(251)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 0, operation: .firstFragment, advertisingData: chunk)) == .success)
        for _ in 0..<5 {
            #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 0, operation: .intermediateFragment, advertisingData: chunk)) == .success)
        }
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 0, operation: .lastFragment, advertisingData: chunk))
                == .memoryCapacityExceeded)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 0, operation: .lastFragment, advertisingData: chunk))
                == .commandDisallowed)  // no first fragment any more
        // A connectable extended set's data must fit its one AUX_ADV_IND (245 bytes with AdvA and ADI).
        #expect(h.returning(parameters(2, [.connectable]))?.status == .success)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 2, advertisingData: Self.data(245))) == .success)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 2, operation: .firstFragment, advertisingData: Self.data(200))) == .success)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 2, operation: .lastFragment, advertisingData: Self.data(46)))
                == .packetTooLong)
        // Enabled sets: parameters are fixed, fragments refused, removal refused.
        enable(h, [.init(advertisingHandle: 3)])
        #expect(h.returning(parameters(3, []))?.status == .commandDisallowed)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 3, operation: .firstFragment, advertisingData: Self.flags))
                == .commandDisallowed)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 3, operation: .unchangedData, advertisingData: [])) == .success)
        #expect(h.status(LERemoveAdvertisingSet(advertisingHandle: 3)) == .commandDisallowed)
        #expect(h.status(LEClearAdvertisingSets()) == .commandDisallowed)
        // Random own address without the set's random address.
        #expect(h.returning(LESetExtendedAdvertisingParameters(advertisingHandle: 1, advertisingEventProperties: [.legacy],
                                                              ownAddressType: .randomDevice))?.status == .success)
        #expect(h.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 1)])) == .invalidHCICommandParameters)
        #expect(h.status(LESetAdvertisingSetRandomAddress(advertisingHandle: 1, randomAddress: BluetoothAddress("C1:00:00:00:00:01")!)) == .success)
        enable(h, [.init(advertisingHandle: 1)])
        // Disabling all (Num_Sets 0), then everything can go.
        #expect(h.status(LESetExtendedAdvertisingEnable(enable: false, sets: [])) == .success)
        #expect(h.status(LERemoveAdvertisingSet(advertisingHandle: 3)) == .success)
        #expect(h.status(LEClearAdvertisingSets()) == .success)
        #expect(h.status(LESetExtendedAdvertisingData(advertisingHandle: 0, advertisingData: [])) == .unknownAdvertisingIdentifier)
    }

    @Test func dataTooLongForTheIntervalIsPacketTooLong() {
        let d = TwoDevices()
        // 1650 bytes on LE Coded (S=8) take about 110 ms of air: too long for a 20 ms interval.
        #expect(d.a.returning(parameters(0, [], secondaryPHY: .leCoded, interval: 0x20))?.status == .success)
        setData(d.a, Self.data(1650))
        #expect(d.a.status(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 0)])) == .packetTooLong)
        // On LE 2M it fits.
        #expect(d.a.returning(parameters(0, [], secondaryPHY: .le2M, interval: 0x20))?.status == .success)
        enable(d.a)
    }

    @Test func randomAddressOfASet() throws {
        let d = TwoDevices()
        let address = BluetoothAddress("C5:00:00:00:00:05")!
        #expect(d.a.returning(LESetExtendedAdvertisingParameters(advertisingEventProperties: [], ownAddressType: .randomDevice))?.status == .success)
        #expect(d.a.status(LESetAdvertisingSetRandomAddress(advertisingHandle: 0, randomAddress: address)) == .success)
        setData(d.a, Self.flags)
        enable(d.a)
        extendedScan(d.b)
        d.loop.run(for: .milliseconds(500))
        let seen = reports(d.b)
        #expect(seen.count == 1)
        #expect(seen.first?.address == address && seen.first?.addressType == .randomDevice)
    }

    @Test func scanDurationEndsWithScanTimeout() throws {
        let d = TwoDevices()
        #expect(d.a.returning(parameters(0, []))?.status == .success)
        setData(d.a, Self.flags)
        enable(d.a)
        // 300 ms (units of 10 ms), no period.
        extendedScan(d.b, filter: .disabled, duration: 30)
        let start = d.loop.now
        var timeoutAt: Duration?
        var reportCount = 0
        d.loop.run(until: {
            for e in d.b.takeLEEvents() {
                if case .scanTimeout = e { timeoutAt = d.loop.now - start }
                if case .extendedAdvertisingReport = e { reportCount += 1 }
            }
            return timeoutAt != nil
        }, timeout: .seconds(2))
        #expect(timeoutAt == .milliseconds(300))
        #expect((2...4).contains(reportCount), "\(reportCount)")
        d.loop.run(for: .seconds(1))
        #expect(reports(d.b).isEmpty)
        // Duration not shorter than the period; reset-per-period filtering without a period.
        #expect(d.b.status(LESetExtendedScanEnable(enable: true, duration: 128, period: 1)) == .invalidHCICommandParameters)
        #expect(d.b.status(LESetExtendedScanEnable(enable: true, filterDuplicates: .enabledResetForEachPeriod)) == .invalidHCICommandParameters)
    }

    @Test func duplicateFilterResetEachPeriod() {
        let d = TwoDevices()
        #expect(d.a.returning(parameters(0, []))?.status == .success)
        setData(d.a, Self.flags)
        enable(d.a)
        // Scan 500 ms of every 1.28 s, reporting each advertiser once per period.
        extendedScan(d.b, filter: .enabledResetForEachPeriod, duration: 50, period: 1)
        d.loop.run(for: .milliseconds(3 * 1280 - 100))
        #expect(reports(d.b).count == 3)
        // No LE Scan Timeout with a period: scanning goes on.
        d.loop.run(for: .milliseconds(300))
        #expect(reports(d.b).count == 1)
        // With plain filtering the advertiser is reported once for the whole scan.
        #expect(d.b.status(LESetExtendedScanEnable(enable: false)) == .success)
        #expect(d.b.status(LESetExtendedScanEnable(enable: true, filterDuplicates: .enabled, duration: 50, period: 1)) == .success)
        d.loop.run(for: .seconds(4))
        #expect(reports(d.b).count == 1)
    }

    @Test func codedPrimaryPHYNeedsACodedScanner() {
        let d = TwoDevices()
        #expect(d.a.returning(LESetExtendedAdvertisingParameters(
            advertisingEventProperties: [], primaryAdvertisingIntervalMin: 0xA0, primaryAdvertisingIntervalMax: 0xA0,
            primaryAdvertisingPHY: .leCoded, secondaryAdvertisingPHY: .leCoded))?.status == .success)
        setData(d.a, Self.flags)
        enable(d.a)
        extendedScan(d.b, phys: [.le1M])
        d.loop.run(for: .milliseconds(500))
        #expect(reports(d.b).isEmpty)
        #expect(d.b.status(LESetExtendedScanEnable(enable: false)) == .success)
        extendedScan(d.b, phys: [.le1M, .leCoded])
        d.loop.run(for: .milliseconds(500))
        let seen = reports(d.b)
        #expect(seen.count == 1 && seen.first?.primaryPHY == 0x03 && seen.first?.secondaryPHY == 0x03)
    }

    /// The AUX_ADV_IND starts at the AuxPtr's offset after its ADV_EXT_IND started, and each
    /// PDU takes its PHY's air time; instant mode delivers all at once.
    @Test(arguments: [(AirTimeMode.timed, LEPHY.le2M), (.timed, .leCoded), (.instant, .leCoded)])
    func auxiliaryPDUsFollowTheirPointers(mode: AirTimeMode, secondary: LEPHY) throws {
        let d = TwoDevices(airTime: mode)
        let recorder = ExtendedPDURecorder(loop: d.loop)
        d.loop.execute { _ = d.radio.attach(recorder, at: RadioPosition(x: 0.5)) }
        #expect(d.a.returning(parameters(0, [], secondaryPHY: secondary))?.status == .success)
        setData(d.a, Self.data(400))
        enable(d.a, [.init(advertisingHandle: 0, maxExtendedAdvertisingEvents: 1)])
        d.loop.run(for: .milliseconds(200))
        let heard = recorder.heard
        try #require(heard.map(\.pdu.kind) == [.advExtInd, .auxAdvInd, .auxChainInd])
        #expect(heard.map(\.phy) == [.le1M, secondary, secondary])
        let indication = try #require(heard[0].pdu.payload)
        let aux = try #require(heard[1].pdu.payload)
        let pointer = try #require(indication.auxPtr)
        #expect(pointer.auxPHY == secondary && aux.adi == indication.adi && aux.advA?.address == TwoDevices.addressA)
        #expect(aux.advData.count + heard[2].pdu.payload!.advData.count == 400)
        if mode == .instant {
            #expect(heard.allSatisfy { $0.at == heard[0].at })
            return
        }
        // Each PDU is heard at the end of its packet: its start plus its PHY's air time.
        let starts = heard.map { entry in
            LoopInstant(nanoseconds: entry.at.nanoseconds - entry.phy.airTimeNanoseconds(pduOctets: entry.pdu.airOctets))
        }
        let chainPointer = try #require(aux.auxPtr)
        #expect(starts[1] - starts[0] == .microseconds(Int64(pointer.offsetMicroseconds)))
        #expect(starts[2] - starts[1] == .microseconds(Int64(chainPointer.offsetMicroseconds)))
        // T_MAFS (300 µs) at least between the end of one and the start of the next.
        #expect(starts[2] - heard[1].at >= .microseconds(300))
        #expect(starts[1] - heard[0].at >= .microseconds(300))
    }
}
