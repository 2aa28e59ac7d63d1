import ByteCoding

// Version 2 of the protocol (docs/daemon.md, "Channels and pairing"): L2CAP credit-based
// channels and pairing prompts. The role services' own types (HostDevice, L2CAP, SMP) live
// above this module, so the wire has its own, mapped one to one by the daemon and the client.

/// Why a channel could not be opened, as the wire carries it.
public enum DaemonChannelOpenError: Error, Sendable, Hashable {
    /// The peer refused with this L2CAP result code (Vol 3 Part A §4.23).
    case refused(UInt16)
    case timeout
    /// The link went down first.
    case disconnected
    case noFreeChannelIDs
    case invalidParameters
    /// Raising the link's security failed in pairing: `local` (this side's check or agent) or
    /// the peer's Pairing Failed reason, or (reason nil) a timeout / the link's end.
    case pairingFailed(local: Bool, reason: UInt8?)
    case peerRemovedPairingInformation
    case encryptionTimedOut
    /// Encryption with the bond's key failed with this HCI status.
    case encryptionFailed(UInt8)
    case notSupported(String)
}

/// Why publishing a channel failed, as the wire carries it.
public enum DaemonChannelPublishError: Error, Sendable, Hashable {
    case noFreePSM
    case psmInUse(UInt16)
    case invalidPSM(UInt16)
}

/// Why a channel closed, as the wire carries it.
public enum DaemonChannelCloseReason: Sendable, Hashable {
    case local
    case remote
    case linkLost
    case protocolError(String)
}

/// A pairing question the daemon hands to the client owning the link (its agent answers).
public enum DaemonPairingPrompt: Sendable, Hashable {
    /// Accept pairing with no value to check; `method` (0 Just Works, 1 numeric comparison,
    /// 2 passkey display, 3 passkey entry, 4 out of band) is the one in use.
    case confirmPairing(method: UInt8)
    /// Show this passkey (six digits) for the peer's user to type.
    case displayPasskey(UInt32)
    case enterPasskey
    case confirmNumber(UInt32)
    case outOfBandData
}

/// The client's answer to a `pairingPrompt`.
public enum DaemonPairingReply: Sendable, Hashable {
    case accept
    case reject
    case passkey(UInt32)
    /// LE Secure Connections: the peer's confirm and random values; legacy: the temporary key.
    case outOfBand(peerConfirm: [UInt8]?, peerRandom: [UInt8]?, temporaryKey: [UInt8]?)
}

extension ByteWriter {
    mutating func channelOpenError(_ value: DaemonChannelOpenError) {
        switch value {
        case .refused(let code): u8(0); u16(code)
        case .timeout: u8(1)
        case .disconnected: u8(2)
        case .noFreeChannelIDs: u8(3)
        case .invalidParameters: u8(4)
        case .pairingFailed(let local, let reason): u8(5); bool(local); optional(reason) { $0.u8($1) }
        case .peerRemovedPairingInformation: u8(6)
        case .encryptionTimedOut: u8(7)
        case .encryptionFailed(let status): u8(8); u8(status)
        case .notSupported(let why): u8(9); string(why)
        }
    }

    mutating func channelPublishError(_ value: DaemonChannelPublishError) {
        switch value {
        case .noFreePSM: u8(0)
        case .psmInUse(let psm): u8(1); u16(psm)
        case .invalidPSM(let psm): u8(2); u16(psm)
        }
    }

    mutating func channelCloseReason(_ value: DaemonChannelCloseReason) {
        switch value {
        case .local: u8(0)
        case .remote: u8(1)
        case .linkLost: u8(2)
        case .protocolError(let what): u8(3); string(what)
        }
    }

    mutating func pairingPrompt(_ value: DaemonPairingPrompt) {
        switch value {
        case .confirmPairing(let method): u8(0); u8(method)
        case .displayPasskey(let passkey): u8(1); u32(passkey)
        case .enterPasskey: u8(2)
        case .confirmNumber(let number): u8(3); u32(number)
        case .outOfBandData: u8(4)
        }
    }

    mutating func pairingReply(_ value: DaemonPairingReply) {
        switch value {
        case .accept: u8(0)
        case .reject: u8(1)
        case .passkey(let passkey): u8(2); u32(passkey)
        case .outOfBand(let confirm, let random, let key):
            u8(3)
            optional(confirm) { $0.blob($1) }
            optional(random) { $0.blob($1) }
            optional(key) { $0.blob($1) }
        }
    }
}

extension ByteReader {
    mutating func channelOpenError() throws -> DaemonChannelOpenError {
        switch try u8() {
        case 0: return .refused(try u16())
        case 1: return .timeout
        case 2: return .disconnected
        case 3: return .noFreeChannelIDs
        case 4: return .invalidParameters
        case 5:
            let local = try bool()
            return .pairingFailed(local: local, reason: try optional { try $0.u8() })
        case 6: return .peerRemovedPairingInformation
        case 7: return .encryptionTimedOut
        case 8: return .encryptionFailed(try u8())
        case 9: return .notSupported(try string())
        case let other: throw DecodeError("\(context): channel open error \(other)")
        }
    }

    mutating func channelPublishError() throws -> DaemonChannelPublishError {
        switch try u8() {
        case 0: return .noFreePSM
        case 1: return .psmInUse(try u16())
        case 2: return .invalidPSM(try u16())
        case let other: throw DecodeError("\(context): channel publish error \(other)")
        }
    }

    mutating func channelCloseReason() throws -> DaemonChannelCloseReason {
        switch try u8() {
        case 0: return .local
        case 1: return .remote
        case 2: return .linkLost
        case 3: return .protocolError(try string())
        case let other: throw DecodeError("\(context): channel close reason \(other)")
        }
    }

    mutating func pairingPrompt() throws -> DaemonPairingPrompt {
        switch try u8() {
        case 0: return .confirmPairing(method: try u8())
        case 1: return .displayPasskey(try passkey())
        case 2: return .enterPasskey
        case 3: return .confirmNumber(try passkey())
        case 4: return .outOfBandData
        case let other: throw DecodeError("\(context): pairing prompt \(other)")
        }
    }

    mutating func pairingReply() throws -> DaemonPairingReply {
        switch try u8() {
        case 0: return .accept
        case 1: return .reject
        case 2: return .passkey(try passkey())
        case 3:
            let confirm = try optional { try $0.blob() }, random = try optional { try $0.blob() }, key = try optional { try $0.blob() }
            return .outOfBand(peerConfirm: confirm, peerRandom: random, temporaryKey: key)
        case let other: throw DecodeError("\(context): pairing reply \(other)")
        }
    }

    /// Six decimal digits at most (Vol 3 Part H §2.3.5.3): anything larger is not a passkey.
    private mutating func passkey() throws -> UInt32 {
        let value = try u32()
        guard value <= 999_999 else { throw DecodeError("\(context): passkey out of range") }
        return value
    }
}
