import Foundation
import Scheduling

/// A characteristic: of a remote peripheral's service (found by discovery), or of the local
/// database (``CBMutableCharacteristic``).
open class CBCharacteristic: CBAttribute, @unchecked Sendable {
    // @unchecked: the storage below is guarded by `objectLock`: the peripheral's for a remote
    // characteristic, the characteristic's own for a `CBMutableCharacteristic` (``ObjectLock``).
    @WeakHeld var serviceStorage: CBService?
    var propertiesStorage: CBCharacteristicProperties
    /// Unchecked: every access is under the lock, and a notified value's takes two (~160
    /// instructions of a 20-byte notification).
    @exclusivity(unchecked) var valueStorage: Data?
    var descriptorsStorage: [CBDescriptor]?
    var isNotifyingStorage = false
    /// On a remote peripheral: the declaration, value and last handles from discovery. On the
    /// local database: the value handle once published.
    var declarationHandle: UInt16 = 0
    var valueHandle: UInt16 = 0
    var endHandle: UInt16 = 0

    init(uuid: CBUUID, properties: CBCharacteristicProperties, value: Data?, service: CBService?) {
        serviceStorage = service
        propertiesStorage = properties
        valueStorage = value
        super.init(uuid: uuid, lock: service?.objectLock ?? ObjectLock())
    }

    /// The service the characteristic belongs to.
    open var service: CBService? { synchronized { serviceStorage } }

    /// What the characteristic allows (read, write, notify…).
    open var properties: CBCharacteristicProperties { synchronized { propertiesStorage } }

    /// The last value read or notified (nil until then).
    open var value: Data? { synchronized { valueStorage } }

    /// Under the lock: `bytes`, notified or indicated, become the value. Written over the old
    /// value's bytes when it has their length and nobody else holds it (an app that read it in
    /// its callback and let it go, as most do): a new `Data` of more than 14 bytes was two
    /// allocations, and the old one's release their frees (with the checks below, ~780 of a
    /// 20-byte notification's 10,110 instructions; BENCHMARKS.md, issue 19 step 24). A value
    /// the app kept is copied first (`Data` is copy-on-write), so what it holds never changes.
    func takeNotifiedValue(_ bytes: borrowing [UInt8]) {
        guard valueStorage?.count == bytes.count, bytes.count > 0 else {
            valueStorage = bytes.withUnsafeBytes { Data($0) }
            return
        }
        bytes.withUnsafeBytes { source in
            valueStorage!.withUnsafeMutableBytes { $0.copyMemory(from: source) }
        }
    }

    /// The descriptors discovered so far (nil until discovered).
    open var descriptors: [CBDescriptor]? { synchronized { descriptorsStorage } }

    /// Whether the characteristic is broadcast (never on Linux, as on iOS 8 and later).
    @available(*, deprecated, message: "Always false")
    open var isBroadcasted: Bool { false }

    /// Whether notifications or indications of the value are on.
    open var isNotifying: Bool { synchronized { isNotifyingStorage } }

    open override var description: String {
        let value = self.value.map { "{length = \($0.count), bytes = 0x\($0.map { String(format: "%02x", $0) }.joined())}" } ?? "(null)"
        return "<CBCharacteristic: \(Unmanaged.passUnretained(self).toOpaque()), UUID = \(uuid.uuidString), properties = 0x\(String(properties.rawValue, radix: 16, uppercase: true)), value = \(value), notifying = \(isNotifying ? "YES" : "NO")>"
    }
}

/// A characteristic of the local GATT database. With a `value` it is cached: read-only, and the
/// manager answers reads itself. With `value` nil it is dynamic: reads and writes reach the
/// delegate.
open class CBMutableCharacteristic: CBCharacteristic, @unchecked Sendable {
    // @unchecked: guarded by the characteristic's own `objectLock`, which every manager it is
    // added to takes to touch it (``ObjectLock``).
    var permissionsStorage: CBAttributePermissions
    var subscribedCentralsStorage: [CBCentral]?

    /// A characteristic with the given type, properties, cached value (or nil for dynamic) and
    /// permissions.
    public init(type UUID: CBUUID, properties: CBCharacteristicProperties, value: Data?,
                permissions: CBAttributePermissions) {
        permissionsStorage = permissions
        super.init(uuid: UUID, properties: properties, value: value, service: nil)
    }

    /// Who may read and write the value, and whether encryption is needed.
    open var permissions: CBAttributePermissions {
        get { synchronized { permissionsStorage } }
        set { synchronized { permissionsStorage = newValue } }
    }

    /// The centrals subscribed to the value.
    open var subscribedCentrals: [CBCentral]? { synchronized { subscribedCentralsStorage } }

    open override var properties: CBCharacteristicProperties {
        get { synchronized { propertiesStorage } }
        set { synchronized { propertiesStorage = newValue } }
    }

    open override var value: Data? {
        get { synchronized { valueStorage } }
        set { synchronized { valueStorage = newValue } }
    }

    open override var descriptors: [CBDescriptor]? {
        get { synchronized { descriptorsStorage } }
        set {
            _ = synchronized { replace(&descriptorsStorage, with: newValue) }
            // Each descriptor under its own lock, one at a time (no section holds two).
            for descriptor in newValue ?? [] {
                descriptor.synchronized { descriptor.characteristicStorage = self }
            }
        }
    }
}
