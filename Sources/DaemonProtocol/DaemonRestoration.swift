import ATT
import AssignedNumbers
import ByteCoding
import GATT
import HCI

// MARK: Restoration and connection events

// What a `restoreState` message carries (docs/daemon.md, "Restoration"): the discovery results
// the daemon relayed on each link, as the client's objects had them, so that the restored
// `CBPeripheral`s come back with their services, characteristics, descriptors and notifying
// flags.

/// A characteristic as discovered, its descriptors when they were discovered, and whether the
/// session was subscribed to it.
public struct DaemonRestoredCharacteristic: Sendable, Hashable {
    public var characteristic: DiscoveredCharacteristic
    public var descriptors: [DiscoveredDescriptor]?
    public var isNotifying: Bool

    public init(characteristic: DiscoveredCharacteristic, descriptors: [DiscoveredDescriptor]?, isNotifying: Bool) {
        self.characteristic = characteristic
        self.descriptors = descriptors
        self.isNotifying = isNotifying
    }
}

/// A service as discovered, and its characteristics when they were discovered.
public struct DaemonRestoredService: Sendable, Hashable {
    public var service: DiscoveredService
    public var characteristics: [DaemonRestoredCharacteristic]?

    public init(service: DiscoveredService, characteristics: [DaemonRestoredCharacteristic]?) {
        self.service = service
        self.characteristics = characteristics
    }
}

/// A peer of a restored session: connected (with its ATT_MTU and discovered services, nil when
/// none were discovered), or still being connected to.
public struct DaemonRestoredPeer: Sendable, Hashable {
    public var peer: LEAddress
    public var isConnected: Bool
    public var mtu: UInt16
    public var services: [DaemonRestoredService]?

    public init(peer: LEAddress, isConnected: Bool, mtu: UInt16, services: [DaemonRestoredService]?) {
        self.peer = peer
        self.isConnected = isConnected
        self.mtu = mtu
        self.services = services
    }
}

/// The scan a restored session had running, as `startScan` asked for it.
public struct DaemonRestoredScan: Sendable, Hashable {
    public var services: [BluetoothUUID]?
    public var solicited: [BluetoothUUID]
    public var allowDuplicates: Bool

    public init(services: [BluetoothUUID]?, solicited: [BluetoothUUID], allowDuplicates: Bool) {
        self.services = services
        self.solicited = solicited
        self.allowDuplicates = allowDuplicates
    }
}

extension ByteWriter {
    mutating func restoredPeer(_ value: DaemonRestoredPeer) {
        leAddress(value.peer)
        bool(value.isConnected)
        u16(value.mtu)
        optional(value.services) { w, services in
            w.array(services) { w, service in
                w.service(service.service)
                w.optional(service.characteristics) { w, characteristics in
                    w.array(characteristics) { w, characteristic in
                        w.characteristic(characteristic.characteristic)
                        w.optional(characteristic.descriptors) { $0.array($1) { $0.descriptor($1) } }
                        w.bool(characteristic.isNotifying)
                    }
                }
            }
        }
    }

    mutating func restoredScan(_ value: DaemonRestoredScan) {
        optional(value.services) { $0.array($1) { $0.uuid($1) } }
        array(value.solicited) { $0.uuid($1) }
        bool(value.allowDuplicates)
    }
}

extension ByteReader {
    mutating func restoredPeer() throws -> DaemonRestoredPeer {
        let peer = try leAddress(), isConnected = try bool(), mtu = try u16()
        let services = try optional { r in
            try r.array { r in
                let service = try r.service()
                let characteristics = try r.optional { r in
                    try r.array { r in
                        let characteristic = try r.characteristic()
                        let descriptors = try r.optional { try $0.array { try $0.descriptor() } }
                        return DaemonRestoredCharacteristic(characteristic: characteristic, descriptors: descriptors,
                                                            isNotifying: try r.bool())
                    }
                }
                return DaemonRestoredService(service: service, characteristics: characteristics)
            }
        }
        return DaemonRestoredPeer(peer: peer, isConnected: isConnected, mtu: mtu, services: services)
    }

    mutating func restoredScan() throws -> DaemonRestoredScan {
        let services = try optional { try $0.array { try $0.uuid() } }
        let solicited = try array { try $0.uuid() }
        return DaemonRestoredScan(services: services, solicited: solicited, allowDuplicates: try bool())
    }
}

// MARK: The peripheral role's restoration

/// A service a restored peripheral session has published: the key its client gave it, the
/// keys of the services it includes, its definition as published (included services named by
/// `includedKeys`, not in it), and where the database placed it.
public struct DaemonRestoredLocalService: Sendable, Hashable {
    public var key: UInt32
    public var includedKeys: [UInt32]
    public var service: GATTService
    public var handles: GATTServiceHandles

    public init(key: UInt32, includedKeys: [UInt32], service: GATTService, handles: GATTServiceHandles) {
        self.key = key
        self.includedKeys = includedKeys
        self.service = service
        self.handles = handles
    }
}

/// A central connected to a restored peripheral session: the daemon's id of it, its address,
/// its ATT_MTU, and the value handles of the characteristics it is subscribed to.
public struct DaemonRestoredCentral: Sendable, Hashable {
    public var central: UInt32
    public var peer: LEAddress
    public var mtu: UInt16
    public var subscribed: [ATTHandle]

    public init(central: UInt32, peer: LEAddress, mtu: UInt16, subscribed: [ATTHandle]) {
        self.central = central
        self.peer = peer
        self.mtu = mtu
        self.subscribed = subscribed
    }
}

extension ByteWriter {
    mutating func restoredLocalService(_ value: DaemonRestoredLocalService) {
        u32(value.key)
        array(value.includedKeys) { $0.u32($1) }
        gattService(value.service)
        serviceHandles(value.handles)
    }

    mutating func restoredCentral(_ value: DaemonRestoredCentral) {
        u32(value.central)
        leAddress(value.peer)
        u16(value.mtu)
        array(value.subscribed) { $0.handle($1) }
    }
}

extension ByteReader {
    mutating func restoredLocalService() throws -> DaemonRestoredLocalService {
        let key = try u32(), includedKeys = try array { try $0.u32() }, service = try gattService()
        return DaemonRestoredLocalService(key: key, includedKeys: includedKeys, service: service, handles: try serviceHandles())
    }

    mutating func restoredCentral() throws -> DaemonRestoredCentral {
        let central = try u32(), peer = try leAddress(), mtu = try u16()
        return DaemonRestoredCentral(central: central, peer: peer, mtu: mtu, subscribed: try array { try $0.handle() })
    }
}
