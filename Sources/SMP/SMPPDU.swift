import ByteCoding
import HCI

/// SMP command codes (Vol 3 Part H §3.3, Table 3.3).
public enum SMPCommandCode: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case pairingRequest = 0x01
    case pairingResponse = 0x02
    case pairingConfirm = 0x03
    case pairingRandom = 0x04
    case pairingFailed = 0x05
    case encryptionInformation = 0x06
    case centralIdentification = 0x07
    case identityInformation = 0x08
    case identityAddressInformation = 0x09
    case signingInformation = 0x0A
    case securityRequest = 0x0B
    case pairingPublicKey = 0x0C
    case pairingDHKeyCheck = 0x0D
    case keypressNotification = 0x0E

    /// The length of the whole PDU (code included); every SMP command has a fixed length.
    public var pduLength: Int {
        switch self {
        case .pairingRequest, .pairingResponse: 7
        case .pairingConfirm, .pairingRandom, .encryptionInformation, .identityInformation,
            .signingInformation, .pairingDHKeyCheck:
            17
        case .pairingFailed, .securityRequest, .keypressNotification: 2
        case .centralIdentification: 11
        case .identityAddressInformation: 8
        case .pairingPublicKey: 65
        }
    }

    public var description: String {
        switch self {
        case .pairingRequest: "Pairing Request"
        case .pairingResponse: "Pairing Response"
        case .pairingConfirm: "Pairing Confirm"
        case .pairingRandom: "Pairing Random"
        case .pairingFailed: "Pairing Failed"
        case .encryptionInformation: "Encryption Information"
        case .centralIdentification: "Central Identification"
        case .identityInformation: "Identity Information"
        case .identityAddressInformation: "Identity Address Information"
        case .signingInformation: "Signing Information"
        case .securityRequest: "Security Request"
        case .pairingPublicKey: "Pairing Public Key"
        case .pairingDHKeyCheck: "Pairing DHKey Check"
        case .keypressNotification: "Keypress Notification"
        }
    }
}

/// The body of a Pairing Request or Pairing Response (Vol 3 Part H §3.5.1, §3.5.2).
public struct SMPPairingFeatures: Sendable, Hashable {
    public var ioCapability: SMPIOCapability
    /// The OOB data flag: this device holds out-of-band data of the peer.
    public var oobDataPresent: Bool
    /// As received, reserved bits included (f6 MACs the octet as sent).
    public var authRequirements: SMPAuthRequirements
    /// Maximum Encryption Key Size, as received (the session checks 7…16).
    public var maximumKeySize: UInt8
    public var initiatorKeys: SMPKeyDistribution
    public var responderKeys: SMPKeyDistribution

    public init(ioCapability: SMPIOCapability, oobDataPresent: Bool, authRequirements: SMPAuthRequirements,
                maximumKeySize: UInt8, initiatorKeys: SMPKeyDistribution, responderKeys: SMPKeyDistribution) {
        self.ioCapability = ioCapability
        self.oobDataPresent = oobDataPresent
        self.authRequirements = authRequirements
        self.maximumKeySize = maximumKeySize
        self.initiatorKeys = initiatorKeys
        self.responderKeys = responderKeys
    }
}

/// Keypress Notification types (Vol 3 Part H §3.5.8, Table 3.9).
public enum SMPKeypressNotificationType: UInt8, Sendable, Hashable, CaseIterable {
    case passkeyEntryStarted = 0x00
    case passkeyDigitEntered = 0x01
    case passkeyDigitErased = 0x02
    case passkeyCleared = 0x03
    case passkeyEntryCompleted = 0x04
}

/// Why SMP bytes did not decode. The session answers these with Pairing Failed: Command Not
/// Supported for an unknown code, Invalid Parameters otherwise.
public enum SMPDecodeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No octets at all.
    case empty
    /// A command code SMP does not define (0x00, 0x0F and above).
    case unknownCommand(UInt8)
    /// A defined command whose length is not its fixed length.
    case invalidLength(SMPCommandCode, expected: Int, actual: Int)
    /// A field holds a reserved value (an IO capability, OOB flag, address type, keypress
    /// type or Pairing Failed reason the specification does not define).
    case invalidValue(SMPCommandCode, field: String, value: UInt8)

    public var description: String {
        switch self {
        case .empty: "SMP: empty PDU"
        case .unknownCommand(let code): "SMP: unknown command code 0x\(String(code, radix: 16))"
        case .invalidLength(let code, let expected, let actual): "SMP \(code): \(actual) octets, expected \(expected)"
        case .invalidValue(let code, let field, let value): "SMP \(code): invalid \(field) 0x\(String(value, radix: 16))"
        }
    }
}

/// One SMP command (Vol 3 Part H §3.5, §3.6), with one decoder (`init(decoding:)`) and one
/// encoder (`encode()`). Value fields are octet arrays as SMP carries them: least significant
/// octet first (reverse them for the `LECrypto` toolbox).
public enum SMPPDU: Sendable, Hashable {
    case pairingRequest(SMPPairingFeatures)
    case pairingResponse(SMPPairingFeatures)
    /// Mconfirm/Sconfirm (legacy) or Ca/Cb (Secure Connections), 16 octets.
    case pairingConfirm([UInt8])
    /// Mrand/Srand or Na/Nb, 16 octets.
    case pairingRandom([UInt8])
    case pairingFailed(SMPPairingFailedReason)
    /// A legacy LTK, 16 octets.
    case encryptionInformation(longTermKey: [UInt8])
    case centralIdentification(ediv: UInt16, rand: UInt64)
    /// An IRK, 16 octets.
    case identityInformation(identityResolvingKey: [UInt8])
    /// A public or static random identity address (`.publicDevice` or `.randomDevice`).
    case identityAddressInformation(LEAddress)
    /// A CSRK, 16 octets.
    case signingInformation(signatureKey: [UInt8])
    case securityRequest(SMPAuthRequirements)
    /// X then Y, 32 octets each, each least significant octet first (64 in all).
    case pairingPublicKey([UInt8])
    /// Ea/Eb, 16 octets.
    case pairingDHKeyCheck([UInt8])
    case keypressNotification(SMPKeypressNotificationType)

    public var code: SMPCommandCode {
        switch self {
        case .pairingRequest: .pairingRequest
        case .pairingResponse: .pairingResponse
        case .pairingConfirm: .pairingConfirm
        case .pairingRandom: .pairingRandom
        case .pairingFailed: .pairingFailed
        case .encryptionInformation: .encryptionInformation
        case .centralIdentification: .centralIdentification
        case .identityInformation: .identityInformation
        case .identityAddressInformation: .identityAddressInformation
        case .signingInformation: .signingInformation
        case .securityRequest: .securityRequest
        case .pairingPublicKey: .pairingPublicKey
        case .pairingDHKeyCheck: .pairingDHKeyCheck
        case .keypressNotification: .keypressNotification
        }
    }

    /// Decodes one SMP PDU: the code octet, then exactly its parameters. Never traps.
    public init(decoding pdu: [UInt8]) throws(SMPDecodeError) {
        guard let first = pdu.first else { throw .empty }
        guard let code = SMPCommandCode(rawValue: first) else { throw .unknownCommand(first) }
        guard pdu.count == code.pduLength else {
            throw .invalidLength(code, expected: code.pduLength, actual: pdu.count)
        }
        // The length is checked above, so the reads below cannot run past the end.
        var r = ByteReader(pdu[1...], context: code.description)
        func read<T>(_ body: (inout ByteReader) throws -> T) -> T {
            do { return try body(&r) } catch { preconditionFailure("SMP read past a checked length") }
        }
        func value<T: RawRepresentable>(_: T.Type, _ field: String) throws(SMPDecodeError) -> T
        where T.RawValue == UInt8 {
            let raw = read { try $0.u8() }
            guard let value = T(rawValue: raw) else { throw .invalidValue(code, field: field, value: raw) }
            return value
        }
        let block = { read { try $0.bytes(16) } }
        switch code {
        case .pairingRequest, .pairingResponse:
            let io = try value(SMPIOCapability.self, "IO capability")
            let oob = read { try $0.u8() }
            guard oob <= 1 else { throw .invalidValue(code, field: "OOB data flag", value: oob) }
            let auth = SMPAuthRequirements(rawValue: read { try $0.u8() })
            let size = read { try $0.u8() }
            let initiator = SMPKeyDistribution(rawValue: read { try $0.u8() })
            let responder = SMPKeyDistribution(rawValue: read { try $0.u8() })
            let features = SMPPairingFeatures(ioCapability: io, oobDataPresent: oob == 1, authRequirements: auth,
                                              maximumKeySize: size, initiatorKeys: initiator, responderKeys: responder)
            self = code == .pairingRequest ? .pairingRequest(features) : .pairingResponse(features)
        case .pairingConfirm: self = .pairingConfirm(block())
        case .pairingRandom: self = .pairingRandom(block())
        case .pairingFailed: self = .pairingFailed(try value(SMPPairingFailedReason.self, "reason"))
        case .encryptionInformation: self = .encryptionInformation(longTermKey: block())
        case .centralIdentification:
            let ediv = read { try $0.u16() }, rand = read { try $0.u64() }
            self = .centralIdentification(ediv: ediv, rand: rand)
        case .identityInformation: self = .identityInformation(identityResolvingKey: block())
        case .identityAddressInformation:
            let type = read { try $0.u8() }
            guard type <= 1 else { throw .invalidValue(code, field: "address type", value: type) }
            let address = read { try $0.address() }
            self = .identityAddressInformation(LEAddress(type == 0 ? .publicDevice : .randomDevice, address))
        case .signingInformation: self = .signingInformation(signatureKey: block())
        case .securityRequest: self = .securityRequest(SMPAuthRequirements(rawValue: read { try $0.u8() }))
        case .pairingPublicKey: self = .pairingPublicKey(read { try $0.bytes(64) })
        case .pairingDHKeyCheck: self = .pairingDHKeyCheck(block())
        case .keypressNotification: self = .keypressNotification(try value(SMPKeypressNotificationType.self, "type"))
        }
    }

    /// The PDU's octets, code first. Value fields must have their sizes (a programming error
    /// otherwise).
    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: code.pduLength)
        w.u8(code.rawValue)
        func block(_ value: [UInt8], _ count: Int = 16) {
            precondition(value.count == count, "\(code) needs \(count) octets, got \(value.count)")
            w.bytes(value)
        }
        switch self {
        case .pairingRequest(let f), .pairingResponse(let f):
            w.u8(f.ioCapability.rawValue); w.u8(f.oobDataPresent ? 1 : 0); w.u8(f.authRequirements.rawValue)
            w.u8(f.maximumKeySize); w.u8(f.initiatorKeys.rawValue); w.u8(f.responderKeys.rawValue)
        case .pairingConfirm(let v), .pairingRandom(let v), .encryptionInformation(let v),
            .identityInformation(let v), .signingInformation(let v), .pairingDHKeyCheck(let v):
            block(v)
        case .pairingFailed(let reason): w.u8(reason.rawValue)
        case .centralIdentification(let ediv, let rand): w.u16(ediv); w.u64(rand)
        case .identityAddressInformation(let address):
            w.u8(address.isRandom ? 1 : 0); w.address(address.address)
        case .securityRequest(let auth): w.u8(auth.rawValue)
        case .pairingPublicKey(let key): block(key, 64)
        case .keypressNotification(let type): w.u8(type.rawValue)
        }
        return w.bytes
    }
}
