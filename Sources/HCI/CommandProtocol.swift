import ByteCoding

/// How the controller answers a command (Vol 4 Part E §4.4).
public enum HCICommandCompletion: Sendable {
    /// Command Complete carrying return parameters.
    case commandComplete
    /// Command Status, then (on success) a later event with the outcome.
    case commandStatus
}

/// The return parameters of a command, carried in Command Complete. The first is always the
/// status. A failed command may return only the status byte (real controllers do): decoders are
/// only called for a successful status.
public protocol HCIReturnParameters: Sendable {
    var status: HCIStatus { get }
    init(decoding reader: inout ByteReader) throws
    func encode(into writer: inout ByteWriter)
}

/// Return parameters that are only a status.
public struct StatusReturn: HCIReturnParameters, Hashable {
    public var status: HCIStatus
    public init(status: HCIStatus = .success) { self.status = status }
    public init(decoding reader: inout ByteReader) throws { status = HCIStatus(try reader.u8()) }
    public func encode(into writer: inout ByteWriter) { writer.u8(status.rawValue) }
}

/// A typed HCI command: one encoder and one decoder for its parameters.
public protocol HCICommand: Sendable {
    static var opcode: HCIOpcode { get }
    /// The spec's name, e.g. "LE Set Advertising Parameters".
    static var name: String { get }
    static var completion: HCICommandCompletion { get }
    associatedtype ReturnParameters: HCIReturnParameters = StatusReturn

    func encodeParameters(into writer: inout ByteWriter)
    init(decodingParameters reader: inout ByteReader) throws
}

extension HCICommand {
    public static var completion: HCICommandCompletion { .commandComplete }

    public var packet: HCICommandPacket {
        var writer = ByteWriter(capacity: 32)
        encodeParameters(into: &writer)
        return HCICommandPacket(opcode: Self.opcode, parameters: writer.bytes)
    }

    /// Decodes the command from a packet; the parameters must be exactly as long as defined.
    public init(packet: HCICommandPacket) throws {
        guard packet.opcode == Self.opcode else {
            throw DecodeError("\(Self.name): wrong opcode \(packet.opcode)")
        }
        var reader = ByteReader(packet.parameters, context: Self.name)
        try self.init(decodingParameters: &reader)
        try reader.expectEnd()
    }
}

/// Commands without parameters share this.
public protocol HCIParameterlessCommand: HCICommand { init() }
extension HCIParameterlessCommand {
    public func encodeParameters(into writer: inout ByteWriter) {}
    public init(decodingParameters reader: inout ByteReader) throws { self.init() }
}

extension HCIReturnParameters {
    /// Encoded return parameters, as Command Complete carries them.
    public var bytes: [UInt8] {
        var writer = ByteWriter(capacity: 16)
        encode(into: &writer)
        return writer.bytes
    }

    /// Decodes return parameters, requiring them to be exactly as long as defined. (Trailing
    /// bytes are tolerated: later spec versions may append parameters.)
    public init(returnBytes: [UInt8], context: String) throws {
        var reader = ByteReader(returnBytes, context: context)
        try self.init(decoding: &reader)
    }
}
