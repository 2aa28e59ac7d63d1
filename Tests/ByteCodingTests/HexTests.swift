import Testing
import ByteCoding

@Suite("Hex parsing and printing")
struct HexTests {
    @Test(arguments: [
        ("01030c00", [0x01, 0x03, 0x0C, 0x00]),
        ("01 03 0c 00", [0x01, 0x03, 0x0C, 0x00]),
        ("01:03:0C:00", [0x01, 0x03, 0x0C, 0x00]),
        ("0x01030c00", [0x01, 0x03, 0x0C, 0x00]),
        ("0XAbCd", [0xAB, 0xCD]),
        ("  ff\n\tEE  ", [0xFF, 0xEE]),
        ("", []),
        ("0x", []),
        ("   ", []),
    ] as [(String, [UInt8])])
    func parsesValidHex(text: String, bytes: [UInt8]) {
        #expect([UInt8](hex: text) == bytes)
    }

    @Test(arguments: [
        "0",          // odd number of digits
        "012",
        "0 1",        // a separator inside a byte
        "01 0",
        "0g",         // not a hex digit
        "zz",
        "01-02",      // not an accepted separator
        "01,02",
        "0x0x01",     // one prefix only
        "01 0x02",    // the prefix only at the start
        "é1",         // non-ASCII
        "01\r\n02",   // carriage return is not accepted
    ])
    func rejectsInvalidHex(text: String) {
        #expect([UInt8](hex: text) == nil)
    }

    @Test func hexStringIsLowercaseWithoutSeparators() {
        #expect([UInt8]([0x01, 0x03, 0x0C, 0x00, 0xAB, 0xFF]).hexString == "01030c00abff")
        #expect([UInt8]().hexString == "")
        #expect([UInt8]([0x00]).hexString == "00")
    }

    @Test func hexStringWorksOnAnyByteCollection() {
        let bytes: [UInt8] = [0xDE, 0xAD, 0xBE, 0xEF]
        #expect(bytes[1...2].hexString == "adbe")
        #expect(bytes.reversed().hexString == "efbeadde")
    }

    @Test func everyByteRoundTrips() {
        let all = (0...255).map { UInt8($0) }
        #expect([UInt8](hex: all.hexString) == all)
        #expect([UInt8](hex: all.hexString.uppercased()) == all)
    }
}
