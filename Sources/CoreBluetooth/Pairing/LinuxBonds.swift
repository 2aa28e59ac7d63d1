import Bonding
import Dispatch
import Foundation
import HCI
import HostDevice
import RoleServices
import Scheduling

/// **Linux extension.** What the local controller keeps of one bonded device (never its keys).
public struct CBLinuxBond: Hashable, Sendable {
    /// The device's Core Bluetooth identifier (its `CBPeripheral` or `CBCentral` has the same).
    public let identifier: UUID
    /// Its identity address, "AA:BB:CC:DD:EE:FF".
    public let address: String
    /// Whether its identity address is a public one (else static random).
    public let isPublicAddress: Bool
    /// Whether the bond's key was made with protection against a man in the middle.
    public let isAuthenticated: Bool
    /// Whether the bond's key was made by LE Secure Connections.
    public let isSecureConnections: Bool
    /// The key's size in bytes.
    public let keySize: Int
    /// Whether it gave us its identity resolving key (its private addresses are recognised).
    public let hasIdentityResolvingKey: Bool
    /// When it was bonded.
    public let created: Date
}

/// **Linux extension.** Why a pairing asked for with ``CBCentralManager/linuxPair(_:completion:)`` failed.
public struct CBLinuxPairingError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension CBManager {
    /// Runs `body` on the device's loop with the host device and waits for it (setup code,
    /// tools, delegate callbacks; not from work the loop itself waits on).
    fileprivate func onHostDevice<T: Sendable>(_ fallback: T, _ body: @escaping @Sendable (HostDevice) -> T) -> T {
        guard let device, state == .poweredOn else { return fallback }
        return device.loop.sync { device.hostDevice.map(body) ?? fallback }
    }

    /// **Linux extension.** The devices this manager's controller is bonded with (shared by
    /// every manager on that controller). Empty until powered on.
    public var linuxBonds: [CBLinuxBond] {
        let identifiers = identifierStore
        return onHostDevice([]) { hostDevice in
            hostDevice.bonds.bonds.map { bond in
                let key = bond.centralLTK ?? bond.peripheralLTK
                // Handed out here: kept, as a bonded device's (never evicted).
                let identifier = identifiers.assignIdentifier(for: bond.peerIdentity)
                identifiers.bonded(bond.peerIdentity, seenAt: bond.peerIdentity)
                return CBLinuxBond(
                    identifier: identifier, address: "\(bond.peerIdentity.address)",
                    isPublicAddress: !bond.peerIdentity.isRandom, isAuthenticated: key?.authenticated ?? false,
                    isSecureConnections: key?.secureConnections ?? false, keySize: key?.keySize ?? 0,
                    hasIdentityResolvingKey: bond.peerIRK != nil, created: bond.createdAt)
            }
        }
    }

    /// **Linux extension.** Forgets the bond with the device `identifier` names (as "Forget This
    /// Device" does on iOS): its keys and what this device kept for it. False when there was none.
    @discardableResult
    public func linuxRemoveBond(_ identifier: UUID) -> Bool {
        let identifiers = identifierStore
        guard let address = identifiers.address(for: identifier) else { return false }
        return onHostDevice(false) { hostDevice in
            let bond = hostDevice.bonds.bonds.first { $0.matches(address) || $0.peerIdentity.address == address.address }
            guard let bond, hostDevice.removeBond(for: bond.peerIdentity) else { return false }
            identifiers.unbonded(bond.peerIdentity)
            return true
        }
    }
}

/// **Linux extension.** This device's LE Secure Connections out-of-band data, to hand to a peer
/// over another channel (an NFC tag, a QR code): its confirm and random values, 16 bytes each,
/// least significant byte first (as the peer's ``CBPairingRequest/provideOutOfBandData(peerConfirm:peerRandom:temporaryKey:)``
/// takes them).
public struct CBLinuxOutOfBandData: Hashable, Sendable {
    public let confirm: Data
    public let random: Data
    /// Data read from a peer (its NFC tag, its QR code).
    public init(confirm: Data, random: Data) {
        self.confirm = confirm
        self.random = random
    }
}

extension CBManager {
    /// **Linux extension.** Makes fresh out-of-band data for this manager's controller; the next
    /// pairing whose peer says it has it uses it, once. Nil until powered on.
    public func linuxMakeOutOfBandData() -> CBLinuxOutOfBandData? {
        onHostDevice(nil) { hostDevice in
            let data = hostDevice.makeLocalOutOfBandData()
            return CBLinuxOutOfBandData(confirm: Data(data.confirm), random: Data(data.random))
        }
    }
}

extension CBCentralManager {
    /// **Linux extension.** Pairs with a connected peripheral now (iOS pairs only when a request
    /// needs it; tools want to pair up front), asking this manager's pairing agent. `completion`
    /// runs on the delegate queue: nil when the link is encrypted with new keys (and bonded
    /// when both sides allow it).
    public func linuxPair(_ peripheral: CBPeripheral, completion: @escaping @Sendable ((any Error)?) -> Void) {
        guard let device, state == .poweredOn, peripheral.state == .connected else {
            return callbacks.async { completion(CBError(.peripheralDisconnected)) }
        }
        let address = peripheral.address
        let callbacks = self.callbacks
        onInProcessService { service in
            guard let hostDevice = device.hostDevice, let link = service.links[address], !link.isClosed else {
                return callbacks.async { completion(CBError(.peripheralDisconnected)) }
            }
            hostDevice.pair(link.connection) { result in
                let error: (any Error)? = switch result {
                case .success: nil
                case .failure(.disconnected): CBError(.peripheralDisconnected)
                case .failure(let failure): CBLinuxPairingError(description: "\(failure)")
                }
                callbacks.async { completion(error) }
            }
        }
    }
}
