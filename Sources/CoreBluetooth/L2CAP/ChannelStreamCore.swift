import Foundation
import Scheduling

/// Which stream of a channel's pair.
enum ChannelStreamSide: Sendable {
    case input, output
}

/// The state of one channel's stream pair, behind one lock, and the delivery of its delegate
/// events on run loops.
///
/// Run-loop delivery on swift-corelibs-foundation: `RunLoop.perform(inModes:block:)` is
/// `CFRunLoopPerformBlock` without `CFRunLoopWakeUp` (a sleeping run loop runs the block only
/// when something else wakes it), `getCFRunLoop()` is not public, and CoreFoundation is not
/// importable, so the wake-up has to come from a run-loop source Foundation exposes: a `Timer`.
/// Scheduling a stream on a run loop adds one repeating timer to it, in the scheduled modes,
/// due in the far future; it stands for the stream's run-loop source (it also keeps the run
/// loop from finishing while the stream is scheduled, as a stream's source does on Apple's).
/// An event makes it due now: `Timer.fireDate`'s setter is `CFRunLoopTimerSetNextFireDate`,
/// which is thread-safe and re-arms the mode's timer descriptor (a timerfd the run loop's epoll
/// waits on), so the run loop wakes and fires the timer on its thread, in one of the timer's
/// modes, where the events are delivered; afterwards the timer is due in the far future again
/// (a fire date set during the callout is kept). Removing the stream from the run loop, or
/// closing it, invalidates the timer (`CFRunLoopTimerInvalidate`, also thread-safe).
final class ChannelStreamCore: @unchecked Sendable {
    // @unchecked: all mutable state is in `state`, behind its lock; the lets are immutable.
    // The run loops and timers kept in `state` are used from other threads only through
    // CoreFoundation's thread-safe calls (adding a timer, setting its fire date, invalidating
    // it), never while the lock is held.

    let sendBufferLimit: Int
    private let receiveHighWater: Int
    private let receiveLowWater: Int
    private weak let transport: (any ChannelStreamTransport)?
    private let state = Locked(PairState())

    /// How long an idle delivery timer waits: a year, so it does not fire unless made due.
    private static let idleInterval: TimeInterval = 365 * 86_400

    init(transport: any ChannelStreamTransport, sendBufferLimit: Int, receiveHighWater: Int, receiveLowWater: Int) {
        self.transport = transport
        self.sendBufferLimit = sendBufferLimit
        self.receiveHighWater = receiveHighWater
        self.receiveLowWater = receiveLowWater
    }

    // MARK: The streams' calls

    func attach(_ stream: Stream, as side: ChannelStreamSide) {
        state.withLock { $0[side].stream = stream }
    }

    func open(_ side: ChannelStreamSide) {
        update { s in
            guard !s[side].opened, !s[side].closed else { return }
            s[side].opened = true
            if case .failed = s.ending {
                s[side].pending.insert(.errorOccurred)
                return
            }
            s[side].pending.insert(.openCompleted)
            switch side {
            case .input:
                if !s.received.isEmpty {
                    s.input.pending.insert(.hasBytesAvailable)
                } else if s.ending != nil {
                    s.input.pending.insert(.endEncountered)
                }
            case .output:
                if s.ending != nil {
                    s.output.pending.insert(.endEncountered)
                } else if s.unsent < sendBufferLimit {
                    s.output.pending.insert(.hasSpaceAvailable)
                }
            }
        }
    }

    func close(_ side: ChannelStreamSide) {
        update { s in
            guard !s[side].closed else { return }
            s[side].closed = true
            s[side].pending = []
            s.effects.retire += s[side].registrations.map(\.timer)
            s[side].registrations = []
            if side == .input {
                // Nobody will read them: drop the bytes, and let the peer send again (its
                // further SDUs are dropped too) rather than stall on credits.
                s.received = ByteQueue()
                if s.receivePaused {
                    s.receivePaused = false
                    if s.ending == nil { s.outbox.append(.setReceivePaused(false)) }
                }
            }
            if s.input.closed && s.output.closed && !s.closeReported {
                s.closeReported = true
                s.outbox.append(.closed)
            }
        }
    }

    func delegate(of side: ChannelStreamSide) -> (any StreamDelegate)? {
        state.withLock { $0[side].delegate }
    }

    func setDelegate(_ delegate: (any StreamDelegate)?, of side: ChannelStreamSide) {
        state.withLock { $0[side].delegate = delegate }
    }

    func schedule(_ side: ChannelStreamSide, in runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        update { s in
            guard !s[side].closed else { return }
            var modes = [mode]
            if let index = s[side].registrations.firstIndex(where: { $0.runLoop === runLoop }) {
                let old = s[side].registrations.remove(at: index)
                guard !old.modes.contains(mode) else {
                    s[side].registrations.insert(old, at: index)
                    return
                }
                modes = old.modes + [mode]
                s.effects.retire.append(old.timer)
            }
            s[side].registrations.append(register(side, on: runLoop, modes: modes, in: &s))
        }
    }

    func remove(_ side: ChannelStreamSide, from runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        update { s in
            guard let index = s[side].registrations.firstIndex(where: { $0.runLoop === runLoop }),
                s[side].registrations[index].modes.contains(mode)
            else { return }
            let old = s[side].registrations.remove(at: index)
            s.effects.retire.append(old.timer)
            let modes = old.modes.filter { $0 != mode }
            if !modes.isEmpty { s[side].registrations.append(register(side, on: runLoop, modes: modes, in: &s)) }
        }
    }

    func status(of side: ChannelStreamSide) -> Stream.Status {
        state.withLock { s in
            if s[side].closed { return .closed }
            if !s[side].opened { return .notOpen }
            switch s.ending {
            case nil: return .open
            case .failed: return .error
            case .peerClosed: return side == .input && !s.received.isEmpty ? .open : .atEnd
            }
        }
    }

    var streamError: (any Error)? {
        state.withLock { s in
            if case .failed(let error) = s.ending { return error }
            return nil
        }
    }

    var hasBytesAvailable: Bool {
        state.withLock { s in s.input.opened && !s.input.closed && !s.received.isEmpty }
    }

    var hasSpaceAvailable: Bool {
        state.withLock { s in
            s.output.opened && !s.output.closed && s.ending == nil && s.unsent < sendBufferLimit
        }
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        update { s in
            guard s.input.opened, !s.input.closed else { return -1 }
            if case .failed = s.ending { return -1 }
            s.input.awaitingApp = false
            let count = s.received.pop(into: buffer, maxLength: maxLength)
            // As a socket's stream: bytes left make the event come again; none left after the
            // peer closed is the end.
            if !s.received.isEmpty {
                s.input.pending.insert(.hasBytesAvailable)
            } else if s.ending != nil {
                s.input.pending.insert(.endEncountered)
            }
            if s.receivePaused && s.received.count < receiveLowWater {
                s.receivePaused = false
                if s.ending == nil { s.outbox.append(.setReceivePaused(false)) }
            }
            return count
        }
    }

    func write(from buffer: UnsafePointer<UInt8>, maxLength: Int) -> Int {
        update { s in
            guard s.output.opened, !s.output.closed, s.ending == nil else { return -1 }
            s.output.awaitingApp = false
            let count = min(max(maxLength, 0), sendBufferLimit - s.unsent)
            if count > 0 {
                s.unsent += count
                s.outbox.append(.wrote(Array(UnsafeBufferPointer(start: buffer, count: count))))
            }
            if s.unsent < sendBufferLimit { s.output.pending.insert(.hasSpaceAvailable) }
            return count
        }
    }

    // MARK: The stack side's calls

    func received(_ sdu: [UInt8]) {
        update { s in
            guard !sdu.isEmpty, !s.input.closed, s.ending == nil else { return }
            s.received.append(sdu)
            if s.input.opened && !s.input.awaitingApp { s.input.pending.insert(.hasBytesAvailable) }
            if !s.receivePaused && s.received.count > receiveHighWater {
                s.receivePaused = true
                s.outbox.append(.setReceivePaused(true))
            }
        }
    }

    func sent(_ count: Int) {
        update { s in
            let count = min(max(count, 0), s.unsent)
            guard count > 0 else { return }
            s.unsent -= count
            if s.output.opened && !s.output.awaitingApp && s.ending == nil {
                s.output.pending.insert(.hasSpaceAvailable)
            }
        }
    }

    func peerClosed() {
        update { s in
            guard s.ending == nil else { return }
            s.ending = .peerClosed
            if s.input.opened && s.received.isEmpty { s.input.pending.insert(.endEncountered) }
            if s.output.opened { s.output.pending.insert(.endEncountered) }
        }
    }

    func failed(_ error: any Error) {
        let error = Self.streamError(for: error)
        update { s in
            guard s.ending == nil else { return }
            s.ending = .failed(error)
            s.received = ByteQueue()
            if s.input.opened { s.input.pending.insert(.errorOccurred) }
            if s.output.opened { s.output.pending.insert(.errorOccurred) }
        }
    }

    /// `error` as an `NSError` in `CBErrorDomain`.
    static func streamError(for error: any Error) -> NSError {
        if let error = error as? CBError { return error.bridgedNSError }
        let nsError = error as NSError
        if nsError.domain == CBErrorDomain { return nsError }
        return CBError(.unknown, userInfo: [NSUnderlyingErrorKey: nsError]).bridgedNSError
    }

    // MARK: Delivery

    /// A delivery timer fired, on its run loop's thread: delivers the events due when it fired,
    /// each checked again just before (an earlier delegate call may have read, written, closed
    /// or unscheduled), never under the lock. Events raised meanwhile make the timer due again,
    /// so other run-loop sources get their turn between rounds.
    private func deliver(_ side: ChannelStreamSide, registration: Int) {
        let taken: (Stream, Stream.Event)? = update { s in
            guard s[side].registrations.contains(where: { $0.id == registration }), let stream = s[side].stream
            else { return nil }
            s[side].armed = false
            defer { s[side].pending = [] }
            return (stream, s[side].pending)
        }
        guard let (stream, events) = taken else { return }
        for event in Self.deliveryOrder where events.contains(event) {
            let delegate: (any StreamDelegate)?? = update { s in
                s.take(event, for: side, registration: registration, sendBufferLimit: sendBufferLimit)
                    ? .some(s[side].delegate) : nil
            }
            if let delegate { delegate?.stream(stream, handle: event) }
        }
    }

    /// The order in which one round delivers events: the end after the last bytes are read.
    private static let deliveryOrder: [Stream.Event] = [
        .openCompleted, .hasBytesAvailable, .hasSpaceAvailable, .endEncountered, .errorOccurred,
    ]

    /// A registration on `runLoop` in `modes`, with a new idle delivery timer, added to the run
    /// loop after the lock is released.
    private func register(
        _ side: ChannelStreamSide, on runLoop: RunLoop, modes: [RunLoop.Mode], in s: inout PairState
    ) -> Registration {
        let id = s.nextRegistration
        s.nextRegistration += 1
        let timer = Timer(fire: .distantFuture, interval: Self.idleInterval, repeats: true) { [weak self] _ in
            self?.deliver(side, registration: id)
        }
        s.effects.add.append((runLoop, timer, modes))
        // The new timer is idle: let the next look at the pending events make it due.
        s[side].armed = false
        return Registration(id: id, runLoop: runLoop, modes: modes, timer: timer)
    }

    // MARK: The lock and what is done after it

    /// Runs `body` under the lock, then (unlocked) applies its effects on run loops and timers,
    /// makes due the timers of streams with events to deliver, and passes calls to the transport.
    private func update<T>(_ body: (inout PairState) -> T) -> T {
        let (result, effects, due) = state.withLock { s in
            let result = body(&s)
            let effects = s.effects
            s.effects = Effects()
            return (result, effects, s.timersToMakeDue())
        }
        for timer in effects.retire { timer.invalidate() }
        for (runLoop, timer, modes) in effects.add {
            for mode in modes { runLoop.add(timer, forMode: mode) }
        }
        if !due.isEmpty {
            let now = Date()
            for timer in due { timer.fireDate = now }
        }
        flushOutbox()
        return result
    }

    /// Makes the transport calls queued under the lock, in order, one caller at a time and
    /// without the lock (a transport may call straight back in): whoever finds calls queued
    /// and nobody making them makes them, including any queued meanwhile.
    private func flushOutbox() {
        while true {
            let calls: [TransportCall] = state.withLock { s in
                guard !s.flushing, !s.outbox.isEmpty else { return [] }
                s.flushing = true
                defer { s.outbox = [] }
                return s.outbox
            }
            guard !calls.isEmpty else { return }
            let transport = transport
            for call in calls {
                switch call {
                case .wrote(let bytes): transport?.streamsWrote(bytes)
                case .setReceivePaused(let paused): transport?.streamsSetReceivePaused(paused)
                case .closed: transport?.streamsClosed()
                }
            }
            state.withLock { $0.flushing = false }
        }
    }
}

// MARK: - State

/// A call to the transport, decided under the lock and made after it.
private enum TransportCall {
    case wrote([UInt8])
    case setReceivePaused(Bool)
    case closed
}

/// How the channel ended.
private enum Ending: Equatable {
    case peerClosed
    case failed(NSError)
}

/// One run loop a stream is scheduled on, in which modes, and the timer delivering there.
private struct Registration {
    let id: Int
    let runLoop: RunLoop
    let modes: [RunLoop.Mode]
    let timer: Timer
}

/// Work on run loops and timers, decided under the lock and done after it.
private struct Effects {
    /// Timers to invalidate.
    var retire: [Timer] = []
    /// Timers to add to a run loop, in these modes.
    var add: [(RunLoop, Timer, [RunLoop.Mode])] = []
}

/// One stream's state.
private struct StreamState {
    weak var stream: Stream?
    weak var delegate: (any StreamDelegate)?
    var opened = false
    var closed = false
    /// Events raised and not yet delivered (checked again before delivery).
    var pending: Stream.Event = []
    /// The delivery timers are due (a round will pick `pending` up).
    var armed = false
    /// `.hasBytesAvailable` / `.hasSpaceAvailable` was delivered and the app has not read or
    /// written since: no new one until it does (as a socket's stream).
    var awaitingApp = false
    var endDelivered = false
    var errorDelivered = false
    var registrations: [Registration] = []
}

private struct PairState {
    var input = StreamState()
    var output = StreamState()
    /// Received bytes the app has not read.
    var received = ByteQueue()
    /// Bytes written and not yet sent.
    var unsent = 0
    var ending: Ending?
    var receivePaused = false
    var closeReported = false
    var outbox: [TransportCall] = []
    var flushing = false
    var effects = Effects()
    var nextRegistration = 0

    subscript(side: ChannelStreamSide) -> StreamState {
        get { side == .input ? input : output }
        set {
            if side == .input { input = newValue } else { output = newValue }
        }
    }

    /// The delivery timers to make due: of each open stream with events pending, scheduled,
    /// and not already due.
    mutating func timersToMakeDue() -> [Timer] {
        var timers: [Timer] = []
        for side in [ChannelStreamSide.input, .output] {
            let stream = self[side]
            guard !stream.pending.isEmpty, !stream.armed, !stream.closed, !stream.registrations.isEmpty else { continue }
            self[side].armed = true
            timers += stream.registrations.map(\.timer)
        }
        return timers
    }

    /// Whether `event` is still due for `side` on the run loop of `registration`; if so, marks
    /// it delivered.
    mutating func take(
        _ event: Stream.Event, for side: ChannelStreamSide, registration: Int, sendBufferLimit: Int
    ) -> Bool {
        let stream = self[side]
        guard stream.opened, !stream.closed, stream.registrations.contains(where: { $0.id == registration }) else {
            return false
        }
        switch event {
        case .openCompleted:
            return true
        case .hasBytesAvailable:
            guard side == .input, !received.isEmpty else { return false }
            if case .failed = ending { return false }
            input.awaitingApp = true
        case .hasSpaceAvailable:
            guard side == .output, ending == nil, unsent < sendBufferLimit else { return false }
            output.awaitingApp = true
        case .endEncountered:
            guard ending == .peerClosed, !stream.endDelivered, side == .output || received.isEmpty else { return false }
            self[side].endDelivered = true
        case .errorOccurred:
            guard case .failed = ending, !stream.errorDelivered else { return false }
            self[side].errorDelivered = true
        default:
            return false
        }
        return true
    }
}

/// Received SDUs, read across their boundaries.
private struct ByteQueue {
    private var chunks = RingBuffer<[UInt8]>()
    /// How much of the first chunk has been read.
    private var offset = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: [UInt8]) {
        chunks.append(bytes)
        count += bytes.count
    }

    /// Moves up to `maxLength` bytes into `buffer`; returns how many.
    mutating func pop(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        var copied = 0
        while copied < maxLength, let chunk = chunks.first {
            let n = min(chunk.count - offset, maxLength - copied)
            chunk.withUnsafeBufferPointer { source in
                (buffer + copied).update(from: source.baseAddress! + offset, count: n)
            }
            copied += n
            offset += n
            if offset == chunk.count {
                _ = chunks.popFirst()
                offset = 0
            }
        }
        count -= copied
        return copied
    }
}
