import HCI
import LECrypto
import SMP

/// What the device keeps of a bonded peer.
public struct DeviceBond: Sendable, Hashable {
    /// The peer's identity address (its Identity Address Information, or the address it
    /// paired from when it distributed none).
    public var peerIdentity: LEAddress
    /// The peer's IRK (16 octets as SMP carries it), to recognise its resolvable private addresses.
    public var peerIRK: [UInt8]?
    /// The key to encrypt with as central.
    public var centralLTK: SMPLongTermKey?
    /// The key to answer the central's LTK request with as peripheral.
    public var peripheralLTK: SMPLongTermKey?
}

/// The device's bonds (in memory for now; the persistent bond store replaces it).
final class DeviceBonds: @unchecked Sendable {
    // Loop-confined with its device.
    private var bonds: [DeviceBond] = []

    func bond(for peer: LEAddress) -> DeviceBond? {
        if let exact = bonds.first(where: { $0.peerIdentity == peer }) { return exact }
        guard peer.type == .randomDevice else { return nil }
        return bonds.first { bond in
            bond.peerIRK.map { LECrypto.resolves(address: peer.address.value, irk: Array($0.reversed())) } ?? false
        }
    }

    /// Keeps the outcome's keys unless the bond already has stronger ones; true when kept.
    func save(_ outcome: PairingOutcome, peer: LEAddress) -> Bool {
        let identity = outcome.peerIdentityAddress ?? peer
        let new = DeviceBond(peerIdentity: identity, peerIRK: outcome.peerIRK,
                             centralLTK: outcome.centralLTK, peripheralLTK: outcome.peripheralLTK)
        if let old = bond(for: peer) ?? bond(for: identity), let oldKey = old.centralLTK ?? old.peripheralLTK,
           let newKey = new.centralLTK ?? new.peripheralLTK, oldKey.securityLevel > newKey.securityLevel {
            return false
        }
        bonds.removeAll { $0.peerIdentity == identity || $0.peerIdentity == peer }
        bonds.append(new)
        return true
    }

    func removeBond(for peer: LEAddress) -> Bool {
        guard let bond = bond(for: peer) else { return false }
        bonds.removeAll { $0.peerIdentity == bond.peerIdentity }
        return true
    }
}
