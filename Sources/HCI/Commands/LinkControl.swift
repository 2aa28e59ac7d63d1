import ByteCoding

/// HCI_Disconnect (Vol 4 Part E §7.1.6). Answered with Command Status, then Disconnection
/// Complete.
public struct Disconnect: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.linkControl, ocf: 0x0006)
    public static let name = "Disconnect"
    public static let completion = HCICommandCompletion.commandStatus

    public var connectionHandle: ConnectionHandle
    /// Sent to the peer; the spec allows Authentication Failure, Remote User Terminated
    /// Connection (the usual one), Remote Device Terminated (Low Resources / Power Off),
    /// Unsupported Remote Feature, Pairing with Unit Key Not Supported and Unacceptable
    /// Connection Parameters. Validating the choice is the controller's job.
    public var reason: HCIStatus

    public init(connectionHandle: ConnectionHandle, reason: HCIStatus = .remoteUserTerminatedConnection) {
        self.connectionHandle = connectionHandle
        self.reason = reason
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u8(reason.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        reason = HCIStatus(try reader.u8())
    }
}

/// HCI_Read_Remote_Version_Information (Vol 4 Part E §7.1.23). Answered with Command Status,
/// then Read Remote Version Information Complete.
public struct ReadRemoteVersionInformation: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.linkControl, ocf: 0x001D)
    public static let name = "Read Remote Version Information"
    public static let completion = HCICommandCompletion.commandStatus

    public var connectionHandle: ConnectionHandle

    public init(connectionHandle: ConnectionHandle) { self.connectionHandle = connectionHandle }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
    }
}
