import AssignedNumbers
import ByteCoding
import Testing
import Scheduling
@testable import GAP

/// Seeded random and mutated payloads: decoding never traps, keeps exactly the well-formed
/// prefix of structures, and round-trips; the packer never exceeds its budgets or loses a UUID.
@Suite struct AdvertisingFuzzTests {
    private func randomBytes(_ count: Int, _ generator: inout SeededGenerator) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// The lenient decoding invariants for any input.
    private func checkDecoding(_ input: [UInt8]) {
        let list = AdvertisingStructure.decodeList(input)
        let data = AdvertisingData(bytes: input)
        // Typed decoding loses nothing: re-encoding gives the well-formed structures' octets,
        // which are where the input starts.
        let wellFormed = AdvertisingStructure.encode(list.structures)
        #expect(data.encoded == wellFormed)
        #expect(Array(input.prefix(wellFormed.count)) == wellFormed)
        #expect(data.structures == list.structures)
        // Re-decoding the re-encoding is stable and strict-clean.
        #expect((try? AdvertisingData.decode(wellFormed)) == data)
        // The accessors never trap.
        _ = (data.flags, data.localName, data.serviceUUIDs, data.solicitedServiceUUIDs, data.serviceDataByUUID,
             data.manufacturerData, data.txPowerLevel, data.uris, data.advertisingInterval, IBeacon(advertisingData: data))
    }

    @Test func randomPayloads() {
        var generator = SeededGenerator(seed: 0x6A9)
        for _ in 0..<3000 {
            checkDecoding(randomBytes(Int.random(in: 0...40, using: &generator), &generator))
        }
    }

    @Test func randomStructuresOfKnownTypes() {
        // Well-framed structures with random types (biased to assigned ones) and random data:
        // every one decodes, typed or raw, and the whole payload round-trips exactly.
        var generator = SeededGenerator(seed: 0xAD)
        let types: [UInt8] = Array(0x01...0x32) + [0x3D, 0xFF]
        for _ in 0..<2000 {
            var payload: [UInt8] = []
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                let type = Bool.random(using: &generator) ? types.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
                let data = randomBytes(Int.random(in: 0...20, using: &generator), &generator)
                payload += [UInt8(data.count + 1), type] + data
            }
            let decoded = try? AdvertisingData.decode(payload)
            #expect(decoded?.encoded == payload)
            checkDecoding(payload)
        }
    }

    @Test func mutatedRealPayloads() {
        var generator = SeededGenerator(seed: 7)
        for seedPayload in [bookIBeaconPayload, heartRatePayload] {
            for _ in 0..<1500 {
                var mutated = seedPayload
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    switch Int.random(in: 0..<4, using: &generator) {
                    case 0: mutated[Int.random(in: 0..<mutated.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                    case 1: mutated = Array(mutated.prefix(Int.random(in: 0...mutated.count, using: &generator)))
                    case 2: mutated.insert(UInt8.random(in: 0...255, using: &generator), at: Int.random(in: 0...mutated.count, using: &generator))
                    default: if !mutated.isEmpty { mutated.remove(at: Int.random(in: 0..<mutated.count, using: &generator)) }
                    }
                    if mutated.isEmpty { break }
                }
                checkDecoding(mutated)
            }
        }
    }

    @Test func packerInvariants() {
        var generator = SeededGenerator(seed: 31)
        for _ in 0..<1500 {
            let uuids: [BluetoothUUID] = (0..<Int.random(in: 0...20, using: &generator)).map { _ in
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: BluetoothUUID(uuid16: UInt16.random(in: 0x1800...0x1830, using: &generator))
                case 1: BluetoothUUID(uuid32: UInt32.random(in: 0x10000...0x10010, using: &generator))
                default: BluetoothUUID(high: UInt64.random(in: 0...7, using: &generator), low: 1)
                }
            }
            let name = String((0..<Int.random(in: 0...40, using: &generator)).map { _ in
                Bool.random(using: &generator) ? Character("x") : Character("é")
            })
            let content = AdvertisingContent(
                flags: Bool.random(using: &generator) ? .leGeneralDiscoverableLEOnly : nil,
                localName: Bool.random(using: &generator) ? name : nil,
                serviceUUIDs: uuids,
                manufacturerData: (0..<Int.random(in: 0...2, using: &generator)).map { _ in
                    ManufacturerData(companyIdentifier: 0x0059, data: randomBytes(Int.random(in: 0...26, using: &generator), &generator))
                },
                txPowerLevel: Bool.random(using: &generator) ? -8 : nil)
            let packer = AdvertisingPacker(advertisingDataLimit: Int.random(in: 0...40, using: &generator),
                                           scanResponseLimit: Int.random(in: 0...40, using: &generator),
                                           serviceUUIDsMayUseScanResponse: Bool.random(using: &generator))
            let packed = packer.pack(content)
            #expect(packed.advertisingData.encodedLength <= packer.advertisingDataLimit)
            #expect(packed.scanResponse.encodedLength <= packer.scanResponseLimit)
            #expect(packed.scanResponse.flags == nil)
            // Every distinct UUID is advertised exactly once or overflows.
            let placed = packed.advertisingData.serviceUUIDs + packed.scanResponse.serviceUUIDs + packed.overflowServiceUUIDs
            #expect(placed.count == Set(uuids).count && Set(placed) == Set(uuids))
            // The name is whole, a prefix, or absent, as reported.
            let names = [packed.advertisingData.localName, packed.scanResponse.localName].compactMap { $0 }
            switch packed.localName {
            case .noName, .omitted: #expect(names.isEmpty)
            case .complete: #expect(names == [content.localName!])
            case let .shortened(short, _):
                #expect(names == [short] && content.localName!.hasPrefix(short) && short != content.localName)
            }
            // Both payloads decode back to themselves.
            #expect((try? AdvertisingData.decode(packed.advertisingData.encoded)) == packed.advertisingData)
            #expect((try? AdvertisingData.decode(packed.scanResponse.encoded)) == packed.scanResponse)
        }
    }
}
