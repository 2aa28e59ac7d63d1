import AssignedNumbers
import ByteCoding
import Testing
@testable import GAP

private let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
private func name(_ length: Int) -> String { String(alphabet.prefix(length)) }
private func sigUUIDs(_ count: Int, from first: UInt16 = 0x1800) -> [BluetoothUUID] {
    (0..<UInt16(count)).map { BluetoothUUID(uuid16: first + $0) }
}
private func vendorUUID(_ n: UInt8) -> BluetoothUUID {
    BluetoothUUID(bigEndian: [0x6E, 0x40, 0x00, n] + [UInt8](repeating: 0xA5, count: 12))!
}
/// A 16-bit list structure as it goes on the air: length, type, then each UUID little-endian.
private func list16(_ type: UInt8, _ uuids: [BluetoothUUID]) -> [UInt8] {
    [UInt8(1 + 2 * uuids.count), type] + uuids.flatMap { $0.littleEndianBytes }
}

@Suite struct AdvertisingPackerTests {
    let packer = AdvertisingPacker.legacy

    @Test func nameJustFitsInTheAdvertisingData() {
        // Flags 3 + name header 2 + 26 characters = 31.
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: name(26)))
        #expect(packed.advertisingData.encoded == bytes("02 01 06 1b 09") + Array(name(26).utf8))
        #expect(packed.advertisingData.encodedLength == 31)
        #expect(packed.scanResponse.isEmpty)
        #expect(packed.localName == .complete(.advertisingData))
        #expect(packed.isComplete)
    }

    @Test func nameJustDoesNotFitAndMovesToTheScanResponse() {
        // 3 + 2 + 27 = 32 > 31; in the scan response 2 + 27 = 29 ≤ 31.
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: name(27)))
        #expect(packed.advertisingData.encoded == bytes("02 01 06"))
        #expect(packed.scanResponse.encoded == bytes("1c 09") + Array(name(27).utf8))
        #expect(packed.localName == .complete(.scanResponse))
        // 29 characters fill the scan response exactly.
        let full = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: name(29)))
        #expect(full.localName == .complete(.scanResponse) && full.scanResponse.encodedLength == 31)
    }

    @Test func nameThatFitsNowhereIsShortened() {
        // 30 characters need 32 octets anywhere: the scan response (31 free, more than the
        // advertising data's 28) takes the first 29 as a Shortened Local Name (0x08).
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: name(30)))
        #expect(packed.localName == .shortened(name(29), .scanResponse))
        #expect(packed.scanResponse.encoded == bytes("1e 08") + Array(name(29).utf8))
        #expect(packed.scanResponse.localName == name(29) && !packed.scanResponse.hasCompleteLocalName)
        #expect(!packed.isComplete)
    }

    @Test func shorteningKeepsWholeCharacters() {
        // No scan response: after flags 28 octets remain, 26 for the name: 13 two-octet "é".
        let nonScannable = AdvertisingPacker(advertisingDataLimit: 31, scanResponseLimit: 0)
        let long = String(repeating: "é", count: 20)
        let packed = nonScannable.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: long))
        #expect(packed.localName == .shortened(String(repeating: "é", count: 13), .advertisingData))
        #expect(packed.advertisingData.encodedLength == 31)
    }

    @Test func nameAndFlagsThatFitNowhere() {
        let tiny = AdvertisingPacker(advertisingDataLimit: 3, scanResponseLimit: 0)
        let packed = tiny.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo"))
        #expect(packed.advertisingData.encoded == bytes("02 01 06"))
        #expect(packed.localName == .omitted)
        let tinier = AdvertisingPacker(advertisingDataLimit: 2, scanResponseLimit: 31)
        let noFlags = tinier.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo"))
        #expect(noFlags.unplaced == [.flags(.leGeneralDiscoverableLEOnly)])
        // Flags never go in the scan response.
        #expect(noFlags.scanResponse.flags == nil && noFlags.localName == .complete(.scanResponse))
    }

    @Test func uuidsOverflowToTheScanResponseThenToOverflow() {
        // 30 UUIDs 0x1800…0x181d. Advertising data: flags 3 + list 2 + 13 × 2 = 31.
        // "Echo" (6) no longer fits there, so it takes the scan response first; 25 octets are
        // left: a list of 2 + 11 × 2 = 24. The last 6 UUIDs overflow. Split lists are Incomplete.
        let uuids = sigUUIDs(30)
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo", serviceUUIDs: uuids))
        #expect(packed.advertisingData.encoded == bytes("02 01 06") + list16(0x02, Array(uuids[0..<13])))
        #expect(packed.scanResponse.encoded == list16(0x02, Array(uuids[13..<24])) + bytes("05 09 45 63 68 6f"))
        #expect(packed.scanResponse.encodedLength == 30)
        #expect(packed.overflowServiceUUIDs == Array(uuids[24...]))
        #expect(packed.localName == .complete(.scanResponse))
        #expect(packed.advertisingData.hasIncompleteServiceUUIDList)
    }

    @Test func completeListWhenAllUUIDsFitInOneStructure() {
        // 13 UUIDs fill the advertising data as a Complete list (0x03); the name moves on.
        let all = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo", serviceUUIDs: sigUUIDs(13)))
        #expect(all.advertisingData.encoded == bytes("02 01 06") + list16(0x03, sigUUIDs(13)))
        #expect(all.scanResponse.encoded == bytes("05 09 45 63 68 6f"))
        #expect(all.isComplete)
        // One more and the 14th goes to the scan response: both lists say Incomplete (0x02).
        let split = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo", serviceUUIDs: sigUUIDs(14)))
        #expect(split.advertisingData.encoded == bytes("02 01 06") + list16(0x02, sigUUIDs(13)))
        #expect(split.scanResponse.encoded == list16(0x02, [BluetoothUUID(uuid16: 0x180D)]) + bytes("05 09 45 63 68 6f"))
        #expect(split.overflowServiceUUIDs.isEmpty)
    }

    @Test func appleStyleOneVendorServiceAndName() {
        // One 128-bit UUID takes 18 octets: 3 + 18 = 21, so "Echo" (6) still fits (27), but
        // "EchoServer" (12) does not (33) and goes to the scan response.
        let service = vendorUUID(1)
        let short = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo", serviceUUIDs: [service]))
        #expect(short.advertisingData.encoded == bytes("02 01 06 11 07") + service.littleEndianBytes + bytes("05 09 45 63 68 6f"))
        #expect(short.scanResponse.isEmpty)
        let long = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "EchoServer", serviceUUIDs: [service]))
        #expect(long.advertisingData.encoded == bytes("02 01 06 11 07") + service.littleEndianBytes)
        #expect(long.scanResponse.encoded == bytes("0b 09") + Array("EchoServer".utf8))
    }

    @Test func vendorUUIDsOverflow() {
        // Three 128-bit UUIDs: one in the advertising data (21 + name 6 = 27), one in the scan
        // response (18; a second would need 34), one overflows.
        let uuids = [vendorUUID(1), vendorUUID(2), vendorUUID(3)]
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo", serviceUUIDs: uuids))
        #expect(packed.advertisingData.elements == [
            .flags(.leGeneralDiscoverableLEOnly), .serviceUUIDs([uuids[0]], width: .bits128, complete: false),
            .localName("Echo", complete: true),
        ])
        #expect(packed.scanResponse.elements == [.serviceUUIDs([uuids[1]], width: .bits128, complete: false)])
        #expect(packed.overflowServiceUUIDs == [uuids[2]])
    }

    @Test func scanResponseReservedForTheName() {
        let appleLike = AdvertisingPacker(serviceUUIDsMayUseScanResponse: false)
        let uuids = sigUUIDs(30)
        let packed = appleLike.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: "Echo", serviceUUIDs: uuids))
        #expect(packed.scanResponse.encoded == bytes("05 09 45 63 68 6f"))
        #expect(packed.overflowServiceUUIDs == Array(uuids[13...]))
    }

    @Test func mixedWidthsNarrowestFirstAndDuplicatesDropped() {
        let uuids = [vendorUUID(1), BluetoothUUID(uuid32: 0x1234_5678), BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid16: 0x180D)]
        let packed = packer.pack(AdvertisingContent(serviceUUIDs: uuids))
        // 16-bit list 4 + 32-bit list 6 + 128-bit list 18 = 28 ≤ 31: all complete.
        #expect(packed.advertisingData.encoded ==
            bytes("03 03 0d 18 05 05 78 56 34 12 11 07") + vendorUUID(1).littleEndianBytes)
        #expect(packed.isComplete)
    }

    @Test func iBeaconContent() {
        let beacon = IBeacon(proximityUUID: BluetoothUUID("E20A39F4-73F5-4BC4-A12F-17D1AD07A961")!, major: 1122, minor: 3344, measuredPower: -56)
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, manufacturerData: [beacon.manufacturerData]))
        #expect(packed.advertisingData.encoded == bookIBeaconPayload)
        #expect(packed.scanResponse.isEmpty && packed.isComplete)
    }

    @Test func wholeFieldsMoveToTheScanResponseThenAreUnplaced() {
        // Flags 3 + 16-bit list 4 = 7; manufacturer data of 24 octets is a 26-octet structure:
        // 33 > 31, so it goes to the scan response; a second one fits nowhere.
        let vendor = ManufacturerData(companyIdentifier: 0x0059, data: [UInt8](repeating: 0x42, count: 22))
        let other = ManufacturerData(companyIdentifier: 0x0059, data: [UInt8](repeating: 0x43, count: 22))
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, serviceUUIDs: [BluetoothUUID(uuid16: 0x180D)],
                                                    manufacturerData: [vendor, other], txPowerLevel: -4))
        #expect(packed.advertisingData.encoded == bytes("02 01 06 03 03 0d 18 02 0a fc"))
        #expect(packed.scanResponse.elements == [.manufacturerData(vendor)])
        #expect(packed.unplaced == [.manufacturerData(other)])
        #expect(!packed.isComplete)
    }

    @Test func otherFieldsAreEncodedInPriorityOrder() {
        let content = AdvertisingContent(
            flags: .leGeneralDiscoverableLEOnly,
            serviceData: [ServiceData(uuid: BluetoothUUID(uuid16: 0x180F), data: [0x64])],
            txPowerLevel: 0, appearance: 0x0341, solicitedServiceUUIDs: [BluetoothUUID(uuid16: 0x1812)],
            uri: AdvertisedURI("http://a.b"))
        let packed = packer.pack(content)
        // 02 01 06 | 04 16 0f 18 64 | 02 0a 00 | 03 19 41 03 | 03 14 12 18 = 19; the URI (8) makes 27.
        #expect(packed.advertisingData.encoded == bytes("02 01 06 04 16 0f 18 64 02 0a 00 03 19 41 03 03 14 12 18 07 24 16 2f 2f 61 2e 62"))
    }

    @Test func extendedAdvertisingBudgets() {
        let extended = AdvertisingPacker.extended()
        #expect(extended.advertisingDataLimit == 1650 && extended.scanResponseLimit == 0)
        // 100 UUIDs are one Complete structure of 200 octets.
        let hundred = extended.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: name(40), serviceUUIDs: sigUUIDs(100)))
        #expect(hundred.isComplete)
        #expect(hundred.advertisingData.elements.count == 3)
        #expect(hundred.advertisingData.encodedLength == 3 + 202 + 42)
        // 200 UUIDs need two structures (127 fill 254 octets): both Incomplete.
        let twoHundred = extended.pack(AdvertisingContent(serviceUUIDs: sigUUIDs(200)))
        let lists = twoHundred.advertisingData.elements
        #expect(lists == [
            .serviceUUIDs(Array(sigUUIDs(200)[..<127]), width: .bits16, complete: false),
            .serviceUUIDs(Array(sigUUIDs(200)[127...]), width: .bits16, complete: false),
        ])
        #expect(twoHundred.advertisingData.encodedLength == 256 + 148)
        #expect(twoHundred.overflowServiceUUIDs.isEmpty)
        // A 300-octet name cannot be one structure: shortened to 254 octets.
        let longName = String(repeating: "n", count: 300)
        let named = extended.pack(AdvertisingContent(localName: longName))
        #expect(named.localName == .shortened(String(repeating: "n", count: 254), .advertisingData))
        // One HCI command's worth (251 octets), with a scan response.
        let oneCommand = AdvertisingPacker.extended(advertisingDataLimit: 251, scanResponseLimit: 251)
        let split = oneCommand.pack(AdvertisingContent(serviceUUIDs: sigUUIDs(200)))
        #expect(split.advertisingData.encodedLength <= 251 && split.scanResponse.encodedLength <= 251)
        #expect(split.advertisingData.serviceUUIDs.count + split.scanResponse.serviceUUIDs.count == 200)
    }
}
