import Dispatch
import Foundation
import Glibc
import Scheduling

/// Accepts connections on a listening socket one at a time and hands each to a handler as an
/// `HCITransport`; the next connection is accepted once the current one has closed.
final class ConnectionAcceptor: Sendable {
    private struct State {
        var closed = false
        var current: FileDescriptorStream?
    }

    private let listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let name: String
    private let handler: @Sendable (HCITransport) -> Void
    private let state = Locked(State())
    private let stopped = DispatchSemaphore(value: 0)

    /// Takes ownership of `listenFD` and starts accepting on a thread of its own.
    init(listenFD: Int32, name: String, handler: @escaping @Sendable (HCITransport) -> Void) throws {
        self.listenFD = listenFD
        self.name = name
        self.handler = handler
        do {
            try POSIX.setNonBlocking(listenFD)
            (wakeRead, wakeWrite) = try POSIX.makePipe()
        } catch {
            Glibc.close(listenFD)
            throw error
        }
        let thread = Thread { self.acceptLoop() }
        thread.name = "\(name) acceptor"
        thread.start()
    }

    private func acceptLoop() {
        defer {
            Glibc.close(listenFD)
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
            stopped.signal()
        }
        while POSIX.waitReady(listenFD, events: Int16(POLLIN), orWake: wakeRead) {
            let fd = accept(listenFD, nil, nil)  // accept4 needs _GNU_SOURCE.
            if fd < 0 {
                switch errno {
                case EINTR, EAGAIN, EWOULDBLOCK, ECONNABORTED: continue
                default: return  // The listening socket is unusable; nothing more will connect.
                }
            }
            POSIX.setCloseOnExec(fd)
            Sockets.setNoDelay(fd)  // Fails harmlessly on Unix sockets.
            guard let stream = try? FileDescriptorStream(adopting: fd, name: "\(name) connection") else { continue }
            let admitted = state.withLock { state in
                if state.closed { return false }
                state.current = stream
                return true
            }
            guard admitted else {
                stream.close()
                return
            }
            let finished = DispatchSemaphore(value: 0)
            stream.whenReleased { finished.signal() }
            handler(stream)
            finished.wait()
            state.withLock { $0.current = nil }
        }
    }

    /// Stops accepting, closes the live connection, and returns once the listening socket is
    /// closed.
    func close() {
        let current = state.withLock { state -> FileDescriptorStream? in
            if state.closed { return nil }
            state.closed = true
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
            return state.current
        }
        current?.close()
        stopped.wait()
        stopped.signal()  // Let a second close() return too.
    }
}

/// Serves H4 over TCP: each accepted connection is handed to `handler` as an `HCITransport`
/// (not yet opened: the handler opens it on its loop). One connection is served at a time; later
/// clients wait in the listen backlog until the current one closes. This is how a virtual
/// controller is offered to a host in another process (ours, or Bumble's `tcp-client`).
///
/// The handler runs on the server's accept thread; it must not call the server's `close()`.
public final class H4TCPServer: Sendable {
    /// The port the server listens on (the one the kernel picked when asked for port 0).
    public let port: UInt16
    public let host: String
    private let acceptor: ConnectionAcceptor

    /// Listens on `host`:`port` (port 0 picks a free port) and starts accepting.
    /// The handler must open or close each transport it is given.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 0,
        handler: @escaping @Sendable (HCITransport) -> Void
    ) throws {
        let (fd, boundPort) = try Sockets.listenTCP(host: host, port: port, backlog: 4)
        self.host = host
        self.port = boundPort
        acceptor = try ConnectionAcceptor(
            listenFD: fd, name: "tcp \(Sockets.displayName(host: host, port: boundPort))", handler: handler)
    }

    /// Stops accepting and closes the live connection (its sink hears `transportClosed(nil)`).
    public func close() { acceptor.close() }
}

/// Serves H4 on a Unix stream socket at `path`, like `H4TCPServer`. A stale socket file at
/// `path` is replaced; the file is removed on `close()`.
public final class H4UnixServer: Sendable {
    public let path: String
    private let acceptor: ConnectionAcceptor

    public init(path: String, handler: @escaping @Sendable (HCITransport) -> Void) throws {
        let fd = try Sockets.listenUnix(path: path, backlog: 4)
        self.path = path
        acceptor = try ConnectionAcceptor(listenFD: fd, name: "unix \(path)", handler: handler)
    }

    public func close() {
        acceptor.close()
        unlink(path)
    }
}
