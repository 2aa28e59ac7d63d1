import Synchronization

/// A registration on a central manager's or peripheral's event tap (see
/// `CBCentralManager.addEventTap(_:)`), for removing it.
package struct CBEventTapToken: Hashable, Sendable {
    let id: UInt64

    private static let counter = Atomic<UInt64>(0)

    static func next() -> CBEventTapToken {
        CBEventTapToken(id: counter.add(1, ordering: .relaxed).newValue)
    }
}

/// Observers that hear every delegate event besides the delegate, on the delegate queue right
/// after it: how CoreBluetoothAsync listens without taking the app's delegate, so both styles
/// mix on one manager. Guarded by its owner's object lock; held strongly until removed.
struct EventTaps<Observer> {
    private var entries: [(token: CBEventTapToken, observer: Observer)] = []
    /// The observers alone, kept so that a callback reads an array instead of mapping one.
    private(set) var observers: [Observer] = []

    mutating func add(_ observer: Observer) -> CBEventTapToken {
        let token = CBEventTapToken.next()
        entries.append((token, observer))
        observers = entries.map(\.observer)
        return token
    }

    /// Returns what was removed, for the caller to release once it let go of the lock: a tap's
    /// last release may end an `AsyncStream`, whose termination handler removes a tap too.
    mutating func remove(_ token: CBEventTapToken) -> [Observer] {
        let removed = entries.filter { $0.token == token }.map(\.observer)
        entries.removeAll { $0.token == token }
        observers = entries.map(\.observer)
        return removed
    }
}
