import AssignedNumbers
import Foundation
import Scheduling
import GATT

/// A descriptor of a characteristic: of a remote peripheral (found by discovery), or of the local
/// database (``CBMutableDescriptor``).
///
/// `value` has the type Apple gives each descriptor: `String` for the User Description,
/// `NSNumber` for the Extended Properties, Client and Server Configuration, `Data` otherwise.
open class CBDescriptor: CBAttribute, @unchecked Sendable {
    // @unchecked: the storage below is guarded by `objectLock`: the peripheral's for a remote
    // descriptor, the descriptor's own for a `CBMutableDescriptor` (``ObjectLock``).
    @WeakHeld var characteristicStorage: CBCharacteristic?
    var valueStorage: Any?
    /// On a remote peripheral: the descriptor's handle.
    var handle: UInt16 = 0

    init(uuid: CBUUID, value: Any?, characteristic: CBCharacteristic?) {
        characteristicStorage = characteristic
        valueStorage = value
        super.init(uuid: uuid, lock: characteristic?.objectLock ?? ObjectLock())
    }

    /// The characteristic the descriptor belongs to.
    open var characteristic: CBCharacteristic? { synchronized { characteristicStorage } }

    /// The last value read or written (nil until then).
    open var value: Any? { synchronized { valueStorage } }

    /// A descriptor value as read, in Apple's type for its UUID.
    static func typedValue(_ bytes: [UInt8], uuid: BluetoothUUID) -> Any {
        switch uuid {
        case .characteristicUserDescription:
            return String(decoding: bytes, as: UTF8.self)
        case .characteristicExtendedProperties, .clientCharacteristicConfiguration, .serverCharacteristicConfiguration:
            let value = bytes.prefix(2).enumerated().reduce(0) { $0 | (Int($1.element) << (8 * $1.offset)) }
            return NSNumber(value: value)
        default:
            return Data(bytes)
        }
    }

    open override var description: String {
        "<CBDescriptor: \(Unmanaged.passUnretained(self).toOpaque()), UUID = \(uuid.uuidString), value = \(value.map { "\($0)" } ?? "(null)")>"
    }
}

/// A descriptor of the local database. As on iOS, only the Characteristic User Description
/// (`String`) and the Characteristic Presentation Format (`Data`, 7 bytes) may be added; the
/// Client Characteristic Configuration and Extended Properties descriptors are made for you.
open class CBMutableDescriptor: CBDescriptor, @unchecked Sendable {
    // @unchecked: guarded by the descriptor's own `objectLock` (``ObjectLock``).
    /// A descriptor with the given type and value (fixed once published).
    public init(type UUID: CBUUID, value: Any?) {
        super.init(uuid: UUID, value: value, characteristic: nil)
    }
}
