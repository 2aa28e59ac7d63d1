import ByteCoding
import HCI
import L2CAPTesting
import LogTesting
import Scheduling
import Testing
@testable import L2CAP

/// Hex written with spaces for readability, compared without them.
func hex(_ spaced: String) -> String { spaced.replacingOccurrences(of: " ", with: "") }

final class Decider: L2CAPLinkDelegate {
    var asked: [ConnectionParameters] = []
    var accept = true
    func link(_ link: L2CAPLink, acceptsConnectionParameterUpdate parameters: ConnectionParameters) -> Bool {
        asked.append(parameters)
        return accept
    }
}

@Suite("L2CAP frames and signalling packets")
struct L2CAPCodecTests {
    @Test func basicFrame() throws {
        // ATT Exchange MTU Request (23) on CID 4: length 3, CID 4.
        let frame = BasicFrame(channelID: 0x0004, payload: [0x02, 0x17, 0x00])
        #expect(frame.encode().hexString == hex("030004000217 00"))
        #expect(try BasicFrame(decoding: [UInt8](hex: "03 00 04 00 02 17 00")!) == frame)
        #expect(throws: DecodeError.self) { try BasicFrame(decoding: [UInt8](hex: "04 00 04 00 02 17 00")!) }
        #expect(throws: DecodeError.self) { try BasicFrame(decoding: [0x00, 0x00, 0x04]) }
    }

    @Test(arguments: [
        // Connection Parameter Update Request, id 1: interval 6–12, latency 0, timeout 200.
        ("12 01 08 00 06 00 0c 00 00 00 c8 00",
         SignalingCommand.connectionParameterUpdateRequest(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 200)),
        ("13 01 02 00 01 00", .connectionParameterUpdateResponse(result: 1)),
        ("01 01 02 00 00 00", .commandReject(reason: 0, data: [])),
        ("01 01 06 00 02 00 40 00 41 00", .commandReject(reason: 2, data: [0x40, 0x00, 0x41, 0x00])),
        // LE Credit Based Connection Request: PSM 0x80, SCID 0x40, MTU 512, MPS 100, 10 credits.
        ("14 01 0a 00 80 00 40 00 00 02 64 00 0a 00",
         .leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x40, mtu: 512, mps: 100, initialCredits: 10)),
        ("15 01 0a 00 41 00 00 02 64 00 05 00 00 00",
         .leCreditBasedConnectionResponse(destinationCID: 0x41, mtu: 512, mps: 100, initialCredits: 5, result: 0)),
        ("16 01 04 00 40 00 03 00", .flowControlCredit(cid: 0x40, credits: 3)),
        ("06 01 04 00 40 00 41 00", .disconnectionRequest(destinationCID: 0x40, sourceCID: 0x41)),
        ("07 01 04 00 40 00 41 00", .disconnectionResponse(destinationCID: 0x40, sourceCID: 0x41)),
        ("17 01 0c 00 80 00 00 02 64 00 0a 00 40 00 41 00",
         .creditBasedConnectionRequest(spsm: 0x80, mtu: 512, mps: 100, initialCredits: 10, sourceCIDs: [0x40, 0x41])),
        ("18 01 0a 00 00 02 64 00 0a 00 00 00 50 00",
         .creditBasedConnectionResponse(mtu: 512, mps: 100, initialCredits: 10, result: 0, destinationCIDs: [0x50])),
        ("19 01 06 00 00 02 64 00 50 00", .creditBasedReconfigureRequest(mtu: 512, mps: 100, destinationCIDs: [0x50])),
        ("1a 01 02 00 00 00", .creditBasedReconfigureResponse(result: 0)),
        ("7f 01 01 00 aa", .unknown(code: 0x7F, data: [0xAA])),
    ])
    func signalingVectors(hex: String, command: SignalingCommand) throws {
        let bytes = try #require([UInt8](hex: hex))
        let packet = SignalingPacket(identifier: 1, command: command)
        #expect(packet.encode() == bytes)
        #expect(try SignalingPacket(decoding: bytes) == packet)
    }

    @Test func malformedSignalingKeepsTheIdentifier() {
        for hex in ["12 07 06 00 06 00 0c 00 00 00", "12 07 09 00 06 00 0c 00 00 00 c8 00", "17 07 08 00 80 00 00 02 64 00 0a 00"] {
            #expect {
                try SignalingPacket(decoding: [UInt8](hex: hex)!)
            } throws: { ($0 as? SignalingDecodeError)?.identifier == 7 }
        }
        #expect(throws: DecodeError.self) { try SignalingPacket(decoding: [0x12]) }
    }
}

@Suite("L2CAP link")
struct L2CAPLinkTests {
    let loop = EventLoop(pacing: .manual)
    let lower = FakeLowerLayer()

    func link(_ role: LERole) -> L2CAPLink { L2CAPLink(handle: 0x40, role: role, lower: lower, loop: loop) }

    func signaling(_ hex: String) -> [UInt8] {
        let payload = [UInt8](hex: hex)!
        return BasicFrame(channelID: 5, payload: payload).encode()
    }

    @Test func centralAnswersParameterUpdateRequests() {
        let l = link(.central)
        let decider = Decider()
        l.delegate = decider
        l.receive(signaling("12 03 08 00 06 00 0c 00 00 00 c8 00"))
        #expect(decider.asked == [ConnectionParameters(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 200)])
        #expect(lower.sentHex == [hex("0600050013030200 0000")])
        decider.accept = false
        l.receive(signaling("12 04 08 00 06 00 0c 00 00 00 c8 00"))
        #expect(lower.sentHex.last == hex("0600050013040200 0100"))
        // Invalid parameters are rejected without asking.
        l.receive(signaling("12 05 08 00 0c 00 06 00 00 00 c8 00"))
        #expect(decider.asked.count == 2)
        #expect(lower.sentHex.last == hex("0600050013050200 0100"))
    }

    @Test func peripheralRejectsParameterUpdateRequest() {
        let l = link(.peripheral)
        l.receive(signaling("12 03 08 00 06 00 0c 00 00 00 c8 00"))
        #expect(lower.sentHex == [hex("0600050001030200 0000")])
    }

    @Test func unknownAndMalformedCommandsGetCommandReject() {
        let l = link(.central)
        l.receive(signaling("7f 09 00 00"))
        l.receive(signaling("12 0a 06 00 06 00 0c 00 00 00"))  // too short for its code
        l.receive(signaling("12 00 08 00 06 00 0c 00 00 00 c8 00"))  // identifier 0: dropped
        l.receive(signaling("12"))  // no identifier: dropped
        #expect(lower.sentHex == [hex("0600050001090200 0000"), hex("06000500010a0200 0000")])
        // Longer than the signalling MTU (23): rejected with reason 1 and our MTU.
        l.receive(signaling("7f 0b 14 00" + String(repeating: "00", count: 20)))
        #expect(lower.sentHex.last == hex("08000500010b0400010017 00"))
    }

    @Test func creditBasedRequestsWithoutChannelsAreRefused() {
        let l = link(.peripheral)
        l.receive(signaling("14 02 0a 00 80 00 40 00 00 02 64 00 0a 00"))
        #expect(lower.sentHex.last == hex("0e00050015020a00 0000 0000 0000 0000 0200"))
        l.receive(signaling("17 03 0c 00 80 00 00 02 64 00 0a 00 40 00 41 00"))
        #expect(lower.sentHex.last == hex("1000050018030c00 0000 0000 0000 0200 0000 0000"))
        l.receive(signaling("06 04 04 00 40 00 41 00"))
        #expect(lower.sentHex.last == hex("0a00050001040600 0200 4000 4100"))
    }

    @Test func fixedChannelsAndUnknownCIDs() {
        let l = link(.central)
        var att: [[UInt8]] = []
        l.att.onReceive = { att.append($0) }
        l.receive(BasicFrame(channelID: 4, payload: [0x02, 0x17, 0x00]).encode())
        l.receive(BasicFrame(channelID: 0x0099, payload: [1, 2, 3]).encode())
        l.receive([0x05, 0x00, 0x04, 0x00, 0x02])  // length disagrees: dropped
        #expect(att == [[0x02, 0x17, 0x00]])
        #expect(l.att.send([0x03, 0x17, 0x00]))
        #expect(lower.sentHex == [hex("0300040003 1700")])
    }

    @Test func pairingIsRefusedUntilSMPExists() {
        let l = link(.peripheral)
        // Pairing Request (Just Works, bonding): Pairing Failed, Pairing Not Supported.
        l.receive(BasicFrame(channelID: 6, payload: [UInt8](hex: "01 03 00 01 10 07 07")!).encode())
        #expect(lower.sentHex == [hex("0200060005 05")])
        l.receive(BasicFrame(channelID: 6, payload: [0x0B, 0x01]).encode())  // Security Request
        l.receive(BasicFrame(channelID: 6, payload: [0x04, 0x00]).encode())  // anything else: ignored
        #expect(lower.sent.count == 2)
    }

    @Test func peripheralRequestsParameterUpdate() throws {
        let l = link(.peripheral)
        var results: [Result<Bool, L2CAPError>] = []
        l.requestConnectionParameterUpdate(ConnectionParameters(intervalMin: 24, intervalMax: 40, latency: 0, timeout: 400)) { results.append($0) }
        #expect(lower.sentHex == [hex("0c00050012010800 1800 2800 0000 9001")])
        l.receive(signaling("13 01 02 00 00 00"))
        #expect(results == [.success(true)])
        // A response nobody asked for is dropped.
        l.receive(signaling("13 01 02 00 00 00"))
        #expect(results.count == 1)
        // A Command Reject answers the request too.
        l.requestConnectionParameterUpdate(ConnectionParameters(intervalMin: 24, intervalMax: 40, latency: 0, timeout: 400)) { results.append($0) }
        l.receive(signaling("01 02 02 00 00 00"))
        #expect(results.last == .failure(.rejected(reason: 0)))
        // The central cannot ask.
        link(.central).requestConnectionParameterUpdate(ConnectionParameters(intervalMin: 24, intervalMax: 40, latency: 0, timeout: 400)) { results.append($0) }
        #expect(results.last == .failure(.wrongRole))
    }

    @Test func requestsTimeOutOnTheVirtualClock() {
        let l = link(.peripheral)
        var results: [Result<Bool, L2CAPError>] = []
        l.requestConnectionParameterUpdate(ConnectionParameters(intervalMin: 24, intervalMax: 40, latency: 0, timeout: 400)) { results.append($0) }
        loop.run(for: .seconds(29))
        #expect(results.isEmpty)
        loop.run(for: .seconds(1))
        #expect(results == [.failure(.timeout)])
    }

    @Test func closeFailsPendingRequestsAndTellsChannels() {
        let l = link(.peripheral)
        var results: [Result<Bool, L2CAPError>] = []
        var closed = 0
        l.att.onClose = { closed += 1 }
        l.requestConnectionParameterUpdate(ConnectionParameters(intervalMin: 24, intervalMax: 40, latency: 0, timeout: 400)) { results.append($0) }
        l.close()
        #expect(results == [.failure(.disconnected)])
        #expect(closed == 1)
        #expect(!l.att.send([1]))
        l.receive(BasicFrame(channelID: 4, payload: [1]).encode())
        loop.run(for: .seconds(60))
        #expect(results.count == 1)
    }
}

/// Keeps a link's log lines (the log closure is `@Sendable`; the loop is the test's).
/// What a link logged, through a capturing log handler.
final class LogLines: Sendable {
    let capture = LogCapture()
    var lines: [String] { capture.records.map(\.message) }
}

@Suite("L2CAP channel registry")
struct L2CAPChannelRegistryTests {
    let loop = EventLoop(pacing: .manual)
    let lower = FakeLowerLayer()

    func link() -> L2CAPLink { L2CAPLink(handle: 0x40, role: .peripheral, lower: lower, loop: loop) }

    @Test func theFixedChannelsRegisterThemselves() throws {
        let l = link()
        #expect(l.channelIDs == [0x0004, 0x0005, 0x0006])
        #expect(l.channel(for: 0x0004) === l.att)
        #expect(l.channel(for: 0x0006) === l.securityManager)
        #expect(try #require(l.channel(for: 0x0005)).channelID == 0x0005)
        #expect(l.channel(for: 0x0021) == nil)
        #expect(l.channel(for: 0x0040) == nil)
    }

    @Test func registeringAFixedChannel() throws {
        let l = link()
        let channel = try #require(l.register(fixedChannel: 0x0021))
        #expect(channel.channelID == 0x0021)
        #expect(channel.connectionHandle == 0x40)
        #expect(l.channel(for: 0x0021) === channel)
        #expect(l.channelIDs == [0x0004, 0x0005, 0x0006, 0x0021])
        // A CID has one channel; the null CID and the dynamic range are not fixed channels.
        #expect(l.register(fixedChannel: 0x0021) == nil)
        #expect(l.register(fixedChannel: 0x0004) == nil)
        #expect(l.register(fixedChannel: 0x0000) == nil)
        #expect(l.register(fixedChannel: 0x0040) == nil)
        #expect(l.register(fixedChannel: 0xFFFF) == nil)
        #expect(l.channel(for: 0x0004) === l.att)
    }

    @Test func pdusReachTheirChannelAndItSends() throws {
        let l = link()
        let channel = try #require(l.register(fixedChannel: 0x0021))
        var received: [[UInt8]] = []
        var att: [[UInt8]] = []
        channel.onReceive = { received.append($0) }
        l.att.onReceive = { att.append($0) }
        l.receive(BasicFrame(channelID: 0x0021, payload: [1, 2, 3]).encode())
        l.receive(BasicFrame(channelID: 0x0004, payload: [0x02, 0x17, 0x00]).encode())
        l.receive(BasicFrame(channelID: 0x0021, payload: []).encode())
        #expect(received == [[1, 2, 3], []])
        #expect(att == [[0x02, 0x17, 0x00]])
        #expect(channel.send([0xAA, 0xBB]))
        #expect(lower.sentHex == [hex("0200 2100 aabb")])
        // Reserved room for the header is filled in with this channel's CID.
        #expect(channel.send(reserved: [0, 0, 0, 0, 0xCC]))
        #expect(lower.sentHex.last == hex("0100 2100 cc"))
    }

    @Test func aLinkLogsOnCorebluetoothL2CAPTaggedWithItsConnection() throws {
        let capture = LogCapture()
        let l = L2CAPLink(handle: 0x40, role: .peripheral, lower: lower, loop: loop, peer: "00:1B:DC:00:00:02 (public)",
                          logging: capture.logging)
        l.receive(BasicFrame(channelID: 0x0021, payload: [1]).encode())
        let record = try #require(capture.records.first)
        #expect(record.label == "corebluetooth.l2cap")
        #expect(record.level == .debug)
        #expect(record.message == "dropped a PDU for unknown channel 0x0021")
        #expect(record.metadata == ["connection": "0x0040", "peer": "00:1B:DC:00:00:02 (public)", "role": "peripheral"])
    }

    @Test func unknownCIDsAreDroppedWithALogLine() {
        let l = link()
        let log = LogLines()
        l.logger = log.capture.logger(.l2cap)
        var att = 0
        l.att.onReceive = { _ in att += 1 }
        for cid: UInt16 in [0x0000, 0x0021, 0x003F, 0x0040, 0x007F, 0x1234] {
            l.receive(BasicFrame(channelID: cid, payload: [1]).encode())
        }
        #expect(att == 0)
        #expect(lower.sent.isEmpty)
        #expect(log.lines == ["0000", "0021", "003f", "0040", "007f", "1234"].map { "dropped a PDU for unknown channel 0x\($0)" })
    }

    @Test func channelsAreClosedWhenTheLinkCloses() throws {
        let l = link()
        let channel = try #require(l.register(fixedChannel: 0x0021))
        var told: [String] = []
        l.att.onClose = { told.append("att closed") }
        l.securityManager.onClose = { told.append("smp closed") }
        channel.onClose = { told.append("0x21 closed") }
        channel.onCanSendMore = { told.append("0x21 can send") }
        var received = 0
        channel.onReceive = { _ in received += 1 }
        l.lowerLayerCanSendMore()
        #expect(told == ["0x21 can send"])
        l.close()
        #expect(told == ["0x21 can send", "att closed", "smp closed", "0x21 closed"])
        // Closed: nothing in or out, no more news, no new channels.
        l.receive(BasicFrame(channelID: 0x0021, payload: [1]).encode())
        #expect(received == 0)
        #expect(!channel.send([1]))
        #expect(lower.sent.isEmpty)
        l.lowerLayerCanSendMore()
        l.close()
        #expect(told.count == 4)
        #expect(l.register(fixedChannel: 0x0022) == nil)
    }
}
