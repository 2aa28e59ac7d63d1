import Glibc
import HCI
import HCITesting
import HCITransport
import Scheduling
import TestTools
import Testing

/// Real loopback sockets: these tests wait (boundedly) for the reader threads.
@Suite(.timeLimit(.minutes(1)))
struct SocketTransportTests {
    static let reset = HCIPacket.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0C03)))
    static let resetComplete = HCIPacket.event(HCIEventPacket(code: 0x0E, parameters: [0x01, 0x03, 0x0C, 0x00]))

    /// The controller end of a served connection.
    final class Controller: Sendable {
        let loop = EventLoop(name: "controller")
        let sink = RecordingSink()
        let transport = Shared<HCITransport?>(nil)
        let connections = Shared(0)

        func accept(_ connection: HCITransport) {
            do {
                try connection.open(on: loop, sink: sink)
                transport.value = connection
                connections.update { $0 += 1 }
            } catch {
                connection.close()
            }
        }
    }

    enum ServerKind { case tcp, unix }

    /// A server of `kind` handing connections to `controller`, and a host transport to it.
    static func makePair(_ kind: ServerKind, controller: Controller) throws -> (close: () -> Void, host: HCITransport) {
        switch kind {
        case .tcp:
            let server = try H4TCPServer(host: "127.0.0.1", port: 0) { controller.accept($0) }
            #expect(server.port != 0)
            return (server.close, TCPTransport(host: "127.0.0.1", port: server.port))
        case .unix:
            let path = temporaryPath("h4.sock")
            let server = try H4UnixServer(path: path) { controller.accept($0) }
            return (server.close, UnixSocketTransport(path: path))
        }
    }

    @Test(arguments: [ServerKind.tcp, .unix])
    func packetsBothWaysThenHostCloses(kind: ServerKind) throws {
        let controller = Controller()
        let (closeServer, host) = try Self.makePair(kind, controller: controller)
        defer { closeServer() }
        let hostLoop = EventLoop(name: "host")
        let hostSink = RecordingSink()
        try host.open(on: hostLoop, sink: hostSink)
        #expect(waitUntil { controller.transport.value != nil })

        host.send(Self.reset)
        #expect(waitUntil(pumping: controller.loop) { controller.sink.packets.count == 1 })
        #expect(controller.sink.packets == [Self.reset])

        controller.transport.value?.send(Self.resetComplete)
        #expect(waitUntil(pumping: hostLoop) { hostSink.packets.count == 1 })
        #expect(hostSink.packets == [Self.resetComplete])

        // Many large ACL packets in a row: partial reads and writes, a full socket buffer.
        let bulk = (0..<300).map { i in
            HCIPacket.acl(ACLDataPacket(
                handle: 0x0040, boundary: .firstNonFlushable,
                data: (0..<1021).map { UInt8(truncatingIfNeeded: $0 &+ i) }))
        }
        for packet in bulk { host.send(packet) }
        #expect(waitUntil(pumping: controller.loop) { controller.sink.packets.count == 301 })
        #expect(Array(controller.sink.packets.dropFirst()) == bulk)

        host.close()
        #expect(waitUntil(pumping: hostLoop) { hostSink.isClosed })
        #expect(waitUntil(pumping: controller.loop) { controller.sink.isClosed })
        // Closed locally: nil. Closed by the other side: an error that says so.
        #expect(hostSink.closes.count == 1)
        #expect(hostSink.closes.first! == nil)
        #expect(controller.sink.closes.count == 1)
        #expect(controller.sink.closes.first??.message.contains("closed by the other side") == true)

        // Sends after close are dropped; closing again reports nothing more.
        host.send(Self.reset)
        host.close()
        controller.transport.value?.send(Self.resetComplete)
        controller.transport.value?.close()
        hostLoop.runUntilIdle()
        controller.loop.runUntilIdle()
        #expect(hostSink.closes.count == 1)
        #expect(controller.sink.closes.count == 1)
    }

    @Test(arguments: [ServerKind.tcp, .unix])
    func serverCloseClosesTheLiveConnection(kind: ServerKind) throws {
        let controller = Controller()
        let (closeServer, host) = try Self.makePair(kind, controller: controller)
        let hostLoop = EventLoop(name: "host")
        let hostSink = RecordingSink()
        try host.open(on: hostLoop, sink: hostSink)
        #expect(waitUntil { controller.transport.value != nil })

        closeServer()
        #expect(waitUntil(pumping: controller.loop) { controller.sink.isClosed })
        #expect(waitUntil(pumping: hostLoop) { hostSink.isClosed })
        #expect(controller.sink.closes.count == 1)
        #expect(controller.sink.closes.first! == nil)
        #expect(hostSink.closes.count == 1)
        #expect(hostSink.closes.first! != nil)

        // Nobody listens any more: the connection, made in the background, fails.
        let late: HCITransport = switch host {
        case let tcp as TCPTransport: TCPTransport(host: tcp.host, port: tcp.port)
        case let unix as UnixSocketTransport: UnixSocketTransport(path: unix.path)
        default: host
        }
        let lateSink = RecordingSink()
        try late.open(on: hostLoop, sink: lateSink)
        #expect(waitUntil(pumping: hostLoop) { lateSink.isClosed })
        #expect(lateSink.closes.first! != nil)
    }

    @Test func connectionsAreServedOneAtATime() throws {
        let controller = Controller()
        let server = try H4TCPServer(port: 0) { controller.accept($0) }
        defer { server.close() }
        let hostLoop = EventLoop(name: "host")

        let first = TCPTransport(host: "127.0.0.1", port: server.port)
        let firstSink = RecordingSink()
        try first.open(on: hostLoop, sink: firstSink)
        #expect(waitUntil { controller.connections.value == 1 })

        // The second client connects (the backlog takes it; "localhost" may try ::1 first) but
        // is served only once the first connection is over.
        let second = TCPTransport(host: "localhost", port: server.port)
        let secondSink = RecordingSink()
        try second.open(on: hostLoop, sink: secondSink)
        second.send(Self.reset)
        #expect(!waitUntil(timeout: .milliseconds(100)) { controller.connections.value == 2 })

        first.close()
        #expect(waitUntil(pumping: controller.loop) { controller.connections.value == 2 })
        #expect(waitUntil(pumping: controller.loop) { controller.sink.packets == [Self.reset] })
        second.close()
        #expect(waitUntil(pumping: hostLoop) { firstSink.isClosed && secondSink.isClosed })
    }

    @Test func garbageOnTheWireClosesWithAFramingError() throws {
        let controller = Controller()
        let server = try H4TCPServer(port: 0) { controller.accept($0) }
        defer { server.close() }

        // A raw client that sends one good command, then a byte that is no H4 indicator.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = server.port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected == 0)
        let bytes: [UInt8] = Self.reset.h4Bytes + [0x7F, 0x00, 0x00]
        #expect(write(fd, bytes, bytes.count) == bytes.count)

        #expect(waitUntil(pumping: controller.loop) { controller.sink.isClosed })
        #expect(controller.sink.packets == [Self.reset])
        #expect(controller.sink.closes.count == 1)
        #expect(controller.sink.closes.first??.message.contains("unknown packet indicator 0x7f") == true)

        // The server hung up on the client.
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(read(fd, &buffer, buffer.count) <= 0)
    }

    @Test func ipv6Loopback() throws {
        let controller = Controller()
        let server: H4TCPServer
        do {
            server = try H4TCPServer(host: "::1", port: 0) { controller.accept($0) }
        } catch {
            // No IPv6 loopback in this container: nothing to test.
            return
        }
        defer { server.close() }
        let host = try TransportSpec(parsing: "tcp:[::1]:\(server.port)").makeExternalTransport()
        let hostLoop = EventLoop(name: "host")
        let hostSink = RecordingSink()
        try host.open(on: hostLoop, sink: hostSink)
        host.send(Self.reset)
        #expect(waitUntil(pumping: controller.loop) { controller.sink.packets == [Self.reset] })
        host.close()
    }

    @Test func connectFailureIsAClearError() throws {
        // Bind a port, then stop listening on it, so that connecting is refused. `open` returns
        // at once; the sink hears why the connection failed, with the errno.
        let port = try freeLoopbackPort()
        let loop = EventLoop()
        let transport = TCPTransport(host: "127.0.0.1", port: port)
        let sink = RecordingSink()
        try transport.open(on: loop, sink: sink)
        transport.send(Self.reset)  // Waits for the connection, then is dropped with it.
        #expect(waitUntil(pumping: loop) { sink.isClosed })
        let error = try #require(sink.closes.first ?? nil)
        #expect(error.message == "connect to 127.0.0.1:\(port): Connection refused (ECONNREFUSED)")
        #expect(error.errno == ECONNREFUSED)
        #expect(sink.closes.count == 1)
        #expect(transport.pendingOutputByteCount == 0)

        let unix = UnixSocketTransport(path: temporaryPath("missing.sock"))
        let unixSink = RecordingSink()
        try unix.open(on: loop, sink: unixSink)
        #expect(waitUntil(pumping: loop) { unixSink.isClosed })
        let unixError = try #require(unixSink.closes.first ?? nil)
        #expect(unixError.message.hasSuffix("No such file or directory (ENOENT)"))
        #expect(unixError.errno == ENOENT)

        // A path that cannot be a socket address is refused before anything connects.
        #expect(throws: HCITransportError.self) {
            try UnixSocketTransport(path: String(repeating: "x", count: 200)).open(on: loop, sink: RecordingSink())
        }
    }

    @Test func closingWhileConnectingStopsTheAttempt() throws {
        // A listener whose backlog never gets accepted still completes TCP connects; an
        // unroutable address would wait for minutes. Close right after open: whichever
        // comes first, the sink hears nil once and nothing stays queued.
        let stalled = try StalledServer()
        defer { stalled.close() }
        let loop = EventLoop()
        let transport = TCPTransport(host: "127.0.0.1", port: stalled.port)
        let sink = RecordingSink()
        try transport.open(on: loop, sink: sink)
        transport.send(Self.reset)
        transport.close()
        #expect(waitUntil(pumping: loop) { sink.isClosed })
        #expect(sink.closes.count == 1)
        #expect(sink.closes.first! == nil)
        #expect(transport.pendingOutputByteCount == 0)
    }

    /// A controller that stopped reading: the loop's timers keep firing while the socket is
    /// full, sends return at once, and the queue's bound closes the transport with an error
    /// that says what happened.
    @Test func aControllerThatStopsReadingNeverBlocksTheLoop() throws {
        let stalled = try StalledServer()
        defer { stalled.close() }
        let loop = EventLoop(name: "host", pacing: .realTime)
        defer { loop.shutdown() }
        let transport = TCPTransport(host: "127.0.0.1", port: stalled.port, outboundLimit: 8 << 20)
        let sink = RecordingSink()
        try transport.open(on: loop, sink: sink)
        let connection = try stalled.accept()
        defer { close(connection) }

        // 6 MiB: more than the socket takes (the kernel grows a TCP send buffer up to
        // net.ipv4.tcp_wmem's maximum, 4 MiB by default, even toward a closed window).
        let bulk = (0..<(6 * 1024)).map { i in
            HCIPacket.acl(ACLDataPacket(handle: 0x0040, boundary: .firstNonFlushable,
                                        data: [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 1019)))
        }
        loop.execute { for packet in bulk { transport.send(packet) } }
        // Connected, part taken by the kernel, the rest waiting: the socket is full.
        #expect(waitUntil { (1..<(6 << 20)).contains(transport.pendingOutputByteCount) })
        let backlog = transport.pendingOutputByteCount
        let fired = Shared(0)
        loop.execute {
            transport.send(Self.reset)
            loop.schedule(after: .milliseconds(1)) { fired.update { $0 += 1 } }
            loop.schedule(after: .milliseconds(2)) { fired.update { $0 += 1 } }
        }
        #expect(waitUntil { fired.value == 2 })
        #expect(transport.pendingOutputByteCount >= 4)
        _ = backlog
        #expect(!sink.isClosed)

        // Past the bound, the transport closes.
        loop.execute { for packet in bulk { transport.send(packet) } }
        #expect(waitUntil { sink.isClosed })
        let error = try #require(sink.closes.first ?? nil)
        #expect(error.message.hasPrefix("tcp 127.0.0.1:\(stalled.port): the other side stopped reading: "))
        #expect(error.message.hasSuffix("more than the limit of 8388608"))
        #expect(transport.pendingOutputByteCount == 0)
    }
}
