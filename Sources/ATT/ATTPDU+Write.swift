import ByteCoding

extension ATTPDU {
    /// ATT_WRITE_REQ (§3.4.5.1): at most ATT_MTU − 3 octets of value.
    public struct WriteRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.writeRequest
        public var attributeHandle: ATTHandle
        public var attributeValue: [UInt8]

        public init(attributeHandle: ATTHandle, attributeValue: [UInt8]) {
            self.attributeHandle = attributeHandle
            self.attributeValue = attributeValue
        }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            attributeValue = reader.rest()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.bytes(attributeValue)
        }
    }

    /// ATT_WRITE_RSP (§3.4.5.2): no parameters.
    public struct WriteResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.writeResponse
        public init() {}
        public init(parameters reader: inout ByteReader) throws { try reader.expectEnd() }
        public func encodeParameters(into writer: inout ByteWriter) {}
    }

    /// ATT_WRITE_CMD (§3.4.5.3): a write without response.
    public struct WriteCommand: ATTPDUParameters {
        public static let opcode = ATTOpcode.writeCommand
        public var attributeHandle: ATTHandle
        public var attributeValue: [UInt8]

        public init(attributeHandle: ATTHandle, attributeValue: [UInt8]) {
            self.attributeHandle = attributeHandle
            self.attributeValue = attributeValue
        }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            attributeValue = reader.rest()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.bytes(attributeValue)
        }
    }

    /// ATT_SIGNED_WRITE_CMD (§3.4.5.4): a write without response followed by a 12-octet
    /// authentication signature (Vol 3 Part H §2.4.5: SignCounter then the MAC).
    public struct SignedWriteCommand: ATTPDUParameters {
        public static let opcode = ATTOpcode.signedWriteCommand
        public static let signatureLength = 12
        public var attributeHandle: ATTHandle
        public var attributeValue: [UInt8]
        /// 12 octets as on the wire; the encoder pads or cuts anything else to 12.
        public var authenticationSignature: [UInt8]

        public init(attributeHandle: ATTHandle, attributeValue: [UInt8], authenticationSignature: [UInt8]) {
            self.attributeHandle = attributeHandle
            self.attributeValue = attributeValue
            self.authenticationSignature = authenticationSignature
        }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            guard reader.remaining >= Self.signatureLength else {
                throw DecodeError.truncated("\(reader.context) Authentication Signature",
                                            needed: Self.signatureLength, available: reader.remaining)
            }
            attributeValue = try reader.bytes(reader.remaining - Self.signatureLength)
            authenticationSignature = reader.rest()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.bytes(attributeValue)
            writer.padded(authenticationSignature.prefix(Self.signatureLength), to: Self.signatureLength)
        }
    }

    /// ATT_PREPARE_WRITE_REQ (§3.4.6.1): queue part of a value at an offset.
    public struct PrepareWriteRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.prepareWriteRequest
        public var attributeHandle: ATTHandle
        public var valueOffset: UInt16
        public var partAttributeValue: [UInt8]

        public init(attributeHandle: ATTHandle, valueOffset: UInt16, partAttributeValue: [UInt8]) {
            self.attributeHandle = attributeHandle
            self.valueOffset = valueOffset
            self.partAttributeValue = partAttributeValue
        }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            valueOffset = try reader.u16()
            partAttributeValue = reader.rest()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.u16(valueOffset)
            writer.bytes(partAttributeValue)
        }
    }

    /// ATT_PREPARE_WRITE_RSP (§3.4.6.2): echoes the request's fields, so the client can check
    /// the server queued what it sent.
    public struct PrepareWriteResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.prepareWriteResponse
        public var attributeHandle: ATTHandle
        public var valueOffset: UInt16
        public var partAttributeValue: [UInt8]

        public init(attributeHandle: ATTHandle, valueOffset: UInt16, partAttributeValue: [UInt8]) {
            self.attributeHandle = attributeHandle
            self.valueOffset = valueOffset
            self.partAttributeValue = partAttributeValue
        }

        /// The echo of `request`.
        public init(echoing request: PrepareWriteRequest) {
            self.init(attributeHandle: request.attributeHandle, valueOffset: request.valueOffset,
                      partAttributeValue: request.partAttributeValue)
        }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            valueOffset = try reader.u16()
            partAttributeValue = reader.rest()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.u16(valueOffset)
            writer.bytes(partAttributeValue)
        }
    }

    /// ATT_EXECUTE_WRITE_REQ (§3.4.6.3): write or discard every prepared value.
    public struct ExecuteWriteRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.executeWriteRequest

        /// The Flags field; other values are reserved and do not decode.
        public enum Flags: UInt8, Hashable, Sendable {
            /// Cancel all prepared writes.
            case cancel = 0x00
            /// Immediately write all pending prepared values.
            case write = 0x01
        }

        public var flags: Flags

        public init(flags: Flags) { self.flags = flags }

        public init(parameters reader: inout ByteReader) throws {
            flags = try reader.enumeration(Flags.self)
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) { writer.u8(flags.rawValue) }
    }

    /// ATT_EXECUTE_WRITE_RSP (§3.4.6.4): no parameters.
    public struct ExecuteWriteResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.executeWriteResponse
        public init() {}
        public init(parameters reader: inout ByteReader) throws { try reader.expectEnd() }
        public func encodeParameters(into writer: inout ByteWriter) {}
    }
}
