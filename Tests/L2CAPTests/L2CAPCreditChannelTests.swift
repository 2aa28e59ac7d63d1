import ByteCoding
import HCI
import L2CAPTesting
import Scheduling
import Testing
@testable import L2CAP

/// A signalling C-frame on CID 5, as the peer sends it.
private func signal(_ identifier: UInt8, _ command: SignalingCommand) -> [UInt8] {
    BasicFrame(channelID: 5, payload: SignalingPacket(identifier: identifier, command: command).encode()).encode()
}

/// A K-frame for `cid`: the basic header, then the payload as given (SDU length included).
private func kFrame(_ cid: UInt16, _ payload: [UInt8]) -> [UInt8] { BasicFrame(channelID: cid, payload: payload).encode() }

/// The first K-frame of an SDU: its 2-byte length, then `data`.
private func firstKFrame(_ cid: UInt16, sduLength: Int, _ data: [UInt8]) -> [UInt8] {
    kFrame(cid, [UInt8(sduLength & 0xFF), UInt8(sduLength >> 8)] + data)
}

private func bytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var generator = SeededGenerator(seed: seed)
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

/// What a channel told its user.
extension Result where Success == L2CAPCreditChannel, Failure == L2CAPChannelOpenError {
    /// The error, or nil for an open channel (a channel is not Equatable).
    fileprivate var failure: L2CAPChannelOpenError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

private final class ChannelEvents {
    var received: [[UInt8]] = []
    var closed: [L2CAPChannelCloseReason] = []
    var canSendMore = 0

    func watch(_ channel: L2CAPCreditChannel) {
        channel.onReceive = { [unowned self] in received.append($0) }
        channel.onClose = { [unowned self] in closed.append($0) }
        channel.onCanSendMore = { [unowned self] in canSendMore += 1 }
    }
}

@Suite("L2CAP credit-based channels")
struct L2CAPCreditChannelTests {
    let loop = EventLoop(pacing: .manual)
    let lower = FakeLowerLayer()

    func link(_ role: LERole = .peripheral) -> L2CAPLink { L2CAPLink(handle: 0x40, role: role, lower: lower, loop: loop) }

    /// A link whose server accepts every SPSM with `ours`, and the channel the peer opened
    /// from its CID 0x0050 with its MTU, MPS and credits (our CID is 0x0040).
    func acceptedChannel(_ l: L2CAPLink, ours: CreditBasedChannelParameters, peerMTU: UInt16 = 1024, peerMPS: UInt16 = 247,
                         peerCredits: UInt16 = 10) throws -> L2CAPCreditChannel {
        var opened: [L2CAPCreditChannel] = []
        l.creditBasedServer = { _ in .accept(ours, onOpen: { opened.append($0) }) }
        l.receive(signal(0x20, .leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x50, mtu: peerMTU, mps: peerMPS,
                                                                initialCredits: peerCredits)))
        lower.sent.removeAll()
        return try #require(opened.first)
    }

    // MARK: Opening

    @Test func openingAnLEChannelSendsTheRequestAndTakesTheResponse() throws {
        let l = link(.central)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80, parameters: CreditBasedChannelParameters(mtu: 512, mps: 100, initialCredits: 10)) {
            results.append($0)
        }
        // LE Credit Based Connection Request, id 1: SPSM 0x80, SCID 0x40, MTU 512, MPS 100, 10 credits.
        #expect(lower.sentHex == [hex("0e00 0500 14 01 0a00 8000 4000 0002 6400 0a00")])
        #expect(results.isEmpty)
        l.receive(signal(1, .leCreditBasedConnectionResponse(destinationCID: 0x41, mtu: 300, mps: 247, initialCredits: 5,
                                                              result: 0)))
        let channel = try #require(try results.first?.get())
        #expect(channel.psm == 0x80)
        #expect(channel.localCID == 0x40)
        #expect(channel.remoteCID == 0x41)
        #expect(channel.remoteMTU == 300)
        #expect(channel.remoteMPS == 247)
        #expect(channel.peerCredits == 5)
        #expect(channel.local == CreditBasedChannelParameters(mtu: 512, mps: 100, initialCredits: 10))
        #expect(!channel.isEnhanced)
        #expect(channel.isOpen)
        #expect(channel.connectionHandle == 0x40)
        #expect(l.creditChannels.map(\.localCID) == [0x40])
        // The next channel takes the next CID.
        l.openCreditBasedChannel(psm: 0x81) { results.append($0) }
        #expect(lower.sentHex.last == hex("0e00 0500 14 02 0a00 8100 4100 0010 f700 4000"))
    }

    @Test func openingAnEnhancedChannel() throws {
        let l = link(.central)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80, enhanced: true) { results.append($0) }
        // Credit Based Connection Request, id 1: SPSM 0x80, MTU 4096, MPS 247, 64 credits, SCID 0x40.
        #expect(lower.sentHex == [hex("0e00 0500 17 01 0a00 8000 0010 f700 4000 4000")])
        l.receive(signal(1, .creditBasedConnectionResponse(mtu: 100, mps: 64, initialCredits: 3, result: 0,
                                                            destinationCIDs: [0x45])))
        let channel = try #require(try results.first?.get())
        #expect(channel.isEnhanced)
        #expect(channel.remoteCID == 0x45)
        #expect(channel.remoteMTU == 100)
        #expect(channel.peerCredits == 3)
    }

    @Test func theEnhancedRequestFallsBackWhenNotUnderstood() throws {
        let l = link(.central)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80, enhanced: true) { results.append($0) }
        l.receive(signal(1, .commandReject(reason: 0x0000, data: [])))
        #expect(results.isEmpty)
        // The same CID, now with LE Credit Based Connection Request.
        #expect(lower.sentHex.last == hex("0e00 0500 14 02 0a00 8000 4000 0010 f700 4000"))
        l.receive(signal(2, .leCreditBasedConnectionResponse(destinationCID: 0x60, mtu: 23, mps: 23, initialCredits: 1,
                                                              result: 0)))
        let channel = try #require(try results.first?.get())
        #expect(!channel.isEnhanced)
        #expect(channel.localCID == 0x40)
        // Other Command Rejects (and rejects of 0x14) are refusals.
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        l.receive(signal(3, .commandReject(reason: 0x0000, data: [])))
        #expect(results.last?.failure == .refused(.spsmNotSupported))
    }

    @Test(arguments: [UInt16(0x0002), 0x0004, 0x0005, 0x0006, 0x0007, 0x0008, 0x0009, 0x000A, 0x000B, 0x000C, 0x0042])
    func refusalsFromThePeer(code: UInt16) {
        let l = link(.central)
        let expected: L2CAPChannelOpenError = CreditBasedConnectionResult(rawValue: code).map { .refused($0) } ?? .refusedWithCode(code)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        l.receive(signal(1, .leCreditBasedConnectionResponse(destinationCID: 0, mtu: 0, mps: 0, initialCredits: 0, result: code)))
        l.openCreditBasedChannel(psm: 0x80, enhanced: true) { results.append($0) }
        l.receive(signal(2, .creditBasedConnectionResponse(mtu: 0, mps: 0, initialCredits: 0, result: code, destinationCIDs: [0])))
        #expect(results.map(\.failure) == [expected, expected])
        #expect(l.creditChannels.isEmpty)
        if code == 0x0042 { #expect("\(expected)" == "the peer refused the channel (result 0x42)") }
    }

    @Test func malformedSuccessfulResponsesFailAndFreeThePeersSide() {
        let l = link(.central)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        // MPS 22 is below the minimum: refused here, and the peer's channel disconnected.
        l.receive(signal(1, .leCreditBasedConnectionResponse(destinationCID: 0x41, mtu: 100, mps: 22, initialCredits: 1, result: 0)))
        #expect(results.map(\.failure) == [.invalidParameters])
        #expect(lower.sentHex.last == hex("0800 0500 06 02 0400 4100 4000"))
        // A CID outside the dynamic range.
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        l.receive(signal(3, .leCreditBasedConnectionResponse(destinationCID: 0x04, mtu: 100, mps: 100, initialCredits: 1, result: 0)))
        #expect(results.last?.failure == .invalidParameters)
        #expect(l.creditChannels.isEmpty)
    }

    @Test func ourParametersAndTheLinkAreChecked() {
        let l = link(.central)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80, parameters: CreditBasedChannelParameters(mtu: 22, mps: 23, initialCredits: 1)) {
            results.append($0)
        }
        l.openCreditBasedChannel(psm: 0x80, parameters: CreditBasedChannelParameters(mtu: 23, mps: 65534, initialCredits: 1)) {
            results.append($0)
        }
        #expect(results.map(\.failure) == Array(repeating: .invalidParameters, count: 2))
        #expect(lower.sent.isEmpty)
        // Below the enhanced mode's minimum (64) the LE mode is asked for instead: Request 0x14,
        // id 1, SPSM 0x80, SCID 0x40, MTU 63, MPS 64, 1 credit.
        l.openCreditBasedChannel(psm: 0x80, parameters: CreditBasedChannelParameters(mtu: 63, mps: 64, initialCredits: 1),
                                 enhanced: true) { results.append($0) }
        #expect(lower.sentHex == [hex("0e00 0500 14 01 0a00 8000 4000 3f00 4000 0100")])
        l.close()
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        #expect(results.last?.failure == .disconnected)
    }

    @Test func openingTimesOutAndFreesTheCID() {
        let l = link(.central)
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        loop.run(for: .seconds(30))
        #expect(results.map(\.failure) == [.timeout])
        // A late response is dropped; the CID is free again.
        l.receive(signal(1, .leCreditBasedConnectionResponse(destinationCID: 0x41, mtu: 100, mps: 100, initialCredits: 1, result: 0)))
        #expect(l.creditChannels.isEmpty)
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        #expect(lower.sentHex.last == hex("0e00 0500 14 02 0a00 8000 4000 0010 f700 4000"))
        // The link going down fails a request under way.
        l.close()
        #expect(results.last?.failure == .disconnected)
    }

    @Test func noFreeCIDs() throws {
        let l = link()
        var opened: [L2CAPCreditChannel] = []
        let ours = CreditBasedChannelParameters(mtu: 100, mps: 100, initialCredits: 1)
        l.creditBasedServer = { _ in .accept(ours, onOpen: { opened.append($0) }) }
        // Our own request under way holds 0x40; the peer's 63 channels take 0x41–0x7F.
        var results: [Result<L2CAPCreditChannel, L2CAPChannelOpenError>] = []
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        for (index, scid) in (UInt16(0x40)...0x7E).enumerated() {
            l.receive(signal(UInt8(index + 1), .leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: scid, mtu: 100, mps: 100,
                                                                                initialCredits: 1)))
        }
        #expect(opened.map(\.localCID) == Array(0x41...0x7F))
        // The peer's CID 0x7F is free, but none of ours: no resources.
        l.receive(signal(0xF0, .leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x7F, mtu: 100, mps: 100, initialCredits: 1)))
        #expect(lower.sentHex.last == hex("0e00 0500 15 f0 0a00 0000 0000 0000 0000 0400"))
        l.receive(signal(0xF1, .creditBasedConnectionRequest(spsm: 0x80, mtu: 100, mps: 100, initialCredits: 1, sourceCIDs: [0x7F])))
        #expect(lower.sentHex.last == hex("0e00 0500 18 f1 0a00 0000 0000 0000 0400 0000"))
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        #expect(results.map(\.failure) == [.noFreeChannelIDs])
        // A CID is free again once its channel's disconnection completed.
        opened[0].close()
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        #expect(results.map(\.failure) == [.noFreeChannelIDs, .noFreeChannelIDs])
        #expect(lower.sentHex.last == hex("0800 0500 06 02 0400 4000 4100"))
        l.receive(signal(2, .disconnectionResponse(destinationCID: 0x40, sourceCID: 0x41)))
        l.openCreditBasedChannel(psm: 0x80) { results.append($0) }
        #expect(results.count == 2)
        #expect(lower.sentHex.last == hex("0e00 0500 14 03 0a00 8000 4100 0010 f700 4000"))
    }

    // MARK: Incoming requests

    @Test func acceptingAnLERequest() throws {
        let l = link()
        var asked: [UInt16] = []
        var opened: [L2CAPCreditChannel] = []
        l.creditBasedServer = { psm in
            asked.append(psm)
            return .accept(CreditBasedChannelParameters(mtu: 600, mps: 247, initialCredits: 8), onOpen: { channel in
                opened.append(channel)
                // Sent at once: it follows the response.
                channel.send([0xAA])
            })
        }
        l.receive(signal(2, .leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x50, mtu: 512, mps: 100, initialCredits: 10)))
        #expect(asked == [0x80])
        // Response id 2: DCID 0x40, MTU 600, MPS 247, 8 credits, success; then the SDU's K-frame.
        #expect(lower.sentHex == [hex("0e00 0500 15 02 0a00 4000 5802 f700 0800 0000"), hex("0300 5000 0100 aa")])
        let channel = try #require(opened.first)
        #expect(channel.localCID == 0x40)
        #expect(channel.remoteCID == 0x50)
        #expect(channel.remoteMTU == 512)
        #expect(channel.remoteMPS == 100)
        #expect(channel.peerCredits == 9)
        #expect(l.creditChannels.map(\.localCID) == [0x40])
    }

    @Test func acceptingAnEnhancedRequestForThreeChannels() throws {
        let l = link()
        var asked = 0
        var opened: [L2CAPCreditChannel] = []
        l.creditBasedServer = { _ in
            asked += 1
            return .accept(CreditBasedChannelParameters(mtu: 100, mps: 64, initialCredits: 2), onOpen: { opened.append($0) })
        }
        l.receive(signal(9, .creditBasedConnectionRequest(spsm: 0x25, mtu: 64, mps: 64, initialCredits: 4,
                                                           sourceCIDs: [0x70, 0x71, 0x72])))
        #expect(asked == 1)
        #expect(opened.map(\.localCID) == [0x40, 0x41, 0x42])
        #expect(opened.map(\.remoteCID) == [0x70, 0x71, 0x72])
        #expect(opened.allSatisfy { $0.isEnhanced && $0.peerCredits == 4 && $0.remoteMTU == 64 })
        #expect(lower.sentHex == [hex("1200 0500 18 09 0e00 6400 4000 0200 0000 4000 4100 4200")])
    }

    /// Each refusal the checks give, with the bytes of the response.
    @Test func everyRefusalOfAnIncomingRequest() throws {
        let l = link()
        var refusal: CreditBasedConnectionResult?
        var opened: [L2CAPCreditChannel] = []
        l.creditBasedServer = { _ in
            if let refusal { return .refuse(refusal) }
            return .accept(.default, onOpen: { opened.append($0) })
        }
        func le(_ spsm: UInt16, _ scid: UInt16, _ mtu: UInt16, _ mps: UInt16) -> String {
            l.receive(signal(7, .leCreditBasedConnectionRequest(spsm: spsm, sourceCID: scid, mtu: mtu, mps: mps, initialCredits: 5)))
            return lower.sentHex.last ?? ""
        }
        func refused(_ code: String) -> String { hex("0e00 0500 15 07 0a00 0000 0000 0000 0000 \(code)") }
        #expect(le(0x0000, 0x50, 100, 100) == refused("0200"))  // SPSM 0 is not an SPSM
        #expect(le(0x0100, 0x50, 100, 100) == refused("0200"))  // above the LE range
        #expect(le(0x0080, 0x003F, 100, 100) == refused("0900"))  // source CID below the dynamic range
        #expect(le(0x0080, 0x0080, 100, 100) == refused("0900"))  // and above it
        #expect(le(0x0080, 0x0050, 22, 100) == refused("0b00"))  // MTU < 23
        #expect(le(0x0080, 0x0050, 100, 22) == refused("0b00"))  // MPS < 23
        #expect(le(0x0080, 0x0050, 100, 65534) == refused("0b00"))  // MPS > 65533
        for result in [CreditBasedConnectionResult.insufficientAuthentication, .insufficientAuthorization,
                       .encryptionKeySizeTooShort, .insufficientEncryption, .noResourcesAvailable, .spsmNotSupported] {
            refusal = result
            #expect(le(0x0080, 0x50, 100, 100) == refused([UInt8(result.rawValue), 0].hexString))
        }
        refusal = nil
        #expect(le(0x0080, 0x0050, 23, 23) == hex("0e00 0500 15 07 0a00 4000 0010 f700 4000 0000"))
        #expect(le(0x0080, 0x0050, 100, 100) == refused("0a00"))  // 0x50 is the open channel's
        // Enhanced: MTU or MPS below 64 → invalid parameters; each source CID gets DCID 0.
        func enhanced(_ mtu: UInt16, _ mps: UInt16, _ scids: [UInt16]) -> String {
            l.receive(signal(8, .creditBasedConnectionRequest(spsm: 0x80, mtu: mtu, mps: mps, initialCredits: 5, sourceCIDs: scids)))
            return lower.sentHex.last ?? ""
        }
        #expect(enhanced(63, 64, [0x51, 0x52]) == hex("1000 0500 18 08 0c00 0000 0000 0000 0c00 0000 0000"))
        #expect(enhanced(64, 63, [0x51]) == hex("0e00 0500 18 08 0a00 0000 0000 0000 0c00 0000"))
        #expect(enhanced(64, 64, [0x51, 0x50]) == hex("1000 0500 18 08 0c00 0000 0000 0000 0a00 0000 0000"))
        #expect(enhanced(64, 64, [0x51, 0x51]) == hex("1000 0500 18 08 0c00 0000 0000 0000 0a00 0000 0000"))
        #expect(enhanced(64, 64, [0x51, 0x05]) == hex("1000 0500 18 08 0c00 0000 0000 0000 0900 0000 0000"))
        refusal = .insufficientEncryption
        #expect(enhanced(64, 64, [0x51]) == hex("0e00 0500 18 08 0a00 0000 0000 0000 0800 0000"))
        #expect(opened.count == 1)
        // Without a server nothing is supported, whatever the request.
        l.creditBasedServer = nil
        #expect(le(0x0080, 0x0050, 1, 1) == refused("0200"))
    }

    // MARK: K-frames and credits

    @Test func anSDUOf600BytesGoesAsThreeKFrames() throws {
        let l = link()
        let channel = try acceptedChannel(l, ours: .default, peerMPS: 247, peerCredits: 2)
        let sdu = bytes(600)
        #expect(channel.send(sdu))
        // 600 = 0x0258: the first K-frame is 2 + 245 bytes, then 247, then 108.
        #expect(lower.sent == [firstKFrame(0x50, sduLength: 600, Array(sdu[0..<245])), kFrame(0x50, Array(sdu[245..<492]))])
        #expect(lower.sentHex[0].hasPrefix(hex("f700 5000 5802")))
        #expect(channel.peerCredits == 0)
        #expect(channel.queuedBytes == 108)
        // One credit more (CID = the peer's, 0x50) lets the last one go.
        l.receive(signal(3, .flowControlCredit(cid: 0x50, credits: 1)))
        #expect(lower.sent.count == 3)
        #expect(lower.sentHex[2] == hex("6c00 5000") + Array(sdu[492...]).hexString)
        #expect(channel.peerCredits == 0)
        #expect(channel.queuedBytes == 0)
    }

    @Test func sendRefusesWhatItCannotTake() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: .default, peerMTU: 1000, peerCredits: 0)
        events.watch(channel)
        channel.sendQueueLimit = 1500
        #expect(!channel.send([]))
        #expect(!channel.send(bytes(1001)))
        #expect(channel.send(bytes(1000)))
        #expect(!channel.send(bytes(600)))  // 1600 > 1500
        #expect(channel.queuedBytes == 1000)
        #expect(events.canSendMore == 0)
        l.receive(signal(3, .flowControlCredit(cid: 0x50, credits: 2)))  // 245 + 247 bytes go
        #expect(channel.queuedBytes == 508)
        #expect(events.canSendMore == 1)  // 508 + 600 fits 1500 now
        #expect(channel.send(bytes(600)))
    }

    @Test func creditsAreReturnedAtHalf() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: CreditBasedChannelParameters(mtu: 100, mps: 23, initialCredits: 8))
        events.watch(channel)
        // An SDU of 60 bytes is 3 K-frames of MPS 23: 2 + 21, 23, 16.
        let sdu = bytes(60)
        l.receive(firstKFrame(0x40, sduLength: 60, Array(sdu[0..<21])))
        l.receive(kFrame(0x40, Array(sdu[21..<44])))
        l.receive(kFrame(0x40, Array(sdu[44...])))
        #expect(events.received == [sdu])
        #expect(lower.sent.isEmpty)  // the peer has 5 of 8
        l.receive(firstKFrame(0x40, sduLength: 1, [7]))
        // 4 left = 8 / 2: one Flow Control Credit (id 1, our CID 0x40) of 4 tops it up to 8.
        #expect(lower.sentHex == [hex("0800 0500 16 01 0400 4000 0400")])
        #expect(events.received.last == [7])
        // Paused: nothing returned, however low; resuming tops up at once.
        channel.isReceivePaused = true
        for _ in 0..<7 { l.receive(firstKFrame(0x40, sduLength: 1, [1])) }
        #expect(lower.sent.count == 1)
        #expect(events.received.count == 9)
        channel.isReceivePaused = false
        #expect(lower.sentHex.last == hex("0800 0500 16 02 0400 4000 0700"))
        channel.isReceivePaused = false
        #expect(lower.sent.count == 2)
    }

    @Test func creditsForUnknownChannelsAreDroppedWithALogLine() throws {
        let l = link()
        let log = LogLines()
        l.logger = log.capture.logger(.l2cap)
        let channel = try acceptedChannel(l, ours: .default)
        // 0x40 is our CID, not the peer's: not a channel's credits.
        l.receive(signal(3, .flowControlCredit(cid: 0x40, credits: 1)))
        #expect(log.lines == ["credits for an unknown channel dropped"])
        #expect(channel.peerCredits == 10)
        #expect(lower.sent.isEmpty)
    }

    // MARK: Protocol violations

    /// Each disconnects the channel: Disconnection Request (DCID 0x50, SCID 0x40), and the
    /// user hears of it at once.
    @Test(arguments: [
        ("a K-frame without a credit", 0),
        ("a payload longer than MPS", 1),
        ("an SDU length above MTU", 2),
        ("more than the SDU length", 3),
        ("a first K-frame of 1 byte", 4),
        ("credits above 65535", 5),
    ])
    func violationsDisconnect(_ what: String, _ which: Int) throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: CreditBasedChannelParameters(mtu: 100, mps: 50, initialCredits: 1))
        events.watch(channel)
        switch which {
        case 0:
            channel.isReceivePaused = true
            l.receive(firstKFrame(0x40, sduLength: 1, [1]))
            l.receive(firstKFrame(0x40, sduLength: 1, [2]))
        case 1: l.receive(firstKFrame(0x40, sduLength: 100, bytes(49)))
        case 2: l.receive(firstKFrame(0x40, sduLength: 101, [1]))
        case 3:
            channel.isReceivePaused = true
            l.receive(signal(3, .flowControlCredit(cid: 0x50, credits: 1)))  // irrelevant: our credits to send
            l.receive(firstKFrame(0x40, sduLength: 3, [1, 2, 3, 4]))
        case 4: l.receive(kFrame(0x40, [1]))
        default: l.receive(signal(3, .flowControlCredit(cid: 0x50, credits: 65535 - 10 + 1)))
        }
        #expect(events.closed.count == 1, "\(what)")
        if case .protocolError = events.closed.first {} else { Issue.record("\(what): \(events.closed)") }
        #expect(!channel.isOpen)
        #expect(lower.sentHex.last == hex("0800 0500 06 01 0400 5000 4000"))
        #expect(!channel.send([1]))
        // Nothing more arrives; the CID is freed by the response.
        let sent = lower.sent.count
        l.receive(firstKFrame(0x40, sduLength: 1, [1]))
        #expect(lower.sent.count == sent)
        #expect(l.creditChannels.isEmpty)
        l.receive(signal(1, .disconnectionResponse(destinationCID: 0x50, sourceCID: 0x40)))
        #expect(events.closed.count == 1)
        #expect(l.dynamicChannels.isEmpty)
    }

    // MARK: Disconnection

    @Test func closingLocally() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: .default, peerCredits: 0)
        events.watch(channel)
        #expect(channel.send([1, 2, 3]))
        channel.close()
        // DCID = the peer's CID, SCID = ours.
        #expect(lower.sentHex == [hex("0800 0500 06 01 0400 5000 4000")])
        #expect(!channel.isOpen)
        #expect(events.closed.isEmpty)
        #expect(!channel.send([1]))
        #expect(channel.queuedBytes == 0)
        l.receive(signal(3, .flowControlCredit(cid: 0x50, credits: 5)))  // the queued SDU is not sent
        #expect(lower.sent.count == 1)
        l.receive(signal(1, .disconnectionResponse(destinationCID: 0x50, sourceCID: 0x40)))
        #expect(events.closed == [.local])
        channel.close()
        l.close()
        #expect(events.closed == [.local])
        #expect(lower.sent.count == 1)
    }

    @Test func closingLocallyWithoutAnAnswer() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: .default)
        events.watch(channel)
        channel.close()
        loop.run(for: .seconds(29))
        #expect(events.closed.isEmpty)
        loop.run(for: .seconds(1))
        #expect(events.closed == [.local])
        #expect(l.dynamicChannels.isEmpty)
    }

    @Test func closedByThePeer() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: .default)
        events.watch(channel)
        // DCID = our CID, SCID = the peer's: answered with the same CIDs.
        l.receive(signal(7, .disconnectionRequest(destinationCID: 0x40, sourceCID: 0x50)))
        #expect(lower.sentHex == [hex("0800 0500 07 07 0400 4000 5000")])
        #expect(events.closed == [.remote])
        #expect(!channel.send([1]))
        #expect(l.creditChannels.isEmpty)
        // Now unknown: Command Reject, invalid CID (as before channels existed).
        l.receive(signal(8, .disconnectionRequest(destinationCID: 0x40, sourceCID: 0x50)))
        #expect(lower.sentHex.last == hex("0a00 0500 01 08 0600 0200 4000 5000"))
    }

    @Test func aDisconnectionRequestWithTheWrongSourceIsDiscarded() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: .default)
        events.watch(channel)
        l.receive(signal(7, .disconnectionRequest(destinationCID: 0x40, sourceCID: 0x51)))
        #expect(lower.sent.isEmpty)
        #expect(channel.isOpen)
    }

    @Test func crossingDisconnectionRequests() throws {
        let l = link()
        let events = ChannelEvents()
        let channel = try acceptedChannel(l, ours: .default)
        events.watch(channel)
        channel.close()
        l.receive(signal(7, .disconnectionRequest(destinationCID: 0x40, sourceCID: 0x50)))
        #expect(lower.sentHex.last == hex("0800 0500 07 07 0400 4000 5000"))
        #expect(events.closed == [.local])
        l.receive(signal(1, .disconnectionResponse(destinationCID: 0x50, sourceCID: 0x40)))
        #expect(events.closed == [.local])
    }

    @Test func theLinkGoingDownClosesEveryChannel() throws {
        let l = link()
        var opened: [L2CAPCreditChannel] = []
        l.creditBasedServer = { _ in .accept(.default, onOpen: { opened.append($0) }) }
        l.receive(signal(1, .creditBasedConnectionRequest(spsm: 0x80, mtu: 64, mps: 64, initialCredits: 4, sourceCIDs: [0x70, 0x71])))
        let events = [ChannelEvents(), ChannelEvents()]
        for (channel, watcher) in zip(opened, events) { watcher.watch(channel) }
        opened[1].close()  // closing, waiting for its response
        let sent = lower.sent.count
        l.close()
        #expect(events.map(\.closed) == [[.linkLost], [.linkLost]])
        #expect(opened.allSatisfy { !$0.isOpen && !$0.send([1]) })
        #expect(lower.sent.count == sent)
        #expect(l.creditChannels.isEmpty)
    }

    // MARK: Scheduling

    @Test func attGoesAheadOfAQueuedSDU() throws {
        let l = link()
        let channel = try acceptedChannel(l, ours: .default, peerMPS: 100, peerCredits: 100)
        lower.holdsSentPDUs = true
        #expect(channel.send(bytes(1000)))  // 11 K-frames
        // Only `creditChannelQueueDepth` K-frames go down while the controller is busy.
        #expect(L2CAPLink.creditChannelQueueDepth == 2)
        #expect(lower.sent.count == 2)
        #expect(l.att.send([0x1B, 0x03, 0x00, 0x01]))  // a notification
        #expect(lower.sent.count == 3)
        for _ in 0..<10 where lower.sent.count < 12 { lower.drain(l) }
        let cids = lower.sent.map { UInt16($0[2]) | UInt16($0[3]) << 8 }
        #expect(cids == [0x50, 0x50, 0x04] + Array(repeating: 0x50, count: 11 - 2))
        #expect(channel.queuedBytes == 0)
    }

    @Test func channelsAreServedRoundRobin() throws {
        let l = link()
        var opened: [L2CAPCreditChannel] = []
        l.creditBasedServer = { _ in .accept(.default, onOpen: { opened.append($0) }) }
        l.receive(signal(1, .creditBasedConnectionRequest(spsm: 0x80, mtu: 200, mps: 64, initialCredits: 50,
                                                           sourceCIDs: [0x70, 0x71, 0x72])))
        lower.sent.removeAll()
        lower.holdsSentPDUs = true
        lower.queued = 2  // the controller is busy: everything waits in the channels
        #expect(opened[0].send(bytes(62 + 64 * 2)))  // 3 K-frames each
        #expect(opened[1].send(bytes(62 + 64 * 2)))
        #expect(opened[2].send(bytes(62)))  // 1 K-frame
        #expect(lower.sent.isEmpty)
        for _ in 0..<10 where lower.sent.count < 7 { lower.drain(l) }
        let cids = lower.sent.map { UInt16($0[2]) | UInt16($0[3]) << 8 }
        #expect(cids == [0x70, 0x71, 0x72, 0x70, 0x71, 0x70, 0x71])
    }

    // MARK: Two links back to back

    @Test func twoLinksExchangeSDUsBothWays() throws {
        let pair = LinkPair(loop: loop)
        let parameters = CreditBasedChannelParameters(mtu: 65535, mps: 247, initialCredits: 10)
        var serverChannel: L2CAPCreditChannel?
        pair.b.creditBasedServer = { psm in
            psm == 0x80 ? .accept(parameters, onOpen: { serverChannel = $0 }) : .refuse(.spsmNotSupported)
        }
        var clientChannel: L2CAPCreditChannel?
        pair.a.openCreditBasedChannel(psm: 0x80, parameters: parameters, enhanced: true) { clientChannel = try? $0.get() }
        loop.runUntilIdle()
        let a = try #require(clientChannel)
        let b = try #require(serverChannel)
        #expect(a.remoteCID == b.localCID && b.remoteCID == a.localCID)
        let sizes = [1, 246, 247, 248, 4000, 65535, 1, 65535]
        let sdus = sizes.enumerated().map { bytes($1, seed: UInt64($0 + 10)) }
        let fromA = Sender(a, sdus)
        let fromB = Sender(b, sdus.reversed())
        let toB = ChannelEvents()
        let toA = ChannelEvents()
        toB.watch(b)
        toA.watch(a)
        fromA.start()
        fromB.start()
        loop.runUntilIdle()
        #expect(toB.received == sdus)
        #expect(toA.received == Array(sdus.reversed()))
        // 65535 bytes took ~266 K-frames on 10 credits at a time: the credits came back often.
        #expect(pair.creditPDUs > 50)
        #expect(a.peerCredits <= 10 && b.peerCredits <= 10)

        // Receive paused: the sender stops when its credits run out, and resumes after.
        b.isReceivePaused = true
        #expect(a.send(bytes(10000)))
        loop.runUntilIdle()
        #expect(toB.received.count == sdus.count)
        #expect(a.peerCredits == 0)
        #expect(a.queuedBytes > 0)
        b.isReceivePaused = false
        loop.runUntilIdle()
        #expect(toB.received.last == bytes(10000))

        // A refused SPSM and a close from each side.
        var refused: Result<L2CAPCreditChannel, L2CAPChannelOpenError>?
        pair.a.openCreditBasedChannel(psm: 0x81) { refused = $0 }
        loop.runUntilIdle()
        #expect(refused?.failure == .refused(.spsmNotSupported))
        a.close()
        loop.runUntilIdle()
        #expect(toA.closed == [.local])
        #expect(toB.closed == [.remote])
        #expect(pair.a.creditChannels.isEmpty && pair.b.creditChannels.isEmpty)
    }

    // MARK: Fuzz

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func randomInputNeverTraps(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let l = link()
        l.requestTimeout = .seconds(1)
        var channels: [L2CAPCreditChannel] = []
        l.creditBasedServer = { _ in
            .accept(CreditBasedChannelParameters(mtu: UInt16.random(in: 23...300, using: &random),
                                                 mps: UInt16.random(in: 23...100, using: &random),
                                                 initialCredits: UInt16.random(in: 0...5, using: &random)),
                    onOpen: { channel in
                        channels.append(channel)
                        channel.onReceive = { _ in if Bool.random(using: &random) { channel.isReceivePaused.toggle() } }
                    })
        }
        func cid() -> UInt16 {
            Bool.random(using: &random) ? UInt16.random(in: 0x3E...0x82, using: &random) : UInt16.random(in: 0...0xFFFF, using: &random)
        }
        func u16() -> UInt16 {
            [0, 1, 22, 23, 64, 65533, 65534, 65535, UInt16.random(in: 0...0xFFFF, using: &random)].randomElement(using: &random) ?? 0
        }
        for step in 0..<3000 {
            let id = UInt8.random(in: 0...255, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                l.receive(signal(id, .leCreditBasedConnectionRequest(spsm: u16(), sourceCID: cid(), mtu: u16(), mps: u16(),
                                                                      initialCredits: u16())))
            case 1:
                let count = Int.random(in: 1...5, using: &random)
                l.receive(signal(id, .creditBasedConnectionRequest(spsm: u16(), mtu: u16(), mps: u16(), initialCredits: u16(),
                                                                    sourceCIDs: (0..<count).map { _ in cid() })))
            case 2: l.receive(signal(id, .flowControlCredit(cid: cid(), credits: u16())))
            case 3: l.receive(signal(id, .disconnectionRequest(destinationCID: cid(), sourceCID: cid())))
            case 4:
                let responses: [SignalingCommand] = [
                    .leCreditBasedConnectionResponse(destinationCID: cid(), mtu: u16(), mps: u16(), initialCredits: u16(),
                                                     result: u16()),
                    .creditBasedConnectionResponse(mtu: u16(), mps: u16(), initialCredits: u16(), result: u16(),
                                                   destinationCIDs: [cid()]),
                    .disconnectionResponse(destinationCID: cid(), sourceCID: cid()),
                    .commandReject(reason: UInt16.random(in: 0...2, using: &random), data: []),
                ]
                l.receive(signal(id, responses.randomElement(using: &random) ?? .commandReject(reason: 0, data: [])))
            case 5:
                l.openCreditBasedChannel(psm: u16(), parameters: CreditBasedChannelParameters(mtu: u16(), mps: u16(), initialCredits: u16()),
                                         enhanced: Bool.random(using: &random)) { if case .success(let c) = $0 { channels.append(c) } }
            case 6:
                let payload = (0..<Int.random(in: 0...120, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                l.receive(kFrame(cid(), payload))
            case 7:
                if let channel = channels.randomElement(using: &random) {
                    _ = channel.send((0..<Int.random(in: 0...400, using: &random)).map { UInt8(truncatingIfNeeded: $0) })
                }
            case 8:
                if let channel = channels.randomElement(using: &random) {
                    if Bool.random(using: &random) { channel.close() } else { channel.isReceivePaused.toggle() }
                }
            default:
                lower.holdsSentPDUs = Bool.random(using: &random)
                if Bool.random(using: &random) { lower.drain(l) }
                loop.run(for: .milliseconds(Int.random(in: 0...600, using: &random)))
            }
            if step % 500 == 499 { lower.sent.removeAll() }
        }
        l.close()
        #expect(channels.allSatisfy { !$0.isOpen })
        #expect(l.dynamicChannels.isEmpty)
    }
}

/// Sends its SDUs in order, waiting for `onCanSendMore` when the queue is full.
private final class Sender {
    let channel: L2CAPCreditChannel
    var sdus: [[UInt8]]

    init(_ channel: L2CAPCreditChannel, _ sdus: [[UInt8]]) {
        self.channel = channel
        self.sdus = sdus
    }

    func start() {
        channel.onCanSendMore = { [unowned self] in start() }
        while let sdu = sdus.first, channel.send(sdu) { sdus.removeFirst() }
    }
}

/// Two links joined by their lower layers on one loop: a PDU is delivered to the other link
/// as a job of the loop, and counts as queued until then, so the links' scheduling sees a
/// controller that drains and calls `lowerLayerCanSendMore` as the HCI driver does.
private final class LinkPair: @unchecked Sendable {
    final class Wire: L2CAPLowerLayer, @unchecked Sendable {
        let loop: EventLoop
        weak var from: L2CAPLink?
        weak var to: L2CAPLink?
        var inFlight = 0
        var creditPDUs = 0

        init(loop: EventLoop) { self.loop = loop }

        func sendACL(handle: ConnectionHandle, pdu: [UInt8]) -> Bool {
            inFlight += 1
            if pdu.count > 4, pdu[2] == 5, pdu[4] == 0x16 { creditPDUs += 1 }
            loop.execute { [self] in
                inFlight -= 1
                to?.receive(pdu)
                if inFlight == 0 { from?.lowerLayerCanSendMore() }
            }
            return true
        }

        func queuedPDUs(handle: ConnectionHandle) -> Int { inFlight }
    }

    let ab: Wire
    let ba: Wire
    let a: L2CAPLink
    let b: L2CAPLink

    init(loop: EventLoop) {
        ab = Wire(loop: loop)
        ba = Wire(loop: loop)
        a = L2CAPLink(handle: 0x40, role: .central, lower: ab, loop: loop)
        b = L2CAPLink(handle: 0x41, role: .peripheral, lower: ba, loop: loop)
        ab.from = a
        ab.to = b
        ba.from = b
        ba.to = a
    }

    var creditPDUs: Int { ab.creditPDUs + ba.creditPDUs }
}
