/// An ATT PDU opcode (Core spec Vol 3 Part F §3.3.1, §3.4.8): bits 0–5 are the method, bit 6
/// the command flag and bit 7 the authentication signature flag. Opcodes the spec does not
/// define are kept as raw values, so a bearer can still tell an unknown command (ignore it)
/// from an unknown request (answer Request Not Supported).
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let errorResponse = ATTOpcode(0x01)
    public static let exchangeMTURequest = ATTOpcode(0x02)
    public static let exchangeMTUResponse = ATTOpcode(0x03)
    public static let findInformationRequest = ATTOpcode(0x04)
    public static let findInformationResponse = ATTOpcode(0x05)
    public static let findByTypeValueRequest = ATTOpcode(0x06)
    public static let findByTypeValueResponse = ATTOpcode(0x07)
    public static let readByTypeRequest = ATTOpcode(0x08)
    public static let readByTypeResponse = ATTOpcode(0x09)
    public static let readRequest = ATTOpcode(0x0A)
    public static let readResponse = ATTOpcode(0x0B)
    public static let readBlobRequest = ATTOpcode(0x0C)
    public static let readBlobResponse = ATTOpcode(0x0D)
    public static let readMultipleRequest = ATTOpcode(0x0E)
    public static let readMultipleResponse = ATTOpcode(0x0F)
    public static let readByGroupTypeRequest = ATTOpcode(0x10)
    public static let readByGroupTypeResponse = ATTOpcode(0x11)
    public static let writeRequest = ATTOpcode(0x12)
    public static let writeResponse = ATTOpcode(0x13)
    public static let prepareWriteRequest = ATTOpcode(0x16)
    public static let prepareWriteResponse = ATTOpcode(0x17)
    public static let executeWriteRequest = ATTOpcode(0x18)
    public static let executeWriteResponse = ATTOpcode(0x19)
    public static let handleValueNotification = ATTOpcode(0x1B)
    public static let handleValueIndication = ATTOpcode(0x1D)
    public static let handleValueConfirmation = ATTOpcode(0x1E)
    public static let readMultipleVariableRequest = ATTOpcode(0x20)
    public static let readMultipleVariableResponse = ATTOpcode(0x21)
    public static let multipleHandleValueNotification = ATTOpcode(0x23)
    public static let writeCommand = ATTOpcode(0x52)
    public static let signedWriteCommand = ATTOpcode(0xD2)

    /// Bits 0–5.
    public var method: UInt8 { rawValue & 0x3F }
    /// Bit 6: set for commands (PDUs that get no response).
    public var isCommand: Bool { rawValue & 0x40 != 0 }
    /// Bit 7: set when the PDU ends in a 12-octet authentication signature.
    public var hasAuthenticationSignature: Bool { rawValue & 0x80 != 0 }

    /// What a PDU with this opcode is (§3.3), or nil for opcodes the spec does not define.
    public enum Kind: Sendable, Hashable {
        case request, response, command, notification, indication, confirmation
    }

    public var kind: Kind? { Self.kinds[Int(rawValue)] }

    /// The spec's name, e.g. "ATT_READ_BY_TYPE_REQ", or "ATT opcode 0xNN" for unknown ones.
    public var name: String {
        Self.table[Int(rawValue)]?.name ?? "ATT opcode 0x" + String(rawValue, radix: 16, uppercase: true)
    }

    public var description: String { name }

    /// For a request, the opcode of its response; for an indication, the confirmation's.
    /// (An Error Response may answer any request instead.)
    public var responseOpcode: ATTOpcode? {
        switch kind {
        case .request?, .indication?: ATTOpcode(rawValue + 1)
        default: nil
        }
    }

    /// For a response (other than Error Response) or a confirmation, the opcode it answers.
    public var requestOpcode: ATTOpcode? {
        switch kind {
        case .response? where self != .errorResponse, .confirmation?: ATTOpcode(rawValue - 1)
        default: nil
        }
    }

    /// Indexed by opcode: every received PDU asks for its kind and the decoder for its name
    /// (a dictionary lookup hashed the opcode each time).
    private static let table: [(name: String, kind: Kind)?] = {
        var table = [(name: String, kind: Kind)?](repeating: nil, count: 256)
        for (opcode, entry) in definitions { table[Int(opcode)] = entry }
        return table
    }()

    /// The kinds alone, indexed by opcode: every received PDU asks for its kind, and reading it
    /// from `table` copied (retained and released) the name beside it.
    private static let kinds: [Kind?] = table.map { $0?.kind }

    private static let definitions: [UInt8: (name: String, kind: Kind)] = [
        0x01: ("ATT_ERROR_RSP", .response),
        0x02: ("ATT_EXCHANGE_MTU_REQ", .request),
        0x03: ("ATT_EXCHANGE_MTU_RSP", .response),
        0x04: ("ATT_FIND_INFORMATION_REQ", .request),
        0x05: ("ATT_FIND_INFORMATION_RSP", .response),
        0x06: ("ATT_FIND_BY_TYPE_VALUE_REQ", .request),
        0x07: ("ATT_FIND_BY_TYPE_VALUE_RSP", .response),
        0x08: ("ATT_READ_BY_TYPE_REQ", .request),
        0x09: ("ATT_READ_BY_TYPE_RSP", .response),
        0x0A: ("ATT_READ_REQ", .request),
        0x0B: ("ATT_READ_RSP", .response),
        0x0C: ("ATT_READ_BLOB_REQ", .request),
        0x0D: ("ATT_READ_BLOB_RSP", .response),
        0x0E: ("ATT_READ_MULTIPLE_REQ", .request),
        0x0F: ("ATT_READ_MULTIPLE_RSP", .response),
        0x10: ("ATT_READ_BY_GROUP_TYPE_REQ", .request),
        0x11: ("ATT_READ_BY_GROUP_TYPE_RSP", .response),
        0x12: ("ATT_WRITE_REQ", .request),
        0x13: ("ATT_WRITE_RSP", .response),
        0x16: ("ATT_PREPARE_WRITE_REQ", .request),
        0x17: ("ATT_PREPARE_WRITE_RSP", .response),
        0x18: ("ATT_EXECUTE_WRITE_REQ", .request),
        0x19: ("ATT_EXECUTE_WRITE_RSP", .response),
        0x1B: ("ATT_HANDLE_VALUE_NTF", .notification),
        0x1D: ("ATT_HANDLE_VALUE_IND", .indication),
        0x1E: ("ATT_HANDLE_VALUE_CFM", .confirmation),
        0x20: ("ATT_READ_MULTIPLE_VARIABLE_REQ", .request),
        0x21: ("ATT_READ_MULTIPLE_VARIABLE_RSP", .response),
        0x23: ("ATT_MULTIPLE_HANDLE_VALUE_NTF", .notification),
        0x52: ("ATT_WRITE_CMD", .command),
        0xD2: ("ATT_SIGNED_WRITE_CMD", .command),
    ]
}
