import Foundation

/// The lock around the state Core Bluetooth objects show to the app (states, values, discovered
/// objects). One lock for all of them: they are read from any thread, written right before the
/// delegate callback that announces the change, and the sections are tiny, so one lock costs
/// nothing and leaves no lock order to get wrong. Recursive, so an accessor may call another.
final class ObjectLock: @unchecked Sendable {
    static let shared = ObjectLock()
    private let lock = NSRecursiveLock()

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

/// Runs `body` holding the object lock.
@inline(__always)
func synchronized<T>(_ body: () throws -> T) rethrows -> T {
    try ObjectLock.shared.withLock(body)
}

/// A value shared between threads behind its own lock (for state that is not the app-visible
/// object graph: budgets, registries).
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    @inline(__always)
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    var current: Value { withLock { $0 } }
}
