import ATT
import AssignedNumbers
import ByteCoding
import GATT
import L2CAP
import Testing

// Scripted exchanges against the fixture database (GATTServerHarness.swift lists its handles):
// request bytes in, response bytes out. Each test is named after the GATT procedure (Core spec
// Vol 3 Part G §4) and the GATT server test case of the SIG's GATT test suite it mirrors.
// Bytes: opcode, then little-endian fields (Vol 3 Part F §3.4).

@Suite("GATT server: discovery (GATT/SR/GAD)")
struct GATTServerDiscoveryTests {
    @Test("Discover All Primary Services (GATT/SR/GAD/BV-01-C)")
    func discoverAllPrimaryServices() {
        let f = Fixture()
        // Read By Group Type 0x0001…0xFFFF, Primary Service. Each 16-bit entry is 2+2+2 octets,
        // so three fill 18 of the 21 octets after opcode and length: GAP, GATT, A (B is secondary).
        expectExchange(f.server, f.connection, "10 0100 ffff 0028",
                       "11 06 0100 0500 0018 0600 0d00 0118 1200 2400 0d18")
        // C has a 128-bit UUID: alone in the next response (Length 4 + 16 = 0x14).
        expectExchange(f.server, f.connection, "10 2500 ffff 0028", "11 14 2500 2700 " + Fixture.serviceCHex)
        // Past the last service: Attribute Not Found at the starting handle.
        expectExchange(f.server, f.connection, "10 2800 ffff 0028", "01 10 2800 0a")
    }

    @Test("Discover secondary services with Read By Group Type 0x2801")
    func discoverSecondaryServices() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "10 0100 ffff 0128", "11 06 0e00 1100 0f18")
    }

    @Test("Discover Primary Services by Service UUID (GATT/SR/GAD/BV-02-C)")
    func discoverPrimaryServicesByUUID() {
        let f = Fixture()
        // Find By Type Value, type Primary Service, value 0x180D: A's handle and group end.
        expectExchange(f.server, f.connection, "06 0100 ffff 0028 0d18", "07 1200 2400")
        expectExchange(f.server, f.connection, "06 2500 ffff 0028 0d18", "01 06 2500 0a")
        // A 128-bit service UUID is matched as the 16 value octets.
        expectExchange(f.server, f.connection, "06 0100 ffff 0028 " + Fixture.serviceCHex, "07 2500 2700")
        // The secondary 0x180F is not a primary service.
        expectExchange(f.server, f.connection, "06 0100 ffff 0028 0f18", "01 06 0100 0a")
    }

    @Test("Find Included Services (GATT/SR/GAD/BV-03-C)")
    func findIncludedServices() {
        let f = Fixture()
        // Read By Type Include in A: included handle, end group handle, and the 16-bit UUID.
        expectExchange(f.server, f.connection, "08 1200 2400 0228", "09 08 1300 0e00 1100 0f18")
        expectExchange(f.server, f.connection, "08 1400 2400 0228", "01 08 1400 0a")
    }

    @Test("An include of a 128-bit service carries no UUID (Vol 3 Part G §3.2)")
    func includeOf128BitService() throws {
        let f = Fixture()
        let d = try f.server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1234), includedServices: [f.serviceC.id]))
        #expect(d.range == ATTHandle(0x0028)...ATTHandle(0x0029))
        expectExchange(f.server, f.connection, "08 2800 2900 0228", "09 06 2900 2500 2700")
    }

    @Test("Discover All Characteristics of a Service (GATT/SR/GAD/BV-04-C)")
    func discoverAllCharacteristics() {
        let f = Fixture()
        // Declarations are 2 + 5 octets with 16-bit UUIDs: three per 23-octet response.
        expectExchange(f.server, f.connection, "08 1200 2400 0328",
                       "09 07 1400 02 1500 382a 1600 8a 1700 392a 1a00 30 1b00 3a2a")
        expectExchange(f.server, f.connection, "08 1b00 2400 0328",
                       "09 07 1d00 0a 1e00 3b2a 1f00 02 2000 3c2a 2100 08 2200 3d2a")
        expectExchange(f.server, f.connection, "08 2200 2400 0328", "09 07 2300 0a 2400 3e2a")
        expectExchange(f.server, f.connection, "08 2500 2400 0328", "01 08 2500 01")
    }

    @Test("Discover Characteristics by UUID (GATT/SR/GAD/BV-05-C): 128-bit declarations")
    func discoverCharacteristicsByUUID() {
        let f = Fixture()
        // The client reads every declaration and keeps the matching ones; a 128-bit
        // declaration is 19 octets (Length 0x15), the whole 23-octet PDU.
        expectExchange(f.server, f.connection, "08 2500 2700 0328", "09 15 2600 02 2700 " + Fixture.characteristicCHex)
    }

    @Test("Discover All Characteristic Descriptors (GATT/SR/GAD/BV-06-C)")
    func discoverAllDescriptors() {
        let f = Fixture()
        // After 0x2A39's value: Extended Properties and User Description (Format 0x01).
        expectExchange(f.server, f.connection, "04 1800 1900", "05 01 1800 0029 1900 0129")
        // Format stays uniform: the 128-bit type of 0x0027 waits for the next request.
        expectExchange(f.server, f.connection, "04 2500 2700", "05 01 2500 0028 2600 0328")
        expectExchange(f.server, f.connection, "04 2700 2700", "05 02 2700 " + Fixture.characteristicCHex)
        // Five 16-bit pairs fill 2 + 20 of 23 octets; a sixth does not fit.
        expectExchange(f.server, f.connection, "04 0100 ffff", "05 01 0100 0028 0200 0328 0300 002a 0400 0328 0500 012a")
        expectExchange(f.server, f.connection, "04 0600 ffff", "05 01 0600 0028 0700 0328 0800 052a 0900 0229 0a00 0328")
    }

    @Test("Find Information: Invalid Handle and Attribute Not Found")
    func findInformationErrors() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "04 0000 ffff", "01 04 0000 01")
        expectExchange(f.server, f.connection, "04 0500 0400", "01 04 0500 01")
        expectExchange(f.server, f.connection, "04 2800 ffff", "01 04 2800 0a")
    }

    @Test("Read By Group Type: Unsupported Group Type 0x10 for anything but services")
    func unsupportedGroupType() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "10 0100 ffff 0328", "01 10 0100 10")
        expectExchange(f.server, f.connection, "10 0100 ffff 0229", "01 10 0100 10")
        // Handles are checked first.
        expectExchange(f.server, f.connection, "10 0000 ffff 0328", "01 10 0000 01")
    }

    @Test("MTU 517: one response holds every characteristic declaration of a service")
    func largeMTUPacking() {
        let f = Fixture(mtu: 517)
        expectExchange(f.server, f.connection, "08 1200 2400 0328",
                       "09 07 1400 02 1500 382a 1600 8a 1700 392a 1a00 30 1b00 3a2a 1d00 0a 1e00 3b2a "
                           + "1f00 02 2000 3c2a 2100 08 2200 3d2a 2300 0a 2400 3e2a")
        expectExchange(f.server, f.connection, "10 0100 ffff 0028",
                       "11 06 0100 0500 0018 0600 0d00 0118 1200 2400 0d18")
        // The 40-octet value comes whole in one Read Response.
        expectExchange(f.server, f.connection, "0a 1500", "0b" + hexRange(0..<40))
    }
}

@Suite("GATT server: reading (GATT/SR/GAR)")
struct GATTServerReadTests {
    @Test("Read Characteristic Value (GATT/SR/GAR/BV-01-C)")
    func readCharacteristicValue() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
        expectExchange(f.server, f.connection, "0a 0300", "0b 54657374") // Device Name "Test"
        expectExchange(f.server, f.connection, "0a 0500", "0b 4003")     // Appearance 0x0340
    }

    @Test("Read – Invalid Handle (GATT/SR/GAR/BI-01-C)")
    func readInvalidHandle() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0a 0000", "01 0a 0000 01")
        expectExchange(f.server, f.connection, "0a 5000", "01 0a 5000 01")
    }

    @Test("Read – Read Not Permitted (GATT/SR/GAR/BI-02-C)")
    func readNotPermitted() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0a 2200", "01 0a 2200 02")
        // Service Changed is indicate-only (Vol 3 Part G §7.1).
        expectExchange(f.server, f.connection, "0a 0800", "01 0a 0800 02")
    }

    @Test("Read – Insufficient Authentication (GATT/SR/GAR/BI-04-C)")
    func readInsufficientAuthentication() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0a 2400", "01 0a 2400 05")
        // Encrypted without an authenticated key is still not enough.
        f.connection.securityLevel = .unauthenticatedEncryption
        expectExchange(f.server, f.connection, "0a 2400", "01 0a 2400 05")
        f.connection.securityLevel = .authenticatedEncryption
        expectExchange(f.server, f.connection, "0a 2400", "0b 00")
    }

    @Test("Read – Insufficient Encryption: encryption required, a key exists, link not encrypted")
    func readInsufficientEncryption() {
        let f = Fixture()
        // No key (not paired): the client must pair first.
        expectExchange(f.server, f.connection, "0a 2000", "01 0a 2000 05")
        f.connection.hasEncryptionKey = true
        expectExchange(f.server, f.connection, "0a 2000", "01 0a 2000 0f")
        f.connection.securityLevel = .unauthenticatedEncryption
        expectExchange(f.server, f.connection, "0a 2000", "0b 55")
    }

    @Test("Read Using Characteristic UUID (GATT/SR/GAR/BV-03-C) and its errors (BI-06, BI-07, BI-10)")
    func readUsingCharacteristicUUID() {
        let f = Fixture()
        // The 40-octet value is cut to ATT_MTU − 4 = 19 octets (Length 2 + 19 = 0x15).
        expectExchange(f.server, f.connection, "08 0100 ffff 382a", "09 15 1500" + hexRange(0..<19))
        expectExchange(f.server, f.connection, "08 0100 ffff 3d2a", "01 08 2200 02")
        expectExchange(f.server, f.connection, "08 0100 ffff 992a", "01 08 0100 0a")
        expectExchange(f.server, f.connection, "08 0100 ffff 3e2a", "01 08 2400 05")
        expectExchange(f.server, f.connection, "08 0100 0000 382a", "01 08 0100 01")
    }

    @Test("Read Long Characteristic Values (GATT/SR/GAR/BV-04-C)")
    func readLong() {
        let f = Fixture()
        // ATT_MTU − 1 = 22 octets per response: 0x00…0x15, then 0x16…0x27 from offset 22.
        expectExchange(f.server, f.connection, "0a 1500", "0b" + hexRange(0..<22))
        expectExchange(f.server, f.connection, "0c 1500 1600", "0d" + hexRange(22..<40))
        // An offset equal to the length reads nothing.
        expectExchange(f.server, f.connection, "0c 1500 2800", "0d")
    }

    @Test("Read Long – Read Not Permitted (GATT/SR/GAR/BI-12-C)")
    func readLongNotPermitted() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0c 2200 0000", "01 0c 2200 02")
    }

    @Test("Read Long – Invalid Offset (GATT/SR/GAR/BI-13-C)")
    func readLongInvalidOffset() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0c 1500 2900", "01 0c 1500 07")
        expectExchange(f.server, f.connection, "0c 1000 0200", "01 0c 1000 07")
    }

    @Test("Read Long – Invalid Handle (GATT/SR/GAR/BI-14-C)")
    func readLongInvalidHandle() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0c 5000 0000", "01 0c 5000 01")
        expectExchange(f.server, f.connection, "0c 0000 0000", "01 0c 0000 01")
    }

    @Test("Read Blob of a value that fits in one Read Response: Attribute Not Long")
    func attributeNotLong() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0c 1000 0000", "01 0c 1000 0b")
        expectExchange(f.server, f.connection, "0c 1000 0100", "01 0c 1000 0b")
        // With MTU 517 even the 40-octet value fits in one response.
        let big = Fixture(mtu: 517)
        expectExchange(big.server, big.connection, "0c 1500 0000", "01 0c 1500 0b")
    }

    @Test("Read Multiple Characteristic Values (GATT/SR/GAR/BV-05-C)")
    func readMultiple() {
        let f = Fixture()
        // 0x64, then 00 00 00 00, then "hi": concatenated.
        expectExchange(f.server, f.connection, "0e 1000 1e00 2700", "0f 64 00000000 6869")
        // Cut at ATT_MTU − 1: 1 + 22 (of the 40-octet value) = first 22 octets overall.
        expectExchange(f.server, f.connection, "0e 1000 1500", "0f 64" + hexRange(0..<21))
    }

    @Test("Read Multiple – errors name the failing handle (GATT/SR/GAR/BI-18-C, BI-19-C)")
    func readMultipleErrors() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0e 1000 5000", "01 0e 5000 01")
        expectExchange(f.server, f.connection, "0e 1000 2200", "01 0e 2200 02")
        expectExchange(f.server, f.connection, "0e 1000 2400", "01 0e 2400 05")
    }

    @Test("Read Multiple Variable Length Characteristic Values (GATT/SR/GAR/BV-08-C)")
    func readMultipleVariable() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "20 1000 2700", "21 0100 64 0200 6869")
        // The 40-octet value is cut at the end of the PDU; its length field says 40.
        expectExchange(f.server, f.connection, "20 1000 1500", "21 0100 64 2800" + hexRange(0..<17))
        expectExchange(f.server, f.connection, "20 1000 0800", "01 20 0800 02")
    }

    @Test("Read Characteristic Descriptors (GATT/SR/GAR/BV-06-C)")
    func readDescriptors() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0a 1900", "0b 436f6e74726f6c") // "Control"
        expectExchange(f.server, f.connection, "0a 1800", "0b 0100")           // Reliable Write
        expectExchange(f.server, f.connection, "0a 1100", "0b 0000")           // CCCD, not subscribed
    }
}

@Suite("GATT server: writing (GATT/SR/GAW)")
struct GATTServerWriteTests {
    @Test("Write Without Response (GATT/SR/GAW/BV-01-C)")
    func writeWithoutResponse() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "52 1e00 aabb", nil)
        expectExchange(f.server, f.connection, "0a 1e00", "0b aabb")
        // Errors are silent: not writable, unknown handle.
        expectExchange(f.server, f.connection, "52 1000 01", nil)
        expectExchange(f.server, f.connection, "52 5000 01", nil)
        expectExchange(f.server, f.connection, "0a 1000", "0b 64")
    }

    @Test("Signed Write Without Response is ignored until signing exists")
    func signedWriteIgnored() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "d2 1e00 01 000000000000000000000000", nil)
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
    }

    @Test("Write Characteristic Value (GATT/SR/GAW/BV-03-C)")
    func writeCharacteristicValue() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 1e00 01020304", "13")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 01020304")
        #expect(f.server.storedValue(for: 0x001E) == [1, 2, 3, 4])
    }

    @Test("Write – Invalid Handle (GATT/SR/GAW/BI-02-C)")
    func writeInvalidHandle() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 5000 01", "01 12 5000 01")
        expectExchange(f.server, f.connection, "12 0000 01", "01 12 0000 01")
    }

    @Test("Write – Write Not Permitted (GATT/SR/GAW/BI-03-C)")
    func writeNotPermitted() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 1000 01", "01 12 1000 03")
        // Declarations are never writable.
        expectExchange(f.server, f.connection, "12 1200 0d18", "01 12 1200 03")
        expectExchange(f.server, f.connection, "12 0d00 00", "01 12 0d00 03")
    }

    @Test("Write – Insufficient Authentication (GATT/SR/GAW/BI-06-C)")
    func writeInsufficientAuthentication() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "12 2400 01", "01 12 2400 05")
        f.connection.securityLevel = .authenticatedSecureConnections
        expectExchange(f.server, f.connection, "12 2400 01", "13")
    }

    @Test("Write – Invalid Attribute Value Length (GATT/SR/GAW/BI-33-C)")
    func writeInvalidLength() {
        let f = Fixture()
        // A CCCD takes exactly two octets.
        expectExchange(f.server, f.connection, "12 1100 01", "01 12 1100 0d")
        expectExchange(f.server, f.connection, "12 1100 010000", "01 12 1100 0d")
        // Longer than 512 octets (MTU 517 lets 514 through the PDU).
        let big = Fixture(mtu: 517)
        expectExchange(big.server, big.connection, "12 1e00" + [UInt8](repeating: 7, count: 513).hexString, "01 12 1e00 0d")
    }

    @Test("Write Characteristic Descriptors (GATT/SR/GAW/BV-08-C): CCCD subscribes and reports")
    func writeClientConfiguration() {
        let f = Fixture()
        var events: [String] = []
        f.server.onSubscriptionChange = { _, handle, old, new in events.append("\(handle) \(old.rawValue)>\(new.rawValue)") }
        expectExchange(f.server, f.connection, "12 1100 0100", "13")
        expectExchange(f.server, f.connection, "0a 1100", "0b 0100")
        // Writing the same value again reports nothing new.
        expectExchange(f.server, f.connection, "12 1100 0100", "13")
        // 0x2A19 offers notify only: the indicate bit cannot be set, nor a reserved bit.
        expectExchange(f.server, f.connection, "12 1100 0200", "01 12 1100 fd")
        expectExchange(f.server, f.connection, "12 1100 0500", "01 12 1100 fd")
        expectExchange(f.server, f.connection, "12 1100 0000", "13")
        #expect(events == ["0x0010 0>1", "0x0010 1>0"])
        #expect(f.server.clientConfiguration(ofCharacteristic: 0x0010, for: f.connection) == [])
    }

    @Test("Write Long Characteristic Values (GATT/SR/GAW/BV-05-C)")
    func writeLong() {
        let f = Fixture()
        // 30 octets: 18 (ATT_MTU − 5) at offset 0, 12 at offset 18; each Prepare Write is echoed.
        let first = Array(UInt8(0xA0)...UInt8(0xB1)), second = Array(UInt8(0xB2)...UInt8(0xBD))
        expectExchange(f.server, f.connection, "16 1e00 0000" + first.hexString, "17 1e00 0000" + first.hexString)
        expectExchange(f.server, f.connection, "16 1e00 1200" + second.hexString, "17 1e00 1200" + second.hexString)
        // Nothing is written before Execute Write.
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
        expectExchange(f.server, f.connection, "18 01", "19")
        #expect(f.server.storedValue(for: 0x001E) == first + second)
        expectExchange(f.server, f.connection, "0a 1e00", "0b" + (first + second).prefix(22).hexString)
        expectExchange(f.server, f.connection, "0c 1e00 1600", "0d" + (first + second).dropFirst(22).hexString)
    }

    @Test("Write Long – Invalid Handle (GATT/SR/GAW/BI-07-C) and Write Not Permitted (BI-08-C)")
    func prepareWriteErrors() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "16 5000 0000 01", "01 16 5000 01")
        expectExchange(f.server, f.connection, "16 1000 0000 01", "01 16 1000 03")
        expectExchange(f.server, f.connection, "16 2400 0000 01", "01 16 2400 05")
    }

    @Test("Write Long – Invalid Offset (GATT/SR/GAW/BI-09-C): reported by Execute Write, nothing written")
    func executeInvalidOffset() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "16 1e00 0000 1111", "17 1e00 0000 1111")
        expectExchange(f.server, f.connection, "16 1e00 0500 22", "17 1e00 0500 22")
        // The value would be 2 octets after the first part; offset 5 is past it.
        expectExchange(f.server, f.connection, "18 01", "01 18 1e00 07")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
        // The queue was discarded.
        expectExchange(f.server, f.connection, "18 01", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
    }

    @Test("Reliable Writes (GATT/SR/GAW/BV-06-C): all or nothing across attributes")
    func executeIsAtomic() {
        let f = Fixture()
        // A good write to 0x001E and a bad one (3 octets) to the CCCD 0x0011: neither happens.
        expectExchange(f.server, f.connection, "16 1e00 0000 0909", "17 1e00 0000 0909")
        expectExchange(f.server, f.connection, "16 1100 0000 010000", "17 1100 0000 010000")
        expectExchange(f.server, f.connection, "18 01", "01 18 1100 0d")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
        expectExchange(f.server, f.connection, "0a 1100", "0b 0000")
        // Both good: both happen.
        expectExchange(f.server, f.connection, "16 1e00 0000 0909", "17 1e00 0000 0909")
        expectExchange(f.server, f.connection, "16 1100 0000 0100", "17 1100 0000 0100")
        expectExchange(f.server, f.connection, "18 01", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 0909")
        expectExchange(f.server, f.connection, "0a 1100", "0b 0100")
    }

    @Test("Execute Write with flags 0x00 cancels every prepared write")
    func executeCancel() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "16 1e00 0000 0102", "17 1e00 0000 0102")
        expectExchange(f.server, f.connection, "18 00", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
        expectExchange(f.server, f.connection, "18 01", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
    }

    @Test("Prepare Queue Full (0x09) beyond the per-connection bound; other connections unaffected")
    func prepareQueueFull() {
        let f = Fixture()
        f.server.preparedWriteLimit = 2
        expectExchange(f.server, f.connection, "16 1e00 0000 01", "17 1e00 0000 01")
        expectExchange(f.server, f.connection, "16 1e00 0100 02", "17 1e00 0100 02")
        expectExchange(f.server, f.connection, "16 1e00 0200 03", "01 16 1e00 09")
        let other = FakeConnection()
        expectExchange(f.server, other, "16 1e00 0000 aa", "17 1e00 0000 aa")
        expectExchange(f.server, f.connection, "18 01", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 0102")
        expectExchange(f.server, other, "18 00", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 0102")
    }

    @Test("Client Supported Features: per connection, bits cannot be cleared (Vol 3 Part G §7.2)")
    func clientSupportedFeatures() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "0a 0b00", "0b 00")
        expectExchange(f.server, f.connection, "12 0b00 01", "13")
        expectExchange(f.server, f.connection, "0a 0b00", "0b 01")
        expectExchange(f.server, f.connection, "12 0b00 00", "01 12 0b00 13")
        expectExchange(f.server, f.connection, "12 0b00 05", "13")
        expectExchange(f.server, f.connection, "12 0b00", "01 12 0b00 0d")
        expectExchange(f.server, FakeConnection(), "0a 0b00", "0b 00")
    }
}

@Suite("GATT server: other requests")
struct GATTServerOtherRequestTests {
    @Test("Request Not Supported for unknown requests and for Exchange MTU (the bearer's)")
    func requestNotSupported() {
        let f = Fixture()
        expectExchange(f.server, f.connection, "3f 0102", "01 3f 0000 06")
        expectExchange(f.server, f.connection, "02 1702", "01 02 0000 06")
        // A response or notification sent to a server is not a request either.
        expectExchange(f.server, f.connection, "0b 00", "01 0b 0000 06")
        // An unknown command is ignored.
        expectExchange(f.server, f.connection, "7f 0102", nil)
    }
}
