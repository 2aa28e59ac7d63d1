import Foundation
import Glibc
import Scheduling

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it). Prefer servers
/// that bind port 0 themselves; this is for tools that need a port number up front.
public func freeLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw TsharkError(description: "socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else { throw TsharkError(description: "bind 127.0.0.1:0: errno \(errno)") }
    return UInt16(bigEndian: address.sin_port)
}

/// Waits for something another thread does (a socket reader, an accept), for real-I/O tests
/// only: polls `condition` every millisecond for at most `timeout`, running a manually paced
/// `loop` between polls so that work posted to it gets done. Returns whether it held.
@discardableResult
public func waitUntil(
    timeout: Duration = .seconds(5), pumping loop: EventLoop? = nil, _ condition: () -> Bool
) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let loop, loop.pacing == .manual { loop.runUntilIdle() }
        if condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        usleep(1000)
    }
}

/// ``waitUntil(timeout:pumping:_:)`` for async tests: polls `condition` every `interval` (1 ms)
/// for at most `timeout` of wall time, suspending between polls (sockets, daemons and delegate
/// queues are other threads). Returns whether it held.
public func eventually(timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(1),
                       _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !(await condition()) {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
    return true
}

/// A value shared between a test and callbacks on other threads.
public final class Shared<Value: Sendable>: Sendable {
    // `Locked`: a pthread mutex, which the thread sanitizer models.
    private let storage: Locked<Value>
    public init(_ value: Value) { storage = Locked(value) }
    public var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
    public func update<T: Sendable>(_ body: (inout Value) -> T) -> T { storage.withLock { body(&$0) } }
}

/// A fresh path in the temporary directory, for captures and Unix sockets.
public func temporaryPath(_ name: String) -> String {
    let directory = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
    return "\(directory)/cb-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)"
}

/// A TCP listener with a tiny receive buffer whose connections are accepted and never read.
public final class StalledServer: Sendable {
    public let fd: Int32
    public let port: UInt16

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        // Before listen: accepted connections inherit it, and the window they offer stays small.
        var size: Int32 = 4096
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok, listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw TsharkError(description: "stalled server: errno \(errno)")
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    /// The next connection (waits for the client's connect, which is under way).
    public func accept() throws -> Int32 {
        let connection = Glibc.accept(fd, nil, nil)
        guard connection >= 0 else { throw TsharkError(description: "accept: errno \(errno)") }
        return connection
    }

    public func close() { Glibc.close(fd) }
}
