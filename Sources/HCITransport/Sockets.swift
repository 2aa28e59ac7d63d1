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

    /// Connects a TCP socket with Nagle off: HCI packets are small and latency-sensitive.
    static func connectTCP(host: String, port: UInt16) throws -> Int32 {
        try withAddresses(host: host, port: port, passive: false) { address, length, family in
            let fd = try streamSocket(family: family)
            while connect(fd, address, length) != 0 {
                let code = errno
                if code == EINTR { continue }
                Glibc.close(fd)
                throw POSIX.error("connect to \(displayName(host: host, port: port))", code)
            }
            setNoDelay(fd)
            return fd
        }
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

    static func connectUnix(path: String) throws -> Int32 {
        try withUnixAddress(path) { address, length in
            let fd = try streamSocket(family: AF_UNIX)
            while connect(fd, address, length) != 0 {
                let code = errno
                if code == EINTR { continue }
                Glibc.close(fd)
                throw POSIX.error("connect to unix socket \(path)", code)
            }
            return fd
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
/// virtual controllers, our own `H4TCPServer`). Connects in `open`, which blocks until the
/// connection is made or refused.
public final class TCPTransport: HCITransport {
    public let host: String
    public let port: UInt16
    private let stream = DeferredStream()

    /// `host` is a name or an IPv4/IPv6 literal (IPv6 without brackets: "::1").
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try stream.open(on: loop, sink: sink) {
            let fd = try Sockets.connectTCP(host: host, port: port)
            return try FileDescriptorStream(adopting: fd, name: "tcp \(Sockets.displayName(host: host, port: port))")
        }
    }

    public func send(_ packet: HCIPacket) { stream.send(packet) }
    public func close() { stream.close() }
}

/// H4 over a Unix stream socket. Connects in `open`.
public final class UnixSocketTransport: HCITransport {
    public let path: String
    private let stream = DeferredStream()

    public init(path: String) { self.path = path }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try stream.open(on: loop, sink: sink) {
            let fd = try Sockets.connectUnix(path: path)
            return try FileDescriptorStream(adopting: fd, name: "unix \(path)")
        }
    }

    public func send(_ packet: HCIPacket) { stream.send(packet) }
    public func close() { stream.close() }
}
