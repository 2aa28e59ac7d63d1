import ByteCoding

extension ATTPDU {
    /// ATT_READ_REQ (§3.4.4.3).
    public struct ReadRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.readRequest
        public var attributeHandle: ATTHandle

        public init(attributeHandle: ATTHandle) { self.attributeHandle = attributeHandle }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) { ATTCoding.write(attributeHandle, &writer) }
    }

    /// ATT_READ_RSP (§3.4.4.4): the value, or its first ATT_MTU − 1 octets.
    public struct ReadResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.readResponse
        public var attributeValue: [UInt8]

        public init(attributeValue: [UInt8]) { self.attributeValue = attributeValue }

        public init(parameters reader: inout ByteReader) throws { attributeValue = reader.rest() }

        public func encodeParameters(into writer: inout ByteWriter) { writer.bytes(attributeValue) }
    }

    /// ATT_READ_BLOB_REQ (§3.4.4.5): part of a long value, from `valueOffset`.
    public struct ReadBlobRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.readBlobRequest
        public var attributeHandle: ATTHandle
        public var valueOffset: UInt16

        public init(attributeHandle: ATTHandle, valueOffset: UInt16) {
            self.attributeHandle = attributeHandle
            self.valueOffset = valueOffset
        }

        public init(parameters reader: inout ByteReader) throws {
            attributeHandle = try ATTCoding.handle(&reader)
            valueOffset = try reader.u16()
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.u16(valueOffset)
        }
    }

    /// ATT_READ_BLOB_RSP (§3.4.4.6): at most ATT_MTU − 1 octets from the requested offset.
    public struct ReadBlobResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.readBlobResponse
        public var partAttributeValue: [UInt8]

        public init(partAttributeValue: [UInt8]) { self.partAttributeValue = partAttributeValue }

        public init(parameters reader: inout ByteReader) throws { partAttributeValue = reader.rest() }

        public func encodeParameters(into writer: inout ByteWriter) { writer.bytes(partAttributeValue) }
    }

    /// ATT_READ_MULTIPLE_REQ (§3.4.4.7): two or more handles whose values (all but the last of
    /// known, fixed length) come back concatenated.
    public struct ReadMultipleRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.readMultipleRequest
        /// Two or more.
        public var setOfHandles: [ATTHandle]

        public init(setOfHandles: [ATTHandle]) { self.setOfHandles = setOfHandles }

        public init(parameters reader: inout ByteReader) throws {
            setOfHandles = try ATTCoding.list(&reader, "Set Of Handles", elementSize: 2, minimumCount: 2) {
                try ATTCoding.handle(&$0)
            }
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            for handle in setOfHandles { ATTCoding.write(handle, &writer) }
        }
    }

    /// ATT_READ_MULTIPLE_RSP (§3.4.4.8): the values concatenated, cut at ATT_MTU − 1 octets.
    public struct ReadMultipleResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.readMultipleResponse
        public var setOfValues: [UInt8]

        public init(setOfValues: [UInt8]) { self.setOfValues = setOfValues }

        /// The values in request order, concatenated and cut to fit `mtu`.
        public init(values: [[UInt8]], mtu: Int) {
            setOfValues = Array(values.joined().prefix(ATTMTU.maximumReadValueLength(mtu: mtu)))
        }

        public init(parameters reader: inout ByteReader) throws { setOfValues = reader.rest() }

        public func encodeParameters(into writer: inout ByteWriter) { writer.bytes(setOfValues) }
    }

    /// ATT_READ_MULTIPLE_VARIABLE_REQ (§3.4.4.11): two or more handles whose values come back
    /// each with its length.
    public struct ReadMultipleVariableRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.readMultipleVariableRequest
        /// Two or more.
        public var setOfHandles: [ATTHandle]

        public init(setOfHandles: [ATTHandle]) { self.setOfHandles = setOfHandles }

        public init(parameters reader: inout ByteReader) throws {
            setOfHandles = try ATTCoding.list(&reader, "Set Of Handles", elementSize: 2, minimumCount: 2) {
                try ATTCoding.handle(&$0)
            }
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            for handle in setOfHandles { ATTCoding.write(handle, &writer) }
        }
    }

    /// ATT_READ_MULTIPLE_VARIABLE_RSP (§3.4.4.12): a Value Length + Value tuple per requested
    /// handle. When the list does not fit in ATT_MTU − 1 octets it is cut there, so the last
    /// value may be shorter than its Value Length says.
    public struct ReadMultipleVariableResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.readMultipleVariableResponse

        public struct LengthValue: Hashable, Sendable {
            /// The Value Length field: the attribute value's full length.
            public var valueLength: UInt16
            /// The value as carried; shorter than `valueLength` only for a cut last tuple.
            public var value: [UInt8]
            public var isTruncated: Bool { value.count < Int(valueLength) }

            /// A whole value (its length is `value.count`, at most 0xFFFF).
            public init(value: [UInt8]) {
                self.valueLength = UInt16(clamping: value.count)
                self.value = Array(value.prefix(Int(valueLength)))
            }

            public init(valueLength: UInt16, value: [UInt8]) {
                self.valueLength = valueLength
                self.value = Array(value.prefix(Int(valueLength)))
            }
        }

        /// At least one tuple; only the last may be truncated.
        public var lengthValueTupleList: [LengthValue]

        public init(lengthValueTupleList: [LengthValue]) { self.lengthValueTupleList = lengthValueTupleList }

        /// The values in request order, as many as fit in one response for `mtu`: the last one
        /// that starts is cut at the end of the PDU (its Value Length keeps the full length).
        public init(values: [[UInt8]], mtu: Int) {
            var room = ATTMTU.maximumReadValueLength(mtu: mtu)
            var tuples: [LengthValue] = []
            for value in values where room >= 2 {
                let whole = LengthValue(value: value)
                tuples.append(LengthValue(valueLength: whole.valueLength, value: Array(whole.value.prefix(room - 2))))
                room -= 2 + tuples[tuples.count - 1].value.count
            }
            lengthValueTupleList = tuples
        }

        public init(parameters reader: inout ByteReader) throws {
            guard !reader.isAtEnd else { throw DecodeError("\(reader.context): empty Length Value Tuple List") }
            var tuples: [LengthValue] = []
            while !reader.isAtEnd {
                let length = try reader.u16()
                // Only the last tuple can run past the end; it takes what is left.
                let value = try reader.bytes(min(Int(length), reader.remaining))
                tuples.append(LengthValue(valueLength: length, value: value))
            }
            lengthValueTupleList = tuples
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            for tuple in lengthValueTupleList {
                writer.u16(tuple.valueLength)
                writer.bytes(tuple.value)
            }
        }
    }
}
