import Testing
import ByteCoding

@Suite("ByteReader")
struct ByteReaderTests {
    @Test func readsLittleEndianFieldsInOrder() throws {
        var reader = ByteReader([
            0xAB,                                             // u8
            0xFE,                                             // i8 -2
            0x34, 0x12,                                       // u16 0x1234
            0x56, 0x34, 0x12,                                 // u24 0x123456
            0x78, 0x56, 0x34, 0x12,                           // u32 0x12345678
            0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01,   // u64 0x0123456789ABCDEF
        ])
        #expect(try reader.u8() == 0xAB)
        #expect(try reader.i8() == -2)
        #expect(try reader.u16() == 0x1234)
        #expect(try reader.u24() == 0x12_3456)
        #expect(try reader.u32() == 0x1234_5678)
        #expect(try reader.u64() == 0x0123_4567_89AB_CDEF)
        #expect(reader.isAtEnd)
        #expect(reader.remaining == 0)
        #expect(reader.offset == 19)
        try reader.expectEnd()
    }

    @Test func highBitsAreNotSignExtended() throws {
        var reader = ByteReader([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(try reader.u24() == 0xFF_FFFF)
        #expect(try reader.u16() == 0xFFFF)
        #expect(try reader.u32() == 0xFFFF_FFFF)
        var reader64 = ByteReader([UInt8](repeating: 0xFF, count: 8))
        #expect(try reader64.u64() == .max)
        var signed = ByteReader([0x80, 0x7F])
        #expect(try signed.i8() == -128)
        #expect(try signed.i8() == 127)
    }

    @Test func bytesSliceSkipAndRest() throws {
        var reader = ByteReader([1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try reader.bytes(2) == [1, 2])
        let slice = try reader.slice(2)
        #expect(Array(slice) == [3, 4])
        #expect(slice.startIndex == 2)   // a view into the buffer, not a copy
        try reader.skip(1)
        #expect(try reader.bytes(0) == [])
        #expect(reader.offset == 5)
        #expect(reader.rest() == [6, 7, 8])
        #expect(reader.isAtEnd)
        #expect(reader.rest() == [])
    }

    @Test func readsFromASliceWithItsOwnIndices() throws {
        let buffer: [UInt8] = [0xAA, 0xBB, 0x34, 0x12, 0xCC]
        var reader = ByteReader(buffer[2..<4], context: "inner")
        #expect(reader.remaining == 2)
        #expect(reader.offset == 0)
        #expect(try reader.u16() == 0x1234)
        #expect(reader.offset == 2)
        // The slice ends before 0xCC: the reader must not see past it.
        #expect(throws: DecodeError("inner: truncated (needed 1 bytes, 0 left)")) { try reader.u8() }
    }

    @Test func truncationThrowsWithContextAndCounts() {
        var reader = ByteReader([0x01, 0x02, 0x03], context: "LE Meta")
        #expect(throws: DecodeError("LE Meta: truncated (needed 4 bytes, 3 left)")) { try reader.u32() }
        #expect(throws: DecodeError("LE Meta: truncated (needed 8 bytes, 3 left)")) { try reader.u64() }
        #expect(throws: DecodeError("LE Meta: truncated (needed 5 bytes, 3 left)")) { try reader.bytes(5) }
        #expect(throws: DecodeError("LE Meta: truncated (needed 4 bytes, 3 left)")) { try reader.slice(4) }
        #expect(throws: DecodeError("LE Meta: truncated (needed 4 bytes, 3 left)")) { try reader.skip(4) }
        // A failed read consumes nothing.
        #expect(reader.offset == 0)
        #expect(throws: Never.self) { try reader.u24() }
        #expect(throws: DecodeError("LE Meta: truncated (needed 1 bytes, 0 left)")) { try reader.u8() }
        #expect(throws: DecodeError("LE Meta: truncated (needed 1 bytes, 0 left)")) { try reader.i8() }
        #expect(throws: DecodeError("LE Meta: truncated (needed 2 bytes, 0 left)")) { try reader.u16() }
        #expect(throws: DecodeError("LE Meta: truncated (needed 3 bytes, 0 left)")) { try reader.u24() }
    }

    @Test func defaultContextIsPacket() {
        var reader = ByteReader([])
        #expect(throws: DecodeError("packet: truncated (needed 2 bytes, 0 left)")) { try reader.u16() }
    }

    // A length field from a peer can make a decoder ask for a negative count.
    @Test func negativeCountsThrowInsteadOfTrapping() {
        var reader = ByteReader([1, 2, 3], context: "ACL")
        #expect(throws: DecodeError("ACL: truncated (needed -1 bytes, 3 left)")) { try reader.bytes(-1) }
        #expect(throws: DecodeError.self) { try reader.slice(-5) }
        #expect(throws: DecodeError.self) { try reader.skip(-1) }
        #expect(reader.offset == 0)
    }

    @Test func expectEndReportsTrailingBytes() throws {
        var reader = ByteReader([1, 2, 3], context: "Reset")
        _ = try reader.u8()
        #expect(throws: DecodeError("Reset: 2 unexpected trailing bytes")) { try reader.expectEnd() }
    }

    enum Role: UInt8 {
        case central = 0
        case peripheral = 1
    }

    @Test func enumerationDecodesKnownValuesAndRejectsOthers() throws {
        var reader = ByteReader([0x01, 0x00, 0x2A, 0xFF], context: "Connection Complete")
        #expect(try reader.enumeration(Role.self) == .peripheral)
        #expect(try reader.enumeration(Role.self) == .central)
        #expect(throws: DecodeError("Connection Complete: invalid Role value 0x2a")) {
            try reader.enumeration(Role.self)
        }
        #expect(throws: DecodeError("Connection Complete: invalid Role value 0xff")) {
            try reader.enumeration(Role.self)
        }
        #expect(throws: DecodeError("Connection Complete: truncated (needed 1 bytes, 0 left)")) {
            try reader.enumeration(Role.self)
        }
    }

    @Test func decodeErrorDescribesItself() {
        let error = DecodeError.truncated("ATT", needed: 2, available: 1)
        #expect(error.reason == "ATT: truncated (needed 2 bytes, 1 left)")
        #expect(error.description == error.reason)
        #expect(String(describing: error) == "ATT: truncated (needed 2 bytes, 1 left)")
    }
}
