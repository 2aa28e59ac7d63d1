import ByteCoding
import HCI
import Scheduling
import Testing
@testable import VirtualController

/// Seeded random and mutated input at both edges of the controller: HCI commands and ACL from
/// the host, PDUs from the radio. Whatever arrives, nothing crashes, every command gets exactly
/// one answer, and the controller keeps working.
@Suite("Virtual controller: fuzzing")
struct ControllerFuzzTests {
    /// Parameter_Total_Length of each implemented command, from the command's definition in
    /// Vol 4 Part E §7 (independent of our encoders).
    static let parameterLengths: [UInt16: Int] = [
        0x0406: 3, 0x041D: 2,                                   // Disconnect, Read Remote Version
        0x0C01: 8, 0x0C03: 0, 0x0C63: 8,                        // Set Event Mask, Reset, Page 2
        0x1001: 0, 0x1002: 0, 0x1003: 0, 0x1005: 0, 0x1009: 0,  // informational
        0x1405: 2,                                              // Read RSSI
        0x2001: 8, 0x2002: 0, 0x2003: 0, 0x2005: 6, 0x2006: 15, 0x2008: 32, 0x2009: 32,
        0x200A: 1, 0x200B: 7, 0x200C: 2, 0x200D: 25, 0x200E: 0, 0x200F: 0, 0x2010: 0,
        0x2011: 7, 0x2012: 7, 0x2013: 14, 0x2016: 2, 0x2017: 32, 0x2018: 0, 0x2019: 28,
        0x201A: 18, 0x201B: 2, 0x201C: 0, 0x2020: 14, 0x2021: 3, 0x2022: 6, 0x2023: 0,
        0x2024: 4, 0x2027: 39, 0x2028: 7, 0x2029: 0, 0x202A: 0, 0x202D: 1, 0x202E: 2,
        0x202F: 0, 0x2030: 2, 0x2031: 3, 0x2032: 7, 0x2060: 0,
    ]

    /// What a host saw in answer to one command.
    struct Answer {
        var opcode: HCIOpcode
        /// Nil when a Command Complete carries no return parameters at all.
        var status: HCIStatus?
    }

    func answers(_ host: RawHost) -> [Answer] {
        host.take { e -> Answer? in
            switch e {
            case .commandComplete(let c): Answer(opcode: c.opcode, status: c.status)
            case .commandStatus(let s): Answer(opcode: s.opcode, status: s.status)
            default: nil
            }
        }
    }

    func randomBytes(_ count: Int, _ random: inout SeededGenerator) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func randomAndMutatedCommandsAndACL(seed: UInt64) throws {
        let d = TwoDevices()
        let fuzzed = d.a
        // The partner advertises connectably and scans, so random commands can meet a peer.
        AdvertisingScanningTests().advertise(d.b, intervalUnits: 0x0020)
        let bitmap = try #require(fuzzed.returning(ReadLocalSupportedCommands())).supportedCommands
        func isKnown(_ opcode: HCIOpcode) -> Bool {
            // Read Local Supported Commands has no bit of its own in the bitmap.
            opcode == ReadLocalSupportedCommands.opcode || SupportedCommandsTable.isSupported(opcode, in: bitmap)
        }
        let known = Self.parameterLengths.keys.sorted().map { HCIOpcode(rawValue: $0) }.filter(isKnown)
        #expect(known.count > 40)
        let groups: [UInt8] = [0x01, 0x03, 0x04, 0x05, 0x08]

        var random = SeededGenerator(seed: seed)
        var unanswered = 0, unknownAnswered = 0, malformed = 0, acl = 0
        for _ in 0..<1500 {
            let choice = Int.random(in: 0..<100, using: &random)
            if choice < 12 {
                // An ACL packet: a live handle or any, any boundary, any length up to past the buffer.
                let live = Array(fuzzed.controller.connections.keys)
                let handle = !live.isEmpty && Bool.random(using: &random)
                    ? live.randomElement(using: &random)! : UInt16.random(in: 0...0x0EFF, using: &random)
                let boundary = ACLDataPacket.Boundary(rawValue: UInt8.random(in: 0...3, using: &random))!
                fuzzed.sendACL(handle: handle, randomBytes(Int.random(in: 0...260, using: &random), &random), boundary: boundary)
                acl += 1
                d.loop.run(for: .milliseconds(Int64.random(in: 0...5, using: &random)))
                continue
            }
            let packet: HCICommandPacket
            enum Expect { case unknown, invalid, anyAnswer }
            let expect: Expect
            if choice < 40 {
                // A random opcode in one of the groups this controller lives in.
                let ocf = Bool.random(using: &random) ? UInt16.random(in: 0...0x90, using: &random) : UInt16.random(in: 0...0x3FF, using: &random)
                let opcode = HCIOpcode(ogf: groups.randomElement(using: &random)!, ocf: ocf)
                packet = HCICommandPacket(opcode: opcode, parameters: randomBytes(Int.random(in: 0...40, using: &random), &random))
                let expectedLength = Self.parameterLengths[opcode.rawValue]
                expect = !isKnown(opcode) ? .unknown : (expectedLength == packet.parameters.count ? .anyAnswer : .invalid)
            } else {
                let opcode = known.randomElement(using: &random)!
                let length = Self.parameterLengths[opcode.rawValue]!
                let mutation = Int.random(in: 0..<3, using: &random)
                if mutation == 0 && length > 0 {
                    packet = HCICommandPacket(opcode: opcode, parameters: randomBytes(Int.random(in: 0..<length, using: &random), &random))
                    expect = .invalid
                } else if mutation == 1 {
                    packet = HCICommandPacket(opcode: opcode, parameters: randomBytes(length + Int.random(in: 1...4, using: &random), &random))
                    expect = .invalid
                } else {
                    // The right length, random content: some answer, never Unknown HCI Command.
                    packet = HCICommandPacket(opcode: opcode, parameters: randomBytes(length, &random))
                    expect = .anyAnswer
                }
            }
            fuzzed.transport.send(.command(packet))
            d.loop.run(for: .zero)
            let got = answers(fuzzed)
            guard got.count == 1, let answer = got.first else {
                Issue.record("\(packet.opcode) with \(packet.parameters.count) bytes: \(got.count) answers")
                unanswered += 1
                continue
            }
            #expect(answer.opcode == packet.opcode)
            switch expect {
            case .unknown:
                #expect(answer.status == .unknownHCICommand, "\(packet.opcode)")
                unknownAnswered += 1
            case .invalid:
                #expect(answer.status == .invalidHCICommandParameters, "\(packet.opcode) with \(packet.parameters.count) bytes")
                malformed += 1
            case .anyAnswer:
                #expect(answer.status != .unknownHCICommand, "\(packet.opcode)")
            }
            // Let some virtual time pass so random commands can take effect on the air.
            if Bool.random(using: &random) { d.loop.run(for: .milliseconds(Int64.random(in: 0...20, using: &random))) }
        }
        #expect(unanswered == 0)
        #expect(unknownAnswered > 100 && malformed > 300 && acl > 100)

        // Afterwards the controller still works: reset, advertise to the partner, scan it.
        d.loop.run(for: .seconds(1))
        fuzzed.initialize()
        _ = d.b.takeLEEvents()
        #expect(d.b.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        AdvertisingScanningTests().scan(d.b, active: false, filterDuplicates: true)
        AdvertisingScanningTests().advertise(fuzzed, intervalUnits: 0x0020)
        d.loop.run(for: .milliseconds(500))
        let heard = AdvertisingScanningTests().reports(d.b)
        #expect(heard.contains { $0.address == TwoDevices.addressA && $0.eventType == .advInd })
        #expect(fuzzed.status(LESetAdvertisingEnable(advertisingEnable: false)) == .success)
        #expect(d.b.status(LESetScanEnable(leScanEnable: false, filterDuplicates: false)) == .success)
        AdvertisingScanningTests().advertise(d.b, intervalUnits: 0x0020)
        AdvertisingScanningTests().scan(fuzzed, active: true, filterDuplicates: true)
        d.loop.run(for: .milliseconds(500))
        let seen = AdvertisingScanningTests().reports(fuzzed)
        #expect(seen.contains { $0.address == TwoDevices.addressB && $0.eventType == .advInd })
        #expect(seen.contains { $0.address == TwoDevices.addressB && $0.eventType == .scanRsp })
    }

    // MARK: Garbage from the radio side

    @Test func randomBytesAsLinkLayerPDUs() {
        var random = SeededGenerator(seed: 99)
        var decodedAdvertising = 0, decodedData = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...45, using: &random)
            var bytes = randomBytes(count, &random)
            // Half the time make the length octet agree, so the decoders get past the header.
            if count >= 2 && Bool.random(using: &random) { bytes[1] = UInt8(count - 2) }
            let lengthAgrees = count >= 2 && Int(bytes[1]) == count - 2
            do {
                let pdu = try AdvertisingPDU(decoding: bytes)
                decodedAdvertising += 1
                #expect(lengthAgrees)
                // Whatever decodes re-encodes to something that decodes to the same PDU.
                #expect(try AdvertisingPDU(decoding: pdu.encode()) == pdu)
            } catch {
                #expect(error is DecodeError)
            }
            let encrypted = Bool.random(using: &random)
            do {
                let pdu = try DataPDU(decoding: bytes, encrypted: encrypted)
                decodedData += 1
                #expect(lengthAgrees)
                #expect(try DataPDU(decoding: pdu.encode(), encrypted: encrypted) == pdu)
                if pdu.llid == .control, let control = try? LLControlPDU(decoding: pdu.payload[...]) {
                    #expect(control.encode() == pdu.payload)
                }
            } catch {
                #expect(error is DecodeError)
            }
            do {
                let control = try LLControlPDU(decoding: bytes[...])
                #expect(control.encode() == bytes)
            } catch {
                #expect(error is DecodeError)
            }
        }
        // The generator does reach past the headers.
        #expect(decodedAdvertising > 500 && decodedData > 1000)
    }

    @Test(arguments: [AirTimeMode.instant, .timed])
    func randomControlPDUsOnAConnection(mode: AirTimeMode) throws {
        let d = TwoDevices(airTime: mode)
        let (central, _) = try #require(d.connect())
        let aa = try #require(d.a.controller.connections[central]?.accessAddress)
        var random = SeededGenerator(seed: 5)
        // Every control opcode with random CtrData of its own length, to both ends.
        for _ in 0..<400 {
            let (pdu, _) = LinkLayerPDUTests.controlVectors.randomElement(using: &random)!
            var payload = pdu.encode()
            for i in payload.indices.dropFirst() { payload[i] = UInt8.random(in: 0...255, using: &random) }
            let target = Bool.random(using: &random) ? d.a.controller : d.b.controller
            let data = DataPDU(llid: .control, payload: payload)
            d.loop.execute { target.radioDidReceive(data, accessAddress: aa, rssi: -50) }
            d.loop.run(for: .milliseconds(Int64.random(in: 0...3, using: &random)))
        }
        // Nothing hangs the loop: virtual time still advances, and both hosts can still talk.
        let before = d.loop.now
        d.loop.run(for: .seconds(2))
        #expect(d.loop.now - before == .seconds(2))
        for host in [d.a, d.b] {
            #expect(host.status(Reset()) == .success)
            host.initialize()
        }
        _ = try #require(d.connect())
    }

    @Test func connectIndWithInvalidParametersIsIgnored() {
        let d = TwoDevices(airTime: .timed)
        AdvertisingScanningTests().advertise(d.b, intervalUnits: 0x0020)
        let advertiser = LEAddress(.publicDevice, TwoDevices.addressB)
        let initiator = LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:00:77")!)
        // Interval 0, timeout 0, no channels: outside every range of Vol 6 Part B §2.3.3.1.
        let bad = [
            ConnectLLData(accessAddress: 0x1234_5678, interval: 0, latency: 0, timeout: 0x48),
            ConnectLLData(accessAddress: 0x1234_5678, interval: 0x18, latency: 0, timeout: 0),
            ConnectLLData(accessAddress: 0x1234_5678, interval: 0x18, latency: 600, timeout: 0x48),
            ConnectLLData(accessAddress: 0x1234_5678, interval: 0x18, latency: 0, timeout: 0x48, channelMap: 0),
        ]
        let sender = d.a.controller.radioID
        for ll in bad {
            d.loop.execute { d.b.controller.radioDidReceive(.connectInd(initA: initiator, advA: advertiser, llData: ll), rssi: -50, from: sender) }
            d.loop.run(for: .milliseconds(50))
        }
        #expect(d.b.takeLEEvents().isEmpty)
        #expect(d.b.controller.connections.isEmpty)
        #expect(d.b.controller.advertising.enabled)
    }
}
