import AssignedNumbers
import ByteCoding

extension ATTPDU {
    /// ATT_FIND_INFORMATION_REQ (§3.4.3.1): handles and types of the attributes in a range.
    public struct FindInformationRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.findInformationRequest
        public var startingHandle: ATTHandle
        public var endingHandle: ATTHandle

        public init(startingHandle: ATTHandle, endingHandle: ATTHandle) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
        }

        public init(parameters reader: inout ByteReader) throws {
            startingHandle = try ATTCoding.handle(&reader)
            endingHandle = try ATTCoding.handle(&reader)
            try reader.expectEnd()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(startingHandle, &writer)
            ATTCoding.write(endingHandle, &writer)
        }
    }

    /// ATT_FIND_INFORMATION_RSP (§3.4.3.2): handle–type pairs, all in one UUID format (Format
    /// 0x01: 16-bit UUIDs, 0x02: 128-bit). Never empty.
    public struct FindInformationResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.findInformationResponse

        public struct Entry: Hashable, Sendable {
            public var handle: ATTHandle
            public var type: BluetoothUUID
            public init(handle: ATTHandle, type: BluetoothUUID) {
                self.handle = handle
                self.type = type
            }
        }

        public private(set) var format: ATTUUIDFormat
        public private(set) var entries: [Entry]

        /// Nil when `entries` is empty or, for `.uuid16`, a type has no 16-bit form.
        public init?(format: ATTUUIDFormat, entries: [Entry]) {
            guard !entries.isEmpty,
                  format == .uuid128 || entries.allSatisfy({ $0.type.uuid16 != nil }) else { return nil }
            self.format = format
            self.entries = entries
        }

        /// 16-bit format when every type has a 16-bit form, else 128-bit. Nil when empty.
        public init?(entries: [Entry]) {
            let all16 = entries.allSatisfy { $0.type.uuid16 != nil }
            self.init(format: all16 ? .uuid16 : .uuid128, entries: entries)
        }

        public init(parameters reader: inout ByteReader) throws {
            let raw = try reader.u8()
            guard let format = ATTUUIDFormat(rawValue: raw) else {
                throw DecodeError("\(reader.context): invalid Format 0x\(String(raw, radix: 16))")
            }
            self.format = format
            entries = try ATTCoding.list(&reader, "Information Data", elementSize: 2 + format.byteCount) {
                Entry(handle: try ATTCoding.handle(&$0), type: try $0.uuid(length: format.byteCount))
            }
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            writer.u8(format.rawValue)
            for entry in entries {
                ATTCoding.write(entry.handle, &writer)
                ATTCoding.write(entry.type, format, &writer)
            }
        }
    }

    /// ATT_FIND_BY_TYPE_VALUE_REQ (§3.4.3.3): attributes of a 16-bit type whose value equals
    /// `attributeValue` (GATT uses it to discover primary services by UUID).
    public struct FindByTypeValueRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.findByTypeValueRequest
        public var startingHandle: ATTHandle
        public var endingHandle: ATTHandle
        /// Always a 16-bit UUID on the wire.
        public private(set) var attributeType: BluetoothUUID
        public var attributeValue: [UInt8]

        /// `attributeType` must have a 16-bit form (the PDU has no room for any other).
        public init(startingHandle: ATTHandle, endingHandle: ATTHandle, attributeType: BluetoothUUID,
                    attributeValue: [UInt8]) {
            precondition(attributeType.uuid16 != nil, "Find By Type Value Request carries only 16-bit types")
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
            self.attributeType = attributeType
            self.attributeValue = attributeValue
        }

        public init(parameters reader: inout ByteReader) throws {
            startingHandle = try ATTCoding.handle(&reader)
            endingHandle = try ATTCoding.handle(&reader)
            attributeType = try reader.uuid(length: 2)
            attributeValue = reader.rest()
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(startingHandle, &writer)
            ATTCoding.write(endingHandle, &writer)
            ATTCoding.write(attributeType, .uuid16, &writer)
            writer.bytes(attributeValue)
        }
    }

    /// ATT_FIND_BY_TYPE_VALUE_RSP (§3.4.3.4): for each match, its handle and the end of its
    /// group (the handle itself for non-grouping attributes). Never empty.
    public struct FindByTypeValueResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.findByTypeValueResponse

        public struct HandlesInformation: Hashable, Sendable {
            public var foundAttributeHandle: ATTHandle
            public var groupEndHandle: ATTHandle
            public init(foundAttributeHandle: ATTHandle, groupEndHandle: ATTHandle) {
                self.foundAttributeHandle = foundAttributeHandle
                self.groupEndHandle = groupEndHandle
            }
        }

        /// At least one element; `packing(_:mtu:)` builds a list that fits.
        public var handlesInformation: [HandlesInformation]

        public init(handlesInformation: [HandlesInformation]) { self.handlesInformation = handlesInformation }

        public init(parameters reader: inout ByteReader) throws {
            handlesInformation = try ATTCoding.list(&reader, "Handles Information List", elementSize: 4) {
                HandlesInformation(foundAttributeHandle: try ATTCoding.handle(&$0), groupEndHandle: try ATTCoding.handle(&$0))
            }
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            for info in handlesInformation {
                ATTCoding.write(info.foundAttributeHandle, &writer)
                ATTCoding.write(info.groupEndHandle, &writer)
            }
        }
    }

    /// ATT_READ_BY_TYPE_REQ (§3.4.4.1): values of the attributes of one type in a range.
    public struct ReadByTypeRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.readByTypeRequest
        public var startingHandle: ATTHandle
        public var endingHandle: ATTHandle
        public private(set) var attributeType: BluetoothUUID
        /// How the type is carried: as received, or the shortest form by default.
        public private(set) var typeFormat: ATTUUIDFormat

        /// `typeFormat` defaults to the shortest form; `.uuid16` for a UUID without a 16-bit
        /// form becomes `.uuid128`.
        public init(startingHandle: ATTHandle, endingHandle: ATTHandle, attributeType: BluetoothUUID,
                    typeFormat: ATTUUIDFormat? = nil) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
            self.attributeType = attributeType
            self.typeFormat = (typeFormat ?? .shortest(for: attributeType)).usable(for: attributeType)
        }

        public init(parameters reader: inout ByteReader) throws {
            startingHandle = try ATTCoding.handle(&reader)
            endingHandle = try ATTCoding.handle(&reader)
            (attributeType, typeFormat) = try ATTCoding.trailingUUID(&reader, "Attribute Type")
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(startingHandle, &writer)
            ATTCoding.write(endingHandle, &writer)
            ATTCoding.write(attributeType, typeFormat, &writer)
        }
    }

    /// ATT_READ_BY_TYPE_RSP (§3.4.4.2): handle–value pairs whose values all have one length
    /// (the Length octet is that length + 2). Never empty.
    public struct ReadByTypeResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.readByTypeResponse

        public struct AttributeData: Hashable, Sendable {
            public var handle: ATTHandle
            public var value: [UInt8]
            public init(handle: ATTHandle, value: [UInt8]) {
                self.handle = handle
                self.value = value
            }
        }

        /// The largest value the Length octet can describe.
        public static let maximumValueLength = 253

        public private(set) var attributeData: [AttributeData]

        /// Nil when empty, when the values differ in length, or when they exceed 253 octets.
        public init?(attributeData: [AttributeData]) {
            guard let length = attributeData.first?.value.count, length <= Self.maximumValueLength,
                  attributeData.allSatisfy({ $0.value.count == length }) else { return nil }
            self.attributeData = attributeData
        }

        public init(parameters reader: inout ByteReader) throws {
            let length = Int(try reader.u8())
            guard length >= 2 else { throw DecodeError("\(reader.context): Length \(length) is less than a handle") }
            attributeData = try ATTCoding.list(&reader, "Attribute Data List", elementSize: length) {
                AttributeData(handle: try ATTCoding.handle(&$0), value: try $0.bytes(length - 2))
            }
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            writer.u8(UInt8(2 + (attributeData.first?.value.count ?? 0)))
            for data in attributeData {
                ATTCoding.write(data.handle, &writer)
                writer.bytes(data.value)
            }
        }
    }

    /// ATT_READ_BY_GROUP_TYPE_REQ (§3.4.4.9): grouping attributes (services) of one type.
    public struct ReadByGroupTypeRequest: ATTPDUParameters {
        public static let opcode = ATTOpcode.readByGroupTypeRequest
        public var startingHandle: ATTHandle
        public var endingHandle: ATTHandle
        public private(set) var attributeGroupType: BluetoothUUID
        /// How the type is carried: as received, or the shortest form by default.
        public private(set) var typeFormat: ATTUUIDFormat

        /// `typeFormat` defaults to the shortest form; `.uuid16` for a UUID without a 16-bit
        /// form becomes `.uuid128`.
        public init(startingHandle: ATTHandle, endingHandle: ATTHandle, attributeGroupType: BluetoothUUID,
                    typeFormat: ATTUUIDFormat? = nil) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
            self.attributeGroupType = attributeGroupType
            self.typeFormat = (typeFormat ?? .shortest(for: attributeGroupType)).usable(for: attributeGroupType)
        }

        public init(parameters reader: inout ByteReader) throws {
            startingHandle = try ATTCoding.handle(&reader)
            endingHandle = try ATTCoding.handle(&reader)
            (attributeGroupType, typeFormat) = try ATTCoding.trailingUUID(&reader, "Attribute Group Type")
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            ATTCoding.write(startingHandle, &writer)
            ATTCoding.write(endingHandle, &writer)
            ATTCoding.write(attributeGroupType, typeFormat, &writer)
        }
    }

    /// ATT_READ_BY_GROUP_TYPE_RSP (§3.4.4.10): handle, end group handle and value of each group,
    /// all values of one length (the Length octet is that length + 4). Never empty.
    public struct ReadByGroupTypeResponse: ATTPDUParameters {
        public static let opcode = ATTOpcode.readByGroupTypeResponse

        public struct AttributeData: Hashable, Sendable {
            public var handle: ATTHandle
            public var endGroupHandle: ATTHandle
            public var value: [UInt8]
            public init(handle: ATTHandle, endGroupHandle: ATTHandle, value: [UInt8]) {
                self.handle = handle
                self.endGroupHandle = endGroupHandle
                self.value = value
            }
        }

        /// The largest value the Length octet can describe.
        public static let maximumValueLength = 251

        public private(set) var attributeData: [AttributeData]

        /// Nil when empty, when the values differ in length, or when they exceed 251 octets.
        public init?(attributeData: [AttributeData]) {
            guard let length = attributeData.first?.value.count, length <= Self.maximumValueLength,
                  attributeData.allSatisfy({ $0.value.count == length }) else { return nil }
            self.attributeData = attributeData
        }

        public init(parameters reader: inout ByteReader) throws {
            let length = Int(try reader.u8())
            guard length >= 4 else { throw DecodeError("\(reader.context): Length \(length) is less than two handles") }
            attributeData = try ATTCoding.list(&reader, "Attribute Data List", elementSize: length) {
                AttributeData(handle: try ATTCoding.handle(&$0), endGroupHandle: try ATTCoding.handle(&$0),
                              value: try $0.bytes(length - 4))
            }
        }

        public func encodeParameters(into writer: inout ByteWriter) {
            writer.u8(UInt8(4 + (attributeData.first?.value.count ?? 0)))
            for data in attributeData {
                ATTCoding.write(data.handle, &writer)
                ATTCoding.write(data.endGroupHandle, &writer)
                writer.bytes(data.value)
            }
        }
    }
}
