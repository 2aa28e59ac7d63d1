import AssignedNumbers
import ByteCoding
import HCI
import Testing
@testable import GAP

/// The book's iBeacon (book-apps.md §1.16): UUID E20A39F4-73F5-4BC4-A12F-17D1AD07A961,
/// major 1122 = 0x0462, minor 3344 = 0x0d10, measured power -56 = 0xc8.
/// Flags `02 01 06`, then manufacturer data of length 0x1a = 1 + 25: Apple 4c 00, type 02,
/// length 15, the UUID big-endian, major and minor big-endian, power. 30 octets.
let bookIBeaconPayload = bytes("""
    02 01 06 1a ff 4c 00 02 15 e2 0a 39 f4 73 f5 4b c4 a1 2f 17 d1 ad 07 a9 61 04 62 0d 10 c8
    """)

/// A heart-rate strap: flags 06; complete 16-bit list Heart Rate 0x180D + Battery 0x180F;
/// complete name "Polar H7" (50 6f 6c 61 72 20 48 37, length 1 + 8 = 9); manufacturer data from
/// Polar (0x006b) with two vendor octets; appearance Heart Rate Belt 0x0341. 29 octets.
let heartRatePayload = bytes("""
    02 01 06 05 03 0d 18 0f 18 09 09 50 6f 6c 61 72 20 48 37 05 ff 6b 00 3f 00 03 19 41 03
    """)

@Suite struct AdvertisingDecodingTests {
    @Test func iBeaconPayload() throws {
        #expect(bookIBeaconPayload.count == 30)
        let data = try AdvertisingData.decode(bookIBeaconPayload)
        #expect(data.flags == [.leGeneralDiscoverableMode, .brEdrNotSupported])
        #expect(data.manufacturerData.count == 1)
        #expect(data.manufacturerData.first?.companyIdentifier == 0x004C)
        let beacon = try #require(IBeacon(advertisingData: data))
        #expect(beacon.proximityUUID == BluetoothUUID("E20A39F4-73F5-4BC4-A12F-17D1AD07A961"))
        #expect(beacon.major == 1122 && beacon.minor == 3344 && beacon.measuredPower == -56)
        #expect(data.encoded == bookIBeaconPayload)
        #expect(data.localName == nil && data.serviceUUIDs.isEmpty)
    }

    @Test func heartRateSensorPayload() throws {
        let data = try AdvertisingData.decode(heartRatePayload)
        #expect(data.flags == .leGeneralDiscoverableLEOnly)
        #expect(data.serviceUUIDs == [BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid16: 0x180F)])
        #expect(!data.hasIncompleteServiceUUIDList)
        #expect(data.localName == "Polar H7" && data.hasCompleteLocalName)
        #expect(data.manufacturerData == [ManufacturerData(companyIdentifier: 0x006B, data: [0x3F, 0x00])])
        #expect(data.appearance == 0x0341)
        #expect(data.otherStructures.isEmpty)
        #expect(data.encoded == heartRatePayload)
    }

    @Test func scanResponseWithServiceDataAndTxPower() throws {
        // Shortened name "Pol"; TX power 0 dBm; battery service data 0x5a = 90 %; the same
        // UUID's data twice: the first wins in the by-UUID view, the list keeps both.
        let wire = bytes("04 08 50 6f 6c 02 0a 00 04 16 0f 18 5a 04 16 0f 18 5b")
        let data = try AdvertisingData.decode(wire)
        #expect(data.localName == "Pol" && !data.hasCompleteLocalName)
        #expect(data.txPowerLevel == 0)
        #expect(data.serviceData.count == 2)
        #expect(data.serviceDataByUUID == [BluetoothUUID(uuid16: 0x180F): [0x5A]])
        #expect(data.encoded == wire)
    }

    @Test func completeNameIsPreferredOverShortened() throws {
        let data = try AdvertisingData.decode(bytes("03 08 45 63 05 09 45 63 68 6f"))
        #expect(data.localName == "Echo")
    }

    @Test func zeroPaddingEndsTheSignificantPart() throws {
        // A 31-octet buffer as LE Set Advertising Data carries it: flags, then zeros.
        let padded = bytes("02 01 06") + [UInt8](repeating: 0, count: 28)
        let data = try AdvertisingData.decode(padded)
        #expect(data.elements == [.flags(.leGeneralDiscoverableLEOnly)])
        #expect(data.encoded == bytes("02 01 06"))
    }

    @Test func zeroLengthFirst() throws {
        // Length 0 ends the data at once: nothing decodes; what follows is not padding.
        #expect(AdvertisingData(bytes: bytes("00 02 01 06")).isEmpty)
        #expect(throws: DecodeError.self) { try AdvertisingData.decode(bytes("00 02 01 06")) }
        #expect(try AdvertisingData.decode([]).isEmpty)
    }

    @Test func lengthPastTheEnd() {
        // Flags, then a name claiming 5 octets with only 2 present.
        let wire = bytes("02 01 06 05 09 45 63")
        let list = AdvertisingStructure.decodeList(wire)
        #expect(list.structures == [AdvertisingStructure(type: .flags, data: [0x06])])
        #expect(list.malformation != nil)
        #expect(AdvertisingData(bytes: wire).flags == .leGeneralDiscoverableLEOnly)
        #expect(AdvertisingData(bytes: wire).localName == nil)
        #expect(throws: DecodeError.self) { try AdvertisingData.decode(wire) }
        // A lone length octet with no type.
        #expect(AdvertisingData(bytes: bytes("02 01 06 03")).elements == [.flags(.leGeneralDiscoverableLEOnly)])
    }

    @Test func truncatedUUIDListsKeepTheirWholeUUIDs() throws {
        // A 16-bit list of 3 octets: 0x180D and half of 0x180F. Kept raw (lossless), but the
        // whole UUID is still reported.
        let wire = bytes("02 01 06 04 03 0d 18 0f")
        let data = try AdvertisingData.decode(wire)
        #expect(data.serviceUUIDs == [BluetoothUUID(uuid16: 0x180D)])
        #expect(data.otherStructures == [AdvertisingStructure(type: .completeList16BitServiceUUIDs, data: [0x0D, 0x18, 0x0F])])
        #expect(data.encoded == wire)
        // A 128-bit list of 15 octets has no whole UUID; a 32-bit solicitation list of 6 has one.
        let partial = try AdvertisingData.decode(bytes("10 07") + [UInt8](repeating: 0x11, count: 15) + bytes("07 1f 78 56 34 12 aa bb"))
        #expect(partial.serviceUUIDs.isEmpty)
        #expect(partial.solicitedServiceUUIDs == [BluetoothUUID(uuid32: 0x1234_5678)])
    }

    @Test func wrongLengthsForFixedTypesStayRaw() throws {
        let cases = [
            "03 01 06 00",        // flags of two octets
            "01 0a",              // TX power with no octet
            "04 19 41 03 00",     // appearance of three octets
            "02 1c 07",           // LE Role 7 is not assigned
            "08 1b 55 44 33 22 11 c3 02", // address type octet with a reserved bit
            "03 09 ff fe",        // a name that is not UTF-8
            "02 ff 4c",           // manufacturer data shorter than a company identifier
            "02 16 0f",           // service data shorter than its UUID
            "06 17 01 02 03 04 05", // a target address of five octets
            "05 2f 00 00 01 00",  // a long interval of four octets whose value fits in three
            "01 24",              // an empty URI
        ]
        for hex in cases {
            let wire = bytes(hex)
            let data = try AdvertisingData.decode(wire)
            #expect(data.otherStructures.count == 1, "\(hex)")
            #expect(data.encoded == wire, "\(hex)")
        }
    }

    @Test func thirtyOneOctetsOfGarbage() {
        // 0xff claims 254 data octets: nothing is well formed.
        let allOnes = [UInt8](repeating: 0xFF, count: 31)
        #expect(AdvertisingData(bytes: allOnes).isEmpty)
        // Structures of unknown types chained exactly to the end decode, raw, losslessly.
        let chained = bytes("1e 7f") + [UInt8](repeating: 0x55, count: 29)
        let data = AdvertisingData(bytes: chained)
        #expect(data.otherStructures.count == 1 && data.encoded == chained)
        // A mix: a good flags structure, then junk claiming more than is left.
        let mixed = bytes("02 01 06 40") + [UInt8](repeating: 0xA5, count: 27)
        #expect(AdvertisingData(bytes: mixed).elements == [.flags(.leGeneralDiscoverableLEOnly)])
    }

    @Test func unknownStructuresAreKeptInOrder() throws {
        let wire = bytes("02 01 06 03 7e de ad 05 09 45 63 68 6f 02 11 01")
        let data = try AdvertisingData.decode(wire)
        #expect(data.otherStructures.map(\.type) == [AdvertisingDataType(0x7E), .securityManagerOOBFlags])
        #expect(data.localName == "Echo")
        #expect(data.encoded == wire)
    }

    @Test func arrayLiteralBuildsPayloads() {
        let data: AdvertisingData = [
            .flags(.leGeneralDiscoverableLEOnly),
            .serviceUUIDs([BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid16: 0x180F)], width: .bits16, complete: true),
            .localName("Echo", complete: true),
        ]
        // 02 01 06 | 05 03 0d 18 0f 18 | 05 09 45 63 68 6f
        #expect(data.encoded == bytes("02 01 06 05 03 0d 18 0f 18 05 09 45 63 68 6f"))
        #expect(data.encodedLength == 15)
    }

    @Test func otherAccessors() throws {
        let wire = bytes("""
            03 1a 00 08 02 1c 00 08 1b 55 44 33 22 11 c3 01 07 17 55 44 33 22 11 c0
            07 18 06 05 04 03 02 01 05 12 06 00 80 0c 04 0d 0c 02 5a 02 27 01 07 24 16 2f 2f 61 2e 62
            """)
        let data = try AdvertisingData.decode(wire)
        #expect(data.advertisingInterval == 0x0800)
        #expect(data.leRole == .peripheralOnly)
        #expect(data.leDeviceAddress == LEAddress(.randomDevice, BluetoothAddress("C3:11:22:33:44:55")!))
        #expect(data.publicTargetAddresses == [BluetoothAddress("C0:11:22:33:44:55")!])
        #expect(data.randomTargetAddresses == [BluetoothAddress("01:02:03:04:05:06")!])
        #expect(data.peripheralConnectionIntervalRange?.minimum == 6 && data.peripheralConnectionIntervalRange?.maximum == 0x0C80)
        #expect(data.classOfDevice == 0x5A_020C)
        #expect(data.leSupportedFeatures == [0x01])
        #expect(data.uris.map(\.string) == ["http://a.b"])
        #expect(data.encoded == wire)
    }
}
