#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock around the state Core Bluetooth objects show to the app (states, values, discovered
/// objects): one per manager, not one per process, so that managers on different delegate
/// queues and controllers never wait for each other.
///
/// Which lock guards an object's state (``ObjectLockHolder/objectLock``, fixed at init):
/// - a manager has its own;
/// - what the stack makes for a manager shares the manager's: its peripherals and their
///   services, characteristics and descriptors (each takes its parent's), its centrals and
///   ATT requests (the central's). A manager's sections may therefore touch any of these
///   objects' storage, but only after checking the object is its own (``CBPeripheral``'s
///   `requireOwn`), or by taking the object's lock instead;
/// - user-made attributes (`CBMutableService`, `CBMutableCharacteristic`, `CBMutableDescriptor`)
///   exist before any manager and may be added to one, or by mistake to two: each has a lock of
///   its own, and whoever touches its storage (the app, the manager publishing it, the manager
///   answering subscriptions) takes that object's lock.
///
/// Lock order: there is none, because no thread holds two object locks at once. A section
/// touches the storage of objects under one lock only, calls no accessor that locks, and never
/// calls out (delegates, observers, closures of other objects) while it holds the lock; links
/// between objects under different locks (a mutable service and its characteristics) are set
/// one object at a time. So no deadlock is possible and the lock need not be recursive. Debug
/// builds check this: taking an object lock while the thread holds one (the same or another)
/// stops the process.
///
/// A pthread mutex rather than `Synchronization.Mutex`: the sections guard stored properties of
/// the objects, not a value inside the lock, and the thread sanitizer models a pthread mutex (it
/// does not see `Mutex`'s futex on Linux, and would report the guarded accesses as races).
final class ObjectLock: @unchecked Sendable {
    // @unchecked: the mutex is made in init, destroyed in deinit, and only locked and unlocked
    // in between; it is what makes the guarded storage safe to share.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock. `body` must not take an object lock (see the type's
    /// comment).
    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        #if DEBUG
        Self.willLock(self)
        defer { Self.didUnlock() }
        #endif
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    #if DEBUG
    /// The object lock the current thread holds (debug builds): at most one.
    private static let heldKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private static func willLock(_ lock: ObjectLock) {
        let me = Unmanaged.passUnretained(lock).toOpaque()
        if let held = pthread_getspecific(heldKey) {
            preconditionFailure(held == UnsafeRawPointer(me)
                ? "an object lock taken again by the thread that holds it (it is not recursive)"
                : "an object lock taken while the thread holds another (no section may hold two)")
        }
        pthread_setspecific(heldKey, me)
    }

    private static func didUnlock() {
        pthread_setspecific(heldKey, nil)
    }
    #endif
}

/// An object whose app-visible state is guarded by an ``ObjectLock``: managers, peers,
/// attributes and ATT requests.
protocol ObjectLockHolder: AnyObject {
    /// The lock guarding the object's storage; never changes (see ``ObjectLock``).
    var objectLock: ObjectLock { get }
}

/// Sets `storage` to `value` and returns what it held, for the caller to release once it let go
/// of the lock: an object released under the lock could run an app's `deinit` there, which may
/// take a lock (an app's subclass of a `CBMutable…` attribute, a pairing agent).
@inline(__always)
func replace<T>(_ storage: inout T, with value: T) -> T {
    let old = storage
    storage = value
    return old
}

extension ObjectLockHolder {
    /// Runs `body` holding this object's lock (``ObjectLock``): it may touch the storage of
    /// objects that share the lock, and must not take a lock itself.
    @inline(__always)
    func synchronized<T>(_ body: () throws -> T) rethrows -> T {
        try objectLock.withLock(body)
    }
}
