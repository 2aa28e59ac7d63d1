import Foundation

/// What delegates saw, in order, readable from the test's thread (delegates run on their queue).
public final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []

    public init() {}

    public func append(_ entry: String) {
        lock.lock()
        entries.append(entry)
        lock.unlock()
    }

    public var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return entries
    }

    public func contains(_ entry: String) -> Bool { all.contains(entry) }
    public func count(of entry: String) -> Int { all.filter { $0 == entry }.count }
    public func count(prefix: String) -> Int { all.filter { $0.hasPrefix(prefix) }.count }
}
