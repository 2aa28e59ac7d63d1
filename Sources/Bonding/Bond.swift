import Foundation
import HCI
import LECrypto
import SMP

/// Everything kept about one bonded peer: the keys a pairing distributed (Core spec Vol 3 Part H
/// §2.4) and the per-client GATT state a server and a client keep across connections for a
/// bonded peer (Vol 3 Part G §2.5.2, §7.3).
///
/// Keys are 16 octets, least significant octet first, as SMP carries them. `description` never
/// shows a key, so a bond can be logged.
public struct Bond: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The peer's identity address: its public or static random address, the type normalized
    /// to `.publicDevice` or `.randomDevice` (see ``identity(of:)``).
    public var peerIdentity: LEAddress
    /// The peer's identity resolving key, when it distributed one: resolvable private
    /// addresses the peer uses are found with it.
    public var peerIRK: [UInt8]?
    /// The key to encrypt with when we are the central (``PairingOutcome/centralLTK``).
    public var centralLTK: SMPLongTermKey?
    /// The key to answer the peer's LTK request with when we are the peripheral
    /// (``PairingOutcome/peripheralLTK``).
    public var peripheralLTK: SMPLongTermKey?
    /// The peer's connection signature resolving key, which verifies its signed writes.
    public var peerCSRK: [UInt8]?
    /// The smallest SignCounter a signed write from the peer may carry next (one more than the
    /// last one accepted), so a replayed write is refused (Vol 3 Part H §2.4.5).
    public var peerSignCounter: UInt32
    /// Our CSRK given to the peer, which signs our writes.
    public var localCSRK: [UInt8]?
    /// The SignCounter our next signed write carries.
    public var localSignCounter: UInt32
    /// Our GATT server's Client Characteristic Configuration values for this client, by the
    /// descriptor's attribute handle: restored when the bonded client reconnects.
    public var cccdValues: [UInt16: UInt16]
    /// Our database changed while this client was away: indicate Service Changed when it
    /// reconnects.
    public var serviceChangedPending: Bool
    /// As a client: the peer server's Database Hash when we last discovered it (16 octets), so
    /// a reconnection whose hash is unchanged can reuse the cached discovery.
    public var peerDatabaseHash: [UInt8]?
    public var createdAt: Date
    public var updatedAt: Date

    /// An empty bond (no keys yet) for the peer with identity address `peerIdentity`.
    public init(peerIdentity: LEAddress, createdAt: Date = Date()) {
        self.peerIdentity = Self.identity(of: peerIdentity)
        peerSignCounter = 0
        localSignCounter = 0
        cccdValues = [:]
        serviceChangedPending = false
        self.createdAt = createdAt
        updatedAt = createdAt
    }

    /// The bond a finished pairing makes with the peer connected at `peer`. The bond is under
    /// the identity address the peer distributed, else under `peer`.
    public init(outcome: PairingOutcome, peer: LEAddress, date: Date = Date()) {
        self.init(peerIdentity: outcome.peerIdentityAddress ?? peer, createdAt: date)
        merge(outcome, date: date)
    }

    /// Takes the keys a new pairing with this peer distributed. Each key the outcome carries
    /// replaces this bond's (a new CSRK restarts its counter); keys it does not carry, and the
    /// GATT state, are kept. Whether a key may be replaced is the store's rule
    /// (``BondStore/save(_:peer:)``), not this method's.
    public mutating func merge(_ outcome: PairingOutcome, date: Date = Date()) {
        if let key = outcome.centralLTK { centralLTK = key }
        if let key = outcome.peripheralLTK { peripheralLTK = key }
        if let irk = outcome.peerIRK { peerIRK = irk }
        if let csrk = outcome.peerCSRK, csrk != peerCSRK {
            peerCSRK = csrk
            peerSignCounter = 0
        }
        if let csrk = outcome.localCSRK, csrk != localCSRK {
            localCSRK = csrk
            localSignCounter = 0
        }
        updatedAt = date
    }

    /// `address` as a bond is keyed: resolved types (the controller resolved an RPA to it) are
    /// the same identity as the plain ones.
    public static func identity(of address: LEAddress) -> LEAddress {
        LEAddress(address.isRandom ? .randomDevice : .publicDevice, address.address)
    }

    /// Whether a device seen at `address` is this peer: its identity address, or a resolvable
    /// private address made with the peer's IRK.
    public func matches(_ address: LEAddress) -> Bool {
        if Self.identity(of: address) == peerIdentity { return true }
        guard address.isRandom, address.address.randomSubtype == .resolvablePrivate, let peerIRK, peerIRK.count == 16
        else { return false }
        // LECrypto takes the IRK most significant octet first; SMP carries it least first.
        return LECrypto.resolves(address: address.address.value, irk: peerIRK.reversed())
    }

    /// Which keys the bond has, never their values.
    public var description: String {
        var keys: [String] = []
        if let centralLTK { keys.append("central LTK (\(centralLTK.securityLevel))") }
        if let peripheralLTK { keys.append("peripheral LTK (\(peripheralLTK.securityLevel))") }
        if peerIRK != nil { keys.append("IRK") }
        if peerCSRK != nil { keys.append("peer CSRK") }
        if localCSRK != nil { keys.append("local CSRK") }
        return "Bond(\(peerIdentity), keys: \(keys.isEmpty ? "none" : keys.joined(separator: ", ")), "
            + "\(cccdValues.count) CCCD\(cccdValues.count == 1 ? "" : "s")"
            + "\(serviceChangedPending ? ", service changed pending" : ""))"
    }
}

extension SMPLongTermKey {
    /// Whether this key is worth less than `other`: compared by MITM protection first, then LE
    /// Secure Connections over legacy pairing, then encryption key size.
    public func isWeaker(than other: SMPLongTermKey) -> Bool {
        (authenticated ? 1 : 0, secureConnections ? 1 : 0, keySize)
            < (other.authenticated ? 1 : 0, other.secureConnections ? 1 : 0, other.keySize)
    }
}

// MARK: - Coding

// The file is meant to be readable by a person debugging a pairing: addresses as people write
// them, keys as hex strings (in the stored order, least significant octet first), handles in
// hex. Dates stay Foundation's default (seconds since 2001-01-01 as a Double), the one form
// that reads back equal to what was written. A file that does not parse is refused as a whole
// (the store moves it aside).

/// An `LEAddress` as the store writes it: `{"address": "C0:11:22:33:44:55", "type": "random"}`.
struct CodedAddress: Codable, Hashable {
    var address: String
    var type: String

    init(_ address: LEAddress) {
        self.address = address.address.description
        type = address.isRandom ? "random" : "public"
    }

    func decoded(codingPath: [any CodingKey]) throws -> LEAddress {
        guard let bd = BluetoothAddress(address), type == "public" || type == "random" else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "not an LE address"))
        }
        return LEAddress(type == "random" ? .randomDevice : .publicDevice, bd)
    }
}

enum Hex {
    static func encode(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Any even number of hex digits: lengths are checked when a bond is stored, not when it
    /// is loaded, so one odd value never makes the whole file unreadable.
    static func decode(_ string: String, codingPath: [any CodingKey]) throws -> [UInt8] {
        let utf8 = Array(string.utf8)
        var bytes: [UInt8] = []
        if utf8.count % 2 == 0 {
            for i in stride(from: 0, to: utf8.count, by: 2) {
                guard let byte = UInt8(String(decoding: utf8[i..<i + 2], as: UTF8.self), radix: 16) else { break }
                bytes.append(byte)
            }
        }
        guard bytes.count * 2 == utf8.count else {
            // The message names the field (in codingPath), never the value: it may be a key.
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "not hex octets"))
        }
        return bytes
    }
}

/// An `SMPLongTermKey` with its key and Rand in hex.
private struct CodedLTK: Codable {
    var key: String
    var ediv: UInt16
    var rand: String
    var keySize: Int
    var authenticated: Bool
    var secureConnections: Bool

    init(_ ltk: SMPLongTermKey) {
        key = Hex.encode(ltk.key)
        ediv = ltk.ediv
        rand = String(ltk.rand, radix: 16)
        keySize = ltk.keySize
        authenticated = ltk.authenticated
        secureConnections = ltk.secureConnections
    }

    func decoded(codingPath: [any CodingKey]) throws -> SMPLongTermKey {
        guard let randValue = UInt64(rand, radix: 16) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "not a long term key"))
        }
        return SMPLongTermKey(key: try Hex.decode(key, codingPath: codingPath), ediv: ediv, rand: randValue,
                              keySize: keySize, authenticated: authenticated, secureConnections: secureConnections)
    }
}

extension Bond {
    private enum CodingKeys: String, CodingKey {
        case peerIdentity, peerIRK, centralLTK, peripheralLTK, peerCSRK, peerSignCounter, localCSRK, localSignCounter
        case cccdValues, serviceChangedPending, peerDatabaseHash, createdAt, updatedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func key(_ name: CodingKeys) throws -> [UInt8]? {
            try c.decodeIfPresent(String.self, forKey: name).map {
                try Hex.decode($0, codingPath: c.codingPath + [name])
            }
        }
        func ltk(_ name: CodingKeys) throws -> SMPLongTermKey? {
            try c.decodeIfPresent(CodedLTK.self, forKey: name)?.decoded(codingPath: c.codingPath + [name])
        }
        peerIdentity = try c.decode(CodedAddress.self, forKey: .peerIdentity)
            .decoded(codingPath: c.codingPath + [CodingKeys.peerIdentity])
        peerIRK = try key(.peerIRK)
        centralLTK = try ltk(.centralLTK)
        peripheralLTK = try ltk(.peripheralLTK)
        peerCSRK = try key(.peerCSRK)
        peerSignCounter = try c.decode(UInt32.self, forKey: .peerSignCounter)
        localCSRK = try key(.localCSRK)
        localSignCounter = try c.decode(UInt32.self, forKey: .localSignCounter)
        var values: [UInt16: UInt16] = [:]
        for (handle, value) in try c.decode([String: UInt16].self, forKey: .cccdValues) {
            guard handle.hasPrefix("0x"), let h = UInt16(handle.dropFirst(2), radix: 16) else {
                throw DecodingError.dataCorruptedError(forKey: .cccdValues, in: c, debugDescription: "not a handle")
            }
            values[h] = value
        }
        cccdValues = values
        serviceChangedPending = try c.decode(Bool.self, forKey: .serviceChangedPending)
        peerDatabaseHash = try key(.peerDatabaseHash)
        createdAt = try c.decode(Date.self, forKey: .createdAt)
        updatedAt = try c.decode(Date.self, forKey: .updatedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(CodedAddress(peerIdentity), forKey: .peerIdentity)
        try c.encodeIfPresent(peerIRK.map(Hex.encode), forKey: .peerIRK)
        try c.encodeIfPresent(centralLTK.map(CodedLTK.init), forKey: .centralLTK)
        try c.encodeIfPresent(peripheralLTK.map(CodedLTK.init), forKey: .peripheralLTK)
        try c.encodeIfPresent(peerCSRK.map(Hex.encode), forKey: .peerCSRK)
        try c.encode(peerSignCounter, forKey: .peerSignCounter)
        try c.encodeIfPresent(localCSRK.map(Hex.encode), forKey: .localCSRK)
        try c.encode(localSignCounter, forKey: .localSignCounter)
        let handles = cccdValues.map { handle, value in ("0x" + String(format: "%04X", handle), value) }
        try c.encode(Dictionary(uniqueKeysWithValues: handles), forKey: .cccdValues)
        try c.encode(serviceChangedPending, forKey: .serviceChangedPending)
        try c.encodeIfPresent(peerDatabaseHash.map(Hex.encode), forKey: .peerDatabaseHash)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
    }
}
