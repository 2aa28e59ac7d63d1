import Foundation

/// What delegates saw, in order, readable from the test's thread (delegates run on their queue).
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []

    func append(_ entry: String) {
        lock.lock()
        entries.append(entry)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return entries
    }

    func contains(_ entry: String) -> Bool { all.contains(entry) }
    func count(of entry: String) -> Int { all.filter { $0 == entry }.count }
    func count(prefix: String) -> Int { all.filter { $0.hasPrefix(prefix) }.count }
}
