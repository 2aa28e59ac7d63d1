#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// Why the shared radio could not be reached or served.
public struct RadioSocketError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
    static func posix(_ what: String, _ code: Int32 = errno) -> RadioSocketError {
        RadioSocketError("\(what): \(String(cString: strerror(code)))")
    }
}

/// One end of a radio socket connection: a thread reading frames, and a serial queue writing
/// them, so that neither side's loop ever blocks on the other process.
final class RadioSocketConnection: @unchecked Sendable {
    private let fd: Int32
    private let writes: DispatchQueue
    private let state = NSLock()
    private var closed = false

    init(fd: Int32, label: String) {
        self.fd = fd
        writes = DispatchQueue(label: "radio socket writer \(label)")
    }

    /// Starts the reading thread: `handshake` first (if any), then `onMessage` for every frame,
    /// then `onClose` once (handshake failed, peer gone, garbage, or `close()`).
    func startReading(handshake: (@Sendable () throws -> Void)? = nil,
                      onMessage: @escaping @Sendable (RadioWireMessage) -> Void,
                      onClose: @escaping @Sendable (String?) -> Void) {
        let thread = Thread { [self] in
            var problem: String?
            do {
                try handshake?()
                while let message = try readMessage() { onMessage(message) }
            } catch {
                problem = "\(error)"
            }
            close()
            onClose(problem)
        }
        thread.name = "radio socket reader"
        thread.start()
    }

    /// Reads one message; nil at the end of the stream.
    func readMessage() throws -> RadioWireMessage? {
        guard let header = try readExactly(4) else { return nil }
        let length = Int(header[0]) | Int(header[1]) << 8 | Int(header[2]) << 16 | Int(header[3]) << 24
        guard length > 0, length <= RadioWireMessage.maxFrameLength else {
            throw RadioSocketError("radio socket: bad frame length \(length)")
        }
        guard let body = try readExactly(length) else { throw RadioSocketError("radio socket: stream ended inside a frame") }
        return try RadioWireMessage(decoding: body)
    }

    private func readExactly(_ count: Int) throws -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n == 0 {
                if got == 0 { return nil }
                throw RadioSocketError("radio socket: stream ended inside a frame")
            }
            if n < 0 {
                if errno == EINTR { continue }
                if isClosed { return nil }
                throw RadioSocketError.posix("radio socket read")
            }
            got += n
        }
        return buffer
    }

    /// Queues a message for writing; dropped once the connection is closed.
    func send(_ message: RadioWireMessage) {
        let frame = message.frame()
        writes.async { [self] in
            guard !isClosed else { return }
            var sent = 0
            while sent < frame.count {
                let n = frame.withUnsafeBytes { Self.sendNoSignal(fd, $0.baseAddress! + sent, frame.count - sent) }
                if n < 0 {
                    if errno == EINTR { continue }
                    close()
                    return
                }
                sent += n
            }
        }
    }

    /// Writes synchronously (the handshake, before the reader runs).
    func sendNow(_ message: RadioWireMessage) throws {
        let frame = message.frame()
        var sent = 0
        while sent < frame.count {
            let n = frame.withUnsafeBytes { Self.sendNoSignal(fd, $0.baseAddress! + sent, frame.count - sent) }
            if n < 0 {
                if errno == EINTR { continue }
                throw RadioSocketError.posix("radio socket write")
            }
            sent += n
        }
    }

    private static func sendNoSignal(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.send(fd, pointer, count, Int32(MSG_NOSIGNAL))
        #else
        Darwin.send(fd, pointer, count, 0)
        #endif
    }

    var isClosed: Bool { state.withLock { closed } }

    /// Shuts the socket down (the reader ends) and releases it once the writer is done.
    func close() {
        let first = state.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        writes.async { [fd] in _ = Foundation.close(fd) }
    }

    /// Sets a receive timeout (the handshake), or none with 0.
    func setReceiveTimeout(seconds: Int) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    // MARK: Unix-domain sockets

    private static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) throws -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw RadioSocketError("radio socket path too long (\(bytes.count) bytes, at most \(capacity - 1)): \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    private static func makeSocket() throws -> Int32 {
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw RadioSocketError.posix("socket") }
        return fd
    }

    /// Connects to the radio at `path` (blocking: for tools and the listener's check).
    static func connect(path: String) throws -> Int32 {
        let fd = try makeSocket()
        let result = try withAddress(path) { Foundation.connect(fd, $0, $1) }
        guard result == 0 else {
            let code = errno
            _ = Foundation.close(fd)
            throw RadioSocketError.posix("cannot reach the radio at \(path)", code)
        }
        return fd
    }

    /// Starts connecting to the radio at `path` without waiting: a Unix socket connects at
    /// once or fails at once (no such file, nobody listening), except when the listener's
    /// backlog is full. Returns the socket (in blocking mode, for the reader thread and the
    /// write queue) and whether it is connected; if not, `finishConnecting` completes it.
    static func startConnecting(path: String) throws -> (fd: Int32, connected: Bool) {
        let fd = try makeSocket()
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var result = try withAddress(path) { Foundation.connect(fd, $0, $1) }
        while result != 0 && errno == EINTR { result = try withAddress(path) { Foundation.connect(fd, $0, $1) } }
        let code = errno
        _ = fcntl(fd, F_SETFL, flags)
        if result == 0 { return (fd, true) }
        if code == EAGAIN || code == EINPROGRESS { return (fd, false) }
        _ = Foundation.close(fd)
        throw RadioSocketError.posix("cannot reach the radio at \(path)", code)
    }

    /// Completes a connection `startConnecting` left waiting for the backlog (blocking: call it
    /// on the reader thread).
    static func finishConnecting(_ fd: Int32, path: String) throws {
        while try withAddress(path, { Foundation.connect(fd, $0, $1) }) != 0 {
            let code = errno
            if code == EINTR || code == EAGAIN { continue }
            if code == EISCONN { return }
            throw RadioSocketError.posix("cannot reach the radio at \(path)", code)
        }
    }

    /// Listens at `path`; a stale socket file nobody answers on is replaced, a live one refused.
    static func listen(path: String) throws -> Int32 {
        if FileManager.default.fileExists(atPath: path) {
            if let fd = try? connect(path: path) {
                _ = Foundation.close(fd)
                throw RadioSocketError("a radio is already listening at \(path)")
            }
            unlink(path)
        }
        let fd = try makeSocket()
        let bound = try withAddress(path) { bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            _ = Foundation.close(fd)
            throw RadioSocketError.posix("cannot listen at \(path)", code)
        }
        guard Foundation.listen(fd, 16) == 0 else {
            let code = errno
            _ = Foundation.close(fd)
            throw RadioSocketError.posix("cannot listen at \(path)", code)
        }
        return fd
    }
}
