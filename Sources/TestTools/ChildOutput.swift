import Foundation

/// Reads a pipe on a thread of its own until end of file (every writer has closed it: the
/// child exited), handing each chunk to `onData` in order.
///
/// Not `FileHandle.readabilityHandler`: that watches the descriptor with a dispatch source in
/// libdispatch's epoll set, and a handle closed (deallocated with its pipe) before the source's
/// cancellation has gone through leaves the set pointing at a freed source, which a descriptor
/// number reused by the next pipe then reaches: libdispatch's manager thread crashed that way
/// (`_dispatch_event_loop_drain`, bad pointer) in the interop suite, which starts and kills a
/// peer process per test. A blocking read holds the handle until it has seen the end.
public final class PipeReader: @unchecked Sendable {
    // `finished` is behind `condition`; nothing else changes after init.
    private let condition = NSCondition()
    private var finished = false

    /// Start it once the process runs: before that, this process still holds the pipe's write
    /// end (`Process.run` closes it), and a process that failed to start never ends the file.
    public init(_ handle: FileHandle, onData: @escaping @Sendable (Data) -> Void) {
        let thread = Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                onData(data)
            }
            condition.lock()
            finished = true
            condition.broadcast()
            condition.unlock()
        }
        thread.name = "pipe reader"
        thread.start()
    }

    /// Waits until the end of file was read, so that every byte written has been handed on;
    /// false after `timeout` seconds.
    @discardableResult
    public func waitForEnd(timeout: TimeInterval = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !finished {
            if !condition.wait(until: deadline) { return finished }
        }
        return true
    }
}

/// What a child process writes to one pipe, collected as it comes: give `pipe` to the process,
/// then `start()` once it runs.
public final class ChildOutput: @unchecked Sendable {
    // `collected` and `reader` are behind the lock; the pipe is set once.
    private let lock = NSLock()
    private var collected = ""
    private var reader: PipeReader?
    public let pipe = Pipe()

    public init() {}

    /// Starts reading (after `Process.run()`); `onData`, if given, also sees each chunk.
    public func start(onData: (@Sendable (Data) -> Void)? = nil) {
        let reader = PipeReader(pipe.fileHandleForReading) { [weak self] data in
            onData?(data)
            self?.lock.withLock { self?.collected += String(decoding: data, as: UTF8.self) }
        }
        lock.withLock { self.reader = reader }
    }

    public var text: String { lock.withLock { collected } }
    public var lines: [String] { text.split(separator: "\n").map(String.init) }

    /// Waits until the child's end of the pipe is closed and everything it wrote is here.
    @discardableResult
    public func waitForEnd(timeout: TimeInterval = 10) -> Bool {
        lock.withLock { reader }?.waitForEnd(timeout: timeout) ?? false
    }
}
