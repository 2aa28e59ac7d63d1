import ByteCoding

/// Every event the host understands, decoded; anything else stays raw in `.unknown`.
public enum HCIEvent: Sendable {
    case commandComplete(CommandComplete)
    case commandStatus(CommandStatus)
    case le(LEMetaEvent)
    /// An event code (or a malformed event, see `init(decoding:)`) the host does not interpret.
    case unknown(HCIEventPacket)

    /// Decodes a packet. Unknown codes give `.unknown`; a known event whose parameters are
    /// malformed throws `DecodeError`.
    public init(decoding packet: HCIEventPacket) throws {
        switch packet.code {
        case CommandComplete.eventCode: self = .commandComplete(try CommandComplete(packet: packet))
        case CommandStatus.eventCode: self = .commandStatus(try CommandStatus(packet: packet))
        case HCIEventCode.leMeta: self = .le(try LEMetaEvent(decoding: packet))
        default: self = .unknown(packet)
        }
    }

    public var packet: HCIEventPacket {
        switch self {
        case .commandComplete(let e): e.packet
        case .commandStatus(let e): e.packet
        case .le(let e): e.packet
        case .unknown(let p): p
        }
    }
}

/// LE Meta subevents (event code 0x3E).
public enum LEMetaEvent: Sendable {
    case unknown(subevent: UInt8, parameters: [UInt8])

    public init(decoding packet: HCIEventPacket) throws {
        guard let subevent = packet.parameters.first else { throw DecodeError("LE Meta event: no subevent code") }
        switch subevent {
        default: self = .unknown(subevent: subevent, parameters: Array(packet.parameters.dropFirst()))
        }
    }

    public var packet: HCIEventPacket {
        switch self {
        case .unknown(let subevent, let parameters):
            HCIEventPacket(code: HCIEventCode.leMeta, parameters: [subevent] + parameters)
        }
    }
}
