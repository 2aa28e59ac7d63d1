import Foundation

/// A remote central connected to a peripheral manager.
open class CBCentral: CBPeer, @unchecked Sendable {
    // @unchecked: `maximumUpdateValueLengthStorage` is guarded by `objectLock`, the peripheral
    // manager's (``ObjectLock``); the rest is immutable.
    var maximumUpdateValueLengthStorage: Int
    /// Which of the peripheral role service's centrals it is (its connection).
    let centralID: Int

    init(identifier: UUID, centralID: Int, maximumUpdateValueLength: Int, manager: CBPeripheralManager) {
        self.centralID = centralID
        maximumUpdateValueLengthStorage = maximumUpdateValueLength
        super.init(identifier: identifier, lock: manager.objectLock)
    }

    /// The longest value one notification or indication to this central carries (ATT_MTU − 3).
    open var maximumUpdateValueLength: Int { synchronized { maximumUpdateValueLengthStorage } }
}
