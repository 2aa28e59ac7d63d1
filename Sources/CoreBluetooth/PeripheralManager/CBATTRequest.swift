import Foundation

/// One read or write of a local characteristic by a remote central, for the app to answer with
/// `CBPeripheralManager.respond(to:withResult:)`.
open class CBATTRequest: NSObject, ObjectLockHolder, @unchecked Sendable {
    // @unchecked: `valueStorage` is guarded by `objectLock`, the peripheral manager's (its
    // central's); the rest is immutable.
    private let centralStorage: CBCentral
    private let characteristicStorage: CBCharacteristic
    private let offsetStorage: Int
    private var valueStorage: Data?
    /// Which ATT exchange this request belongs to, for the answer.
    let transaction: Int
    let objectLock: ObjectLock

    init(central: CBCentral, characteristic: CBCharacteristic, offset: Int, value: Data?, transaction: Int) {
        centralStorage = central
        characteristicStorage = characteristic
        offsetStorage = offset
        valueStorage = value
        self.transaction = transaction
        objectLock = central.objectLock
        super.init()
    }

    /// The central asking.
    open var central: CBCentral { centralStorage }
    /// The characteristic read or written.
    open var characteristic: CBCharacteristic { characteristicStorage }
    /// Where in the value the read or write starts (zero-based).
    open var offset: Int { offsetStorage }
    /// For a write, the bytes written; for a read, nil until the app sets the bytes to send
    /// (from `offset` on).
    open var value: Data? {
        get { synchronized { valueStorage } }
        set { synchronized { valueStorage = newValue } }
    }
}
