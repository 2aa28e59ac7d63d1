import Testing
import ByteCoding

@Suite("ByteWriter")
struct ByteWriterTests {
    @Test func writesLittleEndianFields() {
        var writer = ByteWriter()
        writer.u8(0xAB)
        writer.i8(-2)
        writer.u16(0x1234)
        writer.u24(0x12_3456)
        writer.u32(0x1234_5678)
        writer.u64(0x0123_4567_89AB_CDEF)
        writer.bytes([0xDE, 0xAD])
        writer.bytes([0x00, 0xBE, 0xEF][1...])
        #expect(writer.bytes == [
            0xAB,
            0xFE,
            0x34, 0x12,
            0x56, 0x34, 0x12,
            0x78, 0x56, 0x34, 0x12,
            0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01,
            0xDE, 0xAD,
            0xBE, 0xEF,
        ])
    }

    @Test func startsEmptyWhateverTheCapacity() {
        #expect(ByteWriter().bytes == [])
        #expect(ByteWriter(capacity: 0).bytes == [])
        #expect(ByteWriter(capacity: 1024).bytes == [])
    }

    @Test func extremeValues() {
        var writer = ByteWriter()
        writer.u24(0xFF_FFFF)
        writer.u16(.max)
        writer.u32(0)
        writer.u64(.max)
        writer.i8(.min)
        #expect(writer.bytes == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]
                + [UInt8](repeating: 0xFF, count: 8) + [0x80])
    }

    @Test func paddedWritesExactlyTheFieldSize() {
        var writer = ByteWriter()
        writer.padded([0x02, 0x01, 0x06], to: 6)
        writer.padded([1, 2], to: 2)
        writer.padded([UInt8](), to: 3)
        writer.padded([UInt8](), to: 0)
        #expect(writer.bytes == [0x02, 0x01, 0x06, 0, 0, 0, 1, 2, 0, 0, 0])
    }

    // 31-octet advertising data is the field padded writes are for.
    @Test func paddedAdvertisingData() {
        var writer = ByteWriter()
        writer.u8(3)
        writer.padded([0x02, 0x01, 0x06], to: 31)
        #expect(writer.bytes.count == 32)
        #expect(Array(writer.bytes[0...3]) == [3, 0x02, 0x01, 0x06])
        #expect(writer.bytes[4...].allSatisfy { $0 == 0 })
    }

    @Test func paddedRejectsDataLongerThanTheField() async {
        await #expect(processExitsWith: .failure) {
            var writer = ByteWriter()
            writer.padded([1, 2, 3], to: 2)
        }
    }

    @Test func u24RejectsValuesAbove24Bits() async {
        await #expect(processExitsWith: .failure) {
            var writer = ByteWriter()
            writer.u24(0x100_0000)
        }
    }

    @Test func roundTripsThroughTheReader() throws {
        var writer = ByteWriter()
        writer.u16(0xBEEF)
        writer.u24(0xABCDEF)
        writer.u32(0xDEAD_BEEF)
        writer.u64(0xFEED_FACE_CAFE_BEEF)
        writer.i8(-100)
        var reader = ByteReader(writer.bytes)
        #expect(try reader.u16() == 0xBEEF)
        #expect(try reader.u24() == 0xABCDEF)
        #expect(try reader.u32() == 0xDEAD_BEEF)
        #expect(try reader.u64() == 0xFEED_FACE_CAFE_BEEF)
        #expect(try reader.i8() == -100)
        try reader.expectEnd()
    }
}
