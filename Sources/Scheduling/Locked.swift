#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value shared between threads behind its own lock (for state that is not loop-confined:
/// budgets, registries, hand-offs between an app's threads and a loop). A pthread mutex: the
/// thread sanitizer models it (it does not see `Synchronization.Mutex`'s futex on Linux, and
/// reports races under it), and it costs less than `NSLock`'s class around the same mutex. The
/// critical sections are a few instructions.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Only under `mutex`: the lock, not the dynamic exclusivity check, keeps accesses apart
    /// (and the check costs more than the lock on the paths that use it per packet).
    @usableFromInline @exclusivity(unchecked) var value: Value  // exclusivity checks: 2.4 % of notify

    public init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable @inline(__always)
    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// `withLock`, with `moved` moved into `body`: a value the closure captured would be copied
    /// (a retain and a release of what it holds) and could not be consumed in it.
    @inlinable
    public func withLock<Moved, T>(moving moved: consuming Moved, _ body: (inout Value, consuming Moved) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value, moved)
    }

    @inlinable
    public var current: Value { withLock { $0 } }
}
