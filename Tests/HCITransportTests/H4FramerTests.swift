import ByteCoding
import HCI
import HCITransport
import Testing

/// H4 framing (Core spec Vol 4 Part A §2): indicator byte, then a packet whose header says how
/// long it is.
struct H4FramerTests {
    // One packet of each type, as H4 frames. Lengths derived by hand from each header.
    static let frames: [[UInt8]] = [
        // Command HCI_Reset: opcode 0x0C03 LE, length 0.
        [0x01, 0x03, 0x0C, 0x00],
        // Event Command Complete: code 0x0E, length 4, Num_HCI_Command_Packets 1, opcode, status 0.
        [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00],
        // ACL: handle 0x0040 PB 0b10, length 7; L2CAP length 3, CID 4; ATT Exchange MTU Req 247.
        [0x02, 0x40, 0x20, 0x07, 0x00, 0x03, 0x00, 0x04, 0x00, 0x02, 0xF7, 0x00],
        // SCO: handle 0x0001, 8-bit length 2.
        [0x03, 0x01, 0x00, 0x02, 0xAA, 0xBB],
        // ISO: handle 0x0010, 14-bit length 3 (the reserved top bits are set, and ignored).
        [0x05, 0x10, 0x00, 0x03, 0xC0, 0x11, 0x22, 0x33],
        // Event with an empty parameter block is still a whole packet.
        [0x04, 0xFF, 0x00],
    ]

    static var stream: [UInt8] { frames.flatMap { $0 } }
    static var expected: [HCIPacket] { frames.map { try! HCIPacket(h4: $0) } }

    @Test func decodesEachTypeWithItsHeaderLength() throws {
        var framer = H4Framer()
        let packets = try framer.packets(from: Self.stream)
        #expect(packets == Self.expected)
        #expect(packets.map(\.h4Bytes) == Self.frames)
        #expect(framer.bufferedByteCount == 0)
        #expect(packets[4] == .other(type: 0x05, body: [0x10, 0x00, 0x03, 0xC0, 0x11, 0x22, 0x33]))
    }

    @Test func splitAtEveryOffset() throws {
        let stream = Self.stream
        for split in 0...stream.count {
            var framer = H4Framer()
            var packets = try framer.packets(from: stream[..<split])
            packets += try framer.packets(from: stream[split...])
            #expect(packets == Self.expected, "split at \(split)")
            #expect(framer.bufferedByteCount == 0)
        }
    }

    @Test func splitAtEveryPairOfOffsets() throws {
        let stream = Self.stream
        for first in 0...stream.count {
            for second in first...stream.count {
                var framer = H4Framer()
                var packets = try framer.packets(from: stream[..<first])
                packets += try framer.packets(from: stream[first..<second])
                packets += try framer.packets(from: stream[second...])
                #expect(packets == Self.expected, "splits at \(first), \(second)")
            }
        }
    }

    @Test func oneByteAtATime() throws {
        var framer = H4Framer()
        var packets: [HCIPacket] = []
        for byte in Self.stream { packets += try framer.packets(from: [byte]) }
        #expect(packets == Self.expected)
    }

    @Test func unknownIndicatorLosesFramingAfterEarlierPackets() throws {
        var framer = H4Framer()
        framer.append(contentsOf: Self.frames[0] + [0xFF, 0x01, 0x02] + Self.frames[1])
        #expect(try framer.nextPacket() == Self.expected[0])
        #expect(throws: DecodeError.self) { try framer.nextPacket() }
        // It stays lost: bytes after the bad indicator can't be trusted.
        #expect(throws: DecodeError.self) { try framer.nextPacket() }
    }

    @Test func unknownIndicatorErrorNamesTheByte() {
        var framer = H4Framer()
        let error = #expect(throws: DecodeError.self) { try framer.packets(from: [0x00, 0x01]) }
        #expect(error?.reason.contains("unknown packet indicator 0x0") == true)
    }

    @Test func hugeDeclaredLengthDoesNotAllocateUpFront() throws {
        var framer = H4Framer(initialCapacity: 64)
        // ACL header declaring the largest length H4 allows: 0xFFFF bytes of data.
        let header: [UInt8] = [0x02, 0x01, 0x00, 0xFF, 0xFF]
        let data = (0..<0xFFFF).map { UInt8(truncatingIfNeeded: $0 / 7) }
        #expect(try framer.packets(from: header + data[0..<3]).isEmpty)
        #expect(framer.bufferedByteCount == 8)
        #expect(framer.storageCapacity < 1024)

        var packets: [HCIPacket] = []
        var offset = 3
        while offset < data.count {
            let end = min(offset + 4000, data.count)
            packets += try framer.packets(from: data[offset..<end])
            offset = end
        }
        #expect(packets.count == 1)
        guard case .acl(let acl) = packets.first else {
            Issue.record("expected an ACL packet")
            return
        }
        #expect(acl.handle == 0x0001)
        let sameData = acl.data == data  // Not inside #expect: its failure would print 64 KiB.
        #expect(acl.data.count == data.count)
        #expect(sameData)
        #expect(framer.bufferedByteCount == 0)
        // Bounded by one frame plus one chunk.
        #expect(framer.storageCapacity <= 2 * H4Framer.maximumFrameLength)
    }

    @Test func bufferDoesNotGrowAcrossManyPackets() throws {
        var framer = H4Framer(initialCapacity: 64)
        let chunk = Array(Self.stream + Self.stream + Self.stream)
        for _ in 0..<1000 {
            #expect(try framer.packets(from: chunk).count == 3 * Self.frames.count)
        }
        #expect(framer.storageCapacity < 1024)
    }
}
