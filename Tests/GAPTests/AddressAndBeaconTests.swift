import AssignedNumbers
import HCI
import LECrypto
import Testing
import Scheduling
@testable import GAP

@Suite struct AddressKindTests {
    private func random(_ string: String) -> LEAddress { LEAddress(.randomDevice, BluetoothAddress(string)!) }

    @Test func classifiesByTypeAndTopBits() {
        // Top two bits of the most significant octet: 11 static, 01 resolvable, 00 non-resolvable.
        #expect(LEAddress(.publicDevice, BluetoothAddress("C0:11:22:33:44:55")!).kind == .publicAddress)
        #expect(random("C0:11:22:33:44:55").kind == .randomStatic)
        #expect(random("7F:11:22:33:44:55").kind == .resolvablePrivate)
        #expect(random("3F:11:22:33:44:55").kind == .nonResolvablePrivate)
        #expect(random("80:11:22:33:44:55").kind == .reservedRandom)
        // Identity types reported after resolution carry identity addresses.
        #expect(LEAddress(.publicIdentity, BluetoothAddress("00:1B:DC:01:02:03")!).kind == .publicAddress)
        #expect(LEAddress(.randomIdentity, BluetoothAddress("C0:11:22:33:44:55")!).kind == .randomStatic)
        #expect(LEAddressKind.randomStatic.isIdentity && !LEAddressKind.resolvablePrivate.isIdentity)
    }

    @Test func wellFormedRandomParts() {
        #expect(random("C0:11:22:33:44:55").isWellFormed)
        // The 46 random bits all 1 or all 0 are not allowed.
        #expect(!random("FF:FF:FF:FF:FF:FF").isWellFormed)
        #expect(!random("C0:00:00:00:00:00").isWellFormed)
        #expect(!random("3F:FF:FF:FF:FF:FF").isWellFormed)
        #expect(!random("00:00:00:00:00:00").isWellFormed)
        // Resolvable: prand 0x400000 has its 22 random bits all 0.
        #expect(!random("40:00:00:12:34:56").isWellFormed)
        #expect(random("40:00:01:12:34:56").isWellFormed)
        #expect(!random("80:11:22:33:44:55").isWellFormed)
    }

    @Test func seededGenerationIsRepeatableAndWellFormed() {
        var first = SeededGenerator(seed: 42)
        var second = SeededGenerator(seed: 42)
        for _ in 0..<200 {
            let a = LEAddress.randomStatic(using: &first)
            #expect(a == LEAddress.randomStatic(using: &second))
            #expect(a.kind == .randomStatic && a.isWellFormed && a.type == .randomDevice)
            let b = LEAddress.nonResolvablePrivate(using: &first)
            #expect(b == LEAddress.nonResolvablePrivate(using: &second))
            #expect(b.kind == .nonResolvablePrivate && b.isWellFormed)
        }
    }

    @Test func nonResolvableNeverEqualsThePublicAddress() {
        // A generator that first offers exactly the public address must be asked again.
        struct Scripted: RandomNumberGenerator {
            var values: [UInt64]
            mutating func next() -> UInt64 { values.isEmpty ? 0x1234_5678_9ABC : values.removeFirst() }
        }
        let publicAddress = BluetoothAddress(value: 0x0000_1122_3344_55)
        var generator = Scripted(values: [publicAddress.value, 0])
        let address = LEAddress.nonResolvablePrivate(differentFrom: publicAddress, using: &generator)
        #expect(address.address == BluetoothAddress(value: 0x1234_5678_9ABC))
    }

    @Test func resolvablePrivateAddressesFromLECryptoClassify() {
        // Vol 3 Part H Appendix D.7 style IRK; the prand's top bits are 0b01.
        let irk: [UInt8] = [0xEC, 0x02, 0x34, 0xA3, 0x57, 0xC8, 0xAD, 0x05, 0x34, 0x10, 0x10, 0xA6, 0x0A, 0x39, 0x7D, 0x9B]
        let value = LECrypto.makeResolvablePrivateAddress(irk: irk, prand: 0x70_8194)
        let address = LEAddress(.randomDevice, BluetoothAddress(value: value))
        #expect(address.kind == .resolvablePrivate && address.isWellFormed)
        #expect(LECrypto.resolves(address: address.address.value, irk: irk))
    }
}

@Suite struct IBeaconTests {
    let book = IBeacon(proximityUUID: BluetoothUUID("E20A39F4-73F5-4BC4-A12F-17D1AD07A961")!, major: 1122, minor: 3344, measuredPower: -56)

    @Test func encodesTheBookBeacon() {
        #expect(book.advertisingData.encoded == bookIBeaconPayload)
        // Company 4c 00, type 02, length 15 = 21 octets: 16 UUID + 2 + 2 + 1.
        #expect(book.manufacturerData.bytes.prefix(4) == [0x4C, 0x00, 0x02, 0x15])
        #expect(book.manufacturerData.bytes.count == 25)
    }

    @Test func decodesOnlyExactIBeaconPayloads() {
        #expect(IBeacon(manufacturerData: book.manufacturerData) == book)
        var wrongCompany = book.manufacturerData
        wrongCompany.companyIdentifier = 0x0059
        #expect(IBeacon(manufacturerData: wrongCompany) == nil)
        var wrongType = book.manufacturerData
        wrongType.data[0] = 0x03
        #expect(IBeacon(manufacturerData: wrongType) == nil)
        var short = book.manufacturerData
        short.data.removeLast()
        #expect(IBeacon(manufacturerData: short) == nil)
        var long = book.manufacturerData
        long.data.append(0)
        #expect(IBeacon(manufacturerData: long) == nil)
        #expect(IBeacon(advertisingData: AdvertisingData(bytes: bytes("02 01 06"))) == nil)
    }

    @Test func bigEndianFields() {
        // Major 0x0102 and minor 0x0304 go out most significant octet first; power +3.
        let beacon = IBeacon(proximityUUID: BluetoothUUID(high: 0x0011_2233_4455_6677, low: 0x8899_AABB_CCDD_EEFF),
                             major: 0x0102, minor: 0x0304, measuredPower: 3)
        #expect(beacon.manufacturerData.data == bytes("02 15 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff 01 02 03 04 03"))
    }
}
