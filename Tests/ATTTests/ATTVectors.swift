import Scheduling
import AssignedNumbers
import ByteCoding
import Testing
@testable import ATT

/// One PDU and its bytes, derived by hand from Core spec Vol 3 Part F §3.4 (all multi-octet
/// fields little-endian, the opcode first).
struct ATTVector: Sendable, CustomTestStringConvertible {
    let pdu: ATTPDU
    let bytes: [UInt8]
    init(_ pdu: ATTPDU, _ hex: String) {
        self.pdu = pdu
        self.bytes = [UInt8](hex: hex)!
    }
    var testDescription: String { "\(pdu.opcode.name) \(bytes.hexString)" }
}

/// The Nordic UART service UUIDs: 128-bit UUIDs without a 16-bit alias.
let uartService = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
let uartRX = BluetoothUUID("6E400002-B5A3-F393-E0A9-E50E24DCCA9E")!
/// uartService little-endian: the 16 octets of the string, reversed.
let uartServiceLE = "9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e"
let uartRXLE = "9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 02 00 40 6e"

/// A vector for every PDU type (and both formats where a PDU has two).
let attVectors: [ATTVector] = [
    // Read Request (0x0A) on handle 0x0003 failed with Invalid Handle (0x01).
    ATTVector(.errorResponse(.init(requestOpcode: .readRequest, attributeHandle: 0x0003, errorCode: .invalidHandle)),
              "01 0a 03 00 01"),
    // Client Rx MTU 517 = 0x0205.
    ATTVector(.exchangeMTURequest(.init(clientRxMTU: 517)), "02 05 02"),
    // Server Rx MTU 23 = 0x0017.
    ATTVector(.exchangeMTUResponse(.init(serverRxMTU: 23)), "03 17 00"),
    // 0x0001…0xFFFF.
    ATTVector(.findInformationRequest(.init(startingHandle: 0x0001, endingHandle: 0xFFFF)), "04 01 00 ff ff"),
    // Format 0x01; 0x0010 → 0x2902 (CCCD), 0x0011 → 0x2901 (User Description).
    ATTVector(.findInformationResponse(.init(entries: [
        .init(handle: 0x0010, type: BluetoothUUID(uuid16: 0x2902)),
        .init(handle: 0x0011, type: BluetoothUUID(uuid16: 0x2901)),
    ])!), "05 01 10 00 02 29 11 00 01 29"),
    // Format 0x02; 0x0012 → the UART service UUID, 16 octets little-endian.
    ATTVector(.findInformationResponse(.init(entries: [.init(handle: 0x0012, type: uartService)])!),
              "05 02 12 00 " + uartServiceLE),
    // Primary Service (0x2800) whose value is Heart Rate 0x180D, over 0x0001…0xFFFF.
    ATTVector(.findByTypeValueRequest(.init(startingHandle: 0x0001, endingHandle: 0xFFFF,
                                            attributeType: BluetoothUUID(uuid16: 0x2800), attributeValue: [0x0D, 0x18])),
              "06 01 00 ff ff 00 28 0d 18"),
    // Found 0x000A, group ends at 0x0010; found 0x0020, group ends at 0xFFFF.
    ATTVector(.findByTypeValueResponse(.init(handlesInformation: [
        .init(foundAttributeHandle: 0x000A, groupEndHandle: 0x0010),
        .init(foundAttributeHandle: 0x0020, groupEndHandle: 0xFFFF),
    ])), "07 0a 00 10 00 20 00 ff ff"),
    // Characteristic (0x2803) declarations over 0x0001…0xFFFF.
    ATTVector(.readByTypeRequest(.init(startingHandle: 0x0001, endingHandle: 0xFFFF,
                                       attributeType: BluetoothUUID(uuid16: 0x2803))),
              "08 01 00 ff ff 03 28"),
    // A 128-bit type over 0x0010…0x0020.
    ATTVector(.readByTypeRequest(.init(startingHandle: 0x0010, endingHandle: 0x0020, attributeType: uartRX)),
              "08 10 00 20 00 " + uartRXLE),
    // Two characteristic declarations, 5-octet values (properties, value handle, 16-bit UUID),
    // so Length = 2 + 5 = 7: 0x0002 → read (0x02), 0x0003, Device Name 0x2A00; 0x0004 → read,
    // 0x0005, Appearance 0x2A01.
    ATTVector(.readByTypeResponse(.init(attributeData: [
        .init(handle: 0x0002, value: [0x02, 0x03, 0x00, 0x00, 0x2A]),
        .init(handle: 0x0004, value: [0x02, 0x05, 0x00, 0x01, 0x2A]),
    ])!), "09 07 02 00 02 03 00 00 2a 04 00 02 05 00 01 2a"),
    ATTVector(.readRequest(.init(attributeHandle: 0x0003)), "0a 03 00"),
    // "Hello".
    ATTVector(.readResponse(.init(attributeValue: Array("Hello".utf8))), "0b 48 65 6c 6c 6f"),
    // Handle 0x0003 from offset 22 = 0x0016 (after a first Read Response at MTU 23).
    ATTVector(.readBlobRequest(.init(attributeHandle: 0x0003, valueOffset: 22)), "0c 03 00 16 00"),
    ATTVector(.readBlobResponse(.init(partAttributeValue: [0x77, 0x6f, 0x72, 0x6c, 0x64])), "0d 77 6f 72 6c 64"),
    ATTVector(.readMultipleRequest(.init(setOfHandles: [0x0003, 0x0005])), "0e 03 00 05 00"),
    ATTVector(.readMultipleResponse(.init(setOfValues: [0x01, 0x02, 0x03])), "0f 01 02 03"),
    ATTVector(.readMultipleVariableRequest(.init(setOfHandles: [0x0003, 0x0005, 0x0007])), "20 03 00 05 00 07 00"),
    // Two values: length 2 (aa bb), then an empty one (length 0).
    ATTVector(.readMultipleVariableResponse(.init(lengthValueTupleList: [.init(value: [0xAA, 0xBB]), .init(value: [])])),
              "21 02 00 aa bb 00 00"),
    // Primary services (0x2800) over 0x0001…0xFFFF.
    ATTVector(.readByGroupTypeRequest(.init(startingHandle: 0x0001, endingHandle: 0xFFFF,
                                            attributeGroupType: BluetoothUUID(uuid16: 0x2800))),
              "10 01 00 ff ff 00 28"),
    // GAP 0x1800 at 0x0001…0x0005 and GATT 0x1801 at 0x0006…0x0009: Length = 4 + 2 = 6.
    ATTVector(.readByGroupTypeResponse(.init(attributeData: [
        .init(handle: 0x0001, endGroupHandle: 0x0005, value: [0x00, 0x18]),
        .init(handle: 0x0006, endGroupHandle: 0x0009, value: [0x01, 0x18]),
    ])!), "11 06 01 00 05 00 00 18 06 00 09 00 01 18"),
    // A 128-bit service: Length = 4 + 16 = 20 = 0x14.
    ATTVector(.readByGroupTypeResponse(.init(attributeData: [
        .init(handle: 0x0010, endGroupHandle: 0x0015, value: uartService.littleEndianBytes),
    ])!), "11 14 10 00 15 00 " + uartServiceLE),
    // Enable notifications: 0x0001 into the CCCD at 0x0010.
    ATTVector(.writeRequest(.init(attributeHandle: 0x0010, attributeValue: [0x01, 0x00])), "12 10 00 01 00"),
    ATTVector(.writeResponse(.init()), "13"),
    // Opcode 0x52: Write Request's method 0x12 with the command flag (0x40).
    ATTVector(.writeCommand(.init(attributeHandle: 0x0012, attributeValue: Array("hi".utf8))), "52 12 00 68 69"),
    // Opcode 0xD2: 0x52 with the signature flag (0x80); value 01, then 12 octets of signature
    // (SignCounter 1 little-endian, then an 8-octet MAC).
    ATTVector(.signedWriteCommand(.init(attributeHandle: 0x0012, attributeValue: [0x01],
                                        authenticationSignature: [0x01, 0x00, 0x00, 0x00,
                                                                  0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])),
              "d2 12 00 01 01 00 00 00 11 22 33 44 55 66 77 88"),
    // Handle 0x0012, offset 18 = 0x0012, three octets.
    ATTVector(.prepareWriteRequest(.init(attributeHandle: 0x0012, valueOffset: 18, partAttributeValue: [0xAA, 0xBB, 0xCC])),
              "16 12 00 12 00 aa bb cc"),
    ATTVector(.prepareWriteResponse(.init(attributeHandle: 0x0012, valueOffset: 18, partAttributeValue: [0xAA, 0xBB, 0xCC])),
              "17 12 00 12 00 aa bb cc"),
    ATTVector(.executeWriteRequest(.init(flags: .write)), "18 01"),
    ATTVector(.executeWriteRequest(.init(flags: .cancel)), "18 00"),
    ATTVector(.executeWriteResponse(.init()), "19"),
    // Battery Level 100 % at 0x0015.
    ATTVector(.handleValueNotification(.init(attributeHandle: 0x0015, attributeValue: [0x64])), "1b 15 00 64"),
    // Service Changed (at 0x0003) for 0x0001…0xFFFF.
    ATTVector(.handleValueIndication(.init(attributeHandle: 0x0003, attributeValue: [0x01, 0x00, 0xFF, 0xFF])),
              "1d 03 00 01 00 ff ff"),
    ATTVector(.handleValueConfirmation(.init()), "1e"),
    // 0x0015 → [64] (length 1), 0x0018 → empty (length 0).
    ATTVector(.multipleHandleValueNotification(.init(handleLengthValueTupleList: [
        .init(attributeHandle: 0x0015, attributeValue: [0x64]),
        .init(attributeHandle: 0x0018, attributeValue: []),
    ])), "23 15 00 01 00 64 18 00 00 00"),
]


func bytes(_ hex: String) -> [UInt8] { [UInt8](hex: hex)! }
