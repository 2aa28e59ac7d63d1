import Foundation
import Glibc
import Scheduling

/// Where a client finds the daemon, and where the daemon listens when told no path
/// (docs/daemon.md, "Sockets").
public enum DaemonSocketPath {
    public static let fileName = "corebluetoothd.sock"
    /// The variable naming a user's runtime directory, where a user's daemon listens.
    public static let runtimeDirectoryVariable = "XDG_RUNTIME_DIR"

    /// `/run/corebluetoothd.sock` for root, else `$XDG_RUNTIME_DIR/corebluetoothd.sock`; nil when
    /// a user's session has no runtime directory.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment,
                                   uid: UInt32 = getuid()) -> String? {
        if uid == 0 { return "/run/\(fileName)" }
        guard let directory = environment[runtimeDirectoryVariable], !directory.isEmpty else { return nil }
        return directory.hasSuffix("/") ? directory + fileName : "\(directory)/\(fileName)"
    }

    /// Where `CB_TRANSPORT=daemon` looks: the user's socket, then the system's.
    public static func clientCandidates(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var paths: [String] = []
        if let directory = environment[runtimeDirectoryVariable], !directory.isEmpty {
            paths.append(directory.hasSuffix("/") ? directory + fileName : "\(directory)/\(fileName)")
        }
        paths.append("/run/\(fileName)")
        return paths
    }
}

/// One end of a connection between a client and the daemon: messages out through a writer
/// thread (a caller never waits for the socket), messages in from a reader thread, decoded
/// there.
///
/// Both directions go in batches, so that a burst (notifications) costs few system calls and
/// wake-ups: frames queued while the writer is busy leave in one `send`, and the messages of
/// one `read` reach the owner in one call. A loop that sends (``send(_:batchedOn:)``) does
/// better still: its frames wait for the end of its burst of work and then leave in one
/// non-blocking `send` from the loop's thread, the writer woken only for what the socket's
/// buffer did not take.
///
/// `@unchecked Sendable`: the descriptor is immutable, the outbox is behind its mutex, and the
/// handlers are set once at init.
public final class FramedSocket: @unchecked Sendable {
    public let name: String
    private let fd: Int32
    private let onMessages: @Sendable ([DaemonMessage]) -> Void
    private let onClose: @Sendable (String) -> Void
    private let outboxLimit: Int?
    /// The virtual clock frames hold while they travel (tests only: ``DaemonWireClock``).
    private let wireClock: DaemonWireClock?
    private let outbox = Locked(Outbox())
    /// Signalled when the outbox stops being empty, and on close: the writer waits on it.
    private let ready = DispatchSemaphore(value: 0)

    private struct Outbox {
        /// Whole frames, back to back, waiting for the writer (which swaps in its emptied
        /// buffer, so neither side allocates once both have grown).
        var bytes: [UInt8] = []
        /// Who is writing to the descriptor now: one at a time, so frames stay in order.
        var writing = Writing.nobody
        /// The writer thread woke while a loop was writing: the loop wakes it again after.
        var writerWanted = false
        /// Whether a loop's burst end will flush (``send(_:batchedOn:)``).
        var flushPending = false
        /// The loop's emptied batch, swapped with `bytes` as the writer's is.
        var loopBatch: [UInt8] = []
        var closed = false
        var reason: String?
        /// Threads still using the descriptor (reader, writer): the last one closes it (or a
        /// loop's flush under way, after them).
        var users = 2
    }

    private enum Writing { case nobody, writerThread, loop }

    /// Connects to the socket at `path` (a Unix socket connects at once, or fails).
    public static func connect(path: String) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw DaemonSocketError(description: "\(path): not a socket path")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DaemonSocketError(description: "socket: \(String(cString: strerror(errno)))") }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw DaemonSocketError(description: "no daemon at \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    /// Takes `fd`; ``start()`` starts its threads. `onMessages` and `onClose` run on the reader
    /// thread: `onMessages` with the messages of one read, in order (never empty); `onClose`
    /// once, with why. `outboxLimit`: bytes the other end may leave unread before the
    /// connection is closed (a daemon does not hold without bound what a client never reads).
    public convenience init(fd: Int32, name: String, outboxLimit: Int? = nil, onMessages: @escaping @Sendable ([DaemonMessage]) -> Void,
                            onClose: @escaping @Sendable (String) -> Void) {
        self.init(fd: fd, name: name, outboxLimit: outboxLimit, wireClock: nil, onMessages: onMessages, onClose: onClose)
    }

    /// The same, with frames holding `wireClock` while they travel (the suites' daemon mode).
    package init(fd: Int32, name: String, outboxLimit: Int? = nil, wireClock: DaemonWireClock?,
                 onMessages: @escaping @Sendable ([DaemonMessage]) -> Void, onClose: @escaping @Sendable (String) -> Void) {
        self.wireClock = wireClock
        self.fd = fd
        self.name = name
        self.outboxLimit = outboxLimit
        self.onMessages = onMessages
        self.onClose = onClose
    }

    /// The same, with the messages handed over one at a time.
    public convenience init(fd: Int32, name: String, outboxLimit: Int? = nil, onMessage: @escaping @Sendable (DaemonMessage) -> Void,
                            onClose: @escaping @Sendable (String) -> Void) {
        self.init(fd: fd, name: name, outboxLimit: outboxLimit, onMessages: { messages in
            for message in messages { onMessage(message) }
        }, onClose: onClose)
    }

    /// Starts reading and writing (once its owner holds it: the first message may come at once).
    public func start() {
        let reader = Thread { [self] in readLoop() }
        reader.name = "\(name) reader"
        reader.start()
        let writer = Thread { [self] in writeLoop() }
        writer.name = "\(name) writer"
        writer.start()
    }

    /// Queues a message (any thread; dropped once the socket closed).
    public func send(_ message: DaemonMessage) {
        guard let wake = enqueue(message, batched: false) else { return }
        if wake { ready.signal() }
    }

    /// Queues a message; from `loop`'s thread it leaves when the loop's burst of work ends, so
    /// that a stream of notifications costs one `send` a burst and no wake-up of the writer.
    /// From any other thread it is ``send(_:)``. In order with ``send(_:)``'s messages.
    public func send(_ message: DaemonMessage, batchedOn loop: EventLoop) {
        // Off the loop a batch would wait for a burst that never ends on this thread.
        guard loop.inLoop else { return send(message) }
        guard let askForFlush = enqueue(message, batched: true) else { return }
        if askForFlush { loop.atEndOfBurst { [self] in flush() } }
    }

    /// Appends the message's frame to the outbox. Returns nil when the socket is closed (or was
    /// closed now: the other end left more than `outboxLimit` unread); else, plain, whether the
    /// writer must be woken (the outbox was empty: otherwise a signal is already owed to it);
    /// batched, whether the loop must be asked to flush (none is pending).
    private func enqueue(_ message: DaemonMessage, batched: Bool) -> Bool? {
        let frame = DaemonFrame.encode(message)
        let queued = outbox.withLock { outbox -> (signal: Bool, withinLimit: Bool)? in
            guard !outbox.closed else { return nil }
            // Held before the frame can reach the other end, whose run of it lets go.
            wireClock?.sent()
            let signal: Bool
            if batched {
                signal = !outbox.flushPending
                outbox.flushPending = true
            } else {
                signal = outbox.bytes.isEmpty
            }
            outbox.bytes.append(contentsOf: frame)
            return (signal, outboxLimit.map { outbox.bytes.count <= $0 } ?? true)
        }
        guard let queued else { return nil }
        guard queued.withinLimit else {
            close("more than \(outboxLimit ?? 0) bytes left unread")
            return nil
        }
        return queued.signal
    }

    /// On the loop: sends what waits without blocking, unless the writer thread is writing
    /// (it takes the rest when it is done); what the socket does not take goes to the writer.
    private func flush() {
        var batch: [UInt8] = []
        let took = outbox.withLock { outbox -> Bool in
            outbox.flushPending = false
            guard !outbox.closed, outbox.writing == .nobody, !outbox.bytes.isEmpty else { return false }
            outbox.writing = .loop
            swap(&batch, &outbox.loopBatch)
            swap(&batch, &outbox.bytes)
            return true
        }
        guard took else { return }
        var sent = 0
        var broken = false
        batch.withUnsafeBytes { raw in
            while sent < raw.count {
                let count = Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                if count >= 0 {
                    sent += count
                } else if errno != EINTR {
                    broken = errno != EAGAIN && errno != EWOULDBLOCK
                    return
                }
            }
        }
        let (wake, last) = outbox.withLock { outbox -> (Bool, Bool) in
            outbox.writing = .nobody
            // What the socket did not take goes first, before frames queued meanwhile.
            if sent < batch.count && !broken { outbox.bytes.insert(contentsOf: batch[sent...], at: 0) }
            batch.removeAll(keepingCapacity: true)
            swap(&batch, &outbox.loopBatch)
            let wake = outbox.writerWanted || !outbox.bytes.isEmpty
            outbox.writerWanted = false
            return (wake, outbox.users == 0)
        }
        // The reader and the writer left while this loop wrote: the descriptor is this one's to close.
        if last { Glibc.close(fd); return }
        if broken { return close("the connection broke") }
        if wake { ready.signal() }
    }

    /// Closes the connection (any thread); `onClose` follows from the reader.
    public func close(_ reason: String = "closed") {
        let first = outbox.withLock { outbox -> Bool in
            guard !outbox.closed else { return false }
            outbox.closed = true
            outbox.reason = reason
            return true
        }
        guard first else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        ready.signal()
    }

    private func readLoop() {
        var reader = DaemonFrameReader()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var why = "the other end closed the connection"
        reading: while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            reader.append(buffer[0..<count])
            var messages: [DaemonMessage] = []
            do {
                while let message = try reader.next() { messages.append(message) }
            } catch {
                // What came before the bad frame is handed over first, in order.
                if !messages.isEmpty { onMessages(messages) }
                why = "what came is not the protocol: \(error)"
                break reading
            }
            if !messages.isEmpty { onMessages(messages) }
        }
        close(why)
        onClose(outbox.withLock { $0.reason } ?? why)
        release()
    }

    private func writeLoop() {
        defer { release() }
        var batch: [UInt8] = []
        while true {
            ready.wait()
            // What was queued while it wrote is its too: batched sends do not signal.
            while true {
                let next = outbox.withLock { outbox -> (closed: Bool, took: Bool) in
                    if outbox.closed { return (true, false) }
                    if outbox.writing == .loop {
                        outbox.writerWanted = true
                        return (false, false)
                    }
                    outbox.writing = .nobody
                    guard !outbox.bytes.isEmpty else { return (false, false) }
                    outbox.writing = .writerThread
                    swap(&batch, &outbox.bytes)
                    return (false, true)
                }
                if next.closed { return }
                guard next.took else { break }
                if !write(batch) {
                    close("the connection broke")
                    return
                }
                batch.removeAll(keepingCapacity: true)
            }
        }
    }

    /// MSG_NOSIGNAL: a daemon that went away is an error here, not a SIGPIPE for the app.
    private func write(_ frame: [UInt8]) -> Bool {
        var offset = 0
        while offset < frame.count {
            let sent = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += sent
        }
        return true
    }

    private func release() {
        let last = outbox.withLock { outbox -> Bool in
            outbox.users -= 1
            // A loop writing now closes it when done (`flush()`).
            return outbox.users == 0 && outbox.writing != .loop
        }
        if last { Glibc.close(fd) }
    }
}

/// Why a client could not reach the daemon.
public struct DaemonSocketError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}
