import ByteCoding

extension ATTPDU {
    /// ATT_HANDLE_VALUE_NTF (§3.4.7.1): at most ATT_MTU − 3 octets of value, unacknowledged.
    public struct HandleValueNotification: ATTPDUParameters {
        public static let opcode = ATTOpcode.handleValueNotification
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

        /// Decodes a whole PDU (what the protocol's `init(decoding:)` does), the value being the
        /// PDU's own buffer with the three header octets taken off in place: no allocation when
        /// the caller hands over the only reference, as the bearer's receive path does (the
        /// hottest PDU of all).
        public init(decoding pdu: consuming [UInt8]) throws {
            // Read in place, as `BasicFrame` reads its header (a reader would hold a reference).
            let name = Self.opcode.name
            guard pdu.count >= 1 else { throw DecodeError.truncated(name, needed: 1, available: 0) }
            guard ATTOpcode(pdu[0]) == Self.opcode else { throw DecodeError("\(name): unexpected opcode \(ATTOpcode(pdu[0]).name)") }
            guard pdu.count >= 3 else { throw DecodeError.truncated(name, needed: 2, available: pdu.count - 1) }
            attributeHandle = ATTHandle(UInt16(pdu[1]) | UInt16(pdu[2]) << 8)
            pdu.removeFirst(3)
            attributeValue = pdu
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(attributeHandle, &writer)
            writer.bytes(attributeValue)
        }
    }

    /// ATT_HANDLE_VALUE_IND (§3.4.7.2): like a notification, but confirmed by the client.
    public struct HandleValueIndication: ATTPDUParameters {
        public static let opcode = ATTOpcode.handleValueIndication
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

    /// ATT_HANDLE_VALUE_CFM (§3.4.7.3): no parameters.
    public struct HandleValueConfirmation: ATTPDUParameters {
        public static let opcode = ATTOpcode.handleValueConfirmation
        public init() {}
        public init(parameters reader: inout ByteReader) throws { try reader.expectEnd() }
        public func encodeParameters(into writer: inout ByteWriter) {}
    }

    /// ATT_MULTIPLE_HANDLE_VALUE_NTF (§3.4.7.4): two or more Handle + Length + Value tuples,
    /// each value whole (the list is 8 to ATT_MTU − 1 octets).
    public struct MultipleHandleValueNotification: ATTPDUParameters {
        public static let opcode = ATTOpcode.multipleHandleValueNotification

        public struct HandleValue: Hashable, Sendable {
            public var attributeHandle: ATTHandle
            /// Its length goes on the wire as the tuple's Length field (values past 0xFFFF
            /// octets are cut).
            public var attributeValue: [UInt8]
            public init(attributeHandle: ATTHandle, attributeValue: [UInt8]) {
                self.attributeHandle = attributeHandle
                self.attributeValue = attributeValue
            }
        }

        /// Two or more.
        public var handleLengthValueTupleList: [HandleValue]

        public init(handleLengthValueTupleList: [HandleValue]) {
            self.handleLengthValueTupleList = handleLengthValueTupleList
        }

        /// How many octets the PDU takes, to check it against ATT_MTU before sending.
        public var encodedLength: Int {
            1 + handleLengthValueTupleList.reduce(0) { $0 + 4 + min($1.attributeValue.count, 0xFFFF) }
        }

        public init(parameters reader: inout ByteReader) throws {
            var tuples: [HandleValue] = []
            while !reader.isAtEnd {
                let handle = try ATTCoding.handle(&reader)
                let length = Int(try reader.u16())
                tuples.append(HandleValue(attributeHandle: handle, attributeValue: try reader.bytes(length)))
            }
            guard tuples.count >= 2 else {
                throw DecodeError("\(reader.context): needs at least two Handle Length Value tuples, has \(tuples.count)")
            }
            handleLengthValueTupleList = tuples
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            for tuple in handleLengthValueTupleList {
                let value = tuple.attributeValue.prefix(0xFFFF)
                ATTCoding.write(tuple.attributeHandle, &writer)
                writer.u16(UInt16(value.count))
                writer.bytes(value)
            }
        }
    }
}
