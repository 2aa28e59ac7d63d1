import ByteCoding

/// One Attribute Protocol PDU (Core spec Vol 3 Part F §3.4), with one decoder
/// (`init(decoding:)`) and one encoder (`encode()`).
///
/// The decoder checks what the PDU's layout defines — sizes, formats, list element sizes,
/// minimum list lengths — and throws `DecodeError` otherwise (a server answers that with
/// Invalid PDU). It does not check meaning: a Find Information Request for 0x0000 or with
/// start > end decodes, and the server answers it with Invalid Handle. It does not know the
/// MTU either: a bearer drops or rejects PDUs longer than ATT_MTU before decoding.
public enum ATTPDU: Hashable, Sendable {
    case errorResponse(ErrorResponse)
    case exchangeMTURequest(ExchangeMTURequest)
    case exchangeMTUResponse(ExchangeMTUResponse)
    case findInformationRequest(FindInformationRequest)
    case findInformationResponse(FindInformationResponse)
    case findByTypeValueRequest(FindByTypeValueRequest)
    case findByTypeValueResponse(FindByTypeValueResponse)
    case readByTypeRequest(ReadByTypeRequest)
    case readByTypeResponse(ReadByTypeResponse)
    case readRequest(ReadRequest)
    case readResponse(ReadResponse)
    case readBlobRequest(ReadBlobRequest)
    case readBlobResponse(ReadBlobResponse)
    case readMultipleRequest(ReadMultipleRequest)
    case readMultipleResponse(ReadMultipleResponse)
    case readMultipleVariableRequest(ReadMultipleVariableRequest)
    case readMultipleVariableResponse(ReadMultipleVariableResponse)
    case readByGroupTypeRequest(ReadByGroupTypeRequest)
    case readByGroupTypeResponse(ReadByGroupTypeResponse)
    case writeRequest(WriteRequest)
    case writeResponse(WriteResponse)
    case writeCommand(WriteCommand)
    case signedWriteCommand(SignedWriteCommand)
    case prepareWriteRequest(PrepareWriteRequest)
    case prepareWriteResponse(PrepareWriteResponse)
    case executeWriteRequest(ExecuteWriteRequest)
    case executeWriteResponse(ExecuteWriteResponse)
    case handleValueNotification(HandleValueNotification)
    case handleValueIndication(HandleValueIndication)
    case handleValueConfirmation(HandleValueConfirmation)
    case multipleHandleValueNotification(MultipleHandleValueNotification)
    /// An opcode this codec does not define, with its parameters as received. A server answers
    /// it with Request Not Supported unless `opcode.isCommand`, in which case it ignores it.
    /// (Encoding an `.unknown` with a defined opcode produces that PDU's bytes.)
    case unknown(opcode: ATTOpcode, parameters: [UInt8])

    /// Decodes one PDU: the opcode octet, then its parameters. Throws `DecodeError` for an empty
    /// or malformed PDU; an undefined opcode gives `.unknown`.
    public init(decoding pdu: [UInt8]) throws {
        try self.init(decoding: pdu[...])
    }

    public init(decoding pdu: ArraySlice<UInt8>) throws {
        var reader = ByteReader(pdu, context: "ATT PDU")
        let opcode = ATTOpcode(try reader.u8())
        reader.context = opcode.name
        func body<P: ATTPDUParameters>(_: P.Type) throws -> P { try P(parameters: &reader) }
        switch opcode {
        case .errorResponse: self = .errorResponse(try body(ErrorResponse.self))
        case .exchangeMTURequest: self = .exchangeMTURequest(try body(ExchangeMTURequest.self))
        case .exchangeMTUResponse: self = .exchangeMTUResponse(try body(ExchangeMTUResponse.self))
        case .findInformationRequest: self = .findInformationRequest(try body(FindInformationRequest.self))
        case .findInformationResponse: self = .findInformationResponse(try body(FindInformationResponse.self))
        case .findByTypeValueRequest: self = .findByTypeValueRequest(try body(FindByTypeValueRequest.self))
        case .findByTypeValueResponse: self = .findByTypeValueResponse(try body(FindByTypeValueResponse.self))
        case .readByTypeRequest: self = .readByTypeRequest(try body(ReadByTypeRequest.self))
        case .readByTypeResponse: self = .readByTypeResponse(try body(ReadByTypeResponse.self))
        case .readRequest: self = .readRequest(try body(ReadRequest.self))
        case .readResponse: self = .readResponse(try body(ReadResponse.self))
        case .readBlobRequest: self = .readBlobRequest(try body(ReadBlobRequest.self))
        case .readBlobResponse: self = .readBlobResponse(try body(ReadBlobResponse.self))
        case .readMultipleRequest: self = .readMultipleRequest(try body(ReadMultipleRequest.self))
        case .readMultipleResponse: self = .readMultipleResponse(try body(ReadMultipleResponse.self))
        case .readMultipleVariableRequest:
            self = .readMultipleVariableRequest(try body(ReadMultipleVariableRequest.self))
        case .readMultipleVariableResponse:
            self = .readMultipleVariableResponse(try body(ReadMultipleVariableResponse.self))
        case .readByGroupTypeRequest: self = .readByGroupTypeRequest(try body(ReadByGroupTypeRequest.self))
        case .readByGroupTypeResponse: self = .readByGroupTypeResponse(try body(ReadByGroupTypeResponse.self))
        case .writeRequest: self = .writeRequest(try body(WriteRequest.self))
        case .writeResponse: self = .writeResponse(try body(WriteResponse.self))
        case .writeCommand: self = .writeCommand(try body(WriteCommand.self))
        case .signedWriteCommand: self = .signedWriteCommand(try body(SignedWriteCommand.self))
        case .prepareWriteRequest: self = .prepareWriteRequest(try body(PrepareWriteRequest.self))
        case .prepareWriteResponse: self = .prepareWriteResponse(try body(PrepareWriteResponse.self))
        case .executeWriteRequest: self = .executeWriteRequest(try body(ExecuteWriteRequest.self))
        case .executeWriteResponse: self = .executeWriteResponse(try body(ExecuteWriteResponse.self))
        case .handleValueNotification: self = .handleValueNotification(try body(HandleValueNotification.self))
        case .handleValueIndication: self = .handleValueIndication(try body(HandleValueIndication.self))
        case .handleValueConfirmation: self = .handleValueConfirmation(try body(HandleValueConfirmation.self))
        case .multipleHandleValueNotification:
            self = .multipleHandleValueNotification(try body(MultipleHandleValueNotification.self))
        default: self = .unknown(opcode: opcode, parameters: reader.rest())
        }
    }

    /// The body of a defined PDU; nil for `.unknown`.
    public var parameters: (any ATTPDUParameters)? {
        switch self {
        case .errorResponse(let p): p
        case .exchangeMTURequest(let p): p
        case .exchangeMTUResponse(let p): p
        case .findInformationRequest(let p): p
        case .findInformationResponse(let p): p
        case .findByTypeValueRequest(let p): p
        case .findByTypeValueResponse(let p): p
        case .readByTypeRequest(let p): p
        case .readByTypeResponse(let p): p
        case .readRequest(let p): p
        case .readResponse(let p): p
        case .readBlobRequest(let p): p
        case .readBlobResponse(let p): p
        case .readMultipleRequest(let p): p
        case .readMultipleResponse(let p): p
        case .readMultipleVariableRequest(let p): p
        case .readMultipleVariableResponse(let p): p
        case .readByGroupTypeRequest(let p): p
        case .readByGroupTypeResponse(let p): p
        case .writeRequest(let p): p
        case .writeResponse(let p): p
        case .writeCommand(let p): p
        case .signedWriteCommand(let p): p
        case .prepareWriteRequest(let p): p
        case .prepareWriteResponse(let p): p
        case .executeWriteRequest(let p): p
        case .executeWriteResponse(let p): p
        case .handleValueNotification(let p): p
        case .handleValueIndication(let p): p
        case .handleValueConfirmation(let p): p
        case .multipleHandleValueNotification(let p): p
        case .unknown: nil
        }
    }

    public var opcode: ATTOpcode {
        if case .unknown(let opcode, _) = self { return opcode }
        return type(of: parameters!).opcode
    }

    /// The PDU's bytes: opcode, then parameters.
    public func encode() -> [UInt8] {
        switch self {
        case .unknown(let opcode, let parameters):
            return [opcode.rawValue] + parameters
        default:
            return parameters!.encode()
        }
    }

    /// Client → server, answered by a response or an Error Response.
    public var isRequest: Bool { opcode.kind == .request }
    /// Server → client, answering a request (Error Response included).
    public var isResponse: Bool { opcode.kind == .response }
    /// Client → server, never answered. For `.unknown` this is the opcode's command flag.
    public var isCommand: Bool { opcode.kind == .command || (opcode.kind == nil && opcode.isCommand) }
    /// Server → client, never answered (single or multiple).
    public var isNotification: Bool { opcode.kind == .notification }
    /// Server → client, answered by a confirmation.
    public var isIndication: Bool { opcode.kind == .indication }
    /// Client → server, answering an indication.
    public var isConfirmation: Bool { opcode.kind == .confirmation }

    /// For a request, the opcode of a successful response (an Error Response may come
    /// instead); for an indication, the confirmation's. What a bearer waits for.
    public var expectedResponseOpcode: ATTOpcode? { opcode.responseOpcode }
}
