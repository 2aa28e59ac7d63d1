import ByteCoding
import HCI
import HCIDriver
import HCITesting
import HCITransport
import Scheduling
import Testing

/// Issue 17: a controller that drops a link without a Disconnection Complete. A command naming
/// the link answered Unknown Connection Identifier (0x02) ends it in the driver as that event
/// would: the layer above hears one Disconnection Complete, the link's ACL credits come back,
/// and only then does the command's answer arrive. Stale answers and events end nothing.
@Suite struct ForgottenLinkTests {
    static let a: ConnectionHandle = 0x0040
    static let b: ConnectionHandle = 0x0041

    static func small(_ tag: UInt8) -> [UInt8] { .l2cap(payload: Array(repeating: tag, count: 10)) }

    /// A harness whose controller leaves the commands these tests answer by hand unanswered.
    static func harness() -> Harness {
        let h = Harness()
        for opcode: UInt16 in [0x0406, 0x1405, 0x2022, 0x200E] { h.controller.answer(opcode, .silent) }
        return h
    }

    /// Links `a` and `b` on a controller of three ACL buffers, all three in flight on `a`, and a
    /// packet of `b`'s waiting for one.
    static func aHoldingEveryBufferWhileBWaits() throws -> Harness {
        let h = harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(a)
        h.connect(b)
        for tag: UInt8 in 1...3 { #expect(h.driver.sendACL(handle: a, pdu: small(tag))) }
        #expect(h.driver.sendACL(handle: b, pdu: small(9)))
        return h
    }

    static func disconnections(_ h: Harness) -> [DisconnectionComplete] {
        h.delegate.events.compactMap { if case .disconnectionComplete(let e) = $0 { e } else { nil } }
    }

    @Test func anUnknownConnectionIdentifierAnswerEndsTheLinkAndReturnsItsCredits() throws {
        // The controller forgot `a` with all three buffers in flight on it: `b` waits.
        let h = try Self.aHoldingEveryBufferWhileBWaits()
        #expect(h.driver.aclCredits == 0 && h.transport.sentACL.count == 3)

        var result: Result<ReadRSSI.ReturnParameters, HCIError>?
        var disconnectionsBeforeAnswer = -1
        h.driver.send(ReadRSSI(connectionHandle: Self.a)) {
            disconnectionsBeforeAnswer = Self.disconnections(h).count
            result = $0
        }
        // Command Complete (Read RSSI 0x1405): status 0x02, handle 0x0040, RSSI 0.
        h.transport.inject(h4: "04 0e 07 01 0514 02 4000 00")
        #expect(result == .failure(.status(.unknownConnectionIdentifier, command: ReadRSSI.name)))
        // The link ended first, as a supervision timeout the controller never reported.
        #expect(disconnectionsBeforeAnswer == 1)
        #expect(Self.disconnections(h) == [DisconnectionComplete(connectionHandle: Self.a, reason: .connectionTimeout)])
        #expect(!h.driver.isConnected(handle: Self.a))
        // Its three credits came back: `b`'s packet went, two buffers are free.
        #expect(h.transport.sentACL.count == 4)
        #expect(h.transport.sentACL.last?.handle == Self.b)
        #expect(h.driver.aclCredits == 2)

        // A late Number Of Completed Packets or Disconnection Complete for `a` changes nothing.
        h.completed(Self.a, 3)
        #expect(h.driver.aclCredits == 2)
        h.disconnect(Self.a)
        #expect(h.driver.aclCredits == 2 && h.driver.isConnected(handle: Self.b))
        // A second 0x02 for the handle gone ends nothing more.
        h.driver.send(LESetDataLength(connectionHandle: Self.a, txOctets: 251, txTime: 2120)) { _ in }
        h.transport.inject(h4: "04 0e 06 01 2220 02 4000")
        #expect(Self.disconnections(h).count == 2)   // the controller's stale one, passed up
    }

    @Test func aDisconnectAnsweredUnknownConnectionIdentifierEndsTheLinkLocally() throws {
        let h = Self.harness()
        try h.startRunning()
        h.connect(Self.a)
        var result: Result<Void, HCIError>?
        h.driver.send(Disconnect(connectionHandle: Self.a, reason: .remoteUserTerminatedConnection)) {
            result = $0.map { _ in () }
        }
        // Command Status (Disconnect 0x0406): status 0x02.
        h.transport.inject(h4: "04 0f 04 02 01 0604")
        #expect(Self.disconnections(h) == [DisconnectionComplete(connectionHandle: Self.a,
                                                                  reason: .connectionTerminatedByLocalHost)])
        #expect(result != nil && !h.driver.isConnected(handle: Self.a))
    }

    @Test func anAnswerForALinkSinceReplacedUnderTheSameHandleEndsNothing() throws {
        let h = Self.harness()
        try h.startRunning()
        h.connect(Self.a)
        var answered = false
        h.driver.send(ReadRSSI(connectionHandle: Self.a)) { _ in answered = true }
        // The link ends normally, and a new one gets the same handle before the answer comes.
        h.disconnect(Self.a)
        h.connect(Self.a)
        h.transport.inject(h4: "04 0e 07 01 0514 02 4000 00")
        #expect(answered)
        #expect(Self.disconnections(h).count == 1)
        #expect(h.driver.isConnected(handle: Self.a))

        // Nor does 0x02 for a handle the host never had, or for a command naming no link.
        h.driver.send(ReadRSSI(connectionHandle: 0x0099)) { _ in }
        h.transport.inject(h4: "04 0e 07 01 0514 02 9900 00")
        h.driver.send(LECreateConnectionCancel()) { _ in }
        h.transport.inject(h4: "04 0e 04 01 0e20 02")
        #expect(Self.disconnections(h).count == 1)
        #expect(h.driver.isConnected(handle: Self.a))
    }

    @Test func aLinkWhosePacketsNeverCompleteIsGivenUpWhileOthersWait() throws {
        let h = try Self.aHoldingEveryBufferWhileBWaits()
        let before = h.controller.received.count
        h.loop.run(for: .seconds(39))
        #expect(h.controller.received.count == before)
        h.loop.run(for: .seconds(2))
        // Disconnect 0x0040, Remote User Terminated Connection; the controller does not know it.
        #expect(h.controller.received.last?.opcode == Disconnect.opcode)
        #expect(h.controller.received.last?.parameters == [0x40, 0x00, 0x13])
        h.transport.inject(h4: "04 0f 04 02 01 0604")
        #expect(Self.disconnections(h) == [DisconnectionComplete(connectionHandle: Self.a, reason: .connectionTimeout)])
        #expect(h.transport.sentACL.last?.handle == Self.b)
        #expect(h.driver.aclCredits == 2)
    }

    @Test func aLinkWhosePacketsCompleteSlowlyIsKept() throws {
        let h = Self.harness()
        try h.startRunning(aclLength: 27, aclCount: 3)
        h.connect(Self.a)
        for tag: UInt8 in 1...6 { #expect(h.driver.sendACL(handle: Self.a, pdu: Self.small(tag))) }
        let before = h.controller.received.count
        for _ in 0..<3 {
            h.loop.run(for: .seconds(30))
            h.completed(Self.a, 1)
        }
        h.loop.run(for: .seconds(30))
        #expect(h.controller.received.count == before)
        #expect(h.driver.isConnected(handle: Self.a) && Self.disconnections(h).isEmpty)
    }
}
