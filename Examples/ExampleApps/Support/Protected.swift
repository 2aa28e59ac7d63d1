import Foundation

/// A value behind a lock: the examples' state, written on the delegate queue and read by
/// whoever watches (a test's thread, the executable's main queue).
public final class Protected<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: Value

    public init(_ value: Value) { storage = value }

    /// A copy of the value now.
    public var value: Value { lock.withLock { storage } }

    /// Changes the value under the lock and returns what `body` returns.
    @discardableResult
    public func update<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&storage) }
    }
}
