import AssignedNumbers
import Testing
@testable import ATT

@Suite struct ATTMTUTests {
    @Test func limitsAtTheDefaultAndLargestMTU() {
        // (MTU, read, write/notify, prepare, signed, find by type value, read by type, group type)
        let rows: [(Int, Int, Int, Int, Int, Int, Int, Int)] = [
            (23, 22, 20, 18, 8, 16, 19, 17),
            (517, 516, 514, 512, 502, 510, 253, 251),
        ]
        for (mtu, read, write, prepare, signed, findValue, byType, byGroup) in rows {
            #expect(ATTMTU.maximumReadValueLength(mtu: mtu) == read)
            #expect(ATTMTU.maximumWriteValueLength(mtu: mtu) == write)
            #expect(ATTMTU.maximumNotificationValueLength(mtu: mtu) == write)
            #expect(ATTMTU.maximumPrepareWriteValueLength(mtu: mtu) == prepare)
            #expect(ATTMTU.maximumSignedWriteValueLength(mtu: mtu) == signed)
            #expect(ATTMTU.maximumFindByTypeValueLength(mtu: mtu) == findValue)
            #expect(ATTMTU.maximumReadByTypeValueLength(mtu: mtu) == byType)
            #expect(ATTMTU.maximumReadByGroupTypeValueLength(mtu: mtu) == byGroup)
        }
        #expect(ATTMTU.maximumSignedWriteValueLength(mtu: 5) == 0)
    }

    @Test func negotiatedMTU() {
        #expect(ATTMTU.negotiated(clientRxMTU: 517, serverRxMTU: 23) == 23)
        #expect(ATTMTU.negotiated(clientRxMTU: 517, serverRxMTU: 247) == 247)
        #expect(ATTMTU.negotiated(clientRxMTU: 517, serverRxMTU: 517) == 517)
        // Less than the default from either side leaves the default.
        #expect(ATTMTU.negotiated(clientRxMTU: 10, serverRxMTU: 517) == 23)
    }
}

/// The packing builders: each result fits the MTU, decodes to itself, and stops where the spec
/// says (uniform length, no partial element).
@Suite struct ATTResponsePackingTests {
    func check(_ pdu: ATTPDU, mtu: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(pdu.encode().count <= mtu, sourceLocation: sourceLocation)
        #expect((try? ATTPDU(decoding: pdu.encode())) == pdu, sourceLocation: sourceLocation)
    }

    /// Characteristic declarations: properties, value handle, UUID.
    func declarations(_ count: Int, uuid: BluetoothUUID = BluetoothUUID(uuid16: 0x2A00), from: UInt16 = 2) -> [ATTPDU.ReadByTypeResponse.AttributeData] {
        (0..<UInt16(count)).map { i in
            let handle = from + 2 * i
            return .init(handle: ATTHandle(handle), value: [0x02, UInt8(handle + 1), 0x00] + uuid.littleEndianBytes)
        }
    }

    @Test func readByTypeAtMTU23() throws {
        // 5-octet values: 7-octet pairs, ATT_MTU − 2 = 21 octets → 3 pairs.
        let short = try #require(ATTPDU.ReadByTypeResponse.packing(declarations(10), mtu: 23))
        #expect(short.attributeData.map(\.handle) == [2, 4, 6])
        check(.readByTypeResponse(short), mtu: 23)
        // 19-octet values (128-bit UUIDs): 21-octet pairs → 1.
        let long = try #require(ATTPDU.ReadByTypeResponse.packing(declarations(3, uuid: uartRX), mtu: 23))
        #expect(long.attributeData.count == 1)
        #expect(long.encode().count == 23)
        check(.readByTypeResponse(long), mtu: 23)
        // Stops at the first value of another length.
        let mixed = declarations(1) + declarations(1, uuid: uartRX, from: 4) + declarations(1, from: 6)
        #expect(ATTPDU.ReadByTypeResponse.packing(mixed, mtu: 23)?.attributeData.map(\.handle) == [2])
        // A long value is cut to ATT_MTU − 4 = 19 octets.
        let value = Array(0..<40).map(UInt8.init)
        let cut = try #require(ATTPDU.ReadByTypeResponse.packing([.init(handle: 9, value: value)], mtu: 23))
        #expect(cut.attributeData[0].value == Array(value.prefix(19)))
        check(.readByTypeResponse(cut), mtu: 23)
        #expect(ATTPDU.ReadByTypeResponse.packing([], mtu: 23) == nil)
    }

    @Test func readByTypeAtMTU517() throws {
        // 7-octet pairs in 515 octets → 73.
        let packed = try #require(ATTPDU.ReadByTypeResponse.packing(declarations(100), mtu: 517))
        #expect(packed.attributeData.count == 73)
        check(.readByTypeResponse(packed), mtu: 517)
        // Values of 300 octets are cut to 253 (Length 0xFF); two pairs of 255 fit in 515.
        let long = (1...3).map { ATTPDU.ReadByTypeResponse.AttributeData(handle: ATTHandle($0), value: Array(repeating: UInt8($0), count: 300)) }
        let cut = try #require(ATTPDU.ReadByTypeResponse.packing(long, mtu: 517))
        #expect(cut.attributeData.count == 2)
        #expect(cut.attributeData.allSatisfy { $0.value.count == 253 })
        #expect(cut.encode()[1] == 0xFF)
        check(.readByTypeResponse(cut), mtu: 517)
        // A whole 253-octet value does not join cut 300-octet ones.
        let whole = ATTPDU.ReadByTypeResponse.AttributeData(handle: 9, value: Array(repeating: 9, count: 253))
        #expect(ATTPDU.ReadByTypeResponse.packing([long[0], whole], mtu: 517)?.attributeData.count == 1)
    }

    func services(_ count: Int, uuid: (Int) -> BluetoothUUID) -> [ATTPDU.ReadByGroupTypeResponse.AttributeData] {
        (0..<count).map { i in
            .init(handle: ATTHandle(UInt16(1 + 4 * i)), endGroupHandle: ATTHandle(UInt16(4 + 4 * i)), value: uuid(i).littleEndianBytes)
        }
    }

    @Test func readByGroupTypeAtMTU23And517() throws {
        let short = services(200) { BluetoothUUID(uuid16: 0x1800 + UInt16($0)) }
        // 6-octet elements: 21 / 6 → 3; 515 / 6 → 85.
        let at23 = try #require(ATTPDU.ReadByGroupTypeResponse.packing(short, mtu: 23))
        #expect(at23.attributeData.count == 3)
        check(.readByGroupTypeResponse(at23), mtu: 23)
        let at517 = try #require(ATTPDU.ReadByGroupTypeResponse.packing(short, mtu: 517))
        #expect(at517.attributeData.count == 85)
        check(.readByGroupTypeResponse(at517), mtu: 517)
        // 20-octet elements: 1 at MTU 23, 25 at 517.
        let long = services(40) { _ in uartService }
        #expect(ATTPDU.ReadByGroupTypeResponse.packing(long, mtu: 23)?.attributeData.count == 1)
        #expect(ATTPDU.ReadByGroupTypeResponse.packing(long, mtu: 517)?.attributeData.count == 25)
        // GAP, GATT, then a 128-bit service: stops after the two 16-bit ones.
        let mixed = Array(short.prefix(2)) + services(1) { _ in uartService }
        #expect(ATTPDU.ReadByGroupTypeResponse.packing(mixed, mtu: 517)?.attributeData.count == 2)
        // A value longer than ATT_MTU − 6 is cut.
        let wide = [ATTPDU.ReadByGroupTypeResponse.AttributeData(handle: 1, endGroupHandle: 2, value: Array(repeating: 1, count: 30))]
        #expect(ATTPDU.ReadByGroupTypeResponse.packing(wide, mtu: 23)?.attributeData[0].value.count == 17)
    }

    @Test func findInformationAtMTU23And517() throws {
        typealias Entry = ATTPDU.FindInformationResponse.Entry
        let short: [Entry] = (1...200).map { (i: Int) -> Entry in
            Entry(handle: ATTHandle(UInt16(i)), type: BluetoothUUID(uuid16: 0x2900 + UInt16(i)))
        }
        let long: [Entry] = (1...50).map { (i: Int) -> Entry in Entry(handle: ATTHandle(UInt16(i)), type: uartRX) }
        // Format 1, 4-octet entries: 21 / 4 → 5; 515 / 4 → 128.
        let at23 = try #require(ATTPDU.FindInformationResponse.packing(short, mtu: 23))
        #expect(at23.format == .uuid16 && at23.entries.count == 5)
        check(.findInformationResponse(at23), mtu: 23)
        #expect(ATTPDU.FindInformationResponse.packing(short, mtu: 517)?.entries.count == 128)
        // Format 2, 18-octet entries: 1; 515 / 18 → 28.
        let long23 = try #require(ATTPDU.FindInformationResponse.packing(long, mtu: 23))
        #expect(long23.format == .uuid128 && long23.entries.count == 1)
        check(.findInformationResponse(long23), mtu: 23)
        let long517 = try #require(ATTPDU.FindInformationResponse.packing(long, mtu: 517))
        #expect(long517.entries.count == 28)
        check(.findInformationResponse(long517), mtu: 517)
        // One format per response: stops at the first entry of the other.
        #expect(ATTPDU.FindInformationResponse.packing(Array(short.prefix(2)) + long, mtu: 517)?.entries.count == 2)
        #expect(ATTPDU.FindInformationResponse.packing(Array(long.prefix(1)) + short, mtu: 517)?.entries.count == 1)
        #expect(ATTPDU.FindInformationResponse.packing([], mtu: 23) == nil)
    }

    @Test func findByTypeValueAtMTU23And517() throws {
        typealias Found = ATTPDU.FindByTypeValueResponse.HandlesInformation
        let found: [Found] = (UInt16(0)..<200).map { (i: UInt16) -> Found in
            Found(foundAttributeHandle: ATTHandle(1 + 2 * i), groupEndHandle: ATTHandle(2 + 2 * i))
        }
        // 4-octet elements in ATT_MTU − 1: 22 / 4 → 5; 516 / 4 → 129.
        let at23 = try #require(ATTPDU.FindByTypeValueResponse.packing(found, mtu: 23))
        #expect(at23.handlesInformation.count == 5)
        check(.findByTypeValueResponse(at23), mtu: 23)
        #expect(ATTPDU.FindByTypeValueResponse.packing(found, mtu: 517)?.handlesInformation.count == 129)
        #expect(ATTPDU.FindByTypeValueResponse.packing([], mtu: 23) == nil)
    }

    @Test func readMultipleResponsesCutAtMTUMinusOne() {
        let values: [[UInt8]] = [Array(repeating: 1, count: 10), Array(repeating: 2, count: 10), Array(repeating: 3, count: 10)]
        let multiple = ATTPDU.ReadMultipleResponse(values: values, mtu: 23)
        #expect(multiple.setOfValues == Array(repeating: 1, count: 10) + Array(repeating: 2, count: 10) + [3, 3])
        check(.readMultipleResponse(multiple), mtu: 23)
        #expect(ATTPDU.ReadMultipleResponse(values: values, mtu: 517).setOfValues.count == 30)

        // 2 + 10, then 2 + 8 of the second (cut, its Value Length still 10), then no room.
        let variable = ATTPDU.ReadMultipleVariableResponse(values: values, mtu: 23)
        #expect(variable.lengthValueTupleList.map(\.valueLength) == [10, 10])
        #expect(variable.lengthValueTupleList.map(\.value.count) == [10, 8])
        #expect(variable.lengthValueTupleList.map(\.isTruncated) == [false, true])
        #expect(variable.encode().count == 23)
        check(.readMultipleVariableResponse(variable), mtu: 23)
        // A first tuple of exactly 22 octets leaves no room for the next Value Length.
        let full = ATTPDU.ReadMultipleVariableResponse(values: [Array(repeating: 7, count: 20), [1]], mtu: 23)
        #expect(full.lengthValueTupleList.count == 1)
        let at517 = ATTPDU.ReadMultipleVariableResponse(values: values, mtu: 517)
        #expect(at517.lengthValueTupleList.allSatisfy { !$0.isTruncated } && at517.lengthValueTupleList.count == 3)
        check(.readMultipleVariableResponse(at517), mtu: 517)
    }

    @Test func multipleHandleValueNotificationLength() {
        let pdu = ATTPDU.MultipleHandleValueNotification(handleLengthValueTupleList: [
            .init(attributeHandle: 1, attributeValue: [1, 2]), .init(attributeHandle: 2, attributeValue: []),
        ])
        #expect(pdu.encodedLength == pdu.encode().count)
        #expect(pdu.encodedLength == 1 + 6 + 4)
    }
}
