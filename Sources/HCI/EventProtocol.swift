import ByteCoding

/// A typed HCI event (anything but LE Meta subevents): one encoder and one decoder.
public protocol HCIEventParameters: Sendable {
    static var eventCode: UInt8 { get }
    /// The spec's name, e.g. "Disconnection Complete".
    static var name: String { get }
    func encodeParameters(into writer: inout ByteWriter)
    init(decodingParameters reader: inout ByteReader) throws
}

/// A typed LE Meta event subevent (event code 0x3E).
public protocol LEMetaEventParameters: Sendable {
    static var subeventCode: UInt8 { get }
    static var name: String { get }
    /// Parameters after the subevent code.
    func encodeParameters(into writer: inout ByteWriter)
    init(decodingParameters reader: inout ByteReader) throws
    /// How many bytes `encodeParameters` writes, or about (the writer is made that size:
    /// an event that outgrows it is copied to a larger buffer).
    var encodedParametersSize: Int { get }
}

extension LEMetaEventParameters {
    public var encodedParametersSize: Int { 31 }
}

public enum HCIEventCode {
    public static let leMeta: UInt8 = 0x3E
}

extension HCIEventParameters {
    public var packet: HCIEventPacket {
        var writer = ByteWriter(capacity: 32)
        encodeParameters(into: &writer)
        return HCIEventPacket(code: Self.eventCode, parameters: writer.bytes)
    }

    public init(packet: HCIEventPacket) throws {
        guard packet.code == Self.eventCode else { throw DecodeError("\(Self.name): wrong event code") }
        var reader = ByteReader(packet.parameters, context: Self.name)
        try self.init(decodingParameters: &reader)
    }
}

extension LEMetaEventParameters {
    public var packet: HCIEventPacket {
        var writer = ByteWriter(capacity: 1 + encodedParametersSize)
        writer.u8(Self.subeventCode)
        encodeParameters(into: &writer)
        return HCIEventPacket(code: HCIEventCode.leMeta, parameters: writer.bytes)
    }

    public init(packet: HCIEventPacket) throws {
        guard packet.code == HCIEventCode.leMeta, packet.parameters.first == Self.subeventCode else {
            throw DecodeError("\(Self.name): wrong event or subevent code")
        }
        var reader = ByteReader(packet.parameters[1...], context: Self.name)
        try self.init(decodingParameters: &reader)
    }
}
