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

        // Nobody listens any more.
        let late: HCITransport = switch host {
        case let tcp as TCPTransport: TCPTransport(host: tcp.host, port: tcp.port)
        case let unix as UnixSocketTransport: UnixSocketTransport(path: unix.path)
        default: host
        }
        #expect(throws: HCITransportError.self) { try late.open(on: hostLoop, sink: RecordingSink()) }
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
        // Bind a port, then stop listening on it, so that connecting is refused.
        let port = try freeLoopbackPort()
        let transport = TCPTransport(host: "127.0.0.1", port: port)
        let error = #expect(throws: HCITransportError.self) {
            try transport.open(on: EventLoop(), sink: RecordingSink())
        }
        #expect(error?.message == "connect to 127.0.0.1:\(port): Connection refused (ECONNREFUSED)")

        let unix = UnixSocketTransport(path: temporaryPath("missing.sock"))
        let unixError = #expect(throws: HCITransportError.self) {
            try unix.open(on: EventLoop(), sink: RecordingSink())
        }
        #expect(unixError?.message.hasSuffix("No such file or directory (ENOENT)") == true)
    }
}
