import Testing
@testable import ATT

@Suite struct ATTOpcodeTests {
    @Test func flagBits() {
        // 0x52 = 0101 0010: method 0x12 (as Write Request) with the command flag.
        #expect(ATTOpcode.writeCommand.isCommand)
        #expect(!ATTOpcode.writeCommand.hasAuthenticationSignature)
        #expect(ATTOpcode.writeCommand.method == ATTOpcode.writeRequest.method)
        // 0xD2 = 1101 0010: the same with the authentication signature flag.
        #expect(ATTOpcode.signedWriteCommand.isCommand)
        #expect(ATTOpcode.signedWriteCommand.hasAuthenticationSignature)
        #expect(ATTOpcode.signedWriteCommand.method == 0x12)
        for opcode in [ATTOpcode.readRequest, .handleValueNotification, .handleValueIndication, .errorResponse] {
            #expect(!opcode.isCommand && !opcode.hasAuthenticationSignature)
        }
    }

    @Test func requestsAndIndicationsNameTheirAnswer() {
        let pairs: [(ATTOpcode, ATTOpcode)] = [
            (.exchangeMTURequest, .exchangeMTUResponse), (.findInformationRequest, .findInformationResponse),
            (.findByTypeValueRequest, .findByTypeValueResponse), (.readByTypeRequest, .readByTypeResponse),
            (.readRequest, .readResponse), (.readBlobRequest, .readBlobResponse),
            (.readMultipleRequest, .readMultipleResponse), (.readMultipleVariableRequest, .readMultipleVariableResponse),
            (.readByGroupTypeRequest, .readByGroupTypeResponse), (.writeRequest, .writeResponse),
            (.prepareWriteRequest, .prepareWriteResponse), (.executeWriteRequest, .executeWriteResponse),
            (.handleValueIndication, .handleValueConfirmation),
        ]
        for (request, response) in pairs {
            #expect(request.responseOpcode == response, "\(request)")
            #expect(response.requestOpcode == request, "\(response)")
        }
        #expect(ATTOpcode.errorResponse.requestOpcode == nil)
        #expect(ATTOpcode.writeCommand.responseOpcode == nil)
        #expect(ATTOpcode.handleValueNotification.responseOpcode == nil)
        #expect(ATTOpcode.multipleHandleValueNotification.responseOpcode == nil)
        #expect(ATTOpcode(0x14).responseOpcode == nil)
    }

    @Test func kindsOfEveryVector() {
        for vector in attVectors {
            let pdu = vector.pdu
            let kinds = [pdu.isRequest, pdu.isResponse, pdu.isCommand, pdu.isNotification, pdu.isIndication, pdu.isConfirmation]
            #expect(kinds.filter { $0 }.count == 1, "\(pdu.opcode)")
            #expect(pdu.isRequest == (pdu.expectedResponseOpcode != nil && !pdu.isIndication))
        }
        #expect(ATTPDU.writeCommand(.init(attributeHandle: 1, attributeValue: [])).isCommand)
        #expect(ATTPDU.signedWriteCommand(.init(attributeHandle: 1, attributeValue: [], authenticationSignature: [])).isCommand)
        #expect(ATTPDU.multipleHandleValueNotification(.init(handleLengthValueTupleList: [])).isNotification)
        #expect(ATTPDU.handleValueIndication(.init(attributeHandle: 1, attributeValue: [])).expectedResponseOpcode == .handleValueConfirmation)
        #expect(ATTPDU.errorResponse(.init(requestOpcode: .readRequest, attributeHandle: 1, errorCode: .invalidHandle)).isResponse)
    }

    @Test func names() {
        #expect(ATTOpcode.readByGroupTypeRequest.name == "ATT_READ_BY_GROUP_TYPE_REQ")
        #expect(ATTOpcode.multipleHandleValueNotification.description == "ATT_MULTIPLE_HANDLE_VALUE_NTF")
        #expect(ATTOpcode(0x14).name == "ATT opcode 0x14")
    }
}

@Suite struct ATTErrorCodeTests {
    @Test func valuesAndNames() {
        let codes: [(ATTErrorCode, UInt8, String)] = [
            (.invalidHandle, 0x01, "Invalid Handle"), (.readNotPermitted, 0x02, "Read Not Permitted"),
            (.writeNotPermitted, 0x03, "Write Not Permitted"), (.invalidPDU, 0x04, "Invalid PDU"),
            (.insufficientAuthentication, 0x05, "Insufficient Authentication"),
            (.requestNotSupported, 0x06, "Request Not Supported"), (.invalidOffset, 0x07, "Invalid Offset"),
            (.insufficientAuthorization, 0x08, "Insufficient Authorization"), (.prepareQueueFull, 0x09, "Prepare Queue Full"),
            (.attributeNotFound, 0x0A, "Attribute Not Found"), (.attributeNotLong, 0x0B, "Attribute Not Long"),
            (.encryptionKeySizeTooShort, 0x0C, "Encryption Key Size Too Short"),
            (.invalidAttributeValueLength, 0x0D, "Invalid Attribute Value Length"), (.unlikelyError, 0x0E, "Unlikely Error"),
            (.insufficientEncryption, 0x0F, "Insufficient Encryption"), (.unsupportedGroupType, 0x10, "Unsupported Group Type"),
            (.insufficientResources, 0x11, "Insufficient Resources"), (.databaseOutOfSync, 0x12, "Database Out Of Sync"),
            (.valueNotAllowed, 0x13, "Value Not Allowed"), (.writeRequestRejected, 0xFC, "Write Request Rejected"),
            (.cccdImproperlyConfigured, 0xFD, "Client Characteristic Configuration Descriptor Improperly Configured"),
            (.procedureAlreadyInProgress, 0xFE, "Procedure Already in Progress"), (.outOfRange, 0xFF, "Out of Range"),
        ]
        for (code, raw, name) in codes {
            #expect(code.rawValue == raw)
            #expect(code.name == name)
        }
        #expect(ATTErrorCode(0x14).name == "Reserved")
        #expect(ATTErrorCode.invalidOffset.description == "Invalid Offset (0x7)")
    }

    @Test func ranges() {
        #expect(ATTErrorCode.application(0).rawValue == 0x80)
        #expect(ATTErrorCode.application(0x1F).rawValue == 0x9F)
        #expect(ATTErrorCode.application(0x40).rawValue == 0x9F)
        #expect(ATTErrorCode(0x85).isApplicationError && ATTErrorCode(0x85).name == "Application Error")
        #expect(!ATTErrorCode(0xA0).isApplicationError)
        #expect(ATTErrorCode(0xE0).isCommonProfileError && ATTErrorCode.outOfRange.isCommonProfileError)
        #expect(!ATTErrorCode.invalidHandle.isApplicationError && !ATTErrorCode.invalidHandle.isCommonProfileError)
    }

    @Test func isAnError() {
        func read() throws { throw ATTErrorCode.readNotPermitted }
        #expect(throws: ATTErrorCode.readNotPermitted) { try read() }
    }
}

@Suite struct ATTHandleTests {
    @Test func basics() {
        #expect(!ATTHandle.invalid.isValid && ATTHandle.min.isValid)
        #expect(ATTHandle(0x002A).description == "0x002A")
        #expect(ATTHandle(1).next == 2)
        #expect(ATTHandle.max.next == nil)
        #expect(ATTHandle(3) < ATTHandle(0x0100))
    }

    /// Every opcode's kind agrees with its spec name's suffix, and undefined opcodes have neither.
    @Test func kindAgreesWithTheSpecName() {
        for raw in 0...255 {
            let opcode = ATTOpcode(UInt8(raw))
            let name = opcode.name
            let expected: ATTOpcode.Kind? =
                name.hasPrefix("ATT opcode") ? nil
                : name.hasSuffix("_REQ") ? .request
                : name.hasSuffix("_RSP") ? .response
                : name.hasSuffix("_CMD") ? .command
                : name.hasSuffix("_NTF") ? .notification
                : name.hasSuffix("_IND") ? .indication
                : name.hasSuffix("_CFM") ? .confirmation : nil
            #expect(opcode.kind == expected, "\(name)")
        }
    }
}
