import DaemonProtocol
import Foundation
import Glibc
import HCI
import Scheduling
import Synchronization
import Testing

@Suite("Daemon protocol: the framed socket")
struct FramedSocketTests {
    /// A connected pair of stream sockets: a `FramedSocket` on the first, the test on the second.
    static func pair() -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    static func wait(_ condition: () -> Bool) -> Bool {
        // Wall-clock seconds bound a failure only: each step takes microseconds.
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            usleep(1000)
        }
        return true
    }

    @Test func messagesGoBothWaysAndGarbageClosesTheConnection() throws {
        let (mine, theirs) = Self.pair()
        defer { close(theirs) }
        let received = Mutex<[DaemonMessage]>([])
        let closed = Mutex<String?>(nil)
        let socket = FramedSocket(fd: mine, name: "test", onMessage: { message in received.withLock { $0.append(message) } },
                                  onClose: { reason in closed.withLock { $0 = reason } })
        socket.start()
        socket.send(.close(session: 7))
        var bytes = [UInt8](repeating: 0, count: 64)
        #expect(read(theirs, &bytes, bytes.count) == 10)
        #expect(Array(bytes[0..<10]) == DaemonFrame.encode(.close(session: 7)))

        let frame = DaemonFrame.encode(.stopScan(session: 3))
        _ = frame.withUnsafeBytes { write(theirs, $0.baseAddress, $0.count) }
        #expect(Self.wait { received.withLock { $0 } == [.stopScan(session: 3)] })
        let garbage: [UInt8] = [0x02, 0x00, 0x00, 0x00, 0x99, 0x99]
        _ = garbage.withUnsafeBytes { write(theirs, $0.baseAddress, $0.count) }
        #expect(Self.wait { closed.withLock { $0 } != nil })
        #expect(closed.withLock { $0 }?.contains("not the protocol") == true)
    }

    @Test func aPeerThatDoesNotReadIsClosedPastTheLimit() {
        let (mine, theirs) = Self.pair()
        defer { close(theirs) }
        let closed = Mutex<String?>(nil)
        let socket = FramedSocket(fd: mine, name: "test", outboxLimit: 64 * 1024, onMessage: { _ in },
                                  onClose: { reason in closed.withLock { $0 = reason } })
        socket.start()
        let value = [UInt8](repeating: 0x55, count: 1024)
        let peer = LEAddress(.publicDevice, BluetoothAddress(value: 1))
        // Far more than the socket's buffers and the limit: the writer blocks, the outbox grows.
        for _ in 0..<8192 where closed.withLock({ $0 }) == nil {
            socket.send(.notification(session: 1, peer: peer, handle: 0x0012, value: value))
        }
        #expect(Self.wait { closed.withLock { $0 } != nil })
        #expect(closed.withLock { $0 }?.contains("unread") == true)
    }

    /// Reads from `fd` until `count` messages came (or the other end closed).
    static func readMessages(_ fd: Int32, count: Int) throws -> [DaemonMessage] {
        var reader = DaemonFrameReader()
        var messages: [DaemonMessage] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while messages.count < count {
            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard got > 0 else { break }
            reader.append(buffer[0..<got])
            while let message = try reader.next() { messages.append(message) }
        }
        return messages
    }

    @Test func framesSentBatchedOnALoopLeaveAtTheEndOfItsBurst() throws {
        let (mine, theirs) = Self.pair()
        defer { close(theirs) }
        let socket = FramedSocket(fd: mine, name: "test", onMessage: { _ in }, onClose: { _ in })
        socket.start()
        defer { socket.close() }
        let loop = EventLoop(name: "test")
        loop.execute {
            socket.send(.close(session: 1), batchedOn: loop)
            socket.send(.close(session: 2), batchedOn: loop)
        }
        loop.execute {
            // Still in the burst: nothing has left yet.
            var waiting: Int32 = 0
            _ = ioctl(theirs, UInt(FIONREAD), &waiting)
            #expect(waiting == 0)
            socket.send(.close(session: 3), batchedOn: loop)
        }
        loop.runUntilIdle()
        var waiting: Int32 = 0
        _ = ioctl(theirs, UInt(FIONREAD), &waiting)
        // The three frames, in one send from the loop's thread.
        #expect(Int(waiting) == 3 * DaemonFrame.encode(.close(session: 1)).count)
        #expect(try Self.readMessages(theirs, count: 3) == [.close(session: 1), .close(session: 2), .close(session: 3)])
    }

    @Test func aBatchedSendOffTheLoopLeavesAtOnce() throws {
        let (mine, theirs) = Self.pair()
        defer { close(theirs) }
        let socket = FramedSocket(fd: mine, name: "test", onMessage: { _ in }, onClose: { _ in })
        socket.start()
        defer { socket.close() }
        // Never run: a frame waiting for its burst's end would never leave.
        let loop = EventLoop(name: "test")
        socket.send(.close(session: 4), batchedOn: loop)
        #expect(try Self.readMessages(theirs, count: 1) == [.close(session: 4)])
    }

    @Test func whatTheSocketBufferDoesNotTakeFollowsThroughTheWriterInOrder() throws {
        let (mine, theirs) = Self.pair()
        defer { close(theirs) }
        var small: Int32 = 4096
        #expect(setsockopt(mine, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size)) == 0)
        let socket = FramedSocket(fd: mine, name: "test", onMessage: { _ in }, onClose: { _ in })
        socket.start()
        defer { socket.close() }
        let loop = EventLoop(name: "test")
        let peer = LEAddress(.publicDevice, BluetoothAddress(value: 1))
        let value = [UInt8](repeating: 0x55, count: 200)
        // Far more than the socket's buffer: the loop's send leaves a rest for the writer, and a
        // plain send from the loop's thread keeps its place among the batched ones.
        loop.execute {
            for session in UInt32(0)..<2_000 {
                let message = DaemonMessage.notification(session: session, peer: peer, handle: 0x0012, value: value)
                if session == 1_000 { socket.send(message) } else { socket.send(message, batchedOn: loop) }
            }
        }
        loop.runUntilIdle()
        let messages = try Self.readMessages(theirs, count: 2_000)
        #expect(messages.count == 2_000)
        let sessions = messages.map { message -> UInt32? in
            if case .notification(let session, _, _, _) = message { return session }
            return nil
        }
        #expect(sessions == (UInt32(0)..<2_000).map { $0 })
    }
}
