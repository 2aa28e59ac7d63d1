import Foundation
import HCI
import Scheduling

import Glibc

/// An `HCITransport` over a file descriptor: a socket, a UART or an HCI user channel.
///
/// An I/O thread reads the descriptor, cuts the bytes into packets and delivers each on the
/// loop. Nothing blocks the loop: the descriptor is non-blocking, and `send` writes what the
/// descriptor takes at once and queues the rest, which the I/O thread writes as the descriptor
/// becomes writable (a UART holding CTS, a TCP peer that reads slowly). Frames leave whole and
/// in order: queued bytes are only ever written from the head of the queue, so two packets'
/// bytes never interleave. The queue is bounded (`outboundLimit`): a peer that stops reading
/// closes the transport with an error that says so, rather than growing memory forever.
///
/// A stream made with `init(connecting:name:outboundLimit:)` (TCP, Unix sockets) connects on
/// the I/O thread too; packets sent meanwhile wait in the queue, and a failed connection closes
/// the transport with the error.
///
/// The sink hears `transportClosed` exactly once: `nil` after `close()`, an error when the other
/// side hung up, a connection, read or write failed, the queue overflowed, or the byte stream
/// lost its H4 framing. No packet is delivered after it, and packets sent after it are dropped,
/// as are packets still queued when it closes. The descriptor is closed once the I/O thread has
/// stopped.
public final class FileDescriptorStream: HCITransport {
    /// How packets are delimited on the descriptor.
    public enum Framing: Sendable {
        /// A byte stream (TCP, Unix stream socket, UART): packets are found with `H4Framer`.
        case stream
        /// Each read returns exactly one H4 frame and each frame is written in one write
        /// (the Linux HCI user channel).
        case packetPerRead
    }

    /// The default bound of bytes waiting to be written: far more than a host ever has in
    /// flight to a controller that reads (commands go one at a time, ACL data within the
    /// controller's buffers), so reaching it means the other side stopped reading.
    public static let defaultOutboundLimit = 1 << 20

    private enum Phase { case idle, open, closed }

    /// Connects on the I/O thread: returns the connected descriptor, or nil when `wakeFD`
    /// became readable (closed meanwhile). Throws why it could not connect.
    typealias Connector = @Sendable (_ wakeFD: Int32) throws -> Int32?

    private struct State {
        var phase: Phase = .idle
        var loop: EventLoop?
        var sink: HCIPacketSink?
        /// The descriptor; -1 while connecting, and once released.
        var fd: Int32 = -1
        var ioRunning = false
        var released = false
        /// Set once the sink has been told the transport closed (or close() ran on the loop):
        /// receptions still queued on the loop are then dropped.
        var sinkClosed = false
        var onRelease: [@Sendable () -> Void] = []
        /// Frames waiting to be written, oldest first; the first one's bytes before
        /// `headOffset` are written already.
        var outbound = RingBuffer<[UInt8]>()
        var headOffset = 0
        var outboundBytes = 0
    }

    /// Names the transport in error messages ("tcp 127.0.0.1:9000").
    public let name: String
    /// The most bytes that may wait to be written before the transport closes with an error.
    public let outboundLimit: Int
    private let framing: Framing
    private let isSocket: Bool
    private let connector: Connector?
    // A byte in this pipe wakes the I/O thread's poll: to close, or to watch for writability.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    // A pthread mutex (`Locked`), which the thread sanitizer models (not so `Mutex` on Linux).
    private let state = Locked(State())

    /// Takes ownership of `fd`, which will be closed when the stream is done with it (also when
    /// this initializer throws).
    public init(adopting fd: Int32, name: String, framing: Framing = .stream,
                outboundLimit: Int = FileDescriptorStream.defaultOutboundLimit) throws {
        self.name = name
        self.framing = framing
        self.outboundLimit = outboundLimit
        connector = nil
        var info = stat()
        isSocket = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
        do {
            try POSIX.setNonBlocking(fd)
            (wakeRead, wakeWrite) = try POSIX.makePipe()
        } catch {
            Glibc.close(fd)
            throw error
        }
        state.withLock { $0.fd = fd }
    }

    /// A stream whose descriptor `connector` makes on the I/O thread once opened.
    init(connecting connector: @escaping Connector, name: String, outboundLimit: Int) throws {
        self.name = name
        framing = .stream
        isSocket = true
        self.outboundLimit = outboundLimit
        self.connector = connector
        (wakeRead, wakeWrite) = try POSIX.makePipe()
    }

    deinit {
        // Reached only when no I/O thread runs (it holds the stream): a stream never opened, or
        // one whose descriptors are already released.
        let callbacks = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.released else { return [] }
            releaseDescriptors(&state)
            return state.onRelease
        }
        for callback in callbacks { callback() }
    }

    /// Bytes sent but not yet taken by the descriptor. Thread-safe.
    public var pendingOutputByteCount: Int { state.withLock { $0.outboundBytes } }

    // MARK: HCITransport

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try state.withLock { state in
            switch state.phase {
            case .idle: break
            case .open: throw HCITransportError("\(name): already open")
            case .closed: throw HCITransportError("\(name): already closed")
            }
            state.phase = .open
            state.loop = loop
            state.sink = sink
            state.ioRunning = true
        }
        let thread = Thread { self.ioLoop(loop: loop, sink: sink) }
        thread.name = "\(name) I/O"
        thread.start()
    }

    /// Writes the frame, or what the descriptor takes of it, and queues the rest. Never waits.
    public func send(_ packet: HCIPacket) {
        let frame = packet.h4Bytes
        let failure = state.withLock { state -> HCITransportError? in
            guard state.phase == .open else { return nil }
            let wasEmpty = state.outbound.isEmpty
            state.outbound.append(frame)
            state.outboundBytes += frame.count
            if wasEmpty && state.fd >= 0 {
                if let failure = flush(&state) { return failure }
            }
            if state.outboundBytes > outboundLimit {
                return HCITransportError(
                    "\(name): the other side stopped reading: \(state.outboundBytes) bytes wait to be sent, "
                        + "more than the limit of \(outboundLimit)")
            }
            // Bytes left over: the I/O thread must watch for writability (once connected: until
            // then any wake-up means close).
            if wasEmpty && !state.outbound.isEmpty && state.fd >= 0 { wake() }
            return nil
        }
        if let failure { fail(failure) }
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
                hangUp(&state)
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

    private func wake() {
        var byte: UInt8 = 1
        // A full pipe is readable already: nothing lost.
        _ = write(wakeWrite, &byte, 1)
    }

    /// Drops what waits to be written, wakes the I/O thread, and hangs up a socket so its peer
    /// sees EOF. Call with the lock held, after leaving `.open`.
    private func hangUp(_ state: inout State) {
        state.outbound = RingBuffer()
        state.headOffset = 0
        state.outboundBytes = 0
        guard !state.released else { return }
        wake()
        if isSocket && state.fd >= 0 { _ = shutdown(state.fd, Int32(SHUT_RDWR)) }
    }

    /// The transport broke: tells the sink once, with the error.
    private func fail(_ error: HCITransportError) {
        let target = state.withLock { state -> (EventLoop, HCIPacketSink)? in
            guard state.phase == .open else { return nil }
            state.phase = .closed
            hangUp(&state)
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
            guard state.phase == .closed, !state.ioRunning, !state.released else { return [] }
            releaseDescriptors(&state)
            state.sink = nil
            state.loop = nil
            defer { state.onRelease = [] }
            return state.onRelease
        }
        for callback in callbacks { callback() }
    }

    private func releaseDescriptors(_ state: inout State) {
        if state.fd >= 0 { Glibc.close(state.fd) }
        state.fd = -1
        state.released = true
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    // MARK: The I/O thread

    private func ioLoop(loop: EventLoop, sink: HCIPacketSink) {
        var failure: HCITransportError?
        if let connector {
            do {
                if let fd = try connector(wakeRead) {
                    // Adopted under the lock: close() may have come while the connection was made.
                    let (adopted, pending) = state.withLock { state -> (Bool, HCITransportError?) in
                        guard state.phase == .open else { return (false, nil) }
                        state.fd = fd
                        return (true, state.outbound.isEmpty ? nil : flush(&state))
                    }
                    if !adopted { Glibc.close(fd) }
                    if adopted, let pending { failure = pending }
                    if adopted, failure == nil { failure = transfer(loop: loop, sink: sink) }
                }
            } catch {
                failure = error as? HCITransportError ?? HCITransportError("\(name): \(error)")
            }
        } else {
            failure = transfer(loop: loop, sink: sink)
        }
        // When closed locally the phase is already `.closed`, and `fail` reports nothing.
        fail(failure ?? HCITransportError("\(name): I/O stopped"))
        state.withLock { $0.ioRunning = false }
        releaseIfDone()
    }

    /// Reads and writes until the stream closes or fails; returns the failure (nil when closed).
    private func transfer(loop: EventLoop, sink: HCIPacketSink) -> HCITransportError? {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: H4Framer.maximumFrameLength, alignment: 1)
        defer { chunk.deallocate() }
        var framer = H4Framer(initialCapacity: 4096)
        // The descriptor stays open until this thread ends (release waits for it).
        guard let fd = state.withLock({ $0.phase == .open ? $0.fd : nil }) else { return nil }
        var drain = [UInt8](repeating: 0, count: 64)

        while true {
            let wantsWrite = state.withLock { !$0.outbound.isEmpty }
            var fds = [
                pollfd(fd: fd, events: Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                return POSIX.error("\(name): poll")
            }
            if fds[1].revents != 0 {
                _ = read(wakeRead, &drain, drain.count)
                if state.withLock({ $0.phase != .open }) { return nil }
            }
            let ready = fds[0].revents
            if ready & Int16(POLLOUT) != 0 {
                if let failure = state.withLock({ state in flush(&state) }) { return failure }
            }
            // POLLHUP and POLLERR too: the read says what happened.
            if ready & ~Int16(POLLOUT) != 0 {
                if let failure = readAvailable(fd, chunk: chunk, framer: &framer, loop: loop, sink: sink) {
                    return failure
                }
                if state.withLock({ $0.phase != .open }) { return nil }
            }
        }
    }

    /// Reads until the descriptor has nothing more; returns why the stream must close, if it must.
    private func readAvailable(_ fd: Int32, chunk: UnsafeMutableRawBufferPointer, framer: inout H4Framer,
                               loop: EventLoop, sink: HCIPacketSink) -> HCITransportError? {
        while true {
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
                    return HCITransportError("\(name): \(error)")
                }
                // A short read: nothing more right now (an HCI socket gives one frame a read).
                if count < chunk.count && framing == .stream { return nil }
            } else if count == 0 {
                if state.withLock({ $0.phase != .open }) { return nil }
                return HCITransportError("\(name): closed by the other side")
            } else {
                let code = errno
                switch code {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return nil
                default:
                    if state.withLock({ $0.phase != .open }) { return nil }
                    return POSIX.error("\(name): read", code)
                }
            }
        }
    }

    private func deliver(_ packet: HCIPacket, loop: EventLoop, sink: HCIPacketSink) {
        loop.execute { [self] in
            guard !state.withLock({ $0.sinkClosed }) else { return }
            sink.receive(packet)
        }
    }

    // MARK: Writing

    /// Writes queued frames, oldest first, until the queue is empty or the descriptor is full.
    /// Call with the lock held (so writes never interleave) on a connected, open stream.
    /// Returns the error that broke the transport.
    private func flush(_ state: inout State) -> HCITransportError? {
        guard state.phase == .open, state.fd >= 0 else { return nil }
        let fd = state.fd
        while let frame = state.outbound.first {
            let offset = state.headOffset
            let written = frame.withUnsafeBytes { buffer in
                // MSG_NOSIGNAL: a peer that hung up gives EPIPE, not a process-killing SIGPIPE.
                isSocket
                    ? Glibc.send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                    : Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written < 0 {
                let code = errno
                switch code {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return nil
                default: return POSIX.error("\(name): write", code)
                }
            }
            let remaining = frame.count - offset
            if framing == .packetPerRead && written != remaining {
                return HCITransportError("\(name): short write (\(written) of \(remaining) bytes)")
            }
            state.outboundBytes -= written
            if written == remaining {
                _ = state.outbound.popFirst()
                state.headOffset = 0
            } else {
                // The rest of this frame goes first next time: frames never interleave.
                state.headOffset += written
            }
        }
        return nil
    }
}

/// Holds the stream of a transport that opens its medium (connects, opens a device) in `open`.
final class DeferredStream: Sendable {
    private let stream = Locked<FileDescriptorStream?>(nil)

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
    var pendingOutputByteCount: Int { stream.withLock { $0 }?.pendingOutputByteCount ?? 0 }
}
