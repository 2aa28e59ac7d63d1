import ByteCoding

extension ATTPDU {
    /// ATT_ERROR_RSP (§3.4.1.1): the request that failed, the handle that caused it (0x0000
    /// when none), and why.
    public struct ErrorResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.errorResponse
        public var requestOpcode: ATTOpcode
        public var attributeHandle: ATTHandle
        public var errorCode: ATTErrorCode

        public init(requestOpcode: ATTOpcode, attributeHandle: ATTHandle, errorCode: ATTErrorCode) {
            self.requestOpcode = requestOpcode
            self.attributeHandle = attributeHandle
            self.errorCode = errorCode
        }

        public init(parameters reader: inout ByteReader) throws {
            requestOpcode = ATTOpcode(try reader.u8())
            attributeHandle = try ATTCoding.handle(&reader)
            errorCode = ATTErrorCode(try reader.u8())
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            writer.u8(requestOpcode.rawValue)
            ATTCoding.write(attributeHandle, &writer)
            writer.u8(errorCode.rawValue)
        }
    }

    /// ATT_EXCHANGE_MTU_REQ (§3.4.2.1): the client's receive MTU.
    public struct ExchangeMTURequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.exchangeMTURequest
        public var clientRxMTU: UInt16

        public init(clientRxMTU: UInt16) { self.clientRxMTU = clientRxMTU }

        public init(parameters reader: inout ByteReader) throws {
            clientRxMTU = try reader.u16()
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) { writer.u16(clientRxMTU) }
    }

    /// ATT_EXCHANGE_MTU_RSP (§3.4.2.2): the server's receive MTU.
    public struct ExchangeMTUResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.exchangeMTUResponse
        public var serverRxMTU: UInt16

        public init(serverRxMTU: UInt16) { self.serverRxMTU = serverRxMTU }

        public init(parameters reader: inout ByteReader) throws {
            serverRxMTU = try reader.u16()
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) { writer.u16(serverRxMTU) }
    }
}
