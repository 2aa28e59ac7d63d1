import ByteCoding

/// An LE signalling command (Core spec Vol 3 Part A §4): code, identifier and typed data.
/// On the LE signalling channel each C-frame carries exactly one command.
public struct SignalingPacket: Hashable, Sendable {
    public var identifier: UInt8
    public var command: SignalingCommand

    public init(identifier: UInt8, command: SignalingCommand) {
        self.identifier = identifier
        self.command = command
    }

    public func encode() -> [UInt8] {
        let data = command.encodeData()
        var w = ByteWriter(capacity: data.count + 4)
        w.u8(command.code)
        w.u8(identifier)
        w.u16(UInt16(data.count))
        w.bytes(data)
        return w.bytes
    }

    /// Decodes a C-frame payload. A malformed known command throws `SignalingDecodeError`
    /// carrying the identifier, so the receiver can answer Command Reject.
    public init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, context: "L2CAP signalling")
        let code = try r.u8()
        identifier = try r.u8()
        let length = Int(try r.u16())
        guard r.remaining == length else {
            throw SignalingDecodeError(identifier: identifier, reason: DecodeError("L2CAP signalling: length \(length) but \(r.remaining) bytes"))
        }
        do {
            command = try SignalingCommand(code: code, data: try r.slice(length))
        } catch let error as DecodeError {
            throw SignalingDecodeError(identifier: identifier, reason: error)
        }
    }
}

public struct SignalingDecodeError: Error, Sendable, CustomStringConvertible {
    public var identifier: UInt8
    public var reason: DecodeError
    public var description: String { "\(reason)" }
}

/// Reasons in Command Reject (Vol 3 Part A §4.1).
public enum CommandRejectReason: UInt16, Sendable {
    case commandNotUnderstood = 0x0000
    case signalingMTUExceeded = 0x0001
    case invalidCIDInRequest = 0x0002
}

/// Results of LE Credit Based Connection Response and (Enhanced) Credit Based Connection
/// Response (Vol 3 Part A §4.23, §4.26).
public enum CreditBasedConnectionResult: UInt16, Sendable {
    case successful = 0x0000
    case spsmNotSupported = 0x0002
    case noResourcesAvailable = 0x0004
    case insufficientAuthentication = 0x0005
    case insufficientAuthorization = 0x0006
    case encryptionKeySizeTooShort = 0x0007
    case insufficientEncryption = 0x0008
    case invalidSourceCID = 0x0009
    case sourceCIDAlreadyAllocated = 0x000A
    case unacceptableParameters = 0x000B
    case invalidParameters = 0x000C
}

/// The LE signalling commands (Vol 3 Part A §4), one encoder and one decoder for each.
public enum SignalingCommand: Hashable, Sendable {
    case commandReject(reason: UInt16, data: [UInt8])
    case disconnectionRequest(destinationCID: UInt16, sourceCID: UInt16)
    case disconnectionResponse(destinationCID: UInt16, sourceCID: UInt16)
    case connectionParameterUpdateRequest(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16)
    /// Result 0x0000 accepted, 0x0001 rejected.
    case connectionParameterUpdateResponse(result: UInt16)
    case leCreditBasedConnectionRequest(spsm: UInt16, sourceCID: UInt16, mtu: UInt16, mps: UInt16, initialCredits: UInt16)
    case leCreditBasedConnectionResponse(destinationCID: UInt16, mtu: UInt16, mps: UInt16, initialCredits: UInt16, result: UInt16)
    case flowControlCredit(cid: UInt16, credits: UInt16)
    case creditBasedConnectionRequest(spsm: UInt16, mtu: UInt16, mps: UInt16, initialCredits: UInt16, sourceCIDs: [UInt16])
    case creditBasedConnectionResponse(mtu: UInt16, mps: UInt16, initialCredits: UInt16, result: UInt16, destinationCIDs: [UInt16])
    case creditBasedReconfigureRequest(mtu: UInt16, mps: UInt16, destinationCIDs: [UInt16])
    case creditBasedReconfigureResponse(result: UInt16)
    /// A code this host does not know; answered with Command Reject.
    case unknown(code: UInt8, data: [UInt8])

    public var code: UInt8 {
        switch self {
        case .commandReject: 0x01
        case .disconnectionRequest: 0x06
        case .disconnectionResponse: 0x07
        case .connectionParameterUpdateRequest: 0x12
        case .connectionParameterUpdateResponse: 0x13
        case .leCreditBasedConnectionRequest: 0x14
        case .leCreditBasedConnectionResponse: 0x15
        case .flowControlCredit: 0x16
        case .creditBasedConnectionRequest: 0x17
        case .creditBasedConnectionResponse: 0x18
        case .creditBasedReconfigureRequest: 0x19
        case .creditBasedReconfigureResponse: 0x1A
        case .unknown(let code, _): code
        }
    }

    /// Whether this command is a request the receiver must answer.
    public var isRequest: Bool {
        switch self {
        case .disconnectionRequest, .connectionParameterUpdateRequest, .leCreditBasedConnectionRequest,
             .creditBasedConnectionRequest, .creditBasedReconfigureRequest, .unknown: true
        default: false
        }
    }

    func encodeData() -> [UInt8] {
        var w = ByteWriter(capacity: 16)
        switch self {
        case .commandReject(let reason, let data): w.u16(reason); w.bytes(data)
        case .disconnectionRequest(let d, let s), .disconnectionResponse(let d, let s): w.u16(d); w.u16(s)
        case .connectionParameterUpdateRequest(let min, let max, let latency, let timeout):
            w.u16(min); w.u16(max); w.u16(latency); w.u16(timeout)
        case .connectionParameterUpdateResponse(let result), .creditBasedReconfigureResponse(let result): w.u16(result)
        case .leCreditBasedConnectionRequest(let spsm, let scid, let mtu, let mps, let credits):
            w.u16(spsm); w.u16(scid); w.u16(mtu); w.u16(mps); w.u16(credits)
        case .leCreditBasedConnectionResponse(let dcid, let mtu, let mps, let credits, let result):
            w.u16(dcid); w.u16(mtu); w.u16(mps); w.u16(credits); w.u16(result)
        case .flowControlCredit(let cid, let credits): w.u16(cid); w.u16(credits)
        case .creditBasedConnectionRequest(let spsm, let mtu, let mps, let credits, let scids):
            w.u16(spsm); w.u16(mtu); w.u16(mps); w.u16(credits); scids.forEach { w.u16($0) }
        case .creditBasedConnectionResponse(let mtu, let mps, let credits, let result, let dcids):
            w.u16(mtu); w.u16(mps); w.u16(credits); w.u16(result); dcids.forEach { w.u16($0) }
        case .creditBasedReconfigureRequest(let mtu, let mps, let dcids):
            w.u16(mtu); w.u16(mps); dcids.forEach { w.u16($0) }
        case .unknown(_, let data): w.bytes(data)
        }
        return w.bytes
    }

    init(code: UInt8, data: ArraySlice<UInt8>) throws {
        var r = ByteReader(data, context: "L2CAP signalling command 0x\(String(code, radix: 16))")
        func cids(min: Int, max: Int) throws -> [UInt16] {
            guard r.remaining % 2 == 0, (min...max).contains(r.remaining / 2) else {
                throw DecodeError("\(r.context): \(r.remaining) bytes is not \(min)–\(max) CIDs")
            }
            return try (0..<(r.remaining / 2)).map { _ in try r.u16() }
        }
        switch code {
        case 0x01:
            let reason = try r.u16()
            self = .commandReject(reason: reason, data: r.rest())
        case 0x06: self = .disconnectionRequest(destinationCID: try r.u16(), sourceCID: try r.u16())
        case 0x07: self = .disconnectionResponse(destinationCID: try r.u16(), sourceCID: try r.u16())
        case 0x12:
            self = .connectionParameterUpdateRequest(intervalMin: try r.u16(), intervalMax: try r.u16(),
                                                     latency: try r.u16(), timeout: try r.u16())
        case 0x13: self = .connectionParameterUpdateResponse(result: try r.u16())
        case 0x14:
            self = .leCreditBasedConnectionRequest(spsm: try r.u16(), sourceCID: try r.u16(), mtu: try r.u16(),
                                                   mps: try r.u16(), initialCredits: try r.u16())
        case 0x15:
            self = .leCreditBasedConnectionResponse(destinationCID: try r.u16(), mtu: try r.u16(), mps: try r.u16(),
                                                    initialCredits: try r.u16(), result: try r.u16())
        case 0x16: self = .flowControlCredit(cid: try r.u16(), credits: try r.u16())
        case 0x17:
            let spsm = try r.u16(), mtu = try r.u16(), mps = try r.u16(), credits = try r.u16()
            self = .creditBasedConnectionRequest(spsm: spsm, mtu: mtu, mps: mps, initialCredits: credits, sourceCIDs: try cids(min: 1, max: 5))
        case 0x18:
            let mtu = try r.u16(), mps = try r.u16(), credits = try r.u16(), result = try r.u16()
            self = .creditBasedConnectionResponse(mtu: mtu, mps: mps, initialCredits: credits, result: result,
                                                  destinationCIDs: try cids(min: 0, max: 5))
        case 0x19:
            let mtu = try r.u16(), mps = try r.u16()
            self = .creditBasedReconfigureRequest(mtu: mtu, mps: mps, destinationCIDs: try cids(min: 1, max: 5))
        case 0x1A: self = .creditBasedReconfigureResponse(result: try r.u16())
        default:
            self = .unknown(code: code, data: r.rest())
        }
        try r.expectEnd()
    }
}
