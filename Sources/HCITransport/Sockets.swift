import Glibc
import HCI
import Scheduling

/// Socket set-up shared by the socket transports and servers.
enum Sockets {
    /// Resolves `host`:`port` for a TCP stream socket (IPv4 or IPv6) and runs `body` on each
    /// address in turn until one succeeds. Throws the last failure.
    static func withAddresses<T>(
        host: String, port: UInt16, passive: Bool,
        _ body: (UnsafePointer<sockaddr>, socklen_t, Int32) throws -> T
    ) throws -> T {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = POSIX.socketStream
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw HCITransportError("can't resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var lastError = HCITransportError("no address for \(host)")
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry?.pointee {
            entry = info.ai_next
            guard let address = info.ai_addr else { continue }
            do {
                return try body(address, info.ai_addrlen, info.ai_family)
            } catch let error as HCITransportError {
                lastError = error
            }
        }
        throw lastError
    }

    static func streamSocket(family: Int32) throws -> Int32 {
        let fd = socket(family, POSIX.socketStream | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIX.error("socket") }
        return fd
    }

    /// Connects a TCP socket with Nagle off (HCI packets are small and latency-sensitive),
    /// without blocking: each address in turn, waiting in `poll` for the connection or for
    /// `wakeFD` (closing: returns nil). Run it off the loop: the name lookup may wait too.
    static func connectTCP(host: String, port: UInt16, orWake wakeFD: Int32) throws -> Int32? {
        let target = displayName(host: host, port: port)
        return try withAddresses(host: host, port: port, passive: false) { address, length, family -> Int32? in
            let fd = try streamSocket(family: family)
            do {
                guard try connectNonBlocking(fd, address, length, orWake: wakeFD, what: "connect to \(target)") else {
                    Glibc.close(fd)
                    return nil
                }
            } catch {
                Glibc.close(fd)
                throw error
            }
            setNoDelay(fd)
            return fd
        }
    }

    /// Starts connecting `fd` (made non-blocking) and waits in `poll` until it is connected
    /// (true) or `wakeFD` is readable (false). Throws why it could not connect.
    static func connectNonBlocking(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t,
                                   orWake wakeFD: Int32, what: String) throws -> Bool {
        try POSIX.setNonBlocking(fd)
        while connect(fd, address, length) != 0 {
            let code = errno
            switch code {
            case EINTR:
                continue
            case EINPROGRESS:
                guard POSIX.waitReady(fd, events: Int16(POLLOUT), orWake: wakeFD) else { return false }
                var result: Int32 = 0
                var size = socklen_t(MemoryLayout<Int32>.size)
                guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &size) == 0 else { throw POSIX.error(what) }
                if result != 0 { throw POSIX.error(what, result) }
                return true
            case EAGAIN:
                // A Unix socket whose listener's backlog is full: try again shortly.
                if !POSIX.waitReady(-1, events: 0, orWake: wakeFD, timeoutMilliseconds: 10) { return false }
            default:
                throw POSIX.error(what, code)
            }
        }
        return true
    }

    static func setNoDelay(_ fd: Int32) {
        var on: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A listening TCP socket and the port it is bound to (the kernel picks one for port 0).
    static func listenTCP(host: String, port: UInt16, backlog: Int32) throws -> (fd: Int32, port: UInt16) {
        try withAddresses(host: host, port: port, passive: true) { address, length, family in
            let fd = try streamSocket(family: family)
            var on: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            guard bind(fd, address, length) == 0 else {
                let code = errno
                Glibc.close(fd)
                throw POSIX.error("bind \(displayName(host: host, port: port))", code)
            }
            guard listen(fd, backlog) == 0 else {
                let code = errno
                Glibc.close(fd)
                throw POSIX.error("listen on \(displayName(host: host, port: port))", code)
            }
            return (fd, boundPort(fd))
        }
    }

    static func boundPort(_ fd: Int32) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return 0 }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer in
            switch family {
            case AF_INET:
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            case AF_INET6:
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            default:
                0
            }
        }
    }

    /// "host:port", with IPv6 literals bracketed.
    static func displayName(host: String, port: UInt16) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Runs `body` with a `sockaddr_un` for `path`.
    static func withUnixAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) throws -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !pathBytes.isEmpty, pathBytes.count < capacity else {
            throw HCITransportError("unix socket path must be 1–\(capacity - 1) bytes: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + 1)
        return try withUnsafePointer(to: &address) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, length) }
        }
    }

    /// The address of a Unix socket, checked (the path must fit) before anything connects.
    static func unixAddress(_ path: String) throws -> [UInt8] {
        try withUnixAddress(path) { address, length in
            Array(UnsafeRawBufferPointer(start: address, count: Int(length)))
        }
    }

    /// Connects a Unix stream socket at `address` (from `unixAddress`) without blocking, like
    /// `connectTCP`.
    static func connectUnix(path: String, address: [UInt8], orWake wakeFD: Int32) throws -> Int32? {
        let fd = try streamSocket(family: AF_UNIX)
        do {
            let connected = try address.withUnsafeBytes { raw in
                try connectNonBlocking(
                    fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count),
                    orWake: wakeFD, what: "connect to unix socket \(path)")
            }
            guard connected else {
                Glibc.close(fd)
                return nil
            }
            return fd
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    static func listenUnix(path: String, backlog: Int32) throws -> Int32 {
        try withUnixAddress(path) { address, length in
            // A socket file left by an earlier run would make bind fail with EADDRINUSE.
            var info = stat()
            if lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
            let fd = try streamSocket(family: AF_UNIX)
            guard bind(fd, address, length) == 0 else {
                let code = errno
                Glibc.close(fd)
                throw POSIX.error("bind unix socket \(path)", code)
            }
            guard listen(fd, backlog) == 0 else {
                let code = errno
                Glibc.close(fd)
                throw POSIX.error("listen on unix socket \(path)", code)
            }
            return fd
        }
    }
}

/// H4 over a TCP connection (Bumble's `tcp-client`/`tcp-server` transports, QEMU/Zephyr
/// virtual controllers, our own `H4TCPServer`). `open` returns at once: the name is looked up
/// and the connection made on the transport's I/O thread, and packets sent meanwhile wait. A
/// connection that fails closes the transport (`transportClosed` with the error and its errno,
/// such as ECONNREFUSED).
public final class TCPTransport: HCITransport {
    public let host: String
    public let port: UInt16
    /// The most bytes that may wait to be sent before the transport closes with an error
    /// (see `FileDescriptorStream`).
    public let outboundLimit: Int
    private let stream = DeferredStream()

    /// `host` is a name or an IPv4/IPv6 literal (IPv6 without brackets: "::1").
    public init(host: String, port: UInt16, outboundLimit: Int = FileDescriptorStream.defaultOutboundLimit) {
        self.host = host
        self.port = port
        self.outboundLimit = outboundLimit
    }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try stream.open(on: loop, sink: sink) { [host, port, outboundLimit] in
            try FileDescriptorStream(
                connecting: { wakeFD in try Sockets.connectTCP(host: host, port: port, orWake: wakeFD) },
                name: "tcp \(Sockets.displayName(host: host, port: port))", outboundLimit: outboundLimit)
        }
    }

    /// Bytes sent but not yet taken by the socket (waiting for the connection, or for the
    /// controller to read). Thread-safe.
    public var pendingOutputByteCount: Int { stream.pendingOutputByteCount }

    public func send(_ packet: HCIPacket) { stream.send(packet) }
    public func close() { stream.close() }
}

/// H4 over a Unix stream socket. Connects in the background like `TCPTransport`; a path too
/// long for a socket address throws in `open`.
public final class UnixSocketTransport: HCITransport {
    public let path: String
    public let outboundLimit: Int
    private let stream = DeferredStream()

    public init(path: String, outboundLimit: Int = FileDescriptorStream.defaultOutboundLimit) {
        self.path = path
        self.outboundLimit = outboundLimit
    }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try stream.open(on: loop, sink: sink) { [path, outboundLimit] in
            let address = try Sockets.unixAddress(path)
            return try FileDescriptorStream(
                connecting: { wakeFD in try Sockets.connectUnix(path: path, address: address, orWake: wakeFD) },
                name: "unix \(path)", outboundLimit: outboundLimit)
        }
    }

    /// Bytes sent but not yet taken by the socket. Thread-safe.
    public var pendingOutputByteCount: Int { stream.pendingOutputByteCount }

    public func send(_ packet: HCIPacket) { stream.send(packet) }
    public func close() { stream.close() }
}
