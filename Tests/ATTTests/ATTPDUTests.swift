import AssignedNumbers
import ByteCoding
import Testing
@testable import ATT

@Suite struct ATTPDUVectorTests {
    @Test(arguments: attVectors)
    func encodesAndDecodesExactly(_ vector: ATTVector) throws {
        #expect(vector.pdu.encode().hexString == vector.bytes.hexString)
        #expect(try ATTPDU(decoding: vector.bytes) == vector.pdu)
        // The body's own codec agrees with the enum's.
        let body = try #require(vector.pdu.parameters)
        #expect(body.encode() == vector.bytes)
        #expect(type(of: body).opcode == vector.pdu.opcode)
    }

    @Test func everyDefinedOpcodeHasAVector() {
        let covered = Set(attVectors.map(\.pdu.opcode))
        let defined = (0...255).map { ATTOpcode(UInt8($0)) }.filter { $0.kind != nil }
        #expect(defined.count == 31)
        #expect(Set(defined) == covered)
    }

    @Test func bodiesDecodeOnTheirOwn() throws {
        let request = try ATTPDU.ReadByGroupTypeRequest(decoding: bytes("10 01 00 ff ff 00 28"))
        #expect(request.attributeGroupType == BluetoothUUID(uuid16: 0x2800))
        #expect(request.typeFormat == .uuid16)
        // The wrong opcode for the type.
        #expect(throws: DecodeError.self) { try ATTPDU.ReadRequest(decoding: bytes("0c 03 00")) }
    }

    /// The notification's own decoder (in place, the value keeping the PDU's buffer) agrees
    /// with the enum's on the Core spec's layout, an empty value, and what both refuse.
    @Test func notificationsDecodeInPlaceAsTheEnumDoes() throws {
        for hex in ["1b 15 00 64", "1b 15 00", "1b ff ff 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13"] {
            let notification = try ATTPDU.HandleValueNotification(decoding: bytes(hex))
            #expect(try ATTPDU(decoding: bytes(hex)) == .handleValueNotification(notification))
            #expect(notification.encode() == bytes(hex))
        }
        let value = try ATTPDU.HandleValueNotification(decoding: bytes("1b 15 00 64 65"))
        #expect(value.attributeHandle == 0x0015 && value.attributeValue == [0x64, 0x65])
        for hex in ["", "1b", "1b 15", "1d 15 00 64", "52 15 00 64"] {
            #expect(throws: DecodeError.self) { try ATTPDU.HandleValueNotification(decoding: bytes(hex)) }
        }
    }

    /// A 16-bit UUID sent in its 128-bit form compares equal to the short one, but keeps its
    /// wire form, so it re-encodes to the same bytes.
    @Test func longFormOfAShortUUIDKeepsItsForm() throws {
        // 0x2800 as 00002800-0000-1000-8000-00805F9B34FB, little-endian.
        let wire = bytes("10 01 00 ff ff fb 34 9b 5f 80 00 00 80 00 10 00 00 00 28 00 00")
        guard case .readByGroupTypeRequest(let request) = try ATTPDU(decoding: wire) else {
            Issue.record("wrong PDU"); return
        }
        #expect(request.attributeGroupType == BluetoothUUID(uuid16: 0x2800))
        #expect(request.typeFormat == .uuid128)
        #expect(ATTPDU.readByGroupTypeRequest(request).encode() == wire)

        // The same in a Find Information Response (format 2).
        let info = bytes("05 02 01 00 fb 34 9b 5f 80 00 00 80 00 10 00 00 00 28 00 00")
        guard case .findInformationResponse(let response) = try ATTPDU(decoding: info) else {
            Issue.record("wrong PDU"); return
        }
        #expect(response.format == .uuid128)
        #expect(response.entries == [.init(handle: 0x0001, type: BluetoothUUID(uuid16: 0x2800))])
        #expect(ATTPDU.findInformationResponse(response).encode() == info)
    }

    @Test func requestedFormatsThatCannotCarryTheUUIDFallBackTo128Bits() {
        let request = ATTPDU.ReadByTypeRequest(startingHandle: 1, endingHandle: 2, attributeType: uartRX, typeFormat: .uuid16)
        #expect(request.typeFormat == .uuid128)
        let long = ATTPDU.ReadByTypeRequest(startingHandle: 1, endingHandle: 2,
                                            attributeType: BluetoothUUID(uuid16: 0x2803), typeFormat: .uuid128)
        #expect(long.encode().count == 1 + 4 + 16)
        // 32-bit UUIDs go as 128-bit in ATT.
        let uuid32 = ATTPDU.ReadByTypeRequest(startingHandle: 1, endingHandle: 2, attributeType: BluetoothUUID(uuid32: 0x1234_5678))
        #expect(uuid32.typeFormat == .uuid128)
    }

    @Test func listResponsesRejectNonUniformOrEmptyLists() {
        #expect(ATTPDU.FindInformationResponse(entries: []) == nil)
        #expect(ATTPDU.FindInformationResponse(format: .uuid16, entries: [.init(handle: 1, type: uartService)]) == nil)
        // Mixed types choose the 128-bit format, which carries both.
        let mixed = ATTPDU.FindInformationResponse(entries: [
            .init(handle: 1, type: BluetoothUUID(uuid16: 0x2800)), .init(handle: 2, type: uartService),
        ])
        #expect(mixed?.format == .uuid128)
        #expect(ATTPDU.ReadByTypeResponse(attributeData: []) == nil)
        #expect(ATTPDU.ReadByTypeResponse(attributeData: [.init(handle: 1, value: [1]), .init(handle: 2, value: [1, 2])]) == nil)
        #expect(ATTPDU.ReadByTypeResponse(attributeData: [.init(handle: 1, value: Array(repeating: 0, count: 254))]) == nil)
        #expect(ATTPDU.ReadByTypeResponse(attributeData: [.init(handle: 1, value: Array(repeating: 0, count: 253))]) != nil)
        #expect(ATTPDU.ReadByGroupTypeResponse(attributeData: [.init(handle: 1, endGroupHandle: 2, value: Array(repeating: 0, count: 252))]) == nil)
        #expect(ATTPDU.ReadByGroupTypeResponse(attributeData: [.init(handle: 1, endGroupHandle: 2, value: [1]),
                                                               .init(handle: 3, endGroupHandle: 4, value: [])]) == nil)
    }

    @Test func maximumLengthsRoundTrip() throws {
        // Length octet 0xFF: a 253-octet value in a Read By Type Response.
        let rbt = ATTPDU.readByTypeResponse(.init(attributeData: [.init(handle: 9, value: Array(repeating: 0xA5, count: 253))])!)
        #expect(rbt.encode().prefix(2) == [0x09, 0xFF])
        #expect(try ATTPDU(decoding: rbt.encode()) == rbt)
        // A 512-octet value at MTU 517: a Write Request of 515 octets.
        let write = ATTPDU.writeRequest(.init(attributeHandle: 0x0100, attributeValue: Array(repeating: 7, count: 512)))
        #expect(write.encode().count == 515)
        #expect(try ATTPDU(decoding: write.encode()) == write)
    }

    @Test func prepareWriteResponseEchoesTheRequest() {
        let request = ATTPDU.PrepareWriteRequest(attributeHandle: 0x0012, valueOffset: 18, partAttributeValue: [0xAA, 0xBB, 0xCC])
        let response = ATTPDU.PrepareWriteResponse(echoing: request)
        #expect(response.encode().dropFirst() == request.encode().dropFirst())
    }

    @Test func signedWriteSignatureIsAlwaysTwelveOctets() throws {
        let short = ATTPDU.SignedWriteCommand(attributeHandle: 1, attributeValue: [], authenticationSignature: [1, 2])
        #expect(short.encode() == bytes("d2 01 00 01 02 00 00 00 00 00 00 00 00 00 00"))
        // An empty value with its signature decodes.
        let decoded = try ATTPDU.SignedWriteCommand(decoding: short.encode())
        #expect(decoded.attributeValue.isEmpty)
        #expect(decoded.authenticationSignature == [1, 2] + Array(repeating: 0, count: 10))
    }

    @Test func truncatedLastReadMultipleVariableValueKeepsItsLength() throws {
        // Value Length 10 but only 3 octets left: the server cut the list at ATT_MTU − 1.
        let wire = bytes("21 01 00 aa 0a 00 01 02 03")
        guard case .readMultipleVariableResponse(let response) = try ATTPDU(decoding: wire) else {
            Issue.record("wrong PDU"); return
        }
        #expect(response.lengthValueTupleList.map(\.isTruncated) == [false, true])
        #expect(response.lengthValueTupleList[1].valueLength == 10)
        #expect(response.lengthValueTupleList[1].value == [1, 2, 3])
        #expect(ATTPDU.readMultipleVariableResponse(response).encode() == wire)
    }
}

@Suite struct ATTMalformedPDUTests {
    /// Every PDU of fixed size: one octet less or more throws.
    @Test(arguments: attVectors.filter { [0x01, 0x02, 0x03, 0x04, 0x0A, 0x0C, 0x13, 0x18, 0x19, 0x1E].contains($0.pdu.opcode.rawValue) })
    func fixedSizePDUsInsistOnTheirSize(_ vector: ATTVector) {
        #expect(throws: DecodeError.self) { try ATTPDU(decoding: vector.bytes + [0x00]) }
        if vector.bytes.count > 1 {
            #expect(throws: DecodeError.self) { try ATTPDU(decoding: Array(vector.bytes.dropLast())) }
        }
    }

    /// Every vector cut anywhere before its fixed fields end throws; nothing traps.
    @Test(arguments: attVectors)
    func everyPrefixDecodesOrThrows(_ vector: ATTVector) {
        for cut in 0..<vector.bytes.count {
            let prefix = Array(vector.bytes.prefix(cut))
            if let decoded = try? ATTPDU(decoding: prefix) {
                #expect(decoded.encode() == prefix)
            }
        }
    }

    @Test func emptyPDUThrows() {
        #expect(throws: DecodeError.self) { try ATTPDU(decoding: []) }
    }

    @Test(arguments: [
        "02 05",                       // Exchange MTU Request, one octet of MTU
        "04 01 00 ff",                 // Find Information Request, end handle cut
        "05 03 01 00 00 28",           // Find Information Response, Format 3
        "05 01",                       // …with no information data
        "05 01 01 00 00 28 02",        // …format 1 with a partial entry (5 octets)
        "05 02 01 00 00 28",           // …format 2 with 4 octets
        "06 01 00 ff ff 00",           // Find By Type Value Request, type cut
        "07",                          // Find By Type Value Response, empty list
        "07 01 00 02",                 // …3 octets
        "07 01 00 02 00 03 00",        // …7 octets
        "08 01 00 ff ff",              // Read By Type Request without a type
        "08 01 00 ff ff 03",           // …1-octet type
        "08 01 00 ff ff 00 28 00 00",  // …4-octet (32-bit) type, not allowed in ATT
        "09 01 02",                    // Read By Type Response, Length 1 (less than a handle)
        "09 07",                       // …no attribute data
        "09 04 01 00 aa bb 02 00 cc",  // …second element one octet short
        "10 01 00 ff ff 00 28 00",     // Read By Group Type Request, 3-octet type
        "11 03 01 00 02",              // Read By Group Type Response, Length 3
        "11 06 01 00 05 00 00 18 06",  // …partial second element
        "11 06",                       // …no attribute data
        "0e 03 00",                    // Read Multiple Request, one handle
        "0e 03 00 05",                 // …3 octets
        "20 03 00",                    // Read Multiple Variable Request, one handle
        "21",                          // Read Multiple Variable Response, empty list
        "21 02",                       // …one octet of length
        "21 01 00 aa 02",              // …a second tuple with one octet of length
        "12 10",                       // Write Request, handle cut
        "52",                          // Write Command without a handle
        "d2 12 00 01 02 03 04 05 06 07 08 09 0a 0b", // Signed Write Command, 11-octet signature
        "16 12 00 12",                 // Prepare Write Request, offset cut
        "17 12 00",                    // Prepare Write Response without offset
        "18 02",                       // Execute Write Request, reserved flags
        "1b 15",                       // Notification, handle cut
        "1d",                          // Indication without a handle
        "23 15 00 01 00 64",           // Multiple Handle Value Notification, one tuple
        "23 15 00 05 00 64 18 00 00 00", // …Length 5 with fewer octets left
        "23 15 00 01 00 64 18 00 00",  // …second tuple's Length cut
        "01 0a 03 00",                 // Error Response without error code
    ])
    func malformedPDUsThrow(_ hex: String) {
        #expect(throws: DecodeError.self) { try ATTPDU(decoding: bytes(hex)) }
    }

    /// Semantic problems are the server's to answer (Invalid Handle etc.), not decode errors.
    @Test func semanticProblemsDecode() throws {
        #expect(try ATTPDU(decoding: bytes("04 00 00 ff ff")) == .findInformationRequest(.init(startingHandle: 0, endingHandle: 0xFFFF)))
        #expect(try ATTPDU(decoding: bytes("04 05 00 01 00")) == .findInformationRequest(.init(startingHandle: 5, endingHandle: 1)))
        #expect(try ATTPDU(decoding: bytes("0a 00 00")) == .readRequest(.init(attributeHandle: .invalid)))
        // Exchange MTU below the default: the bearer keeps 23.
        #expect(try ATTPDU(decoding: bytes("02 10 00")) == .exchangeMTURequest(.init(clientRxMTU: 16)))
        // Unknown error codes and request opcodes are kept.
        #expect(try ATTPDU(decoding: bytes("01 7f 00 00 42"))
                == .errorResponse(.init(requestOpcode: ATTOpcode(0x7F), attributeHandle: 0, errorCode: ATTErrorCode(0x42))))
    }

    @Test(arguments: [
        // (PDU, is command)
        ("14 01 02", false),   // reserved method, no flags: an unknown request
        ("00", false),
        ("3f", false),
        ("7f aa bb", true),    // command flag set
        ("53 01 00", true),
        ("d3 01 00", true),    // command + signature flags
        ("92 01 00", false),   // signature flag on Write Request: not defined
        ("ff", true),
    ])
    func unknownOpcodesDecodeToUnknown(_ hex: String, _ isCommand: Bool) throws {
        let wire = bytes(hex)
        let pdu = try ATTPDU(decoding: wire)
        #expect(pdu == .unknown(opcode: ATTOpcode(wire[0]), parameters: Array(wire.dropFirst())))
        #expect(pdu.encode() == wire)
        #expect(pdu.isCommand == isCommand)
        #expect(!pdu.isRequest && !pdu.isResponse && !pdu.isNotification && !pdu.isIndication && !pdu.isConfirmation)
        #expect(pdu.expectedResponseOpcode == nil)
        #expect(pdu.parameters == nil)
    }
}
