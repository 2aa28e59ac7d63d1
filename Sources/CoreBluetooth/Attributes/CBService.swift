import Foundation
import Scheduling

/// A service: of a remote peripheral (found by discovery), or of the local database
/// (``CBMutableService``).
open class CBService: CBAttribute, @unchecked Sendable {
    // @unchecked: the storage below is guarded by `objectLock`: the peripheral's for a remote
    // service, the service's own for a `CBMutableService` (``ObjectLock``).
    @WeakHeld var peripheralStorage: CBPeripheral?
    let isPrimaryStorage: Bool
    var includedServicesStorage: [CBService]?
    var characteristicsStorage: [CBCharacteristic]?
    /// The service's attribute handles: on a remote peripheral, from discovery; on the local
    /// database, once published.
    var handleRange: ClosedRange<UInt16>?

    init(uuid: CBUUID, isPrimary: Bool, peripheral: CBPeripheral?, handles: ClosedRange<UInt16>?) {
        peripheralStorage = peripheral
        isPrimaryStorage = isPrimary
        handleRange = handles
        super.init(uuid: uuid, lock: peripheral?.objectLock ?? ObjectLock())
    }

    /// The peripheral the service belongs to (nil for a local service).
    open var peripheral: CBPeripheral? { synchronized { peripheralStorage } }

    /// Whether the service is primary (secondary services are only included by others).
    open var isPrimary: Bool { isPrimaryStorage }

    /// The included services discovered so far (nil until discovered).
    open var includedServices: [CBService]? { synchronized { includedServicesStorage } }

    /// The characteristics discovered so far (nil until discovered).
    open var characteristics: [CBCharacteristic]? { synchronized { characteristicsStorage } }

    open override var description: String {
        "<CBService: \(Unmanaged.passUnretained(self).toOpaque()), isPrimary = \(isPrimary ? "YES" : "NO"), UUID = \(uuid.uuidString)>"
    }
}

/// A service of the local GATT database, for `CBPeripheralManager.add(_:)`. Once published it
/// cannot change.
open class CBMutableService: CBService, @unchecked Sendable {
    // @unchecked: guarded by the service's own `objectLock`, which every manager it is added
    // to takes to touch it (``ObjectLock``).
    /// A service with the given type.
    public init(type UUID: CBUUID, primary isPrimary: Bool) {
        super.init(uuid: UUID, isPrimary: isPrimary, peripheral: nil, handles: nil)
    }

    /// The services this one includes (published before it).
    open override var includedServices: [CBService]? {
        get { synchronized { includedServicesStorage } }
        set { _ = synchronized { replace(&includedServicesStorage, with: newValue) } }
    }

    /// The service's characteristics.
    open override var characteristics: [CBCharacteristic]? {
        get { synchronized { characteristicsStorage } }
        set {
            _ = synchronized { replace(&characteristicsStorage, with: newValue) }
            // Each characteristic under its own lock, one at a time (no section holds two).
            for characteristic in newValue ?? [] {
                characteristic.synchronized { characteristic.serviceStorage = self }
            }
        }
    }
}
