import CoreBluetooth
import Foundation
import Scheduling

/// A thread whose run loop carries a test's channel streams (under `swift test` nothing runs
/// the main run loop; a process of its own can use `RunLoop.main`).
public final class StreamRunLoopThread: @unchecked Sendable {
    private let ready = DispatchSemaphore(value: 0)
    private let stopped = Locked(false)
    // Set once by the thread before `ready` is signalled, read only after.
    private var loop: RunLoop?

    public init(name: String = "test streams") {
        let thread = Thread { [self] in
            // A far timer keeps the loop sleeping rather than returning while nothing is scheduled.
            RunLoop.current.add(Timer(timeInterval: 3600, repeats: true) { _ in }, forMode: .default)
            loop = RunLoop.current
            ready.signal()
            while !stopped.current { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.2)) }
        }
        thread.name = name
        thread.start()
        ready.wait()
    }

    public var runLoop: RunLoop { loop! }

    /// Lets the thread end (within 0.2 s).
    public func stop() { stopped.withLock { $0 = true } }
}

/// Echoes a channel: everything its input stream has goes back out on its output stream, by
/// stream events on the run loop it is scheduled on. What is read at once is written at once,
/// so an SDU comes back as one SDU when the peer waits for each echo.
public final class ChannelEcho: NSObject, StreamDelegate, @unchecked Sendable {
    public let channel: CBL2CAPChannel
    private let onEvent: (@Sendable () -> Void)?
    // On the run loop's thread only.
    private var pending: [UInt8] = []
    private let counts = Locked((read: 0, written: 0, ended: false))
    public var read: Int { counts.current.read }
    public var written: Int { counts.current.written }
    /// The channel ended (`.endEncountered` or `.errorOccurred`).
    public var ended: Bool { counts.current.ended }

    /// Opens the streams on `runLoop`; `onEvent` runs after each stream event (to wake a waiter).
    public init(_ channel: CBL2CAPChannel, on runLoop: RunLoop, onEvent: (@Sendable () -> Void)? = nil) {
        self.channel = channel
        self.onEvent = onEvent
        super.init()
        openStreams(of: channel, on: runLoop, delegate: self)
    }

    public func stream(_ stream: Stream, handle event: Stream.Event) {
        if event.contains(.hasBytesAvailable) {
            var buffer = [UInt8](repeating: 0, count: 8192)
            while channel.inputStream.hasBytesAvailable {
                let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
                guard count > 0 else { break }
                pending += buffer[0..<count]
                counts.withLock { $0.read += count }
            }
        }
        if event.contains(.endEncountered) || event.contains(.errorOccurred) { counts.withLock { $0.ended = true } }
        while !pending.isEmpty, channel.outputStream.hasSpaceAvailable {
            let written = channel.outputStream.write(pending, maxLength: pending.count)
            guard written > 0 else { break }
            pending.removeFirst(written)
            counts.withLock { $0.written += written }
        }
        onEvent?()
    }

    /// Closes both streams, which closes the channel.
    public func close() {
        channel.inputStream.close()
        channel.outputStream.close()
    }
}

/// One side of a channel that writes `payload` as the output stream takes it (at most `chunk`
/// bytes a write) and collects what comes back.
public final class ChannelSender: NSObject, StreamDelegate, @unchecked Sendable {
    public let channel: CBL2CAPChannel
    public let payload: [UInt8]
    public let chunk: Int
    private let onEvent: (@Sendable () -> Void)?
    // On the run loop's thread only.
    private var offset = 0
    private let receivedBytes = Locked<[UInt8]>([])
    private let failure = Locked<String?>(nil)
    public var received: [UInt8] { receivedBytes.current }
    /// The stream's error, or "end of stream" when the channel ended.
    public var error: String? { failure.current }

    /// Opens the streams on `runLoop`; `onEvent` runs after each stream event (to wake a waiter).
    public init(_ channel: CBL2CAPChannel, payload: [UInt8], chunk: Int = 2048, on runLoop: RunLoop,
                onEvent: (@Sendable () -> Void)? = nil) {
        self.channel = channel
        self.payload = payload
        self.chunk = chunk
        self.onEvent = onEvent
        super.init()
        openStreams(of: channel, on: runLoop, delegate: self)
    }

    public func stream(_ stream: Stream, handle event: Stream.Event) {
        if event.contains(.errorOccurred) {
            failure.withLock { $0 = "\(stream.streamError.map { "\($0)" } ?? "stream error")" }
        }
        if event.contains(.endEncountered) { failure.withLock { $0 = $0 ?? "end of stream" } }
        if event.contains(.hasSpaceAvailable) || event.contains(.openCompleted) { send() }
        if event.contains(.hasBytesAvailable) {
            var buffer = [UInt8](repeating: 0, count: 8192)
            while channel.inputStream.hasBytesAvailable {
                let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
                guard count > 0 else { break }
                receivedBytes.withLock { $0 += buffer[0..<count] }
            }
        }
        onEvent?()
    }

    private func send() {
        while offset < payload.count, channel.outputStream.hasSpaceAvailable {
            let written = payload[offset...].withUnsafeBufferPointer {
                channel.outputStream.write($0.baseAddress!, maxLength: min(chunk, $0.count))
            }
            guard written > 0 else { break }
            offset += written
        }
    }

    /// Closes both streams, which closes the channel.
    public func close() {
        channel.inputStream.close()
        channel.outputStream.close()
    }
}

/// Schedules both of a channel's streams on `runLoop` with `delegate`, and opens them.
private func openStreams(of channel: CBL2CAPChannel, on runLoop: RunLoop, delegate: StreamDelegate) {
    for stream in [channel.inputStream! as Stream, channel.outputStream!] {
        stream.delegate = delegate
        stream.schedule(in: runLoop, forMode: .default)
        stream.open()
    }
}
