import AssignedNumbers
import ByteCoding
import HCI
import Testing
@testable import GAP

func bytes(_ hex: String) -> [UInt8] { [UInt8](hex: hex)! }

/// The Nordic UART service UUID, a typical vendor 128-bit UUID. Little-endian on the air:
/// the 16 octets of 6E400001-B5A3-F393-E0A9-E50E24DCCA9E reversed.
let nordicUART = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
let nordicUARTWire = "9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e"

/// One vector per AD type: the element, and its structure's bytes derived by hand as
/// `Length (type + data) | Type | Data (little-endian unless noted)`.
let adVectors: [(AdvertisingElement, String)] = [
    // Flags 0x06 = LE General Discoverable (0x02) | BR/EDR Not Supported (0x04).
    (.flags([.leGeneralDiscoverableMode, .brEdrNotSupported]), "02 01 06"),
    (.flags(.leLimitedDiscoverableMode), "02 01 01"),
    // 0x180D, 0x180F little-endian: 0d 18 0f 18; length 1 + 4 = 5.
    (.serviceUUIDs([BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid16: 0x180F)], width: .bits16, complete: true), "05 03 0d 18 0f 18"),
    (.serviceUUIDs([BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid16: 0x180F)], width: .bits16, complete: false), "05 02 0d 18 0f 18"),
    // 0x12345678 little-endian: 78 56 34 12.
    (.serviceUUIDs([BluetoothUUID(uuid32: 0x1234_5678)], width: .bits32, complete: true), "05 05 78 56 34 12"),
    (.serviceUUIDs([BluetoothUUID(uuid32: 0x1234_5678)], width: .bits32, complete: false), "05 04 78 56 34 12"),
    // One 128-bit UUID: length 1 + 16 = 17 = 0x11.
    (.serviceUUIDs([nordicUART], width: .bits128, complete: true), "11 07 " + nordicUARTWire),
    (.serviceUUIDs([nordicUART], width: .bits128, complete: false), "11 06 " + nordicUARTWire),
    // A SIG UUID in a 128-bit list keeps its 128-bit form: 0000180D-0000-1000-8000-00805F9B34FB reversed.
    (.serviceUUIDs([BluetoothUUID(uuid16: 0x180D)], width: .bits128, complete: true),
     "11 07 fb 34 9b 5f 80 00 00 80 00 10 00 00 0d 18 00 00"),
    // "Echo" = 45 63 68 6f; length 1 + 4 = 5.
    (.localName("Echo", complete: true), "05 09 45 63 68 6f"),
    (.localName("Ec", complete: false), "03 08 45 63"),
    // "é" is two UTF-8 octets c3 a9.
    (.localName("é", complete: true), "03 09 c3 a9"),
    // An empty name is a structure with no data: length 1.
    (.localName("", complete: true), "01 09"),
    // -8 dBm = 0xf8 two's complement.
    (.txPowerLevel(-8), "02 0a f8"),
    (.txPowerLevel(4), "02 0a 04"),
    // Class of Device 0x5a020c, three octets little-endian.
    (.classOfDevice(0x5A_020C), "04 0d 0c 02 5a"),
    // 7.5 ms (6 × 1.25) to 4 s (3200 = 0x0c80 × 1.25).
    (.peripheralConnectionIntervalRange(minimum: 0x0006, maximum: 0x0C80), "05 12 06 00 80 0c"),
    // HID 0x1812 solicited.
    (.solicitationUUIDs([BluetoothUUID(uuid16: 0x1812)], width: .bits16), "03 14 12 18"),
    (.solicitationUUIDs([BluetoothUUID(uuid32: 0x1234_5678)], width: .bits32), "05 1f 78 56 34 12"),
    (.solicitationUUIDs([nordicUART], width: .bits128), "11 15 " + nordicUARTWire),
    // Battery 0x180F with level 100 = 0x64: length 1 + 2 + 1 = 4.
    (.serviceData(ServiceData(uuid: BluetoothUUID(uuid16: 0x180F), data: [0x64])), "04 16 0f 18 64"),
    (.serviceData(ServiceData(uuid: BluetoothUUID(uuid32: 0x1234_5678), data: [0xAA])), "06 20 78 56 34 12 aa"),
    // Length 1 + 16 + 2 = 19 = 0x13.
    (.serviceData(ServiceData(uuid: nordicUART, data: [0x01, 0x02])), "13 21 " + nordicUARTWire + " 01 02"),
    // C0:11:22:33:44:55 is 55 44 33 22 11 c0 on the air; two addresses: length 1 + 12 = 13.
    (.publicTargetAddresses([BluetoothAddress("C0:11:22:33:44:55")!]), "07 17 55 44 33 22 11 c0"),
    (.randomTargetAddresses([BluetoothAddress("C0:11:22:33:44:55")!, BluetoothAddress("01:02:03:04:05:06")!]),
     "0d 18 55 44 33 22 11 c0 06 05 04 03 02 01"),
    // Heart Rate Belt appearance 0x0341.
    (.appearance(0x0341), "03 19 41 03"),
    // 1.28 s = 2048 × 0.625 ms = 0x0800.
    (.advertisingInterval(0x0800), "03 1a 00 08"),
    // 40.96 s = 65536 units = 0x010000, three octets; 0x01000000 needs four.
    (.advertisingIntervalLong(0x01_0000), "04 2f 00 00 01"),
    (.advertisingIntervalLong(0x0100_0000), "05 2f 00 00 00 01"),
    // Address then 0x01 = random; length 1 + 7 = 8.
    (.leDeviceAddress(LEAddress(.randomDevice, BluetoothAddress("C3:11:22:33:44:55")!)), "08 1b 55 44 33 22 11 c3 01"),
    (.leDeviceAddress(LEAddress(.publicDevice, BluetoothAddress("00:1B:DC:01:02:03")!)), "08 1b 03 02 01 dc 1b 00 00"),
    (.leRole(.peripheralAndCentralPreferPeripheral), "02 1c 02"),
    (.leRole(.centralOnly), "02 1c 01"),
    // "https:" is scheme code point U+0017 (one UTF-8 octet 0x17), then "//www.bluetooth.com"
    // (19 octets): length 1 + 1 + 19 = 21 = 0x15.
    (.uri(AdvertisedURI("https://www.bluetooth.com")),
     "15 24 17 2f 2f 77 77 77 2e 62 6c 75 65 74 6f 6f 74 68 2e 63 6f 6d"),
    // "http:" is U+0016.
    (.uri(AdvertisedURI("http://a.b")), "07 24 16 2f 2f 61 2e 62"),
    // LE Encryption is feature bit 0.
    (.leSupportedFeatures([0x01]), "02 27 01"),
    // Nordic (0x0059) then 01 02: length 1 + 2 + 2 = 5.
    (.manufacturerData(ManufacturerData(companyIdentifier: 0x0059, data: [0x01, 0x02])), "05 ff 59 00 01 02"),
    // A company identifier alone is well formed.
    (.manufacturerData(ManufacturerData(companyIdentifier: 0xFFFF, data: [])), "03 ff ff ff"),
    // Types without a typed case stay raw: Security Manager OOB Flags 0x01.
    (.other(AdvertisingStructure(type: .securityManagerOOBFlags, data: [0x01])), "02 11 01"),
    (.other(AdvertisingStructure(type: AdvertisingDataType(0x7E), data: [0xDE, 0xAD])), "03 7e de ad"),
]

@Suite struct ADTypeVectorTests {
    @Test(arguments: adVectors.indices)
    func encodesAndDecodesByteExact(index: Int) throws {
        let (element, hex) = adVectors[index]
        let wire = bytes(hex)
        #expect(element.structure.encoded == wire, "\(element)")
        #expect(element.encodedLength == wire.count)
        let decoded = try AdvertisingData.decode(wire)
        #expect(decoded.elements == [element], "\(hex)")
        #expect(decoded.encoded == wire)
    }

    @Test func typeNames() {
        #expect(AdvertisingDataType.flags.name == "Flags")
        #expect(AdvertisingDataType.completeLocalName.description == "Complete Local Name (0x09)")
        #expect(AdvertisingDataType.manufacturerSpecificData.rawValue == 0xFF)
        #expect(AdvertisingDataType.advertisingIntervalLong.rawValue == 0x2F)
        #expect(AdvertisingDataType.uri.rawValue == 0x24)
        #expect(AdvertisingDataType.leSupportedFeatures.rawValue == 0x27)
        #expect(AdvertisingDataType(0x7E).name == nil)
        #expect(AdvertisingDataType(0x7E).description == "0x7E")
    }

    @Test func uriSchemes() {
        let https = AdvertisedURI("https://example.org/")
        #expect(https.scheme == .https && https.remainder == "//example.org/" && https.string == "https://example.org/")
        #expect(AdvertisedURI("http://x").scheme == .http)
        // No mapping in the table: code point 0x01 and the whole URI as text.
        let custom = AdvertisedURI("myapp://open")
        #expect(custom.scheme == .empty && custom.remainder == "myapp://open")
        #expect(custom.string == "myapp://open")
        #expect(AdvertisingElement.uri(custom).structure.encoded == [0x0E, 0x24, 0x01] + Array("myapp://open".utf8))
        // An unknown scheme code point survives a round trip: U+0100 is c4 80 in UTF-8.
        let unknown = AdvertisingElement(AdvertisingStructure(type: .uri, data: [0xC4, 0x80, 0x2F]))
        #expect(unknown == .uri(AdvertisedURI(scheme: URIScheme(codePoint: 0x100), remainder: "/")))
        #expect(unknown.structure.data == [0xC4, 0x80, 0x2F])
    }

    @Test func manufacturerDataBytesIncludeTheCompany() {
        let data = ManufacturerData(companyIdentifier: 0x004C, data: [0x02, 0x15])
        #expect(data.bytes == [0x4C, 0x00, 0x02, 0x15])
        #expect(ManufacturerData(bytes: [0x4C, 0x00, 0x02, 0x15]) == data)
        #expect(ManufacturerData(bytes: [0x4C]) == nil)
    }

    @Test func oversizedDataIsCutNotTrapped() {
        // 300 octets cannot be described by one length octet: 254 go out, length 0xff.
        let structure = AdvertisingStructure(type: .manufacturerSpecificData, data: [UInt8](repeating: 0xAB, count: 300))
        #expect(structure.encoded.count == 256)
        #expect(structure.encoded.prefix(2) == [0xFF, 0xFF])
    }
}
