import Foundation
import Scheduling
import Synchronization

/// Where one manager's delegate callbacks run: the app's queue, or the main queue when it gave
/// none. While a callback is queued or running it holds the device's clock, so a virtual clock
/// never leaps past an app that is still answering (a read request, say).
///
/// Callbacks that arrive while an earlier one is still waiting for the queue join it: one
/// block on the queue runs them in order, so a burst (notifications, say) costs one dispatch
/// and one clock hold instead of one each. Callbacks made on the device's loop are handed to
/// the queue at the end of the loop's burst of work (`EventLoop.dispatchAfterBurst`), so the
/// many callbacks of one burst go in one block; on a virtual clock the loop's own thread runs
/// that block on the queue itself (`queue.sync`), with no thread switch. A block that has started takes no more callbacks;
/// those that arrive meanwhile go in the next block, after it.
final class CallbackQueue: @unchecked Sendable {
    let queue: DispatchQueue
    /// `queue` is the main queue: its callbacks never borrow the loop's thread.
    private let isMainQueue: Bool
    private let clock: EventLoop
    private let lock = NSLock()
    /// Callbacks waiting for the block on the queue (guarded by `lock`).
    @exclusivity(unchecked) private var waiting: [Callback] = []  // exclusivity checks: 0.3 % of notify
    /// Whether a block is on the queue that has not taken `waiting` yet, or the loop will
    /// queue one at the end of its burst (guarded by `lock`).
    @exclusivity(unchecked) private var blockQueued = false  // exclusivity checks: 0.3 % of notify
    /// An emptied array kept for `waiting`, so that neither side allocates per block (guarded
    /// by `lock`).
    @exclusivity(unchecked) private var spare: [Callback] = []  // exclusivity checks: 0.28 % of notify

    /// A callback, wrapped: closures stored directly in an array are kept at their most general
    /// abstraction, which costs a thunk allocated around each. A value notified or indicated to
    /// a peripheral's characteristic (the hottest callback of all) is kept as its three parts,
    /// not in a closure: its context was an allocation, and its free, per value. The value
    /// stays the bytes that arrived until the characteristic takes them (in place of its old
    /// value's, `CBCharacteristic.takeNotifiedValue`).
    enum Callback {
        case closure(@Sendable () -> Void)
        case value(CBPeripheral, CBCharacteristic, [UInt8])
        /// What a callback taken out of its batch leaves behind.
        case taken

        /// Consuming, so that a value goes on to the characteristic moved, not copied.
        consuming func run() {
            switch consume self {
            case .closure(let body): body()
            case .value(let peripheral, let characteristic, let value):
                peripheral.deliverUpdatedValue(consume value, for: characteristic)
            case .taken: break
            }
        }
    }

    /// Before this moment the first block does not run (guarded by `lock`; nil once that block
    /// is queued): set when the manager was made on another thread than its delegate queue's.
    @exclusivity(unchecked) private var firstBlockNotBefore: DispatchTime?  // exclusivity checks: 0.3 % of notify

    /// How long a manager made off its delegate queue keeps its first callback back.
    ///
    /// On iOS the first `didUpdateState` comes from `bluetoothd`, so in practice it never runs
    /// before `init` has returned and the caller stored the manager (`self.central =
    /// CBCentralManager(delegate: self, queue: queue)`, the delegate then comparing `central`).
    /// Here the device may be on already, and a delegate queue on another thread would run the
    /// callback at once, racing the caller's store. A manager made on its delegate queue needs
    /// no delay: the callback's block waits for the caller's to end. Wall time, not the
    /// device's clock: a virtual clock stands still meanwhile (the callback holds it).
    static let offQueueFirstCallbackDelay: DispatchTimeInterval = .milliseconds(20)

    /// Marks each delegate queue once, so that `init` can tell whether it runs on it.
    private final class QueueMark: Sendable {}
    private static let queueMarkKey = DispatchSpecificKey<QueueMark>()

    /// Marks the main queue. On Linux `DispatchQueue.main` makes a new object at each use, so
    /// `queue === DispatchQueue.main` never holds (and each comparison allocated one).
    private static let mainQueueKey: DispatchSpecificKey<QueueMark> = {
        let key = DispatchSpecificKey<QueueMark>()
        DispatchQueue.main.setSpecific(key: key, value: QueueMark())
        return key
    }()

    /// Whether `queue` is the main queue itself.
    static func isMainQueue(_ queue: DispatchQueue) -> Bool { queue.getSpecific(key: mainQueueKey) != nil }

    init(queue: DispatchQueue?, clock: EventLoop) {
        self.queue = queue ?? .main
        self.clock = clock
        isMainQueue = Self.isMainQueue(self.queue)
        if !Self.runsOnQueue(self.queue, isMain: isMainQueue) { firstBlockNotBefore = .now() + Self.offQueueFirstCallbackDelay }
    }

    /// Whether the calling code runs on `queue` (or on a queue that targets it).
    private static func runsOnQueue(_ queue: DispatchQueue, isMain: Bool) -> Bool {
        if isMain { return Thread.isMainThread }
        let mark: QueueMark
        if let existing = queue.getSpecific(key: queueMarkKey) {
            mark = existing
        } else {
            // Two managers marking one queue at once: one mark wins, and the other manager
            // merely waits its first callback out.
            mark = QueueMark()
            queue.setSpecific(key: queueMarkKey, value: mark)
        }
        return DispatchQueue.getSpecific(key: queueMarkKey) === mark
    }

    /// Runs `body` on the delegate queue, after the callbacks already queued.
    func async(_ body: @escaping @Sendable () -> Void) { enqueue(.closure(body)) }

    /// On the delegate queue, after the callbacks already queued: `peripheral` takes `value`
    /// for `characteristic` and tells its delegate (`CBPeripheral.deliverUpdatedValue`).
    func asyncValue(_ value: consuming [UInt8], for characteristic: CBCharacteristic, of peripheral: CBPeripheral) {
        enqueue(.value(peripheral, characteristic, consume value))
    }

    private func enqueue(_ callback: consuming Callback) {
        lock.lock()
        waiting.append(callback)
        if blockQueued {
            lock.unlock()
            return
        }
        blockQueued = true
        // Only the first block waits: later ones queue behind it (no block is queued while
        // one waits), so the hold-back is taken here, under the lock already held.
        let notBefore = firstBlockNotBefore
        firstBlockNotBefore = nil
        lock.unlock()
        clock.holdClock()
        if clock.inLoop {
            if notBefore == nil, !isMainQueue {
                // The loop's thread runs the block itself on the queue (`queue.sync`) when it
                // can, rather than waking a worker and sleeping until the block lets the clock
                // go. Never the main queue: its thread may be waiting for the loop.
                clock.dispatchAfterBurst(on: queue) { [self] in runWaiting() }
            } else {
                clock.atEndOfBurst { [self] in enqueueBlock(notBefore: notBefore) }
            }
        } else {
            enqueueBlock(notBefore: notBefore)
        }
    }

    private func enqueueBlock(notBefore: DispatchTime?) {
        if let notBefore, notBefore > .now() {
            queue.asyncAfter(deadline: notBefore) { [self] in runWaiting() }
        } else {
            queue.async { [self] in runWaiting() }
        }
    }

    /// On the queue: runs the callbacks that joined this block, each followed by a look at the
    /// threads waiting for a condition, then lets go of the clock.
    private func runWaiting() {
        var batch: [Callback] = []
        lock.lock()
        swap(&batch, &spare)
        swap(&batch, &waiting)
        blockQueued = false
        lock.unlock()
        batch.withUnsafeMutableBufferPointer { callbacks in
            for index in callbacks.indices {
                // Moved out, `taken` left behind: a copy retained and released each reference
                // the callback holds.
                var callback: Callback? = (callbacks.baseAddress! + index).move()
                (callbacks.baseAddress! + index).initialize(to: .taken)
                // A request the callback makes (a read, `respond`) runs on this thread once the
                // callback returns, if the loop's thread sleeps, instead of waking it; before the
                // waiters' conditions, which may wait on the loop themselves.
                clock.handingOffInline { callback.take()!.run() }
                CallbackWaiters.shared.callbackFinished(clock: clock)
            }
        }
        batch.removeAll(keepingCapacity: true)
        lock.lock()
        if spare.capacity < batch.capacity { swap(&batch, &spare) }
        lock.unlock()
        clock.releaseClock()
    }
}

/// Threads waiting for a condition on the objects' state (the test and tool helpers
/// `CBVirtualRadio.run(until:)` and `CBVirtualRadio.waitForCallbacks(until:)`). The condition
/// is checked after every delegate callback, on the callback's queue.
final class CallbackWaiters: @unchecked Sendable {
    static let shared = CallbackWaiters()
    private let waiters = Locked<[Waiter]>([])

    /// One waiting thread. Its condition is evaluated without any lock held: conditions may
    /// block briefly (a test reading loop-confined state through the loop), and a lock held
    /// across that would deadlock against the loop reporting its own callback.
    final class Waiter: @unchecked Sendable {
        /// Until the wait ends (`end()`), then dropped, so that what it captured is let go by
        /// the waiting thread: `callbackFinished` checks every waiter of the process from a
        /// snapshot of the list, and a thread holding one (any manager's callback, other
        /// radios' included) kept a test's objects alive past its wait for as long as it was
        /// descheduled (a released peripheral stayed alive, or cancelled its connection late,
        /// under load). Written only by the waiting thread, and by `end()` only once no check
        /// runs (`checking` is zero with `ending` set); read by checkers while they count in
        /// `checking` and `ending` was not set.
        private var condition: (@Sendable () -> Bool)?
        /// Checks running now. Atomic, with `ending`, so that a check (after every callback)
        /// takes no lock: the two locked sections it took were ~300 instructions of a 20-byte
        /// notification's ~9,400 (BENCHMARKS.md, issue 19 step 24). Sequentially consistent:
        /// a check counts itself in and then looks at `ending`, `end()` sets `ending` and then
        /// looks at the count, so one of the two always sees the other.
        private let checking = Atomic<Int>(0)
        /// `end()` waits for `checking` to reach zero (under `signal`'s lock). Only then does
        /// the last check broadcast: the waiting thread sleeps on the same condition, and a
        /// broadcast after every callback woke it for nothing (a thread switch per callback
        /// halved `fleet_timed_speedup`).
        private let ending = Atomic<Bool>(false)
        /// The clock of the radio waited on (nil for the wall clock): taken (held) when the
        /// wait ends, so the waiting thread owns the clock again.
        let clock: EventLoop?
        private let signal = NSCondition()
        private(set) var satisfied = false

        init(condition: @escaping @Sendable () -> Bool, clock: EventLoop?) {
            self.condition = condition
            self.clock = clock
        }

        /// Set once, under `signal`'s lock; atomic so that `check`, which runs after every
        /// callback, can look without the lock.
        private let finishedFlag = Atomic<Bool>(false)

        private var finished: Bool { finishedFlag.load(ordering: .acquiring) }

        func check() {
            guard !finished else { return }
            checking.wrappingAdd(1, ordering: .sequentiallyConsistent)
            guard !ending.load(ordering: .sequentiallyConsistent), let running = condition else { return checkDone() }
            let holds = running()
            // This thread's reference goes before the count does (`end()` waits for the count).
            _ = consume running
            if holds {
                signal.lock()
                if !finished { finish(satisfied: true) }
                signal.unlock()
            }
            checkDone()
        }

        /// A check is over: the last one while `end()` waits wakes it. The broadcast is under
        /// `signal`'s lock, which `end()` holds from its look at the count until it sleeps.
        private func checkDone() {
            guard checking.wrappingSubtract(1, ordering: .sequentiallyConsistent).newValue == 0,
                  ending.load(ordering: .sequentiallyConsistent) else { return }
            signal.lock()
            signal.broadcast()
            signal.unlock()
        }

        /// The wait is over and the waiter out of the list (`remove(_:)` calls it): once the
        /// checks running now are done, the condition (and what it captured) goes, on this thread.
        func end() {
            signal.lock()
            ending.store(true, ordering: .sequentiallyConsistent)
            while checking.load(ordering: .sequentiallyConsistent) > 0 { signal.wait() }
            let dropped = condition
            condition = nil
            signal.unlock()
            // Outside the lock: a deinit it runs may end in a callback that checks waiters.
            _ = consume dropped
        }

        /// Before the waiting thread lets go of the clock: whether the condition holds already.
        /// The thread still holds the clock, so a hold taken by a callback that got there
        /// first is given back.
        func isAlreadySatisfied() -> Bool {
            let holds = condition?() ?? false
            signal.lock()
            defer { signal.unlock() }
            if finished {
                clock?.releaseClock()
                return satisfied
            }
            guard holds else { return false }
            finishedFlag.store(true, ordering: .releasing)
            satisfied = true
            return true
        }

        func expire() {
            signal.lock()
            defer { signal.unlock() }
            guard !finished else { return }
            finish(satisfied: false)
        }

        private func finish(satisfied: Bool) {
            finishedFlag.store(true, ordering: .releasing)
            self.satisfied = satisfied
            clock?.holdClock()
            signal.broadcast()
        }

        /// Waits until the condition held or the waiter expired; `wallDeadline` bounds a wait no
        /// timer will end.
        func wait(wallDeadline: Date) {
            signal.lock()
            while !finished {
                if !signal.wait(until: wallDeadline) {
                    signal.unlock()
                    let holds = condition?() ?? false
                    signal.lock()
                    if !finished { finish(satisfied: holds) }
                } else if !finished {
                    idleWakeUps += 1
                }
            }
            signal.unlock()
        }

        /// Times the waiting thread woke before the wait was over (under `signal`'s lock): a
        /// test's measure that checks do not wake it.
        private(set) var idleWakeUps = 0
    }

    /// How many waiters there are: callbacks with nobody waiting skip the lock.
    private let count = Atomic<Int>(0)

    func add(_ waiter: Waiter) {
        waiters.withLock {
            $0.append(waiter)
            count.store($0.count, ordering: .releasing)
        }
    }

    /// Takes the finished wait's waiter out of the list and ends it (`Waiter.end()`: what its
    /// condition captured goes now, on the waiting thread), outside the list's lock.
    func remove(_ waiter: Waiter) {
        waiters.withLock {
            $0.removeAll { $0 === waiter }
            count.store($0.count, ordering: .releasing)
        }
        waiter.end()
    }

    /// A callback (or a test's event) finished: waiters on `clock`'s radio, and those on the
    /// wall clock, look at their conditions again. Nil checks every waiter.
    func callbackFinished(clock: EventLoop? = nil) {
        guard count.load(ordering: .acquiring) > 0 else { return }
        // A reference to the list (no copy of it), so conditions run without the lock.
        let current = waiters.withLock { $0 }
        for waiter in current where clock == nil || waiter.clock == nil || waiter.clock === clock {
            waiter.check()
        }
    }
}
