import ByteCoding

/// HCI_Command_Complete (Vol 4 Part E §7.7.14). Return parameters stay raw here; the command's
/// `ReturnParameters` type decodes them.
public struct CommandComplete: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x0E
    public static let name = "Command Complete"
    public var numHCICommandPackets: UInt8
    /// 0x0000 (no command) is how a controller announces free command slots.
    public var opcode: HCIOpcode
    public var returnParameters: [UInt8]

    public init(numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode, returnParameters: [UInt8]) {
        self.numHCICommandPackets = numHCICommandPackets
        self.opcode = opcode
        self.returnParameters = returnParameters
    }

    public init<R: HCIReturnParameters>(numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode, returning r: R) {
        self.init(numHCICommandPackets: numHCICommandPackets, opcode: opcode, returnParameters: r.bytes)
    }

    /// The status (first return parameter), if any.
    public var status: HCIStatus? { returnParameters.first.map(HCIStatus.init(rawValue:)) }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(numHCICommandPackets)
        writer.u16(opcode.rawValue)
        writer.bytes(returnParameters)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        numHCICommandPackets = try reader.u8()
        opcode = HCIOpcode(rawValue: try reader.u16())
        returnParameters = reader.rest()
    }
}

/// HCI_Command_Status (Vol 4 Part E §7.7.15).
public struct CommandStatus: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x0F
    public static let name = "Command Status"
    public var status: HCIStatus
    public var numHCICommandPackets: UInt8
    public var opcode: HCIOpcode

    public init(status: HCIStatus, numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode) {
        self.status = status
        self.numHCICommandPackets = numHCICommandPackets
        self.opcode = opcode
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.u8(numHCICommandPackets)
        writer.u16(opcode.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        numHCICommandPackets = try reader.u8()
        opcode = HCIOpcode(rawValue: try reader.u16())
    }
}
