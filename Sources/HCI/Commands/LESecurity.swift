import ByteCoding

// LE Controller commands (Vol 4 Part E §7.8) for link encryption and the controller's AES and
// random number services. Keys and AES blocks are `[UInt8]` of 16 octets in wire order (least
// significant octet first), exactly as they cross HCI.

/// HCI_LE_Enable_Encryption (§7.8.24; "LE Start Encryption" before Core 5.3). Answered with
/// Command Status, then Encryption Change (or Encryption Key Refresh Complete).
public struct LEEnableEncryption: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0019)
    public static let name = "LE Enable Encryption"
    public static let completion = HCICommandCompletion.commandStatus

    public var connectionHandle: ConnectionHandle
    /// Rand of legacy pairing's distributed LTK; 0 for an LE Secure Connections key.
    public var randomNumber: UInt64
    /// EDIV of legacy pairing's distributed LTK; 0 for an LE Secure Connections key.
    public var encryptedDiversifier: UInt16
    /// 16 octets, wire order.
    public var longTermKey: [UInt8]

    public init(connectionHandle: ConnectionHandle, randomNumber: UInt64 = 0, encryptedDiversifier: UInt16 = 0,
                longTermKey: [UInt8]) {
        self.connectionHandle = connectionHandle
        self.randomNumber = randomNumber
        self.encryptedDiversifier = encryptedDiversifier
        self.longTermKey = longTermKey
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u64(randomNumber)
        writer.u16(encryptedDiversifier)
        CommandCoding.writeBlock16(longTermKey, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        randomNumber = try reader.u64()
        encryptedDiversifier = try reader.u16()
        longTermKey = try CommandCoding.block16(&reader)
    }
}

/// HCI_LE_Long_Term_Key_Request_Reply (§7.8.25): the peripheral's answer to LE Long Term Key
/// Request.
public struct LELongTermKeyRequestReply: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x001A)
    public static let name = "LE Long Term Key Request Reply"
    public typealias ReturnParameters = ConnectionHandleReturn

    public var connectionHandle: ConnectionHandle
    /// 16 octets, wire order.
    public var longTermKey: [UInt8]

    public init(connectionHandle: ConnectionHandle, longTermKey: [UInt8]) {
        self.connectionHandle = connectionHandle
        self.longTermKey = longTermKey
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        CommandCoding.writeBlock16(longTermKey, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        longTermKey = try CommandCoding.block16(&reader)
    }
}

/// HCI_LE_Long_Term_Key_Request_Negative_Reply (§7.8.26): the host has no key for the peer.
public struct LELongTermKeyRequestNegativeReply: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x001B)
    public static let name = "LE Long Term Key Request Negative Reply"
    public typealias ReturnParameters = ConnectionHandleReturn

    public var connectionHandle: ConnectionHandle

    public init(connectionHandle: ConnectionHandle) { self.connectionHandle = connectionHandle }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
    }
}

/// HCI_LE_Rand (§7.8.23): 64 random bits from the controller.
public struct LERand: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0018)
    public static let name = "LE Rand"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        public var randomNumber: UInt64

        public init(status: HCIStatus = .success, randomNumber: UInt64) {
            self.status = status
            self.randomNumber = randomNumber
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            randomNumber = try reader.u64()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u64(randomNumber)
        }
    }
}

/// HCI_LE_Encrypt (§7.8.22): AES-128 of one block with the given key.
public struct LEEncrypt: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0017)
    public static let name = "LE Encrypt"

    /// 16 octets, wire order (least significant octet of the 128-bit key first).
    public var key: [UInt8]
    /// 16 octets, wire order.
    public var plaintextData: [UInt8]

    public init(key: [UInt8], plaintextData: [UInt8]) {
        self.key = key
        self.plaintextData = plaintextData
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeBlock16(key, &writer)
        CommandCoding.writeBlock16(plaintextData, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        key = try CommandCoding.block16(&reader)
        plaintextData = try CommandCoding.block16(&reader)
    }

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// 16 octets, wire order.
        public var encryptedData: [UInt8]

        public init(status: HCIStatus = .success, encryptedData: [UInt8]) {
            self.status = status
            self.encryptedData = encryptedData
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            encryptedData = try CommandCoding.block16(&reader)
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            CommandCoding.writeBlock16(encryptedData, &writer)
        }
    }
}
