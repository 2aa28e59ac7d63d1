import AssignedNumbers
import Testing

@Suite struct BluetoothUUIDTests {
    @Test func shortFormsAreAliasesOnTheBaseUUID() throws {
        let hr = BluetoothUUID(uuid16: 0x180D)
        #expect(hr.fullString == "0000180D-0000-1000-8000-00805F9B34FB")
        #expect(hr.description == "180D")
        #expect(hr == BluetoothUUID("0000180D-0000-1000-8000-00805f9b34fb"))
        #expect(hr == BluetoothUUID("180d"))
        #expect(hr == BluetoothUUID(uuid32: 0x0000_180D))
        #expect(hr.littleEndianBytes == [0x0D, 0x18])
        #expect(hr.littleEndianBytes(length: 4) == [0x0D, 0x18, 0, 0])
        #expect(BluetoothUUID(littleEndian: [0x0D, 0x18]) == hr)
    }

    @Test func vendorUUIDs() throws {
        let echo = try #require(BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
        #expect(echo.uuid16 == nil)
        #expect(echo.description == "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
        #expect(echo.littleEndianBytes.count == 16)
        #expect(echo.littleEndianBytes.first == 0x9E && echo.littleEndianBytes.last == 0x6E)
        #expect(BluetoothUUID(littleEndian: echo.littleEndianBytes) == echo)
        #expect(echo.littleEndianBytes(length: 2) == nil)
        let thirtyTwo = BluetoothUUID(uuid32: 0x1234_5678)
        #expect(thirtyTwo.uuid16 == nil && thirtyTwo.uuid32 == 0x1234_5678)
        #expect(thirtyTwo.description == "12345678-0000-1000-8000-00805F9B34FB")
    }

    @Test func rejectsMalformedStrings() {
        for bad in ["", "18", "18G0", "0000180D-0000-1000-8000-00805F9B34F", "0000180D00001000800000805F9B34FB",
                    "0000180D-00001-000-8000-00805F9B34FB", "12345"] {
            #expect(BluetoothUUID(bad) == nil, "\(bad)")
        }
        #expect(BluetoothUUID(littleEndian: [1, 2, 3]) == nil)
    }
}
