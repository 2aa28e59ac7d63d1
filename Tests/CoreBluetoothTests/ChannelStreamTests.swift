import Foundation
import Testing

@testable import CoreBluetooth

/// The Foundation stream pair of an L2CAP channel, against transport doubles: delegate events on
/// run loops (a dedicated thread's, and the main one), polling, the send buffer, back-pressure,
/// the channel's end and failure, and a 64 KiB echo.
@Suite struct ChannelStreamTests {
    // MARK: Opening

    @Test func openCompletesOnTheRunLoopThreadInOrder() throws {
        let transport = RecordingTransport()
        let streams = ChannelStreams(transport: transport)
        let loop = RunLoopThread()
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        for stream in [streams.input, streams.output] as [Stream] {
            stream.delegate = delegate
            stream.schedule(in: loop.runLoop, forMode: .default)
            #expect(stream.streamStatus == .notOpen)
        }
        streams.input.open()
        streams.output.open()
        #expect(streams.input.streamStatus == .open)
        #expect(streams.output.streamStatus == .open)
        #expect(delegate.log.wait { $0.count == 3 })
        #expect(delegate.events(of: streams.input) == [.openCompleted])
        #expect(delegate.events(of: streams.output) == [.openCompleted, .hasSpaceAvailable])
        #expect(delegate.allOnExpectedThread)
        #expect(delegate.log.current.allSatisfy { $0.mode == .default })
    }

    @Test func anEventRaisedBeforeSchedulingComesOnceScheduled() {
        let streams = ChannelStreams(transport: RecordingTransport())
        let loop = RunLoopThread()
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        streams.input.delegate = delegate
        streams.input.open()
        streams.received([1, 2, 3])
        streams.input.schedule(in: loop.runLoop, forMode: .default)
        #expect(delegate.log.wait { $0.count == 2 })
        #expect(delegate.events(of: streams.input) == [.openCompleted, .hasBytesAvailable])
        #expect(delegate.allOnExpectedThread)
    }

    // MARK: Receiving

    @Test func bytesInAreReadInOrderAcrossManyChunks() {
        let streams = ChannelStreams(transport: RecordingTransport())
        let loop = RunLoopThread()
        defer { loop.stop() }
        let collected = Guarded<[UInt8]>([])
        // One short read per event, as many apps do: the event must come again while bytes remain.
        let delegate = RecordingDelegate(expectedThread: loop.thread) { stream, event in
            guard event == .hasBytesAvailable, let input = stream as? InputStream else { return }
            var buffer = [UInt8](repeating: 0, count: 100)
            let n = input.read(&buffer, maxLength: buffer.count)
            if n > 0 { collected.update { $0 += buffer[..<n] } }
        }
        streams.input.delegate = delegate
        streams.input.schedule(in: loop.runLoop, forMode: .default)
        streams.input.open()

        var generator = SystemRandomNumberGenerator()
        var sent: [UInt8] = []
        for _ in 0..<500 {
            let chunk = (0..<Int.random(in: 1...300, using: &generator)).map { _ in UInt8.random(in: 0...255) }
            sent += chunk
            streams.received(chunk)
        }
        #expect(collected.wait { $0.count >= sent.count })
        #expect(collected.current == sent)
        #expect(delegate.allOnExpectedThread)
        #expect(!streams.input.hasBytesAvailable)
        #expect(delegate.events(of: streams.input).first == .openCompleted)
    }

    @Test func aDelegateThatDoesNotReadHearsNoMoreUntilItReads() {
        let streams = ChannelStreams(transport: RecordingTransport())
        let loop = RunLoopThread()
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        streams.input.delegate = delegate
        streams.input.schedule(in: loop.runLoop, forMode: .default)
        streams.input.open()
        streams.received([1])
        #expect(delegate.log.wait { $0.count == 2 })
        streams.received([2])
        streams.received([3])
        // A read leaving bytes raises the event again; a later arrival does not, before it.
        var byte: UInt8 = 0
        #expect(streams.input.read(&byte, maxLength: 1) == 1)
        #expect(delegate.log.wait { $0.count == 3 })
        #expect(delegate.events(of: streams.input) == [.openCompleted, .hasBytesAvailable, .hasBytesAvailable])
    }

    @Test func peerClosedEndsTheInputOnlyAfterTheBufferedBytes() {
        let transport = RecordingTransport()
        let streams = ChannelStreams(transport: transport)
        let loop = RunLoopThread()
        defer { loop.stop() }
        let collected = Guarded<[UInt8]>([])
        let delegate = RecordingDelegate(expectedThread: loop.thread) { stream, event in
            guard event == .hasBytesAvailable, let input = stream as? InputStream else { return }
            var buffer = [UInt8](repeating: 0, count: 10)
            let n = input.read(&buffer, maxLength: buffer.count)
            if n > 0 { collected.update { $0 += buffer[..<n] } }
        }
        for stream in [streams.input, streams.output] as [Stream] {
            stream.delegate = delegate
            stream.schedule(in: loop.runLoop, forMode: .default)
        }
        let bytes = (0..<95).map { UInt8($0) }
        streams.received(bytes)
        streams.peerClosed()
        streams.input.open()
        streams.output.open()
        #expect(delegate.log.wait { log in log.contains { $0.isInput && $0.event == .endEncountered } })
        #expect(collected.current == bytes)
        let inputEvents = delegate.events(of: streams.input)
        #expect(inputEvents.first == .openCompleted)
        #expect(inputEvents.last == .endEncountered)
        #expect(inputEvents.dropFirst().dropLast().allSatisfy { $0 == .hasBytesAvailable })
        #expect(inputEvents.count == 1 + 10 + 1)
        var byte: UInt8 = 0
        #expect(streams.input.read(&byte, maxLength: 1) == 0)
        #expect(streams.input.streamStatus == .atEnd)
        #expect(!streams.input.hasBytesAvailable)
        // The output stream ends at once: writes fail.
        #expect(delegate.log.wait { log in log.contains { !$0.isInput && $0.event == .endEncountered } })
        #expect(delegate.events(of: streams.output) == [.openCompleted, .endEncountered])
        #expect(streams.output.streamStatus == .atEnd)
        #expect(!streams.output.hasSpaceAvailable)
        #expect(streams.output.write([1], maxLength: 1) == -1)
        #expect(streams.output.streamError == nil)
        #expect(delegate.allOnExpectedThread)
    }

    @Test func peerClosedWhilePolling() {
        let streams = ChannelStreams(transport: RecordingTransport())
        streams.input.open()
        streams.received([1, 2, 3, 4, 5])
        streams.peerClosed()
        streams.received([6])  // after the end: dropped
        #expect(streams.input.streamStatus == .open)
        #expect(streams.input.hasBytesAvailable)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(streams.input.read(&buffer, maxLength: 16) == 5)
        #expect(buffer[..<5] == [1, 2, 3, 4, 5])
        #expect(streams.input.streamStatus == .atEnd)
        #expect(streams.input.read(&buffer, maxLength: 16) == 0)
    }

    // MARK: Sending

    @Test func writeFillsTheSendBufferThenSentBringsSpaceBack() {
        let transport = RecordingTransport()
        let streams = ChannelStreams(transport: transport)
        let loop = RunLoopThread()
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        streams.output.delegate = delegate
        streams.output.schedule(in: loop.runLoop, forMode: .default)
        #expect(streams.output.write([1], maxLength: 1) == -1)  // not open
        streams.output.open()
        #expect(delegate.log.wait { $0.count == 2 })

        let limit = ChannelStreams.defaultSendBufferLimit
        let data = (0..<(100 * 1024)).map { UInt8(truncatingIfNeeded: $0 * 7) }
        #expect(streams.output.write(data, maxLength: data.count) == limit)
        #expect(streams.output.write(data, maxLength: data.count) == 0)
        #expect(!streams.output.hasSpaceAvailable)
        #expect(transport.log.current.written == Array(data[..<limit]))

        delegate.log.update { $0 = [] }
        streams.sent(1000)
        #expect(delegate.log.wait { $0.count == 1 })
        #expect(delegate.events(of: streams.output) == [.hasSpaceAvailable])
        #expect(streams.output.hasSpaceAvailable)
        let rest = Array(data[limit...])
        #expect(streams.output.write(rest, maxLength: rest.count) == 1000)
        #expect(streams.output.write(rest, maxLength: rest.count) == 0)
        #expect(transport.log.current.written == Array(data[..<(limit + 1000)]))
        #expect(transport.log.current.writes == 2)
        #expect(delegate.allOnExpectedThread)
    }

    // MARK: Failure and closing

    @Test func failureReportsErrorOccurredWithACBErrorDomainNSError() throws {
        let streams = ChannelStreams(transport: RecordingTransport())
        let loop = RunLoopThread()
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        for stream in [streams.input, streams.output] as [Stream] {
            stream.delegate = delegate
            stream.schedule(in: loop.runLoop, forMode: .default)
            stream.open()
        }
        #expect(delegate.log.wait { $0.count == 3 })
        streams.received([1, 2, 3])
        streams.failed(CBError(.connectionTimeout))
        #expect(delegate.log.wait { log in log.filter { $0.event == .errorOccurred }.count == 2 })
        #expect(delegate.events(of: streams.input).last == .errorOccurred)
        #expect(delegate.events(of: streams.output).last == .errorOccurred)
        for stream in [streams.input, streams.output] as [Stream] {
            #expect(stream.streamStatus == .error)
            let error = try #require(stream.streamError as? NSError)
            #expect(error.domain == CBErrorDomain)
            #expect(error.code == CBError.Code.connectionTimeout.rawValue)
        }
        var byte: UInt8 = 0
        #expect(streams.input.read(&byte, maxLength: 1) == -1)
        #expect(streams.output.write([1], maxLength: 1) == -1)
        #expect(!streams.input.hasBytesAvailable)
        #expect(!streams.output.hasSpaceAvailable)
        #expect(delegate.allOnExpectedThread)
    }

    @Test func aFailureOtherThanCBErrorIsWrapped() throws {
        let streams = ChannelStreams(transport: RecordingTransport())
        streams.input.open()
        streams.failed(NSError(domain: NSPOSIXErrorDomain, code: Int(EIO)))
        let error = try #require(streams.input.streamError as? NSError)
        #expect(error.domain == CBErrorDomain)
        #expect(error.code == CBError.Code.unknown.rawValue)
        let underlying = try #require(error.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(underlying.domain == NSPOSIXErrorDomain)
        // A stream opened after the failure reports it rather than opening.
        #expect(streams.output.streamStatus == .notOpen)
        streams.output.open()
        #expect(streams.output.streamStatus == .error)
    }

    @Test func closingBothStreamsClosesTheChannelOnce() {
        let transport = RecordingTransport()
        let streams = ChannelStreams(transport: transport)
        streams.input.open()
        streams.output.open()
        streams.input.close()
        #expect(transport.log.current.closes == 0)
        #expect(streams.input.streamStatus == .closed)
        var byte: UInt8 = 0
        #expect(streams.input.read(&byte, maxLength: 1) == -1)
        streams.output.close()
        streams.output.close()
        streams.input.close()
        #expect(transport.log.current.closes == 1)
        #expect(streams.output.write([1], maxLength: 1) == -1)
        streams.peerClosed()
        #expect(transport.log.current.closes == 1)
    }

    @Test func releasingTheStreamsUnclosedClosesTheChannel() {
        let transport = RecordingTransport()
        do {
            let streams = ChannelStreams(transport: transport)
            streams.input.open()
            streams.output.open()
        }
        #expect(transport.log.current.closes == 1)
    }

    @Test func noEventsAfterClose() {
        let streams = ChannelStreams(transport: RecordingTransport())
        let loop = RunLoopThread()
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        let other = ChannelStreams(transport: RecordingTransport())
        for stream in [streams.input, other.input] as [Stream] {
            stream.delegate = delegate
            stream.schedule(in: loop.runLoop, forMode: .default)
            stream.open()
        }
        #expect(delegate.log.wait { $0.count == 2 })
        streams.input.close()
        streams.received([1])
        // A later event on another stream of the same run loop is the barrier: the closed one
        // had its chance first.
        other.received([1])
        #expect(delegate.log.wait { $0.count == 3 })
        #expect(delegate.events(of: streams.input) == [.openCompleted])
        #expect(delegate.events(of: other.input) == [.openCompleted, .hasBytesAvailable])
    }

    // MARK: Back-pressure

    @Test func receivingPausesAboveTheHighWaterMarkAndResumesBelowTheLowOne() {
        let transport = RecordingTransport()
        let streams = ChannelStreams(transport: transport, receiveHighWater: 1000, receiveLowWater: 200)
        streams.input.open()
        streams.received([UInt8](repeating: 1, count: 600))
        streams.received([UInt8](repeating: 2, count: 400))
        #expect(transport.log.current.pauses == [])  // at the mark, not above it
        streams.received([3])
        #expect(transport.log.current.pauses == [true])
        streams.received([UInt8](repeating: 4, count: 500))
        #expect(transport.log.current.pauses == [true])
        var buffer = [UInt8](repeating: 0, count: 1500)
        #expect(streams.input.read(&buffer, maxLength: 1200) == 1200)  // 301 left
        #expect(transport.log.current.pauses == [true])
        #expect(streams.input.read(&buffer, maxLength: 102) == 102)  // 199 left
        #expect(transport.log.current.pauses == [true, false])
        streams.received([UInt8](repeating: 5, count: 900))  // 1099
        #expect(transport.log.current.pauses == [true, false, true])
        // Closing the input drops what is unread and lets the peer send again.
        streams.input.close()
        #expect(transport.log.current.pauses == [true, false, true, false])
    }

    // MARK: Modes and threads

    @Test func eventsComeOnlyInTheScheduledModes() {
        let mode = RunLoop.Mode("ChannelStreamTestsMode")
        let loop = RunLoopThread(mode: mode)
        defer { loop.stop() }
        let delegate = RecordingDelegate(expectedThread: loop.thread)
        let inDefaultMode = ChannelStreams(transport: RecordingTransport())
        inDefaultMode.input.delegate = delegate
        inDefaultMode.input.schedule(in: loop.runLoop, forMode: .default)
        inDefaultMode.input.open()
        let inTestMode = ChannelStreams(transport: RecordingTransport())
        inTestMode.input.delegate = delegate
        inTestMode.input.schedule(in: loop.runLoop, forMode: mode)
        inTestMode.input.schedule(in: loop.runLoop, forMode: .default)
        inTestMode.input.open()
        inTestMode.received([1])
        #expect(delegate.log.wait { $0.count == 2 })
        #expect(delegate.events(of: inTestMode.input) == [.openCompleted, .hasBytesAvailable])
        #expect(delegate.log.current.allSatisfy { $0.mode == mode })
        // Due since before, but the loop never runs the default mode.
        #expect(delegate.events(of: inDefaultMode.input) == [])
        // Removed from the run loop's mode: nothing more comes.
        inTestMode.input.remove(from: loop.runLoop, forMode: mode)
        var byte: UInt8 = 0
        _ = inTestMode.input.read(&byte, maxLength: 1)
        inTestMode.received([2])
        let barrier = ChannelStreams(transport: RecordingTransport())
        barrier.input.delegate = delegate
        barrier.input.schedule(in: loop.runLoop, forMode: mode)
        barrier.input.open()
        #expect(delegate.log.wait { $0.count == 3 })
        #expect(delegate.events(of: barrier.input) == [.openCompleted])
        #expect(delegate.events(of: inTestMode.input) == [.openCompleted, .hasBytesAvailable])
        #expect(delegate.allOnExpectedThread)
    }

    @Test func pollingFromOtherThreadsWithoutScheduling() {
        let transport = LoopbackTransport(mtu: 100)
        let streams = ChannelStreams(transport: transport, sendBufferLimit: 1000)
        transport.attach(streams)
        // Set and never scheduled: must hear nothing.
        let delegate = RecordingDelegate(expectedThread: nil)
        streams.input.delegate = delegate
        streams.output.delegate = delegate
        nonisolated(unsafe) let input = streams.input
        nonisolated(unsafe) let output = streams.output
        input.open()
        output.open()
        let data = (0..<(20 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
        let received = Guarded<[UInt8]>([])
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 512)
            let deadline = Date(timeIntervalSinceNow: 10)
            while received.current.count < data.count && Date() < deadline {
                guard input.hasBytesAvailable else {
                    sched_yield()
                    continue
                }
                let n = input.read(&buffer, maxLength: buffer.count)
                if n > 0 { received.update { $0 += buffer[..<n] } }
            }
        }
        let writer = Thread {
            var offset = 0
            let deadline = Date(timeIntervalSinceNow: 10)
            while offset < data.count && Date() < deadline {
                guard output.hasSpaceAvailable else {
                    sched_yield()
                    continue
                }
                let n = data[offset...].withUnsafeBufferPointer {
                    output.write($0.baseAddress!, maxLength: min($0.count, 700))
                }
                if n > 0 { offset += n }
            }
        }
        reader.start()
        writer.start()
        #expect(received.wait { $0.count >= data.count })
        #expect(received.current == data)
        #expect(delegate.log.current.isEmpty)
    }

    // MARK: Echo

    @Test func echo64KiBThroughALoopbackWithBothStreamsOnARunLoop() {
        let transport = LoopbackTransport(mtu: 247)
        // Small buffers, so that both the send buffer and receive back-pressure are exercised.
        let streams = ChannelStreams(
            transport: transport, sendBufferLimit: 4096, receiveHighWater: 8192, receiveLowWater: 2048)
        transport.attach(streams)
        let loop = RunLoopThread()
        defer { loop.stop() }
        let data = (0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 8) }
        let echo = EchoApp(data: data)
        let delegate = RecordingDelegate(expectedThread: loop.thread) { stream, event in echo.handle(stream, event) }
        for stream in [streams.input, streams.output] as [Stream] {
            stream.delegate = delegate
            stream.schedule(in: loop.runLoop, forMode: .default)
        }
        streams.input.open()
        streams.output.open()
        #expect(echo.received.wait(timeout: 20) { $0.count >= data.count })
        #expect(echo.received.current == data)
        #expect(delegate.allOnExpectedThread)
        #expect(transport.maxSDU <= 247)
        streams.input.close()
        streams.output.close()
        #expect(transport.closes.current == 1)
    }
    // Delivery on the main run loop needs a process whose main thread runs it (under `swift
    // test` it never runs): L2CAPStreamTests runs `L2CAPStream`, which schedules there.
}

// MARK: - Doubles and helpers

/// A value shared with other threads, whose changes can be waited for.
private final class Guarded<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched with `condition` locked.
    private let condition = NSCondition()
    private var value: Value

    init(_ value: Value) { self.value = value }

    var current: Value {
        condition.lock()
        defer { condition.unlock() }
        return value
    }

    @discardableResult
    func update<T>(_ body: (inout Value) -> T) -> T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return body(&value)
    }

    /// Waits (blocked, no polling) until `predicate` holds, for at most `timeout` seconds.
    func wait(timeout: TimeInterval = 10, until predicate: (Value) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(value) {
            if !condition.wait(until: deadline) { return predicate(value) }
        }
        return true
    }
}

private struct TransportLog {
    var written: [UInt8] = []
    var writes = 0
    var pauses: [Bool] = []
    var closes = 0
}

/// Records what the streams ask of the channel.
private final class RecordingTransport: ChannelStreamTransport {
    let log = Guarded(TransportLog())

    func streamsWrote(_ bytes: [UInt8]) {
        log.update {
            $0.written += bytes
            $0.writes += 1
        }
    }
    func streamsSetReceivePaused(_ paused: Bool) { log.update { $0.pauses.append(paused) } }
    func streamsClosed() { log.update { $0.closes += 1 } }
}

/// A channel whose peer echoes: on its own queue (the stack's loop), takes written bytes off
/// the send buffer and feeds them back as SDUs of at most `mtu` bytes, withholding them while
/// receiving is paused (as withheld credits would).
private final class LoopbackTransport: ChannelStreamTransport, @unchecked Sendable {
    // @unchecked: `streams` is set once by `attach` before any stream is opened; the rest is
    // behind `state`'s lock or only touched on `queue`.
    private let queue = DispatchQueue(label: "loopback")
    private let mtu: Int
    private weak var streams: ChannelStreams?
    private let state = Guarded((paused: false, held: [[UInt8]](), maxSDU: 0))
    let closes = Guarded(0)

    init(mtu: Int) { self.mtu = mtu }

    func attach(_ streams: ChannelStreams) { self.streams = streams }

    var maxSDU: Int { state.current.maxSDU }

    func streamsWrote(_ bytes: [UInt8]) {
        queue.async { [self] in
            streams?.sent(bytes.count)
            for start in stride(from: 0, to: bytes.count, by: mtu) {
                state.update { $0.held.append(Array(bytes[start..<min(start + mtu, bytes.count)])) }
            }
            deliverHeld()
        }
    }

    func streamsSetReceivePaused(_ paused: Bool) {
        queue.async { [self] in
            state.update { $0.paused = paused }
            deliverHeld()
        }
    }

    func streamsClosed() { closes.update { $0 += 1 } }

    private func deliverHeld() {
        while let sdu = state.update({ s -> [UInt8]? in
            guard !s.paused, !s.held.isEmpty else { return nil }
            s.maxSDU = max(s.maxSDU, s.held[0].count)
            return s.held.removeFirst()
        }) {
            streams?.received(sdu)
        }
    }
}

/// An app echoing `data` to itself through a channel: writes it as space comes, reads what
/// comes back.
private final class EchoApp: @unchecked Sendable {
    // @unchecked: `offset` is only touched in `handle`, on the run loop's thread.
    let data: [UInt8]
    private var offset = 0
    let received = Guarded<[UInt8]>([])

    init(data: [UInt8]) { self.data = data }

    func handle(_ stream: Stream, _ event: Stream.Event) {
        switch (stream, event) {
        case (let output as OutputStream, .hasSpaceAvailable):
            while offset < data.count {
                let n = data[offset...].withUnsafeBufferPointer { output.write($0.baseAddress!, maxLength: $0.count) }
                guard n > 0 else { break }
                offset += n
            }
        case (let input as InputStream, .hasBytesAvailable):
            var buffer = [UInt8](repeating: 0, count: 1000)
            while input.hasBytesAvailable {
                let n = input.read(&buffer, maxLength: buffer.count)
                guard n > 0 else { break }
                received.update { $0 += buffer[..<n] }
            }
        default: break
        }
    }
}

/// A delegate recording each event, its stream, thread and run-loop mode, then passing it on.
private final class RecordingDelegate: NSObject, StreamDelegate, @unchecked Sendable {
    // @unchecked: `log` is thread-safe; the rest is immutable.
    struct Entry {
        let stream: ObjectIdentifier
        let isInput: Bool
        let event: Stream.Event
        let onExpectedThread: Bool
        let mode: RunLoop.Mode?
    }

    let log = Guarded<[Entry]>([])
    private let expectedThread: Thread?
    private let handler: (@Sendable (Stream, Stream.Event) -> Void)?

    init(expectedThread: Thread?, handler: (@Sendable (Stream, Stream.Event) -> Void)? = nil) {
        self.expectedThread = expectedThread
        self.handler = handler
    }

    func stream(_ aStream: Stream, handle eventCode: Stream.Event) {
        log.update {
            $0.append(
                Entry(
                    stream: ObjectIdentifier(aStream), isInput: aStream is InputStream, event: eventCode,
                    onExpectedThread: Thread.current === expectedThread, mode: RunLoop.current.currentMode))
        }
        handler?(aStream, eventCode)
    }

    func events(of stream: Stream) -> [Stream.Event] {
        log.current.filter { $0.stream == ObjectIdentifier(stream) }.map(\.event)
    }

    var allOnExpectedThread: Bool { log.current.allSatisfy(\.onExpectedThread) }
}

/// A thread running its run loop in one mode, sleeping until a source or timer wakes it (a
/// never-due timer keeps it from finishing while nothing is scheduled).
private final class RunLoopThread: @unchecked Sendable {
    // @unchecked: `runLoop` is set once before `init` returns and only used through
    // CoreFoundation's thread-safe calls (adding timers, stopping); the rest is thread-safe.
    private(set) var runLoop: RunLoop!
    let thread: Thread
    private let stopping: Guarded<Bool>
    private let stopped: Guarded<Bool>

    init(mode: RunLoop.Mode = .default) {
        let ready = Guarded<RunLoop?>(nil)
        let stopping = Guarded(false), stopped = Guarded(false)
        self.stopping = stopping
        self.stopped = stopped
        thread = Thread {
            let runLoop = RunLoop.current
            let keepAlive = Timer(fire: .distantFuture, interval: 86_400, repeats: true) { _ in }
            runLoop.add(keepAlive, forMode: mode)
            ready.update { $0 = runLoop }
            while !stopping.current { _ = runLoop.run(mode: mode, before: .distantFuture) }
            keepAlive.invalidate()
            stopped.update { $0 = true }
        }
        thread.name = "ChannelStreamTests run loop"
        thread.start()
        _ = ready.wait { $0 != nil }
        runLoop = ready.current
    }

    /// Stops the run loop and waits for the thread to leave it. (`_stop()` is
    /// `CFRunLoopStop`, which corelibs Foundation exposes for XCTest; a stop between two runs
    /// is lost, hence the retries.)
    func stop() {
        stopping.update { $0 = true }
        for _ in 0..<100 {
            runLoop._stop()
            if stopped.wait(timeout: 0.1, until: { $0 }) { return }
        }
    }
}

/// Runs the main run loop (called on the main thread) until `condition` holds, for at most `timeout`
/// seconds; returns whether it held. Synchronous: `RunLoop.run(mode:before:)` is unavailable
/// from async code.
private func runMainRunLoop(timeout: TimeInterval, until condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while !condition() {
        guard Date() < deadline else { return false }
        // Returns at the slice's end at the latest (timers firing do not end a run).
        _ = RunLoop.main.run(mode: .default, before: min(deadline, Date(timeIntervalSinceNow: 0.05)))
    }
    return true
}
