import Foundation

/// A remote central connected to a peripheral manager.
open class CBCentral: CBPeer, @unchecked Sendable {
    var maximumUpdateValueLengthStorage: Int

    init(identifier: UUID, maximumUpdateValueLength: Int) {
        maximumUpdateValueLengthStorage = maximumUpdateValueLength
        super.init(identifier: identifier)
    }

    /// The longest value one notification or indication to this central carries (ATT_MTU − 3).
    public var maximumUpdateValueLength: Int { synchronized { maximumUpdateValueLengthStorage } }
}
