import Foundation
import HCI
import HCITesting
import HCITransport
import Scheduling
import TestTools
import Testing

struct BtsnoopTests {
    static let reset = try! HCIPacket(h4: [0x01, 0x03, 0x0C, 0x00])
    static let resetComplete = try! HCIPacket(h4: [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00])
    static let attRequest = try! HCIPacket(h4: [0x02, 0x40, 0x20, 0x07, 0x00, 0x03, 0x00, 0x04, 0x00, 0x02, 0xF7, 0x00])

    @Test func writerThenReaderRoundTripWithExactBytes() throws {
        let path = temporaryPath("roundtrip.btsnoop")
        defer { unlink(path) }
        let writer = try BtsnoopWriter(path: path)
        writer.write(Self.reset, direction: .sent, unixMicroseconds: 0)
        writer.write(Self.resetComplete, direction: .received, unixMicroseconds: 1_000_000)
        writer.write(Self.attRequest, direction: .sent, unixMicroseconds: 1_700_000_000_123_456)
        writer.write(Self.attRequest, direction: .received, unixMicroseconds: 2)
        writer.close()
        writer.write(Self.reset, direction: .sent)  // Ignored once closed.

        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        // "btsnoop\0", version 1, datalink 1002 (0x3EA, H4), big-endian.
        #expect(Array(bytes[0..<16]) == [
            0x62, 0x74, 0x73, 0x6E, 0x6F, 0x6F, 0x70, 0x00,
            0x00, 0x00, 0x00, 0x01,
            0x00, 0x00, 0x03, 0xEA,
        ])
        // First record: lengths 4 and 4; flags 2 (sent, command); drops 0; the Unix epoch on the
        // year-0 scale, 0x00DCDDB30F2F8000; then the H4 frame.
        #expect(Array(bytes[16..<44]) == [
            0x00, 0x00, 0x00, 0x04,
            0x00, 0x00, 0x00, 0x04,
            0x00, 0x00, 0x00, 0x02,
            0x00, 0x00, 0x00, 0x00,
            0x00, 0xDC, 0xDD, 0xB3, 0x0F, 0x2F, 0x80, 0x00,
            0x01, 0x03, 0x0C, 0x00,
        ])
        // Second record: flags 3 (received, event); timestamp 0x00DCDDB30F2F8000 + 1,000,000 (0xF4240) = 0x00DCDDB30F3EC240.
        #expect(Array(bytes[52..<56]) == [0x00, 0x00, 0x00, 0x03])
        #expect(Array(bytes[60..<68]) == [0x00, 0xDC, 0xDD, 0xB3, 0x0F, 0x3E, 0xC2, 0x40])

        let capture = try BtsnoopReader(bytes: bytes)
        #expect(capture.version == 1)
        #expect(capture.datalink == 1002)
        #expect(capture.truncatedTailLength == 0)
        #expect(capture.records.count == 4)
        #expect(try capture.records.map { try $0.packet() } == [Self.reset, Self.resetComplete, Self.attRequest, Self.attRequest])
        #expect(capture.records.map(\.direction) == [.sent, .received, .sent, .received])
        // ACL data: bit 1 clear.
        #expect(capture.records.map(\.flags) == [2, 3, 0, 1])
        #expect(capture.records.map(\.unixMicroseconds) == [0, 1_000_000, 1_700_000_000_123_456, 2])
        #expect(capture.records.allSatisfy { $0.cumulativeDrops == 0 && Int($0.originalLength) == $0.data.count })

        let fromFile = try BtsnoopReader(path: path)
        #expect(fromFile.records == capture.records)
    }

    @Test func truncatedTailStopsAtTheLastWholeRecord() throws {
        var bytes = Btsnoop.fileHeader
        bytes += Btsnoop.record(h4Frame: Self.reset.h4Bytes, direction: .sent, unixMicroseconds: 5)
        let whole = bytes.count
        bytes += Btsnoop.record(h4Frame: Self.attRequest.h4Bytes, direction: .sent, unixMicroseconds: 6)
        for cut in whole..<bytes.count {
            let capture = try BtsnoopReader(bytes: Array(bytes[..<cut]))
            #expect(capture.records.count == 1)
            #expect(capture.truncatedTailLength == cut - whole)
        }
        #expect(try BtsnoopReader(bytes: bytes).records.count == 2)
    }

    @Test func badHeaderThrows() {
        #expect(throws: (any Error).self) { try BtsnoopReader(bytes: []) }
        #expect(throws: (any Error).self) { try BtsnoopReader(bytes: Array("btsnoop".utf8)) }
        #expect(throws: (any Error).self) { try BtsnoopReader(bytes: Array("snoopbt\0".utf8) + [0, 0, 0, 1, 0, 0, 3, 0xEA]) }
    }

    @Test func snoopFromEnvironment() throws {
        #expect(try Snoop.fromEnvironment([:]) == nil)
        #expect(try Snoop.fromEnvironment(["CB_SNOOP": ""]) == nil)
        let path = temporaryPath("env.btsnoop")
        defer { unlink(path) }
        let writer = try #require(try Snoop.fromEnvironment(["CB_SNOOP": path]))
        #expect(writer.path == path)
        #expect(try BtsnoopReader(path: path).records.isEmpty)
        #expect(throws: HCITransportError.self) {
            try Snoop.fromEnvironment(["CB_SNOOP": "/nonexistent-directory/x.btsnoop"])
        }
    }

    @Test func writerIsSafeFromManyThreads() async throws {
        let path = temporaryPath("threads.btsnoop")
        defer { unlink(path) }
        let writer = try BtsnoopWriter(path: path)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for i in 0..<200 {
                        writer.write(Self.attRequest, direction: task % 2 == 0 ? .sent : .received, unixMicroseconds: Int64(i))
                    }
                }
            }
        }
        writer.flush()
        let capture = try BtsnoopReader(path: path)
        #expect(capture.records.count == 1600)
        #expect(capture.truncatedTailLength == 0)
        #expect(capture.records.allSatisfy { $0.data == Self.attRequest.h4Bytes })
    }
}

struct SnoopingTransportTests {
    /// A host bringing up a controller, scanning, and exchanging ATT MTU over a connection.
    /// Bytes derived by hand from Vol 4 Part E §7 and Vol 3 Parts A and F.
    static let exchange: [(Btsnoop.Direction, [UInt8])] = [
        // HCI_Reset (OGF 0x03, OCF 0x003 → 0x0C03), no parameters.
        (.sent, [0x01, 0x03, 0x0C, 0x00]),
        // Command Complete: 1 command credit, opcode 0x0C03, Status success.
        (.received, [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]),
        // LE Set Scan Enable (OGF 0x08, OCF 0x00C → 0x200C): enable, no duplicate filtering.
        (.sent, [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00]),
        (.received, [0x04, 0x0E, 0x04, 0x01, 0x0C, 0x20, 0x00]),
        // LE Meta (0x3E), length 0x15 = 21: subevent 0x02 Advertising Report, 1 report,
        // ADV_IND, public address 66:55:44:33:22:11, 9 bytes of AD (Flags 0x06; Complete Local
        // Name "Test"), RSSI -59 (0xC5).
        (.received, [
            0x04, 0x3E, 0x15, 0x02, 0x01, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
            0x09, 0x02, 0x01, 0x06, 0x05, 0x09, 0x54, 0x65, 0x73, 0x74, 0xC5,
        ]),
        // LE Create Connection (0x200D), 25 bytes: scan interval 0x0060, window 0x0030, no
        // filter list, public peer 66:55:44:33:22:11, public own address, connection interval
        // 0x0018–0x0028, latency 0, supervision timeout 0x00C8, CE length 0–0.
        (.sent, [
            0x01, 0x0D, 0x20, 0x19, 0x60, 0x00, 0x30, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
            0x00, 0x18, 0x00, 0x28, 0x00, 0x00, 0x00, 0xC8, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]),
        // Command Status (0x0F): success, 1 credit, opcode 0x200D.
        (.received, [0x04, 0x0F, 0x04, 0x00, 0x01, 0x0D, 0x20]),
        // LE Meta, length 0x13 = 19: subevent 0x01 Connection Complete, success, handle 0x0040,
        // central, public peer 66:55:44:33:22:11, interval 0x0028, latency 0, timeout 0x00C8,
        // peer clock accuracy 0.
        (.received, [
            0x04, 0x3E, 0x13, 0x01, 0x00, 0x40, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
            0x28, 0x00, 0x00, 0x00, 0xC8, 0x00, 0x00,
        ]),
        // ACL handle 0x0040, 7 bytes: L2CAP length 3, CID 0x0004 (ATT), Exchange MTU Request
        // (0x02), Client Rx MTU 247.
        (.sent, [0x02, 0x40, 0x20, 0x07, 0x00, 0x03, 0x00, 0x04, 0x00, 0x02, 0xF7, 0x00]),
        // Number Of Completed Packets (0x13): 1 handle, 0x0040, 1 packet.
        (.received, [0x04, 0x13, 0x05, 0x01, 0x40, 0x00, 0x01, 0x00]),
        // Exchange MTU Response (0x03), Server Rx MTU 247.
        (.received, [0x02, 0x40, 0x20, 0x07, 0x00, 0x03, 0x00, 0x04, 0x00, 0x03, 0xF7, 0x00]),
    ]

    @Test func recordsBothDirectionsAndTsharkDecodesThem() throws {
        let path = temporaryPath("exchange.btsnoop")
        defer { unlink(path) }
        let scripted = FakeTransport()
        let writer = try BtsnoopWriter(path: path)
        let transport = SnoopingTransport(wrapping: scripted, writer: writer)
        let sink = RecordingSink()
        try transport.open(on: EventLoop(), sink: sink)

        for (direction, frame) in Self.exchange {
            let packet = try HCIPacket(h4: frame)
            switch direction {
            case .sent: transport.send(packet)
            case .received: scripted.inject(packet)
            }
        }
        transport.close()
        writer.close()

        // The wrapped transport and the sink saw everything, and were told of the close.
        #expect(scripted.sent.map(\.h4Bytes) == Self.exchange.filter { $0.0 == .sent }.map(\.1))
        #expect(sink.packets.map(\.h4Bytes) == Self.exchange.filter { $0.0 == .received }.map(\.1))
        #expect(sink.closes.count == 1)

        let capture = try BtsnoopReader(path: path)
        #expect(capture.records.map(\.data) == Self.exchange.map(\.1))
        #expect(capture.records.map(\.direction) == Self.exchange.map(\.0))

        let result = try Tshark.check(capture: path)
        #expect(result.frameCount == Self.exchange.count)
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        #expect(result.expertErrors.isEmpty, "\(result.expertErrors)")
        // The ATT frames are decoded down to ATT.
        #expect(result.frameProtocols.count == Self.exchange.count)
        #expect(result.frameProtocols[8].hasSuffix("btl2cap:btatt"), "\(result.frameProtocols)")
        #expect(result.frameProtocols[10].hasSuffix("btl2cap:btatt"), "\(result.frameProtocols)")
        #expect(result.verboseOutput.contains("Exchange MTU Request"))
        #expect(result.verboseOutput.contains("LE Advertising Report"))
        #expect(result.verboseOutput.contains("LE Connection Complete"))
    }

    @Test func tsharkFlagsAMalformedPacket() throws {
        // The checker must be able to fail: a Command Complete whose length claims 4 bytes of
        // parameters but holds 1.
        let path = temporaryPath("malformed.btsnoop")
        defer { unlink(path) }
        let writer = try BtsnoopWriter(path: path)
        writer.write(h4Frame: [0x04, 0x0E, 0x04, 0x01], direction: .received)
        writer.close()
        let result = try Tshark.check(capture: path)
        #expect(result.frameCount == 1)
        #expect(!result.isClean)
    }
}

/// The writer never waits on the disk: records gather in memory and a background queue writes
/// them in order; `flush` and `close` wait for them.
struct BtsnoopBackgroundWriterTests {
    static let event = HCIPacket.event(HCIEventPacket(code: 0x0E, parameters: [0x01, 0x03, 0x0C, 0x00]))

    @Test func recordsKeepTheirOrderAndCloseFlushesThem() throws {
        let path = temporaryPath("order.btsnoop")
        defer { unlink(path) }
        let writer = try BtsnoopWriter(path: path)
        for i in 0..<5000 {
            writer.write(h4Frame: [0x04, 0x0E, 0x02, UInt8(i & 0xFF), UInt8(i >> 8)], direction: .received,
                         unixMicroseconds: Int64(i))
        }
        writer.close()
        let capture = try BtsnoopReader(path: path)
        #expect(capture.records.count == 5000)
        #expect(capture.records.map(\.unixMicroseconds) == (0..<5000).map(Int64.init))
        #expect(capture.records.allSatisfy { $0.cumulativeDrops == 0 })
        #expect(capture.truncatedTailLength == 0)
    }

    @Test func aDiskThatFallsBehindDropsRecordsAndCountsThem() throws {
        let path = temporaryPath("drops.btsnoop")
        defer { unlink(path) }
        // Room for two records: a third written before the queue runs is dropped, and counted
        // by the next record that fits.
        let record = Btsnoop.recordHeaderLength + Self.event.h4Bytes.count
        let writer = try BtsnoopWriter(path: path, bufferLimit: 2 * record)
        for _ in 0..<200 { writer.write(Self.event, direction: .received, unixMicroseconds: 1) }
        writer.close()
        // How many fit depends on how fast the queue drains; what is in the file is whole, and
        // each record counts the drops before it.
        let capture = try BtsnoopReader(path: path)
        #expect(capture.records.count >= 2 && capture.records.count <= 200)
        #expect(capture.truncatedTailLength == 0)
        let drops = capture.records.map(\.cumulativeDrops)
        #expect(drops == drops.sorted())
        #expect(Int(drops.last!) + capture.records.count <= 200)
    }
}

