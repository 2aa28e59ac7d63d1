import Foundation
import Scheduling

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
