import DaemonProtocol
import Foundation
import Glibc
import HCI
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
}
