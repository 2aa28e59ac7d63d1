import Glibc
import HCI
import HCITesting
import HCITransport
import Scheduling
import TestTools
import Testing

/// The outbound queue of `FileDescriptorStream`, on socketpairs whose buffers fill up: sends
/// never wait, frames leave whole and in order, the queue is bounded, close drops what waits.
@Suite(.timeLimit(.minutes(1)))
struct OutboundQueueTests {
    /// A socketpair: `ours` for the stream, `theirs` for the test to read, with a small send
    /// buffer so that a few packets fill it.
    static func socketPair(_ type: __socket_type = SOCK_STREAM) -> (ours: Int32, theirs: Int32) {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        var size: Int32 = 4096
        _ = setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        return (fds[0], fds[1])
    }

    /// ACL packets of `size` bytes of data, each with its own byte pattern.
    static func packets(_ count: Int, size: Int = 1000) -> [HCIPacket] {
        (0..<count).map { i in
            .acl(ACLDataPacket(handle: 0x0040, boundary: .firstNonFlushable,
                               data: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }))
        }
    }

    /// Reads H4 frames from `fd` (blocking) until `count` arrived or the stream ends.
    static func readPackets(_ fd: Int32, count: Int) throws -> [HCIPacket] {
        var framer = H4Framer()
        var received: [HCIPacket] = []
        var buffer = [UInt8](repeating: 0, count: 1500)  // Shorter than a frame: partial reads.
        while received.count < count {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { break }
            received += try framer.packets(from: buffer[0..<n])
        }
        return received
    }

    @Test func sendsNeverWaitAndFramesArriveWholeAndInOrder() throws {
        let (ours, theirs) = Self.socketPair()
        defer { close(theirs) }
        let stream = try FileDescriptorStream(adopting: ours, name: "pair")
        let loop = EventLoop(name: "host")
        let sink = RecordingSink()
        try stream.open(on: loop, sink: sink)

        // Far more than the socket holds: on a manual loop, a send that waited for room would
        // never return (nobody reads yet).
        let sent = Self.packets(200)
        for packet in sent { stream.send(packet) }
        #expect(stream.pendingOutputByteCount > 0)
        #expect(stream.pendingOutputByteCount < 200 * 1005)

        // The reader takes whatever the socket gives; the I/O thread writes the rest as room
        // appears, partial writes included, never splicing one frame into another.
        let received = try Self.readPackets(theirs, count: sent.count)
        #expect(received == sent)
        #expect(waitUntil { stream.pendingOutputByteCount == 0 })

        stream.close()
        #expect(waitUntil(pumping: loop) { sink.isClosed })
        #expect(sink.closes.count == 1)
        #expect(sink.closes.first! == nil)
    }

    @Test func sendsAfterABacklogQueueBehindIt() throws {
        let (ours, theirs) = Self.socketPair()
        defer { close(theirs) }
        let stream = try FileDescriptorStream(adopting: ours, name: "pair")
        let loop = EventLoop(name: "host")
        try stream.open(on: loop, sink: RecordingSink())

        // Fill the socket, then send small commands: they go after the queued data, even once
        // the socket has room for them again.
        let bulk = Self.packets(30)
        for packet in bulk { stream.send(packet) }
        #expect(stream.pendingOutputByteCount > 0)
        let commands = (0..<5).map { i in HCIPacket.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0C03), parameters: [UInt8(i)])) }
        // Room in the socket for a command, if one jumped the queue.
        var framer = H4Framer()
        var buffer = [UInt8](repeating: 0, count: 2000)
        let n = read(theirs, &buffer, buffer.count)
        #expect(n > 0)
        var received = try framer.packets(from: buffer[0..<max(n, 0)])
        for command in commands { stream.send(command) }

        while received.count < bulk.count + commands.count {
            let n = read(theirs, &buffer, buffer.count)
            guard n > 0 else { break }
            received += try framer.packets(from: buffer[0..<n])
        }
        #expect(received == bulk + commands)
        stream.close()
    }

    @Test func aPeerThatNeverReadsClosesTheTransportAtTheBound() throws {
        let (ours, theirs) = Self.socketPair()
        defer { close(theirs) }
        let stream = try FileDescriptorStream(adopting: ours, name: "stalled", outboundLimit: 20_000)
        let loop = EventLoop(name: "host")
        let sink = RecordingSink()
        try stream.open(on: loop, sink: sink)

        var sends = 0
        while !sink.isClosed && sends < 1000 {
            stream.send(Self.packets(1)[0])
            sends += 1
            loop.runUntilIdle()
        }
        #expect(sink.closes.count == 1)
        let message = try #require(sink.closes.first??.message)
        #expect(message.hasPrefix("stalled: the other side stopped reading: "))
        #expect(message.hasSuffix("bytes wait to be sent, more than the limit of 20000"))
        // The socket buffer, then the bound: a few dozen packets, not the thousand.
        #expect(sends < 100)
        #expect(stream.pendingOutputByteCount == 0)

        // The peer sees the end after what reached its socket.
        var buffer = [UInt8](repeating: 0, count: 65536)
        var total = 0
        while true {
            let n = read(theirs, &buffer, buffer.count)
            if n <= 0 { break }
            total += n
        }
        #expect(total > 0 && total < sends * 1005)
    }

    @Test func closeWithDataQueuedDropsItAndReleasesTheDescriptor() throws {
        let (ours, theirs) = Self.socketPair()
        defer { close(theirs) }
        let stream = try FileDescriptorStream(adopting: ours, name: "pair")
        let loop = EventLoop(name: "host")
        let sink = RecordingSink()
        try stream.open(on: loop, sink: sink)
        for packet in Self.packets(50) { stream.send(packet) }
        #expect(stream.pendingOutputByteCount > 0)

        stream.close()
        #expect(stream.pendingOutputByteCount == 0)
        stream.send(Self.packets(1)[0])  // Dropped: closed.
        #expect(stream.pendingOutputByteCount == 0)
        #expect(waitUntil(pumping: loop) { sink.isClosed })
        #expect(sink.closes.count == 1)
        #expect(sink.closes.first! == nil)

        // Our end is closed once the I/O thread stopped: the peer reads what the socket had,
        // then EOF, and never the dropped packets.
        var buffer = [UInt8](repeating: 0, count: 65536)
        var total = 0
        while true {
            let n = read(theirs, &buffer, buffer.count)
            if n <= 0 { break }
            total += n
        }
        #expect(total < 50 * 1005)
        loop.runUntilIdle()
        #expect(sink.closes.count == 1)
    }

    @Test func packetPerReadWritesEachFrameInOneWrite() throws {
        let (ours, theirs) = Self.socketPair(SOCK_SEQPACKET)
        defer { close(theirs) }
        let stream = try FileDescriptorStream(adopting: ours, name: "user channel", framing: .packetPerRead)
        let loop = EventLoop(name: "host")
        try stream.open(on: loop, sink: RecordingSink())
        let sent = Self.packets(60, size: 300)
        for packet in sent { stream.send(packet) }
        #expect(stream.pendingOutputByteCount > 0)

        // Each datagram is one whole frame, in order.
        var received: [HCIPacket] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while received.count < sent.count {
            let n = read(theirs, &buffer, buffer.count)
            guard n > 0 else { break }
            received.append(try HCIPacket(h4: Array(buffer[0..<n])))
        }
        #expect(received == sent)
        stream.close()
    }

    @Test func theLoopKeepsRunningItsTimersWhileTheSocketIsFull() throws {
        let (ours, theirs) = Self.socketPair()
        defer { close(theirs) }
        let stream = try FileDescriptorStream(adopting: ours, name: "pair")
        let loop = EventLoop(name: "host", pacing: .realTime)
        defer { loop.shutdown() }
        let sink = RecordingSink()
        try stream.open(on: loop, sink: sink)
        let fired = Shared(false)
        let backlog = Shared(0)
        loop.execute {
            for packet in Self.packets(100) { stream.send(packet) }
            backlog.value = stream.pendingOutputByteCount
            loop.schedule(after: .milliseconds(1)) { fired.value = true }
        }
        #expect(waitUntil { fired.value })
        #expect(backlog.value > 0)
        stream.close()
        #expect(waitUntil { sink.isClosed })
    }
}
