import CoreBluetooth
import Foundation
import Testing

@Suite struct CBUUIDTests {
    @Test func sixteenBitForm() {
        let uuid = CBUUID(string: "180d")
        #expect(uuid.uuidString == "180D")
        #expect(uuid.data == Data([0x18, 0x0D]))
        #expect(uuid.description == "180D")
    }

    @Test func thirtyTwoBitForm() {
        let uuid = CBUUID(string: "1234abcd")
        #expect(uuid.uuidString == "1234ABCD")
        #expect(uuid.data == Data([0x12, 0x34, 0xAB, 0xCD]))
    }

    @Test func oneTwentyEightBitForm() {
        // The guide's uuidgen example (A:543).
        let uuid = CBUUID(string: "71da3fd1-7e10-41c1-b16f-4430b506cde7")
        #expect(uuid.uuidString == "71DA3FD1-7E10-41C1-B16F-4430B506CDE7")
        #expect(uuid.data == Data([
            0x71, 0xDA, 0x3F, 0xD1, 0x7E, 0x10, 0x41, 0xC1, 0xB1, 0x6F, 0x44, 0x30, 0xB5, 0x06, 0xCD, 0xE7,
        ]))
    }

    @Test func sigUUIDsShortenWhateverTheForm() {
        let short = CBUUID(string: "180D")
        let thirtyTwo = CBUUID(string: "0000180D")
        let full = CBUUID(string: "0000180D-0000-1000-8000-00805F9B34FB")
        let fromData = CBUUID(data: Data([0x18, 0x0D]))
        for uuid in [thirtyTwo, full, fromData] {
            #expect(uuid == short)
            #expect(uuid.hash == short.hash)
            #expect(uuid.uuidString == "180D")
            #expect(uuid.data == Data([0x18, 0x0D]))
        }
        #expect(CBUUID(string: "180D") != CBUUID(string: "180E"))
        #expect(Set([short, thirtyTwo, full]).count == 1)
    }

    @Test func dataRoundTrips() {
        for string in ["2902", "1234ABCD", "71DA3FD1-7E10-41C1-B16F-4430B506CDE7"] {
            let uuid = CBUUID(string: string)
            #expect(CBUUID(data: uuid.data) == uuid)
            #expect(CBUUID(data: uuid.data).uuidString == string)
        }
    }

    @Test func fromFoundationUUID() throws {
        let nsuuid = try #require(UUID(uuidString: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7"))
        #expect(CBUUID(nsuuid: nsuuid) == CBUUID(string: "71DA3FD1-7E10-41C1-B16F-4430B506CDE7"))
        #expect(CBUUID(nsuuid: nsuuid).uuidString == nsuuid.uuidString)
    }

    @Test func copyIsEqual() throws {
        let uuid = CBUUID(string: "2A37")
        let copy = try #require(uuid.copy() as? CBUUID)
        #expect(copy == uuid)
        #expect(!uuid.isEqual("2A37"))
    }

    @Test func descriptorConstants() {
        #expect(CBUUIDCharacteristicExtendedPropertiesString == "2900")
        #expect(CBUUIDCharacteristicUserDescriptionString == "2901")
        #expect(CBUUIDClientCharacteristicConfigurationString == "2902")
        #expect(CBUUIDServerCharacteristicConfigurationString == "2903")
        #expect(CBUUIDCharacteristicFormatString == "2904")
        #expect(CBUUIDCharacteristicAggregateFormatString == "2905")
        #expect(CBUUIDCharacteristicValidRangeString == "2906")
        #expect(CBUUIDCharacteristicObservationScheduleString == "2910")
        #expect(CBUUIDL2CAPPSMCharacteristicString == "ABDD3056-28FA-441D-A470-55A75A52553A")
        #expect(CBUUID(string: CBUUIDL2CAPPSMCharacteristicString).uuidString == CBUUIDL2CAPPSMCharacteristicString)
    }
}

@Suite struct CBUUIDTrapTests {
    // Apple's CBUUID raises on malformed input; ours stops with a precondition failure.
    @Test func invalidStringTraps() async {
        await #expect(processExitsWith: .failure) { _ = CBUUID(string: "18G0") }
        await #expect(processExitsWith: .failure) { _ = CBUUID(string: "71DA3FD1-7E10-41C1-B16F4430B506CDE7") }
    }

    @Test func invalidDataLengthTraps() async {
        await #expect(processExitsWith: .failure) { _ = CBUUID(data: Data([0x18, 0x0D, 0x00])) }
    }
}
