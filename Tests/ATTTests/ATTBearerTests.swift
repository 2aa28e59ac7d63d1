import ATTTesting
import ByteCoding
import HCI
import L2CAP
import Scheduling
import Testing
@testable import ATT

/// A bearer on a fake channel and a manually paced loop.
struct BearerHarness {
    let loop = EventLoop(name: "att", pacing: .manual)
    let channel = FakeATTChannel()
    let bearer: ATTBearer

    init() { bearer = ATTBearer(channel: channel, loop: loop) }
}

/// Records what bearers tell their listeners, in order. The bearer holds it weakly: keep it.
final class BearerEvents: ATTBearerListener, @unchecked Sendable {
    var mtuChanges: [Int] = []
    var ready = 0
    var closes: [ATTBearer.CloseReason] = []

    init(_ bearers: ATTBearer...) { for bearer in bearers { bearer.addListener(self) } }

    func attBearerMTUDidChange(to mtu: Int) { mtuChanges.append(mtu) }
    func attBearerIsReadyToSend() { ready += 1 }
    func attBearerDidClose(_ reason: ATTBearer.CloseReason) { closes.append(reason) }
}

/// Keeps what completions and handlers report.
final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s)! }

@Suite("ATT bearer: protocol rules on a fake channel")
struct ATTBearerTests {
    // MARK: MTU

    @Test func exchangeMTUAsClientTakesTheSmallerAndOnlyOnce() {
        let h = BearerHarness()
        let events = BearerEvents(h.bearer)
        let result = Box<Result<Int, ATTBearerError>?>(nil)
        h.bearer.exchangeMTU { result.value = $0 }
        // Exchange MTU Request (0x02), Client Rx MTU 517 = 0x0205 little-endian.
        #expect(h.channel.takeSent() == ["020502"])
        #expect(h.bearer.mtu == 23)
        // Exchange MTU Response (0x03), Server Rx MTU 247 = 0x00F7.
        h.channel.deliver("03 f7 00")
        #expect(result.value == .success(247))
        #expect(h.bearer.mtu == 247 && events.mtuChanges == [247])

        let second = Box<Result<Int, ATTBearerError>?>(nil)
        h.bearer.exchangeMTU { second.value = $0 }
        #expect(second.value == .failure(.mtuAlreadyExchanged))
        #expect(h.channel.takeSent().isEmpty)
    }

    @Test func serverRxMTUBelowTheDefaultLeavesTheDefault() {
        let h = BearerHarness()
        let events = BearerEvents(h.bearer)
        let result = Box<Result<Int, ATTBearerError>?>(nil)
        h.bearer.exchangeMTU { result.value = $0 }
        h.channel.deliver("03 10 00")  // 16 < 23
        #expect(result.value == .success(23))
        #expect(h.bearer.mtu == 23 && events.mtuChanges.isEmpty)
    }

    @Test func exchangeMTURefusedByTheServerKeepsTheDefault() {
        let h = BearerHarness()
        let result = Box<Result<Int, ATTBearerError>?>(nil)
        h.bearer.exchangeMTU { result.value = $0 }
        // Error Response: Exchange MTU Request, handle 0x0000, Request Not Supported.
        h.channel.deliver("01 02 00 00 06")
        #expect(result.value == .failure(.errorResponse(.init(requestOpcode: .exchangeMTURequest,
                                                                attributeHandle: .invalid, errorCode: .requestNotSupported))))
        #expect(h.bearer.mtu == 23)
    }

    @Test(arguments: [
        // (Client Rx MTU as the peer sends it, our Rx MTU, ATT_MTU after the exchange)
        ("02 05 02", 247, "03 f7 00", 247),  // 517 vs 247 → 247
        ("02 f7 00", 517, "03 05 02", 247),  // 247 vs 517 → 247
        ("02 10 00", 517, "03 05 02", 23),  // 16 is below the default → 23
        ("02 17 00", 10, "03 17 00", 23),  // our Rx MTU counts as at least 23
    ])
    func exchangeMTUAsServer(request: String, preferred: Int, response: String, negotiated: Int) {
        let h = BearerHarness()
        h.bearer.preferredMTU = preferred
        h.channel.deliver(request)
        #expect(h.channel.takeSent() == [response.replacingOccurrences(of: " ", with: "")])
        #expect(h.bearer.mtu == negotiated)
        #expect(h.bearer.hasAnsweredMTUExchange)
    }

    @Test func aSecondExchangeMTURequestGetsRequestNotSupported() {
        let h = BearerHarness()
        h.channel.deliver("02 f7 00")
        #expect(h.channel.takeSent() == ["030502"])
        h.channel.deliver("02 00 02")
        // Error Response (0x01) for 0x02, handle 0x0000, Request Not Supported (0x06).
        #expect(h.channel.takeSent() == ["0102000006"])
        #expect(h.bearer.mtu == 247)
    }

    @Test func bothDirectionsMayExchangeOnce() {
        let h = BearerHarness()
        h.bearer.preferredMTU = 247
        h.channel.deliver("02 05 02")
        #expect(h.channel.takeSent() == ["03f700"])
        let result = Box<Result<Int, ATTBearerError>?>(nil)
        h.bearer.exchangeMTU { result.value = $0 }
        #expect(h.channel.takeSent() == ["02f700"])
        h.channel.deliver("03 05 02")
        #expect(result.value == .success(247))
    }

    // MARK: Client requests

    @Test func requestsGoOutOneAtATime() {
        let h = BearerHarness()
        let first = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        let second = Box<Result<ATTPDU, ATTBearerError>?>(nil)
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { first.value = $0 }
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0004))) { second.value = $0 }
        // Read Request (0x0A) for 0x0003 only: the second waits.
        #expect(h.channel.takeSent() == ["0a0300"])
        h.channel.deliver("0b 01 02")
        #expect(first.value == .success(.readResponse(.init(attributeValue: [0x01, 0x02]))))
        #expect(h.channel.takeSent() == ["0a0400"])
        #expect(second.value == nil)
        // Error Response for Read Request, handle 0x0004, Read Not Permitted (0x02).
        h.channel.deliver("01 0a 04 00 02")
        #expect(second.value == .failure(.errorResponse(.init(requestOpcode: .readRequest, attributeHandle: 0x0004,
                                                                errorCode: .readNotPermitted))))
    }

    @Test func aRequestQueuedFromACompletionGoesOutNext() {
        let h = BearerHarness()
        let done = Box(0)
        h.bearer.request(.writeRequest(.init(attributeHandle: 0x0010, attributeValue: [0x01]))) { _ in
            h.bearer.request(.readRequest(.init(attributeHandle: 0x0010))) { _ in done.value += 1 }
        }
        #expect(h.channel.takeSent() == ["12100001"])
        h.channel.deliver("13")
        #expect(h.channel.takeSent() == ["0a1000"])
        h.channel.deliver("0b 01")
        #expect(done.value == 1)
    }

    @Test func responsesThatDoNotAnswerTheRequestAreViolations() {
        let h = BearerHarness()
        let results = Box<[Result<ATTPDU, ATTBearerError>]>([])
        for handle: ATTHandle in [0x0003, 0x0004, 0x0005] {
            h.bearer.request(.readRequest(.init(attributeHandle: handle))) { results.value.append($0) }
        }
        h.channel.deliver("13")  // a Write Response answers no Read Request
        h.channel.deliver("01 12 04 00 01")  // an Error Response for a Write Request
        h.channel.deliver("01 0a 05")  // a truncated Error Response
        #expect(results.value.count == 3)
        for result in results.value {
            guard case .failure(.protocolViolation) = result else {
                Issue.record("expected a protocol violation, got \(result)")
                continue
            }
        }
        #expect(h.channel.takeSent() == ["0a0300", "0a0400", "0a0500"])
        // A response with nothing outstanding is dropped.
        h.channel.deliver("0b 00")
        #expect(h.channel.takeSent().isEmpty && h.bearer.isOpen)
    }

    @Test func requestsThatCannotBeSentFailAtOnce() {
        let h = BearerHarness()
        let results = Box<[Result<ATTPDU, ATTBearerError>]>([])
        h.bearer.request(.writeResponse(.init())) { results.value.append($0) }
        #expect(h.bearer.sendCommand(.writeCommand(.init(attributeHandle: 1, attributeValue: []))))
        // 3 + 21 octets: one more than ATT_MTU 23.
        h.bearer.request(.writeRequest(.init(attributeHandle: 1, attributeValue: [UInt8](repeating: 0, count: 21)))) {
            results.value.append($0)
        }
        #expect(results.value.count == 2)
        #expect(results.value.allSatisfy { if case .failure(.invalidRequest) = $0 { true } else { false } })
        #expect(h.channel.takeSent() == ["520100"])
    }

    @Test func notificationsDuringARequestArriveAtOnceAndInOrder() {
        let h = BearerHarness()
        let events = Box<[String]>([])
        h.bearer.onNotification = { events.value.append("ntf \($0) \($1.hexString)") }
        h.bearer.onMultipleNotification = { events.value.append("multi " + $0.map { "\($0.handle) \($0.value.hexString)" }.joined(separator: ", ")) }
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { events.value.append("rsp \($0)") }
        h.channel.deliver("1b 15 00 aa bb")
        // Multiple Handle Value Notification: (0x0015, length 1, aa), (0x0016, length 2, bb cc).
        h.channel.deliver("23 15 00 01 00 aa 16 00 02 00 bb cc")
        h.channel.deliver("0b 07")
        #expect(events.value.count == 3)
        #expect(events.value.prefix(2) == ["ntf 0x0015 aabb", "multi 0x0015 aa, 0x0016 bbcc"])
        #expect(events.value.last?.hasPrefix("rsp success") == true)
    }

    @Test func anIndicationIsConfirmedAfterItsHandlerReturns() {
        let h = BearerHarness()
        let seen = Box<[(ATTHandle, [UInt8], Int)]>([])
        h.bearer.onIndication = { handle, value in seen.value.append((handle, value, h.channel.sent.count)) }
        h.channel.deliver("1d 20 00 01 02")
        #expect(seen.value.count == 1)
        #expect(seen.value.first?.0 == 0x0020 && seen.value.first?.1 == [0x01, 0x02])
        #expect(seen.value.first?.2 == 0)  // nothing sent while the handler ran
        #expect(h.channel.takeSent() == ["1e"])
        // Without a handler it is confirmed all the same; a malformed one is dropped.
        h.bearer.onIndication = nil
        h.channel.deliver("1d 21 00")
        h.channel.deliver("1d 21")
        #expect(h.channel.takeSent() == ["1e"])
    }

    // MARK: Server

    @Test func theServerAnswersLaterAndTheNextRequestWaits() {
        let h = BearerHarness()
        let responders = Box<[ATTResponder]>([])
        h.bearer.onRequest = { _, responder in responders.value.append(responder) }
        h.channel.deliver("0a 03 00")
        // A client that does not wait: its second request is held until the first is answered.
        h.channel.deliver("0a 04 00")
        #expect(responders.value.map(\.request) == [.readRequest(.init(attributeHandle: 0x0003))])
        #expect(h.channel.takeSent().isEmpty)

        responders.value[0].respond(.readResponse(.init(attributeValue: [0x42])))
        #expect(h.channel.takeSent() == ["0b42"])
        #expect(responders.value.count == 2)
        // Answered twice: the second is ignored.
        responders.value[0].respond(.readResponse(.init(attributeValue: [0x43])))
        responders.value[1].respondError(.invalidHandle, handle: 0x0004)
        // Error Response for Read Request (0x0A), handle 0x0004, Invalid Handle (0x01).
        #expect(h.channel.takeSent() == ["010a040001"])
        responders.value[1].respondError(.readRequest, 0x0004, .readNotPermitted)
        #expect(h.channel.takeSent().isEmpty)
    }

    @Test func aResponderAnsweringInsideTheHandlerServesTheQueueInOrder() {
        let h = BearerHarness()
        let handles = Box<[ATTHandle]>([])
        let held = Box<ATTResponder?>(nil)
        h.bearer.onRequest = { request, responder in
            guard case .readRequest(let read) = request else { return }
            handles.value.append(read.attributeHandle)
            if read.attributeHandle == 0x0001 { held.value = responder } else { responder.respond(.readResponse(.init(attributeValue: []))) }
        }
        h.channel.deliver("0a 01 00")
        h.channel.deliver("0a 02 00")
        h.channel.deliver("0a 03 00")
        held.value?.respond(.readResponse(.init(attributeValue: [0x01])))
        #expect(handles.value == [0x0001, 0x0002, 0x0003])
        #expect(h.channel.takeSent() == ["0b01", "0b", "0b"])
    }

    @Test func aResponderDroppedUnansweredAnswersUnlikelyError() {
        let h = BearerHarness()
        h.bearer.onRequest = { _, _ in }
        h.channel.deliver("12 05 00 01")
        // Error Response for Write Request (0x12), handle 0x0000, Unlikely Error (0x0E).
        #expect(h.channel.takeSent() == ["011200000e"])
        // Without a server at all: Request Not Supported.
        h.bearer.onRequest = nil
        h.channel.deliver("0a 05 00")
        #expect(h.channel.takeSent() == ["010a000006"])
    }

    @Test func wrongOrOversizedAnswersAreFixedOrReplaced() {
        let h = BearerHarness()
        let responders = Box<[ATTResponder]>([])
        h.bearer.onRequest = { _, responder in responders.value.append(responder) }
        h.channel.deliver("0a 03 00")
        // A read value longer than ATT_MTU − 1 is cut to it (23 octets in all).
        responders.value[0].respond(.readResponse(.init(attributeValue: Array(0..<30))))
        #expect(h.channel.sent.count == 1 && h.channel.takeSent() == [([0x0B] + Array(0..<22)).hexString])
        // A Write Response cannot answer a Read Request: Unlikely Error instead.
        h.channel.deliver("0a 04 00")
        responders.value[1].respond(.writeResponse(.init()))
        #expect(h.channel.takeSent() == ["010a00000e"])
    }

    @Test func notifyCutsTheValueToMTUMinus3() {
        let h = BearerHarness()
        #expect(h.bearer.notify(handle: 0x0020, value: Array(0..<30)))
        // Handle Value Notification (0x1B), handle 0x0020, the first 20 octets.
        #expect(h.channel.takeSent() == [([0x1B, 0x20, 0x00] + Array(0..<20)).hexString])
        #expect(h.bearer.notifyMultiple([(0x0020, [0x01]), (0x0021, [0x02, 0x03])]))
        #expect(h.channel.takeSent() == ["2320000100012100020002 03".replacingOccurrences(of: " ", with: "")])
        // Fewer than two, or too long for ATT_MTU: refused, never cut.
        #expect(!h.bearer.notifyMultiple([(0x0020, [0x01])]))
        // 1 + 2 × (4 + 10) = 29 octets > 23.
        let ten = [UInt8](repeating: 0x55, count: 10)
        #expect(!h.bearer.notifyMultiple([(ATTHandle(0x0020), ten), (ATTHandle(0x0021), ten)]))
        #expect(h.channel.takeSent().isEmpty)
    }

    @Test func indicationsGoOneAtATimeAndCompleteOnConfirmation() {
        let h = BearerHarness()
        let results = Box<[String]>([])
        let outcome: (Result<Void, ATTBearerError>) -> String = { if case .failure(let e) = $0 { "\(e)" } else { "confirmed" } }
        h.bearer.indicate(handle: 0x0020, value: [0x01]) { results.value.append("A " + outcome($0)) }
        h.bearer.indicate(handle: 0x0021, value: Array(0..<30)) { results.value.append("B " + outcome($0)) }
        #expect(h.channel.takeSent() == ["1d200001"])
        h.channel.deliver("1e")
        #expect(results.value == ["A confirmed"])
        // The second goes out now, its value cut to ATT_MTU − 3.
        #expect(h.channel.takeSent() == [([0x1D, 0x21, 0x00] + Array(0..<20)).hexString])
        h.channel.deliver("1e")
        #expect(results.value == ["A confirmed", "B confirmed"])
        // A confirmation with nothing outstanding is dropped.
        h.channel.deliver("1e")
        #expect(results.value.count == 2 && h.bearer.isOpen)
    }

    @Test func unknownRequestsUnknownCommandsAndInvalidPDUs() {
        let h = BearerHarness()
        let commands = Box<[ATTPDU]>([])
        h.bearer.onCommand = { commands.value.append($0) }
        let requests = Box(0)
        h.bearer.onRequest = { _, responder in requests.value += 1; responder.respondError(.unlikelyError) }
        // 0x3F is no opcode, command flag clear: Error Response, Request Not Supported (0x06).
        h.channel.deliver("3f 01 02")
        #expect(h.channel.takeSent() == ["013f000006"])
        // 0x7F has the command flag: ignored.
        h.channel.deliver("7f 01 02")
        #expect(h.channel.takeSent().isEmpty)
        // A Read Request one octet short: Invalid PDU (0x04), handle 0x0000.
        h.channel.deliver("0a 03")
        #expect(h.channel.takeSent() == ["010a000004"])
        // A Write Request of 24 octets, one more than ATT_MTU: Invalid PDU.
        h.channel.deliver("12 05 00" + String(repeating: "00", count: 21))
        #expect(h.channel.takeSent() == ["0112000004"])
        #expect(requests.value == 0)
        // A Write Command reaches the server; a malformed one and a Signed Write Command do not.
        h.channel.deliver("52 05 00 aa")
        h.channel.deliver("52 05")
        h.channel.deliver("d2 05 00 aa" + String(repeating: "00", count: 12))
        #expect(commands.value == [.writeCommand(.init(attributeHandle: 0x0005, attributeValue: [0xAA]))])
        // Malformed or oversized notifications are dropped; empty PDUs too.
        let notified = Box(0)
        h.bearer.onNotification = { _, _ in notified.value += 1 }
        h.channel.deliver("1b 05")
        h.channel.deliver("1b 05 00" + String(repeating: "00", count: 21))
        h.channel.onReceive?([])
        #expect(notified.value == 0 && h.channel.takeSent().isEmpty)
    }

    @Test func theBearerExposesTheLinkSecurityLevel() {
        let h = BearerHarness()
        #expect(h.bearer.securityLevel == .noSecurity)
        h.channel.securityLevel = .authenticatedEncryption
        #expect(h.bearer.securityLevel == .authenticatedEncryption)
        let level = Box<LESecurityLevel?>(nil)
        h.bearer.onRequest = { _, responder in level.value = responder.securityLevel; responder.respondError(.unlikelyError) }
        h.channel.deliver("0a 01 00")
        #expect(level.value == .authenticatedEncryption)
    }

    // MARK: Timeout and close

    @Test func anUnansweredRequestTimesOutAfter30SecondsAndClosesTheBearer() {
        let h = BearerHarness()
        let results = Box<[Result<ATTPDU, ATTBearerError>]>([])
        let events = BearerEvents(h.bearer)
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0003))) { results.value.append($0) }
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0004))) { results.value.append($0) }
        h.bearer.indicate(handle: 0x0020, value: [0x01]) { _ in }
        h.loop.run(for: .seconds(29))
        #expect(results.value.isEmpty && events.closes.isEmpty)
        h.loop.run(for: .seconds(1))
        #expect(results.value == [.failure(.timeout), .failure(.bearerClosed)])
        #expect(events.closes == [.transactionTimeout] && h.bearer.closeReason == .transactionTimeout)
        #expect(h.channel.takeSent() == ["0a0300", "1d200001"])

        // Closed for good: nothing is sent or accepted.
        h.bearer.request(.readRequest(.init(attributeHandle: 0x0005))) { results.value.append($0) }
        #expect(results.value.last == .failure(.bearerClosed))
        #expect(!h.bearer.sendCommand(.writeCommand(.init(attributeHandle: 1, attributeValue: []))))
        #expect(!h.bearer.notify(handle: 1, value: []))
        h.bearer.onRequest = { _, _ in Issue.record("a request reached a closed bearer") }
        h.channel.deliver("0a 01 00")
        h.channel.deliver("0b 00")
        h.channel.onClose?()
        #expect(h.channel.takeSent().isEmpty && events.closes.count == 1)
    }

    @Test func anUnconfirmedIndicationTimesOutAfter30SecondsAndClosesTheBearer() {
        let h = BearerHarness()
        let results = Box<[Result<Void, ATTBearerError>]>([])
        let events = BearerEvents(h.bearer)
        h.bearer.indicate(handle: 0x0020, value: [0x01]) { results.value.append($0) }
        h.bearer.indicate(handle: 0x0021, value: [0x02]) { results.value.append($0) }
        h.loop.run(for: .milliseconds(29_999))
        #expect(results.value.isEmpty)
        h.loop.run(for: .milliseconds(1))
        let failures: [ATTBearerError?] = results.value.map { if case .failure(let e) = $0 { e } else { nil } }
        #expect(failures == [.timeout, .bearerClosed])
        #expect(events.closes == [.transactionTimeout])
        let later = Box<Result<Void, ATTBearerError>?>(nil)
        h.bearer.indicate(handle: 0x0020, value: []) { later.value = $0 }
        if case .failure(let e) = later.value { #expect(e == .bearerClosed) } else { Issue.record("indicate on a closed bearer") }
        #expect(h.channel.takeSent() == ["1d200001"])
    }

    @Test func theTimeoutRestartsWithEachTransactionAndIsConfigurable() {
        let h = BearerHarness()
        h.bearer.transactionTimeout = .seconds(5)
        let results = Box<[Result<ATTPDU, ATTBearerError>]>([])
        h.bearer.request(.readRequest(.init(attributeHandle: 1))) { results.value.append($0) }
        h.bearer.request(.readRequest(.init(attributeHandle: 2))) { results.value.append($0) }
        h.loop.run(for: .seconds(4))
        h.channel.deliver("0b 00")
        h.loop.run(for: .seconds(4))
        #expect(results.value.count == 1 && h.bearer.isOpen)
        h.loop.run(for: .seconds(1))
        #expect(results.value.last == .failure(.timeout) && !h.bearer.isOpen)
    }

    @Test func theLinkClosingFailsEverythingWithDisconnected() {
        let h = BearerHarness()
        let failures = Box<[ATTBearerError]>([])
        let events = BearerEvents(h.bearer)
        let record: (Result<ATTPDU, ATTBearerError>) -> Void = { if case .failure(let e) = $0 { failures.value.append(e) } }
        h.bearer.request(.readRequest(.init(attributeHandle: 1)), completion: record)
        h.bearer.request(.readRequest(.init(attributeHandle: 2)), completion: record)
        h.bearer.indicate(handle: 3, value: []) { if case .failure(let e) = $0 { failures.value.append(e) } }
        h.bearer.indicate(handle: 4, value: []) { if case .failure(let e) = $0 { failures.value.append(e) } }
        h.channel.onClose?()
        #expect(failures.value == [.disconnected, .disconnected, .disconnected, .disconnected])
        #expect(events.closes == [.disconnected])
        h.bearer.request(.readRequest(.init(attributeHandle: 1)), completion: record)
        #expect(failures.value.last == .disconnected)
        // The timers are gone with the link.
        h.loop.run(for: .seconds(60))
        #expect(failures.value.count == 5 && events.closes.count == 1)
    }

    // MARK: Listeners

    @Test func everyListenerHearsEachEventInTheOrderTheyWereAdded() {
        let h = BearerHarness()
        var heard: [String] = []
        final class Named: ATTBearerListener {
            let name: String
            let log: (String) -> Void
            init(_ name: String, _ log: @escaping (String) -> Void) { self.name = name; self.log = log }
            func attBearerMTUDidChange(to mtu: Int) { log("\(name) mtu \(mtu)") }
            func attBearerIsReadyToSend() { log("\(name) ready") }
            func attBearerDidClose(_ reason: ATTBearer.CloseReason) { log("\(name) closed") }
        }
        /// Implements nothing: the defaults do nothing.
        final class Silent: ATTBearerListener {}
        let first = Named("a") { heard.append($0) }
        let second = Named("b") { heard.append($0) }
        let silent = Silent()
        h.bearer.addListener(first)
        h.bearer.addListener(silent)
        h.bearer.addListener(second)
        h.bearer.addListener(first) // already listening: once only
        h.bearer.exchangeMTU { _ in }
        h.channel.deliver("03 f7 00")
        h.channel.queuedPDUs = h.bearer.maximumQueuedPDUsForUnacknowledged
        #expect(!h.bearer.notify(handle: 1, value: [1]))
        h.channel.queuedPDUs = 0
        h.channel.onCanSendMore?()
        h.bearer.removeListener(second)
        h.channel.onClose?()
        #expect(heard == ["a mtu 247", "b mtu 247", "a ready", "b ready", "a closed"])
    }

    @Test func listenersAreHeldWeaklyAndMayLeaveWhileHearing() {
        let h = BearerHarness()
        var heard: [String] = []
        final class Leaving: ATTBearerListener {
            let bearer: ATTBearer
            let log: (String) -> Void
            init(_ bearer: ATTBearer, _ log: @escaping (String) -> Void) { self.bearer = bearer; self.log = log }
            func attBearerIsReadyToSend() {
                log("leaving")
                bearer.removeListener(self)
            }
        }
        var gone: BearerEvents? = BearerEvents(h.bearer)
        weak let goneRef = gone
        gone = nil
        #expect(goneRef == nil) // the bearer did not keep it
        // A listener holding the bearer is no cycle, and removing itself mid-call spares the others.
        let leaving = Leaving(h.bearer) { heard.append($0) }
        h.bearer.addListener(leaving)
        let events = BearerEvents(h.bearer)
        for _ in 0..<2 {
            h.channel.queuedPDUs = h.bearer.maximumQueuedPDUsForUnacknowledged
            #expect(!h.bearer.notify(handle: 1, value: [1]))
            h.channel.queuedPDUs = 0
            h.channel.onCanSendMore?()
        }
        #expect(heard == ["leaving"] && events.ready == 2)
    }

    // MARK: Back-pressure

    @Test func commandsAndNotificationsStopAtTheQueueBoundAndResumeWhenItDrains() {
        let h = BearerHarness()
        let events = BearerEvents(h.bearer)
        let command = ATTPDU.writeCommand(.init(attributeHandle: 0x0010, attributeValue: [0x01]))
        #expect(h.bearer.sendCommand(command))
        // The link drained without anyone having been refused: nothing to tell.
        h.channel.onCanSendMore?()
        #expect(events.ready == 0)

        h.channel.queuedPDUs = h.bearer.maximumQueuedPDUsForUnacknowledged
        #expect(!h.bearer.sendCommand(command))
        #expect(!h.bearer.notify(handle: 0x0020, value: [0x02]))
        h.channel.queuedPDUs = 0
        h.channel.onCanSendMore?()
        h.channel.onCanSendMore?()
        #expect(events.ready == 1)
        #expect(h.bearer.sendCommand(command))
        // Write Command (0x52), handle 0x0010, value 01 — twice; nothing while refused.
        #expect(h.channel.takeSent() == ["52100001", "52100001"])
        // Not a command, or longer than ATT_MTU: refused without waiting for the queue.
        #expect(!h.bearer.sendCommand(.writeRequest(.init(attributeHandle: 1, attributeValue: []))))
        #expect(!h.bearer.sendCommand(.writeCommand(.init(attributeHandle: 1, attributeValue: Array(repeating: 0, count: 21)))))
    }
}
