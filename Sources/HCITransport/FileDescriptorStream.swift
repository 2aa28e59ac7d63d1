import Foundation
import HCI
import Scheduling
import Synchronization

import Glibc

/// An `HCITransport` over an open file descriptor: a socket, a UART or an HCI user channel.
///
/// A reader thread reads the descriptor, cuts the bytes into packets and delivers each on the
/// loop. `send` writes each H4 frame whole from the loop. The descriptor is made non-blocking,
/// and every wait is a `poll` that also watches a wake-up pipe, so `close()` from any thread
/// stops both the reader and a writer blocked on a full socket buffer.
///
/// The sink hears `transportClosed` exactly once: `nil` after `close()`, an error when the other
/// side hung up, a read or write failed, or the byte stream lost its H4 framing. No packet is
/// delivered after it, and packets sent after it are dropped. The descriptor is closed once the
/// reader has stopped and no write is in progress.
public final class FileDescriptorStream: HCITransport {
    /// How packets are delimited on the descriptor.
    public enum Framing: Sendable {
        /// A byte stream (TCP, Unix stream socket, UART): packets are found with `H4Framer`.
        case stream
        /// Each read returns exactly one H4 frame and each frame is written in one write
        /// (the Linux HCI user channel).
        case packetPerRead
    }

    private enum Phase { case idle, open, closed }

    private struct State {
        var phase: Phase = .idle
        var loop: EventLoop?
        var sink: HCIPacketSink?
        var readerRunning = false
        var writers = 0
        var released = false
        /// Set once the sink has been told the transport closed (or close() ran on the loop):
        /// receptions still queued on the loop are then dropped.
        var sinkClosed = false
        var onRelease: [@Sendable () -> Void] = []
    }

    /// Names the transport in error messages ("tcp 127.0.0.1:9000").
    public let name: String
    private let fd: Int32
    private let framing: Framing
    private let isSocket: Bool
    // Written to on close: a byte in this pipe wakes every poll of the reader and writer.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let state = Mutex(State())

    /// Takes ownership of `fd`, which will be closed when the stream is done with it (also when
    /// this initializer throws).
    public init(adopting fd: Int32, name: String, framing: Framing = .stream) throws {
        self.name = name
        self.fd = fd
        self.framing = framing
        var info = stat()
        isSocket = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
        do {
            try POSIX.setNonBlocking(fd)
            (wakeRead, wakeWrite) = try POSIX.makePipe()
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit {
        // Reached only when no reader runs (it holds the stream): a stream never opened, or one
        // whose descriptors are already released.
        let callbacks = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.released else { return [] }
            releaseDescriptors()
            state.released = true
            return state.onRelease
        }
        for callback in callbacks { callback() }
    }

    // MARK: HCITransport

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try state.withLock { state throws(HCITransportError) in
            switch state.phase {
            case .idle: break
            case .open: throw HCITransportError("\(name): already open")
            case .closed: throw HCITransportError("\(name): already closed")
            }
            state.phase = .open
            state.loop = loop
            state.sink = sink
            state.readerRunning = true
        }
        let thread = Thread { self.readLoop(loop: loop, sink: sink) }
        thread.name = "\(name) reader"
        thread.start()
    }

    public func send(_ packet: HCIPacket) {
        let writing = state.withLock { state in
            guard state.phase == .open else { return false }
            state.writers += 1
            return true
        }
        guard writing else { return }
        let failure = writeFrame(packet.h4Bytes)
        state.withLock { $0.writers -= 1 }
        if let failure { fail(failure) }
        releaseIfDone()
    }

    /// Closes the stream; the sink hears `transportClosed(nil)` on its loop. Thread-safe.
    public func close() {
        let target = state.withLock { state -> (EventLoop, HCIPacketSink)? in
            switch state.phase {
            case .closed:
                return nil
            case .idle:
                state.phase = .closed
                return nil
            case .open:
                state.phase = .closed
                wakeUp(&state)
                // Called on the loop: nothing more reaches the sink from now on.
                if state.loop?.inLoop == true { state.sinkClosed = true }
                return (state.loop!, state.sink!)
            }
        }
        if let (loop, sink) = target { tellClosed(nil, loop: loop, sink: sink) }
        releaseIfDone()
    }

    /// Runs `body` (on any thread) once the descriptor has been closed: right away if it already
    /// has. Servers use it to accept the next connection.
    func whenReleased(_ body: @escaping @Sendable () -> Void) {
        let already = state.withLock { state in
            if state.released { return true }
            state.onRelease.append(body)
            return false
        }
        if already { body() }
    }

    // MARK: Closing

    /// Wakes the reader and any blocked writer, and hangs up a socket so its peer sees EOF.
    /// Call with the lock held, before the descriptors are released.
    private func wakeUp(_ state: inout State) {
        guard !state.released else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        if isSocket { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// The transport broke: tells the sink once, with the error.
    private func fail(_ error: HCITransportError) {
        let target = state.withLock { state -> (EventLoop, HCIPacketSink)? in
            guard state.phase == .open else { return nil }
            state.phase = .closed
            wakeUp(&state)
            return (state.loop!, state.sink!)
        }
        if let (loop, sink) = target { tellClosed(error, loop: loop, sink: sink) }
    }

    /// Called once per stream, by whichever of close() or a failure moved it out of `.open`.
    private func tellClosed(_ error: HCITransportError?, loop: EventLoop, sink: HCIPacketSink) {
        loop.execute { [self] in
            state.withLock { $0.sinkClosed = true }
            sink.transportClosed(error)
        }
    }

    private func releaseIfDone() {
        let callbacks = state.withLock { state -> [@Sendable () -> Void] in
            guard state.phase == .closed, !state.readerRunning, state.writers == 0, !state.released else {
                return []
            }
            releaseDescriptors()
            state.released = true
            state.sink = nil
            state.loop = nil
            defer { state.onRelease = [] }
            return state.onRelease
        }
        for callback in callbacks { callback() }
    }

    private func releaseDescriptors() {
        Glibc.close(fd)
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    // MARK: Reading

    private func readLoop(loop: EventLoop, sink: HCIPacketSink) {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: H4Framer.maximumFrameLength, alignment: 1)
        defer { chunk.deallocate() }
        var framer = H4Framer(initialCapacity: 4096)
        var failure: HCITransportError?

        reading: while true {
            let count = read(fd, chunk.baseAddress, chunk.count)
            if count > 0 {
                let bytes = UnsafeRawBufferPointer(rebasing: chunk[0..<count])
                do {
                    switch framing {
                    case .stream:
                        framer.append(bytes)
                        while let packet = try framer.nextPacket() { deliver(packet, loop: loop, sink: sink) }
                    case .packetPerRead:
                        let packet = try HCIPacket(type: bytes[0], body: Array(bytes[1...])[...])
                        deliver(packet, loop: loop, sink: sink)
                    }
                } catch {
                    failure = HCITransportError("\(name): \(error)")
                    break reading
                }
            } else if count == 0 {
                failure = HCITransportError("\(name): closed by the other side")
                break reading
            } else {
                let code = errno
                switch code {
                case EINTR:
                    continue reading
                case EAGAIN, EWOULDBLOCK:
                    // Woken instead of readable: close() was called.
                    if POSIX.waitReady(fd, events: Int16(POLLIN), orWake: wakeRead) { continue reading }
                    break reading
                default:
                    failure = POSIX.error("\(name): read", code)
                    break reading
                }
            }
        }
        // When closed locally the phase is already `.closed`, and `fail` reports nothing.
        if let failure { fail(failure) } else { fail(HCITransportError("\(name): reader stopped")) }
        state.withLock { $0.readerRunning = false }
        releaseIfDone()
    }

    private func deliver(_ packet: HCIPacket, loop: EventLoop, sink: HCIPacketSink) {
        loop.execute { [self] in
            guard !state.withLock({ $0.sinkClosed }) else { return }
            sink.receive(packet)
        }
    }

    // MARK: Writing

    /// Writes the whole frame, waiting while the descriptor is full. Returns the error that broke
    /// the transport, or nil (also when woken by close(): the frame is then dropped).
    private func writeFrame(_ frame: [UInt8]) -> HCITransportError? {
        frame.withUnsafeBytes { buffer -> HCITransportError? in
            guard let base = buffer.baseAddress else { return nil }
            var offset = 0
            while offset < buffer.count {
                let remaining = buffer.count - offset
                // MSG_NOSIGNAL: a peer that hung up gives EPIPE, not a process-killing SIGPIPE.
                let written = isSocket
                    ? Glibc.send(fd, base + offset, remaining, Int32(MSG_NOSIGNAL))
                    : Glibc.write(fd, base + offset, remaining)
                if written >= 0 {
                    if framing == .packetPerRead && written != remaining {
                        return HCITransportError("\(name): short write (\(written) of \(remaining) bytes)")
                    }
                    offset += written
                    continue
                }
                let code = errno
                switch code {
                case EINTR:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    if !POSIX.waitReady(fd, events: Int16(POLLOUT), orWake: wakeRead) { return nil }
                default:
                    return POSIX.error("\(name): write", code)
                }
            }
            return nil
        }
    }
}

/// Holds the stream of a transport that opens its medium (connects, opens a device) in `open`.
final class DeferredStream: Sendable {
    private let stream = Mutex<FileDescriptorStream?>(nil)

    func open(on loop: EventLoop, sink: HCIPacketSink, connect: () throws -> FileDescriptorStream) throws {
        try stream.withLock { current in
            if let current { throw HCITransportError("\(current.name): already opened") }
            let opened = try connect()
            try opened.open(on: loop, sink: sink)
            current = opened
        }
    }

    func send(_ packet: HCIPacket) { stream.withLock { $0 }?.send(packet) }
    func close() { stream.withLock { $0 }?.close() }
}
