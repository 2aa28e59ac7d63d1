import Scheduling

/// A test seam: the virtual clock of a daemon and its clients that share one loop in one
/// process (the suites' daemon mode, `CB_TEST_ON_DAEMON=1`). A frame between them is work in
/// progress the loop cannot see: while it is on the socket the clock is held, so that virtual
/// time does not jump past a message in flight (a timeout firing before the answer that was
/// already sent). Registered by socket path; both ends of a connection on that path count the
/// frames they queue (`sent`) and those they ran on the loop (`delivered`). When a connection
/// ends, what it still carried is let go (`connectionClosed`). Nothing registers one outside
/// tests; a path without one costs a dictionary lookup per connection.
package final class DaemonWireClock: Sendable {
    package let loop: EventLoop
    /// Frames queued on either end and not yet run on the loop.
    private let inFlight = Locked(0)

    private static let registry = Locked<[String: DaemonWireClock]>([:])

    private init(loop: EventLoop) { self.loop = loop }

    /// Frames on the connections at `path` hold `loop`'s clock while they travel.
    @discardableResult
    package static func register(path: String, loop: EventLoop) -> DaemonWireClock {
        let clock = DaemonWireClock(loop: loop)
        registry.withLock { $0[path] = clock }
        return clock
    }

    package static func unregister(path: String) {
        registry.withLock { _ = $0.removeValue(forKey: path) }
    }

    /// The clock the connections at `path` hold, if a test registered one.
    package static func clock(for path: String) -> DaemonWireClock? {
        registry.withLock { $0[path] }
    }

    /// A frame was queued on the socket (any thread).
    package func sent() {
        inFlight.withLock { $0 += 1 }
        loop.holdClock()
    }

    /// A frame that came was run on the loop (on the loop, after it ran). Frames a closed
    /// connection already let go of are not counted twice.
    package func delivered() {
        let held = inFlight.withLock { count -> Bool in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
        if held { loop.releaseClock() }
    }

    /// A connection at the path ended: frames it was carrying will never run.
    package func connectionClosed() {
        let count = inFlight.withLock { count -> Int in
            defer { count = 0 }
            return count
        }
        for _ in 0..<count { loop.releaseClock() }
    }
}
