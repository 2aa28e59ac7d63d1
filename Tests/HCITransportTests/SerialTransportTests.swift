import Glibc
import HCI
import HCITesting
import HCITransport
import Scheduling
import TestTools
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SerialTransportTests {
    @Test func rejectsNonStandardRates() {
        let error = #expect(throws: HCITransportError.self) {
            try SerialTransport(device: "/dev/ttyS0", baudRate: 123_456)
        }
        #expect(error?.message.hasPrefix("/dev/ttyS0: unsupported baud rate 123456; use one of 1200, 2400,") == true)
        #expect(error?.message.hasSuffix("3500000, 4000000") == true)
        #expect(SerialTransport.supportedBaudRates.last == 4_000_000)
    }

    @Test func missingDeviceIsAClearError() throws {
        let transport = try SerialTransport(device: "/dev/no-such-uart", baudRate: 115_200)
        let error = #expect(throws: HCITransportError.self) {
            try transport.open(on: EventLoop(), sink: RecordingSink())
        }
        #expect(error?.message == "open /dev/no-such-uart: No such file or directory (ENOENT)")
    }

    /// A pseudo-terminal stands in for a UART: the transport configures and uses its
    /// follower side, the test plays the controller on the leader side.
    @Test func packetsBothWaysOverAPseudoTerminal() throws {
        let (leader, device) = try PseudoTerminal.open()
        defer { close(leader) }

        let transport = try SerialTransport(device: device, baudRate: 3_000_000, flowControl: true)
        let loop = EventLoop(name: "host")
        let sink = RecordingSink()
        try transport.open(on: loop, sink: sink)

        // Controller → host, split over two writes in the middle of the header.
        let event: [UInt8] = [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]
        #expect(write(leader, event, 2) == 2)
        #expect(write(leader, Array(event[2...]), event.count - 2) == event.count - 2)
        #expect(waitUntil(pumping: loop) { sink.packets.count == 1 })
        #expect(sink.packets.map(\.h4Bytes) == [event])

        // Host → controller, byte for byte (raw mode: no line discipline translation).
        let command = HCIPacket.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0C03)))
        let acl = HCIPacket.acl(ACLDataPacket(handle: 1, boundary: .firstNonFlushable, data: [0x0A, 0x0D, 0x11, 0x13, 0x7F]))
        transport.send(command)
        transport.send(acl)
        let expected = command.h4Bytes + acl.h4Bytes
        var received: [UInt8] = []
        #expect(waitUntil {
            var buffer = [UInt8](repeating: 0, count: 64)
            var ready = pollfd(fd: leader, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, 0) == 1 {
                let count = read(leader, &buffer, buffer.count)
                if count > 0 { received += buffer[..<count] }
            }
            return received.count >= expected.count
        })
        #expect(received == expected)

        transport.close()
        #expect(waitUntil(pumping: loop) { sink.isClosed })
        #expect(sink.closes.count == 1)
        #expect(sink.closes.first! == nil)
    }
}

/// posix_openpt and friends are X/Open functions that Swift's Glibc module doesn't import:
/// look them up in the C library at run time.
enum PseudoTerminal {
    struct Failure: Error, CustomStringConvertible { var description: String }

    private static func function<T>(_ name: String, as type: T.Type) throws -> T {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            throw Failure(description: "\(name) not found in the C library")
        }
        return unsafeBitCast(symbol, to: type)
    }

    /// Opens a pseudo-terminal: the leader's descriptor and the follower's device path.
    static func open() throws -> (leader: Int32, device: String) {
        typealias FDFunction = @convention(c) (Int32) -> Int32
        let openpt = try function("posix_openpt", as: FDFunction.self)
        let unlockpt = try function("unlockpt", as: FDFunction.self)
        let ptsname = try function("ptsname", as: (@convention(c) (Int32) -> UnsafeMutablePointer<CChar>?).self)
        let leader = openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard leader >= 0 else { throw Failure(description: "posix_openpt: errno \(errno)") }
        guard unlockpt(leader) == 0, let name = ptsname(leader) else {
            close(leader)
            throw Failure(description: "unlockpt/ptsname: errno \(errno)")
        }
        return (leader, String(cString: name))
    }
}
