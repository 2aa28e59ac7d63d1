import ByteCoding

/// Every event the host understands, decoded; anything else stays raw in `.unknown`.
/// Cases are in event-code order.
public enum HCIEvent: Sendable, Hashable {
    case disconnectionComplete(DisconnectionComplete)
    case encryptionChange(EncryptionChange)
    case readRemoteVersionInformationComplete(ReadRemoteVersionInformationComplete)
    case commandComplete(CommandComplete)
    case commandStatus(CommandStatus)
    case hardwareError(HardwareError)
    case numberOfCompletedPackets(NumberOfCompletedPackets)
    case dataBufferOverflow(DataBufferOverflow)
    case encryptionKeyRefreshComplete(EncryptionKeyRefreshComplete)
    case encryptionChangeV2(EncryptionChangeV2)
    case le(LEMetaEvent)
    /// An event code the host does not interpret.
    case unknown(HCIEventPacket)

    /// Decodes a packet. Unknown codes give `.unknown`; a known event whose parameters are
    /// malformed throws `DecodeError`.
    public init(decoding packet: HCIEventPacket) throws {
        switch packet.code {
        case DisconnectionComplete.eventCode:
            self = .disconnectionComplete(try DisconnectionComplete(packet: packet))
        case EncryptionChange.eventCode: self = .encryptionChange(try EncryptionChange(packet: packet))
        case ReadRemoteVersionInformationComplete.eventCode:
            self = .readRemoteVersionInformationComplete(try ReadRemoteVersionInformationComplete(packet: packet))
        case CommandComplete.eventCode: self = .commandComplete(try CommandComplete(packet: packet))
        case CommandStatus.eventCode: self = .commandStatus(try CommandStatus(packet: packet))
        case HardwareError.eventCode: self = .hardwareError(try HardwareError(packet: packet))
        case NumberOfCompletedPackets.eventCode:
            self = .numberOfCompletedPackets(try NumberOfCompletedPackets(packet: packet))
        case DataBufferOverflow.eventCode: self = .dataBufferOverflow(try DataBufferOverflow(packet: packet))
        case EncryptionKeyRefreshComplete.eventCode:
            self = .encryptionKeyRefreshComplete(try EncryptionKeyRefreshComplete(packet: packet))
        case EncryptionChangeV2.eventCode: self = .encryptionChangeV2(try EncryptionChangeV2(packet: packet))
        case HCIEventCode.leMeta: self = .le(try LEMetaEvent(decoding: packet))
        default: self = .unknown(packet)
        }
    }

    public var packet: HCIEventPacket {
        switch self {
        case .disconnectionComplete(let e): e.packet
        case .encryptionChange(let e): e.packet
        case .readRemoteVersionInformationComplete(let e): e.packet
        case .commandComplete(let e): e.packet
        case .commandStatus(let e): e.packet
        case .hardwareError(let e): e.packet
        case .numberOfCompletedPackets(let e): e.packet
        case .dataBufferOverflow(let e): e.packet
        case .encryptionKeyRefreshComplete(let e): e.packet
        case .encryptionChangeV2(let e): e.packet
        case .le(let e): e.packet
        case .unknown(let p): p
        }
    }

    /// The spec's name of the event, for logs ("Disconnection Complete", "LE Advertising Report").
    public var name: String {
        switch self {
        case .disconnectionComplete: DisconnectionComplete.name
        case .encryptionChange: EncryptionChange.name
        case .readRemoteVersionInformationComplete: ReadRemoteVersionInformationComplete.name
        case .commandComplete: CommandComplete.name
        case .commandStatus: CommandStatus.name
        case .hardwareError: HardwareError.name
        case .numberOfCompletedPackets: NumberOfCompletedPackets.name
        case .dataBufferOverflow: DataBufferOverflow.name
        case .encryptionKeyRefreshComplete: EncryptionKeyRefreshComplete.name
        case .encryptionChangeV2: EncryptionChangeV2.name
        case .le(let e): e.name
        case .unknown(let p): "Unknown event 0x" + p.code.hex2
        }
    }
}

/// LE Meta subevents (event code 0x3E), in subevent-code order.
public enum LEMetaEvent: Sendable, Hashable {
    case connectionComplete(LEConnectionComplete)
    case advertisingReport(LEAdvertisingReport)
    case connectionUpdateComplete(LEConnectionUpdateComplete)
    case readRemoteFeaturesComplete(LEReadRemoteFeaturesComplete)
    case longTermKeyRequest(LELongTermKeyRequest)
    case remoteConnectionParameterRequest(LERemoteConnectionParameterRequest)
    case dataLengthChange(LEDataLengthChange)
    case enhancedConnectionComplete(LEEnhancedConnectionComplete)
    case directedAdvertisingReport(LEDirectedAdvertisingReport)
    case phyUpdateComplete(LEPHYUpdateComplete)
    case extendedAdvertisingReport(LEExtendedAdvertisingReport)
    case scanTimeout(LEScanTimeout)
    case advertisingSetTerminated(LEAdvertisingSetTerminated)
    case enhancedConnectionCompleteV2(LEEnhancedConnectionCompleteV2)
    /// A subevent the host does not interpret.
    case unknown(subevent: UInt8, parameters: [UInt8])

    /// Decodes an LE Meta event; an empty one (no subevent code) or a known subevent with
    /// malformed parameters throws `DecodeError`.
    public init(decoding packet: HCIEventPacket) throws {
        guard let subevent = packet.parameters.first else { throw DecodeError("LE Meta event: no subevent code") }
        switch subevent {
        case LEConnectionComplete.subeventCode:
            self = .connectionComplete(try LEConnectionComplete(packet: packet))
        case LEAdvertisingReport.subeventCode:
            self = .advertisingReport(try LEAdvertisingReport(packet: packet))
        case LEConnectionUpdateComplete.subeventCode:
            self = .connectionUpdateComplete(try LEConnectionUpdateComplete(packet: packet))
        case LEReadRemoteFeaturesComplete.subeventCode:
            self = .readRemoteFeaturesComplete(try LEReadRemoteFeaturesComplete(packet: packet))
        case LELongTermKeyRequest.subeventCode:
            self = .longTermKeyRequest(try LELongTermKeyRequest(packet: packet))
        case LERemoteConnectionParameterRequest.subeventCode:
            self = .remoteConnectionParameterRequest(try LERemoteConnectionParameterRequest(packet: packet))
        case LEDataLengthChange.subeventCode: self = .dataLengthChange(try LEDataLengthChange(packet: packet))
        case LEEnhancedConnectionComplete.subeventCode:
            self = .enhancedConnectionComplete(try LEEnhancedConnectionComplete(packet: packet))
        case LEDirectedAdvertisingReport.subeventCode:
            self = .directedAdvertisingReport(try LEDirectedAdvertisingReport(packet: packet))
        case LEPHYUpdateComplete.subeventCode:
            self = .phyUpdateComplete(try LEPHYUpdateComplete(packet: packet))
        case LEExtendedAdvertisingReport.subeventCode:
            self = .extendedAdvertisingReport(try LEExtendedAdvertisingReport(packet: packet))
        case LEScanTimeout.subeventCode: self = .scanTimeout(try LEScanTimeout(packet: packet))
        case LEAdvertisingSetTerminated.subeventCode:
            self = .advertisingSetTerminated(try LEAdvertisingSetTerminated(packet: packet))
        case LEEnhancedConnectionCompleteV2.subeventCode:
            self = .enhancedConnectionCompleteV2(try LEEnhancedConnectionCompleteV2(packet: packet))
        default: self = .unknown(subevent: subevent, parameters: Array(packet.parameters.dropFirst()))
        }
    }

    public var packet: HCIEventPacket {
        switch self {
        case .connectionComplete(let e): e.packet
        case .advertisingReport(let e): e.packet
        case .connectionUpdateComplete(let e): e.packet
        case .readRemoteFeaturesComplete(let e): e.packet
        case .longTermKeyRequest(let e): e.packet
        case .remoteConnectionParameterRequest(let e): e.packet
        case .dataLengthChange(let e): e.packet
        case .enhancedConnectionComplete(let e): e.packet
        case .directedAdvertisingReport(let e): e.packet
        case .phyUpdateComplete(let e): e.packet
        case .extendedAdvertisingReport(let e): e.packet
        case .scanTimeout(let e): e.packet
        case .advertisingSetTerminated(let e): e.packet
        case .enhancedConnectionCompleteV2(let e): e.packet
        case .unknown(let subevent, let parameters):
            HCIEventPacket(code: HCIEventCode.leMeta, parameters: [subevent] + parameters)
        }
    }

    /// The spec's name of the subevent, for logs.
    public var name: String {
        switch self {
        case .connectionComplete: LEConnectionComplete.name
        case .advertisingReport: LEAdvertisingReport.name
        case .connectionUpdateComplete: LEConnectionUpdateComplete.name
        case .readRemoteFeaturesComplete: LEReadRemoteFeaturesComplete.name
        case .longTermKeyRequest: LELongTermKeyRequest.name
        case .remoteConnectionParameterRequest: LERemoteConnectionParameterRequest.name
        case .dataLengthChange: LEDataLengthChange.name
        case .enhancedConnectionComplete: LEEnhancedConnectionComplete.name
        case .directedAdvertisingReport: LEDirectedAdvertisingReport.name
        case .phyUpdateComplete: LEPHYUpdateComplete.name
        case .extendedAdvertisingReport: LEExtendedAdvertisingReport.name
        case .scanTimeout: LEScanTimeout.name
        case .advertisingSetTerminated: LEAdvertisingSetTerminated.name
        case .enhancedConnectionCompleteV2: LEEnhancedConnectionCompleteV2.name
        case .unknown(let subevent, _): "Unknown LE subevent 0x" + subevent.hex2
        }
    }
}

extension UInt8 {
    /// Two lower-case hex digits, for names of unknown codes.
    fileprivate var hex2: String { (self < 0x10 ? "0" : "") + String(self, radix: 16) }
}
