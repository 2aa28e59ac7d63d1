import ByteCoding
import HCI
import HCIDriver
import HCITransport
import Scheduling
import Testing

@Suite struct OutboundACLTests {
    static let a: ConnectionHandle = 0x0040
    static let b: ConnectionHandle = 0x0041

    /// A small PDU that fits one 27-byte fragment: 4 + 10 bytes.
    static func small(_ tag: UInt8) -> [UInt8] { .l2cap(payload: Array(repeating: tag, count: 10)) }

    @Test func fragmentsToTheControllerLengthWithBoundaryFlags() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(Self.a)
        let pdu = [UInt8].l2cap(payload: (0..<60).map { UInt8($0) })   // 64 bytes: 27 + 27 + 10
        #expect(h.driver.sendACL(handle: Self.a, pdu: pdu))
        // Handle 0x040 with PB 0b00 → 0x0040; with PB 0b01 → 0x1040 (LE16 "4000", "4010").
        #expect(h.transport.sentHex == [
            "02" + "4000" + "1b00" + pdu[0..<27].hexString,
            "02" + "4010" + "1b00" + pdu[27..<54].hexString,
            "02" + "4010" + "0a00" + pdu[54..<64].hexString,
        ])
        // The first fragment starts with the L2CAP header: length 60 (0x003C), CID 0x0004.
        #expect(h.transport.sentHex[0].hasPrefix("024000" + "1b00" + "3c000400"))
        #expect(h.driver.aclCredits == 0)
    }

    @Test func exactMultipleOfTheFragmentSize() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(Self.a)
        let pdu = [UInt8].l2cap(payload: Array(repeating: 7, count: 50))  // 54 = 2 × 27
        #expect(h.driver.sendACL(handle: Self.a, pdu: pdu))
        #expect(h.transport.sentACL.map(\.boundary) == [.firstNonFlushable, .continuing])
        #expect(h.transport.sentACL.map(\.data.count) == [27, 27])
    }

    @Test func creditsExhaustedQueueUntilCompletedPackets() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(Self.a)
        for tag: UInt8 in 1...4 { #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(tag))) }
        #expect(h.transport.sentACL.count == 3)
        #expect(h.driver.queuedPDUs(handle: Self.a) == 1)
        #expect(h.delegate.canSendMore.isEmpty)

        // Number Of Completed Packets: 1 handle, 0x0040, 1 packet.
        h.transport.inject(h4: "04 13 05 01 4000 0100")
        #expect(h.transport.sentACL.count == 4)
        #expect(h.transport.sentACL.last?.data == Self.small(4))
        #expect(h.driver.queuedPDUs(handle: Self.a) == 0)
        #expect(h.delegate.canSendMore == [Self.a])
        #expect(h.driver.aclCredits == 0)

        h.completed(Self.a, 3)
        #expect(h.driver.aclCredits == 3)
        // Only one more was in flight: a controller reporting too many never inflates credits.
        h.completed(Self.a, 5)
        #expect(h.driver.aclCredits == 3)
        // Unknown handles are ignored.
        h.completed(0x0123, 2)
        #expect(h.driver.aclCredits == 3)
        // Sending with credits available does not call driverCanSendMore.
        #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(5)))
        #expect(h.delegate.canSendMore == [Self.a])
    }

    @Test func multiFragmentPDUCountsAsQueuedUntilItsLastFragmentIsSent() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 1)
        h.connect(Self.a)
        #expect(h.driver.sendACL(handle: Self.a, pdu: .l2cap(payload: Array(repeating: 1, count: 60))))
        #expect(h.driver.queuedPDUs(handle: Self.a) == 1)
        h.completed(Self.a, 1)
        #expect(h.driver.queuedPDUs(handle: Self.a) == 1)
        h.completed(Self.a, 1)
        #expect(h.driver.queuedPDUs(handle: Self.a) == 0)
        #expect(h.transport.sentACL.count == 3)
        #expect(h.delegate.canSendMore == [Self.a])
    }

    @Test func roundRobinBetweenConnectionsWhenCreditsAreScarce() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 1)
        h.connect(Self.a)
        h.connect(Self.b)
        #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(0)))             // takes the only buffer
        #expect(h.driver.sendACL(handle: Self.a, pdu: .l2cap(payload: Array(repeating: 0xA, count: 60))))  // 3 fragments
        #expect(h.driver.sendACL(handle: Self.b, pdu: .l2cap(payload: Array(repeating: 0xB, count: 36))))  // 2 fragments
        for _ in 0..<5 {
            let last = h.transport.sentACL.last!.handle
            h.completed(last, 1)
        }
        #expect(h.transport.sentACL.map(\.handle) == [Self.a, Self.a, Self.b, Self.a, Self.b, Self.a])
        #expect(h.transport.sentACL.map(\.boundary) == [
            .firstNonFlushable, .firstNonFlushable, .firstNonFlushable, .continuing, .continuing, .continuing,
        ])
        #expect(Set(h.delegate.canSendMore) == [Self.a, Self.b])
    }

    @Test func disconnectionReturnsCreditsAndDropsTheQueue() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(Self.a)
        h.connect(Self.b)
        for tag: UInt8 in 1...5 { #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(tag))) }
        #expect(h.driver.sendACL(handle: Self.b, pdu: Self.small(0xB)))
        #expect(h.transport.sentACL.count == 3)
        #expect(h.driver.queuedPDUs(handle: Self.a) == 2)

        var creditsSeenByDelegate: Int?
        h.delegate.onEvent = { [driver = h.driver] event in
            if case .disconnectionComplete = event { creditsSeenByDelegate = driver.aclCredits }
        }
        h.disconnect(Self.a)
        // The delegate saw the event after the three in-flight buffers came back.
        #expect(creditsSeenByDelegate == 3)
        // A's queue is gone; B's waiting PDU went out with a freed buffer.
        #expect(h.driver.queuedPDUs(handle: Self.a) == 0)
        #expect(!h.driver.isConnected(handle: Self.a))
        #expect(h.transport.sentACL.count == 4)
        #expect(h.transport.sentACL.last?.handle == Self.b)
        #expect(h.driver.aclCredits == 2)
        #expect(!h.driver.sendACL(handle: Self.a, pdu: Self.small(9)))
        // Late completions for the closed handle give nothing back twice.
        h.completed(Self.a, 3)
        #expect(h.driver.aclCredits == 2)
    }

    @Test func connectionsComeFromEnhancedConnectionCompleteToo() throws {
        let h = Harness()
        try h.startRunning()
        // LE Enhanced Connection Complete (0x0A), length 31: status 0, handle 0x0042, role 1,
        // peer type 1, peer address, local and peer RPAs zero, interval 0x0018, latency 0,
        // timeout 0x00C8, accuracy 0.
        h.transport.inject(h4: "04 3e 1f 0a 00 4200 01 01 112233445566 000000000000 000000000000 1800 0000 c800 00")
        #expect(h.driver.isConnected(handle: 0x0042))
        // A failed connection registers nothing (status 0x3E).
        h.transport.inject(h4: "04 3e 13 01 3e 4300 00 00 112233445566 1800 0000 c800 00")
        #expect(!h.driver.isConnected(handle: 0x0043))
        #expect(h.delegate.events.count == 2)
    }

    @Test func unknownHandlesAndMalformedPDUsAreRejected() throws {
        let h = Harness()
        try h.startRunning()
        h.connect(Self.a)
        #expect(!h.driver.sendACL(handle: 0x0099, pdu: Self.small(1)))
        #expect(!h.driver.sendACL(handle: Self.a, pdu: [0x01, 0x00]))
        // Length field says 5, 3 bytes follow the header.
        #expect(!h.driver.sendACL(handle: Self.a, pdu: [0x05, 0x00, 0x04, 0x00, 1, 2, 3]))
        #expect(h.transport.sentACL.isEmpty)
    }

    @Test func perConnectionQueueIsBounded() throws {
        var configuration = HCIDriverConfiguration()
        configuration.maxQueuedPDUsPerConnection = 2
        let h = Harness(configuration: configuration)
        try h.startRunning(aclLength: 27, aclCount: 1)
        h.connect(Self.a)
        #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(1)))   // sent
        #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(2)))   // queued
        #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(3)))   // queued
        #expect(!h.driver.sendACL(handle: Self.a, pdu: Self.small(4)))
        #expect(h.driver.queuedPDUs(handle: Self.a) == 2)
    }

    @Test func aclBeforeStartIsRejected() {
        let h = Harness()
        #expect(!h.driver.sendACL(handle: Self.a, pdu: Self.small(1)))
    }

    @Test func transportCloseForgetsConnections() throws {
        let h = Harness()
        try h.startRunning()
        h.connect(Self.a)
        h.transport.fail(HCITransportError("gone"))
        #expect(!h.driver.isConnected(handle: Self.a))
        #expect(!h.driver.sendACL(handle: Self.a, pdu: Self.small(1)))
    }
}

@Suite struct InboundACLTests {
    static let a: ConnectionHandle = 0x0040

    static func start() throws -> Harness {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(a)
        return h
    }

    static func inject(_ h: Harness, _ boundary: ACLDataPacket.Boundary, _ data: some Collection<UInt8>,
                       handle: ConnectionHandle = a) {
        h.transport.inject(.acl(ACLDataPacket(handle: handle, boundary: boundary, data: Array(data))))
    }

    @Test func reassemblesFragments() throws {
        let h = try Self.start()
        let pdu = [UInt8].l2cap(payload: (0..<60).map { UInt8($0) })
        // PB 0b10 (first, flushable) on handle 0x040 → header 0x2040, LE "4020".
        h.transport.inject(h4: "02 4020 1b00" + pdu[0..<27].hexString)
        Self.inject(h, .continuing, pdu[27..<54])
        #expect(h.delegate.pdus.isEmpty)
        Self.inject(h, .continuing, pdu[54...])
        #expect(h.delegate.pdus.count == 1)
        #expect(h.delegate.pdus.first?.handle == Self.a)
        #expect(h.delegate.pdus.first?.pdu == pdu)
    }

    @Test func acceptsAnUnfragmentedPDULargerThanTheBufferSize() throws {
        let h = try Self.start()
        let pdu = [UInt8].l2cap(payload: (0..<296).map { UInt8(truncatingIfNeeded: $0) })   // 300 bytes ≫ 27
        Self.inject(h, .firstFlushable, pdu)
        #expect(h.delegate.pdus.map(\.pdu) == [pdu])
    }

    @Test func firstNonFlushableAndCompleteBoundariesStartPDUsToo() throws {
        let h = try Self.start()
        Self.inject(h, .firstNonFlushable, [UInt8].l2cap(payload: [1]))
        Self.inject(h, .complete, [UInt8].l2cap(payload: [2]))
        #expect(h.delegate.pdus.map(\.pdu) == [.l2cap(payload: [1]), .l2cap(payload: [2])])
    }

    @Test func emptyPayloadPDU() throws {
        let h = try Self.start()
        Self.inject(h, .firstFlushable, [0x00, 0x00, 0x04, 0x00])
        #expect(h.delegate.pdus.map(\.pdu) == [[0x00, 0x00, 0x04, 0x00]])
    }

    @Test func headerSplitAcrossFragments() throws {
        let h = try Self.start()
        let pdu = [UInt8].l2cap(payload: [9, 8, 7])
        Self.inject(h, .firstFlushable, [UInt8]())
        Self.inject(h, .continuing, pdu[0..<2])
        Self.inject(h, .continuing, pdu[2..<5])
        #expect(h.delegate.pdus.isEmpty)
        Self.inject(h, .continuing, pdu[5...])
        #expect(h.delegate.pdus.map(\.pdu) == [pdu])
    }

    @Test func continuationWithoutAStartIsDropped() throws {
        let h = try Self.start()
        Self.inject(h, .continuing, [1, 2, 3])
        #expect(h.delegate.pdus.isEmpty)
        // The next well-formed PDU is unaffected.
        Self.inject(h, .firstFlushable, [UInt8].l2cap(payload: [4]))
        #expect(h.delegate.pdus.map(\.pdu) == [.l2cap(payload: [4])])
    }

    @Test func overflowBeyondTheL2CAPLengthDropsThePDU() throws {
        let h = try Self.start()
        let pdu = [UInt8].l2cap(payload: Array(repeating: 5, count: 10))   // 14 bytes
        Self.inject(h, .firstFlushable, pdu[0..<10])
        Self.inject(h, .continuing, pdu[10...] + [0xEE, 0xEE])            // 16 > 14
        #expect(h.delegate.pdus.isEmpty)
        // The partial was dropped: a continuation now has no start.
        Self.inject(h, .continuing, [0xEE])
        #expect(h.delegate.pdus.isEmpty)
        Self.inject(h, .firstFlushable, pdu)
        #expect(h.delegate.pdus.map(\.pdu) == [pdu])
    }

    @Test func firstFragmentAlreadyTooLongIsDropped() throws {
        let h = try Self.start()
        // Length field 2, but 5 payload bytes.
        Self.inject(h, .firstFlushable, [0x02, 0x00, 0x04, 0x00, 1, 2, 3, 4, 5])
        #expect(h.delegate.pdus.isEmpty)
    }

    @Test func newStartWhileOneIsInProgressDropsThePartial() throws {
        let h = try Self.start()
        let long = [UInt8].l2cap(payload: Array(repeating: 1, count: 60))
        Self.inject(h, .firstFlushable, long[0..<27])
        let short = [UInt8].l2cap(payload: [2, 2])
        Self.inject(h, .firstFlushable, short)
        #expect(h.delegate.pdus.map(\.pdu) == [short])
        // The rest of the abandoned PDU is a continuation without a start.
        Self.inject(h, .continuing, long[27...])
        #expect(h.delegate.pdus.count == 1)
    }

    @Test func handlesReassembleIndependently() throws {
        let h = try Self.start()
        h.connect(0x0041)
        let one = [UInt8].l2cap(payload: Array(repeating: 1, count: 30))
        let two = [UInt8].l2cap(payload: Array(repeating: 2, count: 30))
        Self.inject(h, .firstFlushable, one[0..<27])
        Self.inject(h, .firstFlushable, two[0..<27], handle: 0x0041)
        Self.inject(h, .continuing, two[27...], handle: 0x0041)
        Self.inject(h, .continuing, one[27...])
        #expect(h.delegate.pdus.map(\.handle) == [0x0041, Self.a])
        #expect(h.delegate.pdus.map(\.pdu) == [two, one])
    }

    @Test func disconnectionDropsAPartialPDU() throws {
        let h = try Self.start()
        let pdu = [UInt8].l2cap(payload: Array(repeating: 3, count: 30))
        Self.inject(h, .firstFlushable, pdu[0..<27])
        h.disconnect(Self.a)
        h.connect(Self.a)
        Self.inject(h, .continuing, pdu[27...])
        #expect(h.delegate.pdus.isEmpty)
    }

    @Test func dataBeforeConnectionCompleteIsStillDelivered() throws {
        let h = Harness()
        try h.startRunning()
        Self.inject(h, .firstFlushable, [UInt8].l2cap(payload: [1]), handle: 0x0050)
        #expect(h.delegate.pdus.map(\.handle) == [0x0050])
    }

    @Test func largestPossiblePDU() throws {
        let h = try Self.start()
        let pdu = [UInt8].l2cap(payload: Array(repeating: 0x5A, count: 65535))
        var offset = 0
        while offset < pdu.count {
            let end = min(offset + 1021, pdu.count)
            Self.inject(h, offset == 0 ? .firstFlushable : .continuing, pdu[offset..<end])
            offset = end
        }
        #expect(h.delegate.pdus.count == 1)
        #expect(h.delegate.pdus.first?.pdu.count == 65539)
    }
}
