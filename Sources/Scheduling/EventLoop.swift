import Foundation
import Synchronization

/// A cancellable timer scheduled on an `EventLoop`.
public final class TimerHandle: @unchecked Sendable {
    fileprivate let loop: EventLoop
    fileprivate var work: (@Sendable () -> Void)?

    fileprivate init(loop: EventLoop, work: consuming @escaping @Sendable () -> Void) {
        self.loop = loop
        self.work = work
    }

    /// Cancels the timer; safe from any thread. A timer cancelled on its loop never fires.
    public func cancel() {
        if loop.inLoop { work = nil } else { loop.execute { self.work = nil } }
    }

    /// Whether the timer is still waiting to fire. Loop-confined.
    public var isPending: Bool { work != nil }
}

/// A serial executor with its own clock. Every controller and the host stack above it run on one
/// loop, so their state needs no locks; other threads hand work in with `execute`.
///
/// Pacing decides how the clock moves:
/// - `.manual`: only `run(for:)`, `run(until:)` and `runUntilIdle()` move it, on the caller's
///   thread. Idle time is skipped, which is what makes tests fast and deterministic.
/// - `.realTime(speed:)`: a thread of its own runs the loop, and the clock follows the wall
///   clock (times `speed`).
/// - `.unpaced`: a thread of its own runs the loop and jumps over idle time, except while some
///   other thread holds the clock (`holdClock()`): work in flight elsewhere, such as an API
///   callback on a dispatch queue, must not see time leap past it.
public final class EventLoop: @unchecked Sendable {
    public enum Pacing: Sendable, Equatable {
        case manual
        case realTime(speed: Double)
        case unpaced
        public static var realTime: Pacing { .realTime(speed: 1) }
    }

    public let pacing: Pacing
    public let name: String

    // Work posted from other threads, guarded by `condition`.
    //
    // `@exclusivity(unchecked)` on a field of this class: no access to it overlaps another on
    // one thread (none is held across a call that could reach it again), and the dynamic check
    // cannot see other threads anyway (the locks and the thread sanitizer answer for those).
    // Each check was ~80 instructions: a lend of the loop's thread made six (~5 % of
    // `fleet_timed_speedup`, BENCHMARKS.md issue 19 step 24).
    private let condition = NSCondition()
    @exclusivity(unchecked) private var inbox: [Job] = []  // exclusivity checks: 1.8 % of notify
    /// Whether `inbox` may hold work: set with each post, cleared when the loop empties it
    /// (both under `condition`), read without it by `drainInbox()`, which the loop runs before
    /// every job it queues itself; the lock and unlock it saves were ~270 instructions a
    /// notification. Work posted before such a job (in the happens-before sense) is seen.
    private let inboxPosted = Atomic<Bool>(false)
    @exclusivity(unchecked) private var stopRequested = false
    /// `stopRequested`, readable without `condition` (set with it, under it).
    private let stopPosted = Atomic<Bool>(false)
    private var thread: Thread?
    @exclusivity(unchecked) private var clockHolds = 0
    private var sharedNow = LoopInstant.zero
    /// Where the loop's thread sleeps, if it does (unpaced loops; guarded by `condition`).
    @exclusivity(unchecked) private var parked = Parked.no
    /// Whether another thread is running the loop's work while its thread sleeps
    /// (`handingOffInline(_:)`; guarded by `condition`).
    @exclusivity(unchecked) private var lent = false
    /// Set by a thread that ran the loop's work when the sleeping thread must look at the
    /// loop's state again (guarded by `condition`).
    private var lookAgain = false

    private enum Parked { case no, idle, clock }

    /// Whether the loop's own thread is lent to a block (`dispatchAfterBurst(on:_:)`), and
    /// how many lends began (guarded by `condition`).
    @exclusivity(unchecked) private var lending = false
    @exclusivity(unchecked) private var lendSequence: UInt64 = 0
    /// Whether the standby thread runs the loop's work while its thread is lent (guarded by
    /// `condition`).
    @exclusivity(unchecked) private var standbyDriving = false
    /// Wakes the standby thread; guards `standbyAsleep` and `standbyKicked`.
    private let standbySignal = NSCondition()
    /// The standby sleeps without a bound (no lend happened for a while).
    @exclusivity(unchecked) private var standbyAsleep = false
    /// Work was posted with a wake-up during a lend: the standby takes the loop over at once.
    private var standbyKicked = false
    /// Started on the first lend (touched by the loop's own thread only).
    @exclusivity(unchecked) private var standbyThread: Thread?

    // Loop-confined state.
    @exclusivity(unchecked) private var ready = RingBuffer<Job>()  // exclusivity checks: 0.9 % of notify
    /// An emptied array swapped with `inbox` when the loop takes its posted work.
    @exclusivity(unchecked) private var drained: [Job] = []  // exclusivity checks: 0.05 % of adv
    @exclusivity(unchecked) private var burstEnd: [() -> Void] = []  // exclusivity checks: 0.1 % of adv
    @exclusivity(unchecked) private var spareBurstEnd: [() -> Void] = []  // exclusivity checks: 0.1 % of adv
    /// Blocks the loop's own thread runs on their queues after the burst (`dispatchAfterBurst`).
    @exclusivity(unchecked) private var pendingLends = RingBuffer<Lend>()
    /// Whether a callback's thread runs held-back work while the loop's own thread sleeps
    /// (`runHeldBackWork()`): blocks dispatched meanwhile wait for the loop's thread.
    @exclusivity(unchecked) private var runningHeldBack = false
    /// Jobs run in a burst before the work asked for its end runs anyway. Each burst end may
    /// hand callbacks to another thread (a wake-up, costly on these VMs): 1024 rather than 64
    /// roughly halves the wake-ups of a sustained notification stream again after 256 did, and
    /// delays a callback by at most 1024 jobs of loop work (about a millisecond); a loop that
    /// runs out of work ends its burst at once, so a lone callback is never held back.
    static let burstLength = 1024
    @exclusivity(unchecked) private var timers = TimerHeap()  // exclusivity checks: 0.17 % of adv
    @exclusivity(unchecked) private var sequence: UInt64 = 0  // exclusivity checks: 0.17 % of adv
    private var wallBase = ContinuousClock.now
    private var virtualBase = LoopInstant.zero
    /// The loop's current time. Read it on the loop. A threaded loop publishes each change
    /// for `currentTime` (`advanceThreadedClock(to:)`, or with the jump in `jumpClock(to:)`).
    /// A getter over unchecked storage: a stored property read from another module is checked
    /// there (~80 instructions a read, several a connection event) whatever its attribute.
    public var now: LoopInstant { nowStorage }
    @exclusivity(unchecked) private var nowStorage = LoopInstant.zero

    private static let sharedCurrentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Set on a threaded loop's own thread (not on the standby, nor on a thread running the
    /// loop's work in `handingOffInline(_:)`).
    private static let sharedOwnThreadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The loop whose wake-ups the calling thread holds back (`handingOffInline(_:)`).
    private static let sharedHandOffKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The keys, copied into each loop: a `static let` is read through `swift_once` at every
    /// use, several times a packet.
    private let currentKey = EventLoop.sharedCurrentKey
    private let ownThreadKey = EventLoop.sharedOwnThreadKey
    private let handOffKey = EventLoop.sharedHandOffKey

    /// How long a sleeping unpaced loop thread waits for work held back by
    /// `handingOffInline(_:)` before it looks anyway: the bound on a callback that blocks
    /// until the loop has run the work it posted with `execute` (`sync(_:)` wakes the loop at
    /// once).
    static let defaultHandOffSafetyWait: TimeInterval = 0.01
    let handOffSafetyWait: TimeInterval

    public convenience init(name: String = "loop", pacing: Pacing = .manual) {
        self.init(name: name, pacing: pacing, handOffSafetyWait: Self.defaultHandOffSafetyWait)
    }

    /// Tests: a loop whose safety wait is long enough to tell a prompt wake-up from it.
    init(name: String, pacing: Pacing, handOffSafetyWait: TimeInterval) {
        self.name = name
        self.pacing = pacing
        self.handOffSafetyWait = handOffSafetyWait
        if pacing != .manual { startThread() }
    }

    deinit { }

    /// True on the thread currently running this loop.
    public var inLoop: Bool {
        pthread_getspecific(currentKey) == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Whether the caller may use state confined to this loop: on the loop's thread, or on any
    /// thread for a `.manual` loop (its driver, between runs, is the only one using it).
    public var isConfinedToCaller: Bool { pacing == .manual || inLoop }

    /// Debug builds: traps when called off the loop (a loop-confined object's entry points call
    /// it). Release builds: nothing.
    @inlinable
    public func assertConfined(_ what: @autoclosure () -> String, file: StaticString = #file, line: UInt = #line) {
        assert(isConfinedToCaller, "\(what()) used off its loop (\(name))", file: file, line: line)
    }

    /// Runs `work` on the loop as soon as possible, after work already posted. Thread-safe.
    /// `work` is taken consuming (here and in `schedule`): moved into the job or timer, where
    /// a borrowed closure was retained to be stored and released by its caller.
    public func execute(_ work: consuming @escaping @Sendable () -> Void) {
        if inLoop {
            // Work other threads posted before this call goes first: a job posted here must
            // not overtake it (a stream's writes, posted from the app's thread and then, for the
            // last of them, from the loop, went out of order that way).
            drainInbox()
            ready.append(Job(run: work))
            return
        }
        let holdingWakes = pacing == .unpaced && pthread_getspecific(handOffKey) == selfPointer
        post(work, wake: !holdingWakes)
    }

    private func post(_ work: consuming @escaping @Sendable () -> Void, wake: Bool) {
        condition.lock()
        inbox.append(Job(run: work))
        inboxPosted.store(true, ordering: .releasing)
        if wake { condition.signal() }
        let kick = wake && lending && !standbyDriving
        condition.unlock()
        if kick { kickStandby() }
    }

    /// Runs `body` on the loop and returns its result, waiting for it: on the loop (or on a
    /// manual loop, whose caller drives it) it runs at once. Thread-safe. For answers a caller
    /// needs now (an address, the bonds) from setup code, tools or a delegate callback: the
    /// loop's thread is woken at once, even in `handingOffInline(_:)`, where `execute` holds
    /// the wake-up back. Never from work the loop itself waits on.
    public func sync<T>(_ body: @escaping @Sendable () -> T) -> T {
        if inLoop { return body() }
        if pacing == .manual { return enter(body) }
        let answer = SyncAnswer<T>()
        post({ answer.give(body()) }, wake: true)
        return answer.take()
    }

    private var selfPointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Whether the loop's own thread is lent to a block (tests).
    var isLent: Bool {
        condition.lock()
        defer { condition.unlock() }
        return lending
    }

    /// Whether the loop's thread sleeps (tests).
    var threadSleeps: Bool {
        condition.lock()
        defer { condition.unlock() }
        return parked != .no
    }

    /// Runs `body` (a delegate callback on its queue, which holds this loop's clock) so that
    /// the work it posts here does not wake the loop's thread at once; when `body` returns, the
    /// calling thread runs that work itself if the loop's thread is asleep, or wakes it.
    ///
    /// A request made from a callback (a read, `respond`) would otherwise wake the sleeping
    /// loop thread, which runs a few jobs, hands a callback to the other side's queue and sleeps
    /// again: one thread wake-up (tens of µs on a VM whose idle core halts) per hop of a round
    /// trip. Running the jobs here instead leaves one hand-off per hop, to the delegate queue.
    /// Only unpaced loops (a virtual clock) do this; other pacings wake the thread as usual.
    /// The thread running the work counts as the loop's (`inLoop`), and it runs at most one
    /// burst of it (`burstLength` jobs) before it wakes the loop's thread for the rest. It
    /// never moves the clock; timers already due fire, as on the loop's thread.
    ///
    /// A `body` that blocks until the loop has run the work it posted gets it run within
    /// `handOffSafetyWait` (the loop's thread looks on its own then).
    public func handingOffInline(_ body: () -> Void) {
        guard pacing == .unpaced else { return body() }
        let previous = pthread_getspecific(handOffKey)
        pthread_setspecific(handOffKey, selfPointer)
        body()
        pthread_setspecific(handOffKey, previous)
        if previous != selfPointer { runHeldBackWork() }
    }

    /// The end of `handingOffInline(_:)`: runs the posted work here while the loop's thread
    /// sleeps, or wakes it.
    private func runHeldBackWork() {
        // Nothing posted (most callbacks post nothing): no lock. Work this thread posted is
        // seen; work another thread posted with a wake-up woke the loop's thread itself.
        guard inboxPosted.load(ordering: .acquiring) else { return }
        condition.lock()
        if inbox.isEmpty {
            condition.unlock()
            return
        }
        guard parked != .no, !lent, !stopRequested, pthread_getspecific(currentKey) == nil else {
            condition.signal()
            condition.unlock()
            return
        }
        lent = true
        let parkedWhere = parked
        swap(&inbox, &drained)
        inboxPosted.store(false, ordering: .relaxed)
        condition.unlock()
        let (unfinished, hasTimers, hasLends) = enter { () -> (Bool, Bool, Bool) in
            runningHeldBack = true
            takeDrained()
            let unfinished = runLentBurst()
            runningHeldBack = false
            timers.discardCancelledTop()
            return (unfinished, timers.peekTime() != nil, !pendingLends.isEmpty)
        }
        condition.lock()
        lent = false
        // The sleeping thread looks again when there is work left (or blocks to lend it to),
        // when the clock was let go meanwhile (it may move time now), or when it slept with no
        // timers and now has some.
        let look = unfinished || hasLends || stopRequested || !inbox.isEmpty
            || (parkedWhere == .clock ? clockHolds == 0 : hasTimers)
        if look {
            lookAgain = true
            condition.signal()
        }
        condition.unlock()
    }

    /// Runs ready work and timers already due, at most `burstLength` jobs, with the burst's
    /// end; true when work is left for the loop's thread.
    private func runLentBurst() -> Bool {
        var budget = Self.burstLength
        while true {
            while budget > 0, let job = ready.popFirst() {
                job.run()
                budget -= 1
            }
            runBurstEnd()
            drainInbox()
            if !ready.isEmpty {
                if budget > 0 { continue }
                return true
            }
            timers.discardCancelledTop()
            guard let next = timers.peekTime(), next <= now else { return false }
            if budget == 0 { return true }
            fireDueTimer()
            budget -= 1
        }
    }

    /// Runs `work` on the loop `delay` after the loop's current time. Thread-safe; the handle
    /// cancels it.
    @discardableResult
    public func schedule(after delay: Duration, _ work: consuming @escaping @Sendable () -> Void) -> TimerHandle {
        schedule(afterNanoseconds: delay.nanoseconds, work)
    }

    /// `schedule(after:_:)` with the delay in nanoseconds: for the radio's per-packet timers
    /// (air time, T_IFS, connection events), which count in nanoseconds already; taking a
    /// `Duration` apart costs a 128-bit division per timer.
    @discardableResult
    public func schedule(afterNanoseconds delay: Int64, _ work: consuming @escaping @Sendable () -> Void) -> TimerHandle {
        let handle = TimerHandle(loop: self, work: work)
        let delayNs = max(0, delay)
        if inLoop {
            addTimer(at: LoopInstant(nanoseconds: now.nanoseconds &+ delayNs), handle)
        } else {
            execute { self.addTimer(at: LoopInstant(nanoseconds: self.now.nanoseconds &+ delayNs), handle) }
        }
        return handle
    }

    /// Runs `work` at loop time `instant` (or now, if that has passed). Must be called on the loop.
    @discardableResult
    public func schedule(at instant: LoopInstant, _ work: consuming @escaping @Sendable () -> Void) -> TimerHandle {
        precondition(inLoop, "schedule(at:) must be called on the loop")
        let handle = TimerHandle(loop: self, work: work)
        addTimer(at: max(instant, now), handle)
        return handle
    }

    private func addTimer(at instant: LoopInstant, _ handle: TimerHandle) {
        sequence &+= 1
        timers.push(TimerEntry(time: instant, sequence: sequence, handle: handle))
    }

    /// Runs `work` on the loop once the work ready now has run (or after a long burst of it),
    /// before the loop waits or moves its clock: for work that is cheaper in bulk, such as
    /// handing the results of many jobs to another thread at once. Must be called on the loop.
    public func atEndOfBurst(_ work: @escaping () -> Void) {
        precondition(inLoop, "atEndOfBurst(_:) must be called on the loop")
        burstEnd.append(work)
    }

    private func runBurstEnd() {
        while !burstEnd.isEmpty {
            swap(&burstEnd, &spareBurstEnd)
            for work in spareBurstEnd { work() }
            spareBurstEnd.removeAll(keepingCapacity: true)
        }
    }

    // MARK: Lending the loop's thread to a delegate callback

    /// A block for `queue` that the loop's own thread runs itself, with `queue.sync`, once
    /// its burst of work has ended (`dispatchAfterBurst(on:_:)`).
    struct Lend {
        let queue: DispatchQueue
        let body: @Sendable () -> Void
    }

    /// Runs `body` on `queue` once the work ready now has run, like `atEndOfBurst` followed by
    /// `queue.async`. On an unpaced loop's own thread, the thread runs it itself with
    /// `queue.sync` instead (libdispatch runs a sync block on the calling thread: on `queue`
    /// for `dispatchPrecondition` and `getSpecific`, in order with the queue's other blocks),
    /// which saves the wake-up of a worker thread and the loop thread's sleep until the block
    /// lets the clock go: two thread switches per delegate callback. Blocks dispatched by work
    /// a callback's thread runs for the sleeping loop (`handingOffInline(_:)`) wait for the
    /// loop's thread too, which wakes for them: sent with `async`, each callback would run
    /// on a worker thread and post its requests from there, and the loop's work would stay on
    /// workers for good (a mode that cost a quarter more CPU a notification, in one run of
    /// three to five). Must be called on the loop.
    ///
    /// While the thread is lent, it is not the loop's (`inLoop` is false in `body`), and a
    /// standby thread runs the loop's work if `body` waits for it: at once for work posted
    /// with a wake-up (`sync`, `execute` outside `handingOffInline`), after
    /// `handOffSafetyWait` for the rest (a block blocked on a queue busy with an app's block
    /// that waits for the loop, work held back by `handingOffInline`, other callbacks waiting
    /// for this thread). Never use it for the main queue (its thread may be waiting for the
    /// loop), or for a block that moves the clock.
    public func dispatchAfterBurst(on queue: DispatchQueue, _ body: @escaping @Sendable () -> Void) {
        precondition(inLoop, "dispatchAfterBurst(on:_:) must be called on the loop")
        if pacing == .unpaced, runningHeldBack || pthread_getspecific(ownThreadKey) == selfPointer {
            pendingLends.append(Lend(queue: queue, body: body))
        } else {
            burstEnd.append { queue.async(execute: body) }
        }
    }

    /// On the loop's own thread, after a burst's end: lends the thread to each block queued by
    /// `dispatchAfterBurst(on:_:)`. True when it lent (the blocks may have posted work).
    private func runPendingLends() -> Bool {
        guard !pendingLends.isEmpty else { return false }
        // The standby may take the list over while a block runs (and dispatch the rest).
        while let lend = pendingLends.popFirst() { lendThread(to: lend) }
        return true
    }

    private func lendThread(to lend: Lend) {
        condition.lock()
        lending = true
        lendSequence &+= 1
        condition.unlock()
        wakeStandbyIfAsleep()
        pthread_setspecific(currentKey, nil)
        lend.queue.sync(execute: lend.body)
        pthread_setspecific(currentKey, selfPointer)
        condition.lock()
        lending = false
        if standbyDriving {
            condition.broadcast()
            while standbyDriving { condition.wait() }
        }
        condition.unlock()
    }

    /// Starts the standby thread on the first lend; wakes it if it sleeps without a bound
    /// (no lend happened for a while), so it watches this one.
    private func wakeStandbyIfAsleep() {
        if standbyThread == nil {
            let thread = Thread { self.standbyMain() }
            thread.name = name + " (standby)"
            standbyThread = thread
            thread.start()
            return
        }
        standbySignal.lock()
        if standbyAsleep {
            standbyAsleep = false
            standbySignal.signal()
        }
        standbySignal.unlock()
    }

    /// Work was posted with a wake-up while the loop's thread is lent: the standby takes the
    /// loop over now (the lent block may be waiting for that work).
    private func kickStandby() {
        standbySignal.lock()
        standbyKicked = true
        standbyAsleep = false
        standbySignal.signal()
        standbySignal.unlock()
    }

    /// The standby thread: looks every `handOffSafetyWait` while lends happen, and takes the
    /// loop over when one lasts a whole look or when kicked; sleeps without a bound when no
    /// lend happened between two looks.
    private func standbyMain() {
        var seen = UInt64.max
        while true {
            standbySignal.lock()
            if !standbyKicked {
                if standbyAsleep {
                    while standbyAsleep && !standbyKicked { standbySignal.wait() }
                } else {
                    _ = standbySignal.wait(until: Date(timeIntervalSinceNow: handOffSafetyWait))
                }
            }
            let kicked = standbyKicked
            standbyKicked = false
            standbySignal.unlock()

            condition.lock()
            if stopRequested {
                condition.unlock()
                return
            }
            if !lending || (!kicked && lendSequence != seen) {
                // No lend, or a new one since the last look: look again after a while; after
                // a whole interval without a lend, sleep until the next one.
                let idle = !lending && lendSequence == seen
                seen = lendSequence
                condition.unlock()
                if idle { sleepUntilNextLend(seen: seen) }
                continue
            }
            standbyDriving = true
            condition.unlock()
            driveDuringLend()
        }
    }

    /// Marks the standby asleep, then looks once more for a lend that started meanwhile (the
    /// lender looks at the mark after starting its lend: one of the two sees the other).
    private func sleepUntilNextLend(seen: UInt64) {
        standbySignal.lock()
        standbyAsleep = true
        standbySignal.unlock()
        condition.lock()
        let started = lendSequence != seen || stopRequested
        condition.unlock()
        if started {
            standbySignal.lock()
            standbyAsleep = false
            standbySignal.unlock()
        }
    }

    /// The standby runs the loop's work while its thread stays lent: ready work and timers
    /// already due (the clock does not move: the lent callback holds it), until the lend ends.
    private func driveDuringLend() {
        enter {
            // Blocks waiting for the lent thread go to their queues: the lent one may wait
            // for one of them.
            while let lend = pendingLends.popFirst() { lend.queue.async(execute: lend.body) }
            while true {
                drainInbox()
                let unfinished = runLentBurst()
                condition.lock()
                if !lending || stopRequested {
                    standbyDriving = false
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                if !unfinished && inbox.isEmpty {
                    // Bounded: work held back by `handingOffInline` does not signal.
                    _ = condition.wait(until: Date(timeIntervalSinceNow: handOffSafetyWait))
                }
                condition.unlock()
            }
        }
    }

    // MARK: Clock holds

    /// Keeps an unpaced loop from jumping over idle time until the matching `releaseClock()`.
    /// Work still runs, and timers already due still fire. Thread-safe; no effect on other pacings.
    public func holdClock() {
        condition.lock()
        clockHolds += 1
        condition.unlock()
    }

    /// Ends one `holdClock()`.
    public func releaseClock() {
        condition.lock()
        precondition(clockHolds > 0, "releaseClock() without holdClock()")
        clockHolds -= 1
        if clockHolds == 0 { condition.signal() }
        condition.unlock()
    }

    /// The loop's time as last published by its thread, readable from any thread (threaded
    /// pacings; for a manual loop read `now` on the loop).
    public var currentTime: LoopInstant {
        condition.lock()
        defer { condition.unlock() }
        return sharedNow
    }

    /// A threaded loop's clock moves to `instant` (if later), published for `currentTime`.
    private func advanceThreadedClock(to instant: LoopInstant) {
        guard instant > now else { return }
        nowStorage = instant
        condition.lock()
        sharedNow = instant
        condition.unlock()
    }

    // MARK: Manual pacing

    /// Processes work and timers for `duration` of loop time, then leaves the clock at the end.
    public func run(for duration: Duration) {
        let deadline = now + duration
        _ = runLoop(deadline: deadline, predicate: { false })
        nowStorage = max(now, deadline)
    }

    /// Processes work and timers until `predicate` holds (checked after each job) or `timeout` of
    /// loop time passes. Returns whether the predicate held.
    @discardableResult
    public func run(until predicate: () -> Bool, timeout: Duration = .seconds(60)) -> Bool {
        if enter({ predicate() }) { return true }
        let deadline = now + timeout
        let held = runLoop(deadline: deadline, predicate: predicate)
        if !held { nowStorage = max(now, deadline) }
        return held
    }

    /// Processes work and timers until none is left, skipping idle time. Timers that keep
    /// re-arming (advertising, say) never let the loop go idle: use `run(for:)` with those.
    public func runUntilIdle(limit: Duration = .seconds(3600)) {
        _ = runLoop(deadline: now + limit, predicate: { false })
    }

    private func enter<T>(_ body: () -> T) -> T {
        let previous = pthread_getspecific(currentKey)
        pthread_setspecific(currentKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(currentKey, previous) }
        return body()
    }

    private func runLoop(deadline: LoopInstant, predicate: () -> Bool) -> Bool {
        precondition(pacing == .manual, "run(…) drives only manually paced loops")
        return enter {
            while true {
                drainInbox()
                if let job = ready.popFirst() {
                    job.run()
                    if ready.isEmpty { runBurstEnd() }
                    if predicate() { return true }
                    continue
                }
                runBurstEnd()
                timers.discardCancelledTop()
                guard let next = timers.peekTime(), next <= deadline else { return false }
                nowStorage = max(now, next)
                fireDueTimer()
                if ready.isEmpty { runBurstEnd() }
                if predicate() { return true }
            }
        }
    }

    private func drainInbox() {
        guard inboxPosted.load(ordering: .acquiring) else { return }
        condition.lock()
        if inbox.isEmpty { condition.unlock(); return }
        swap(&inbox, &drained)
        inboxPosted.store(false, ordering: .relaxed)
        condition.unlock()
        takeDrained()
    }

    /// Moves the work swapped out of `inbox` into `ready`, keeping both arrays' storage.
    private func takeDrained() {
        for job in drained { ready.append(job) }
        drained.removeAll(keepingCapacity: true)
    }

    private func fireDueTimer() {
        guard let entry = timers.pop() else { return }
        // Moved out (nil left): a read retained the closure and the clearing released it.
        if let work = entry.handle.work.take() { work() }
    }

    // MARK: Threaded pacing

    private func startThread() {
        // The thread keeps the loop alive until `shutdown()` lets it finish.
        let thread = Thread { self.threadMain() }
        thread.name = name
        self.thread = thread
        wallBase = ContinuousClock.now
        thread.start()
    }

    private func wallToLoop(_ instant: ContinuousClock.Instant) -> LoopInstant {
        guard case .realTime(let speed) = pacing else { return now }
        let elapsed = Double((instant - wallBase).nanoseconds) * speed
        return LoopInstant(nanoseconds: virtualBase.nanoseconds + Int64(elapsed))
    }

    private func threadMain() {
        pthread_setspecific(ownThreadKey, selfPointer)
        enter {
            // Whether the thread parked since it last looked under the lock: only then can
            // another thread be running the loop's work (`lent` is set only while it is
            // parked). Otherwise, with nothing posted and no stop, the lock and unlock are
            // skipped: a timed radio goes round here once a timer, thousands a second of its
            // time (16,900 lock pairs a second of a fleet's).
            var parkedSinceLook = true
            while true {
                guard parkedSinceLook || inboxPosted.load(ordering: .acquiring) || stopPosted.load(ordering: .acquiring) else {
                    parkedSinceLook = turn()
                    continue
                }
                parkedSinceLook = false
                condition.lock()
                // Another thread may be running the loop's work (`handingOffInline`).
                while lent { condition.wait() }
                if stopRequested {
                    // Drop pending work: its closures often hold objects that hold this loop.
                    inbox.removeAll()
                    condition.unlock()
                    ready = RingBuffer()
                    timers = TimerHeap()
                    burstEnd = []
                    pendingLends = RingBuffer()
                    return
                }
                swap(&inbox, &drained)
                inboxPosted.store(false, ordering: .relaxed)
                condition.unlock()
                takeDrained()
                parkedSinceLook = turn()
            }
        }
    }

    /// A threaded loop's turn once it has taken its posted work: the ready work, the blocks it
    /// lends its thread to, then a due timer, a jump of the clock, or a wait. True when the
    /// thread parked (another thread may have run the loop's work meanwhile).
    private func turn() -> Bool {
        if case .realTime = pacing { advanceThreadedClock(to: wallToLoop(.now)) }
        var burst = 0
        while let job = ready.popFirst() {
            job.run()
            burst += 1
            if burst == Self.burstLength {
                burst = 0
                runBurstEnd()
                _ = runPendingLends()
            }
        }
        runBurstEnd()
        // Blocks lent this thread may have posted work: look again before the clock.
        if runPendingLends() { return false }
        timers.discardCancelledTop()
        if let next = timers.peekTime() {
            if pacing == .unpaced && next > now {
                guard jumpClock(to: next) else { return true }
                fireDueTimer()
                return false
            }
            if next <= now {
                fireDueTimer()
                return false
            }
            if case .realTime(let speed) = pacing {
                // Not a park: work posted meanwhile sets `inboxPosted`, a stop `stopPosted`.
                let waitNs = Double(next.nanoseconds - now.nanoseconds) / speed
                condition.lock()
                if inbox.isEmpty && !stopRequested {
                    _ = condition.wait(until: Date(timeIntervalSinceNow: waitNs / 1e9))
                }
                condition.unlock()
            }
            return false
        }
        condition.lock()
        park(.idle) { inbox.isEmpty }
        condition.unlock()
        return true
    }

    /// For an unpaced loop about to jump ahead to its next timer: when no hold is on and no
    /// work was posted, moves the clock to `next` (published in the same critical section: one
    /// lock per jump, not two) and returns true; otherwise waits until the holds are released
    /// or work arrives and returns false (the caller looks again). Work posted by a thread that
    /// then released its hold must run before time jumps, or that thread's request would land
    /// after the leap.
    private func jumpClock(to next: LoopInstant) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if clockHolds == 0 {
            guard inbox.isEmpty else { return false }
            nowStorage = next
            sharedNow = next
            return true
        }
        park(.clock) { clockHolds > 0 && inbox.isEmpty }
        return false
    }

    /// Sleeps (with `condition` locked) while `sleeping` holds, or while another thread runs the
    /// loop's work, until stopped or told to look again. While the clock of an unpaced loop is
    /// held, a callback may have held back a wake-up (`handingOffInline`): the sleep is then
    /// bounded. (Other pacings never hold wake-ups back, so they sleep until woken.)
    private func park(_ place: Parked, while sleeping: () -> Bool) {
        parked = place
        while (lent || (sleeping() && !lookAgain)) && !stopRequested {
            if clockHolds > 0 && !lent && pacing == .unpaced {
                _ = condition.wait(until: Date(timeIntervalSinceNow: handOffSafetyWait))
            } else {
                condition.wait()
            }
        }
        parked = .no
        lookAgain = false
    }

    /// Stops a threaded loop after the job it is running. Work posted afterwards never runs.
    public func shutdown() {
        condition.lock()
        stopRequested = true
        stopPosted.store(true, ordering: .releasing)
        condition.broadcast()
        condition.unlock()
        kickStandby()
    }
}

/// The answer `EventLoop.sync(_:)` waits for.
///
/// `@unchecked Sendable`: `value` and `given` are read and written only with `condition`
/// locked; the loop gives once, the caller takes once.
private final class SyncAnswer<T>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: T?
    private var given = false

    func give(_ answer: T) {
        condition.lock()
        value = answer
        given = true
        condition.signal()
        condition.unlock()
    }

    func take() -> T {
        condition.lock()
        defer { condition.unlock() }
        while !given { condition.wait() }
        return value!
    }
}

/// A job, wrapped: a closure stored directly in a generic container (an array, a ring buffer) is
/// kept at its most general abstraction, which costs a thunk allocated around every closure.
struct Job {
    let run: @Sendable () -> Void
}

struct TimerEntry {
    var time: LoopInstant
    var sequence: UInt64
    var handle: TimerHandle
}

/// A binary min-heap ordered by time, then by scheduling order.
///
/// The sifts work on the array's buffer and move entries with `swapAt` on it, which moves the
/// handles' references without retaining and releasing them: on the array itself each swap
/// retained and released a handle and checked the storage's uniqueness, most of a timed
/// radio's cost per timer (several timers per packet).
struct TimerHeap {
    private var items: [TimerEntry] = []

    /// Through the buffer, as the sifts: `items.first` copied the entry (its handle retained
    /// and released) to read one field, at each turn of the loop.
    func peekTime() -> LoopInstant? { items.isEmpty ? nil : items.withUnsafeBufferPointer { $0[0].time } }

    /// Drops cancelled timers from the top of the heap, so that a cancelled timer neither moves
    /// the clock to its time nor keeps a loop waiting for it.
    mutating func discardCancelledTop() {
        while !items.isEmpty, items.withUnsafeBufferPointer({ $0[0].handle.work == nil }) { _ = pop() }
    }

    mutating func push(_ entry: consuming TimerEntry) {
        // A cancelled timer stays until it reaches the top, and most are cancelled long before
        // (an HCI command's or an ATT request's timeout): a heap about to grow drops them first,
        // so that it holds what is live, not every timeout of thousands of connections' setup.
        if items.count >= 32, items.count == items.capacity {
            dropCancelled()
            // Few dropped: grow anyway, or every push would walk the whole heap again (10,000
            // connections' supervision and advertising timers, with a cancelled one or two).
            if items.count > items.capacity / 2 { items.reserveCapacity(items.capacity * 2) }
        }
        items.append(entry)
        items.withUnsafeMutableBufferPointer { Self.siftUp($0, from: $0.count - 1) }
    }

    mutating func pop() -> TimerEntry? {
        let last = items.count - 1
        guard last >= 0 else { return nil }
        if last > 0 { items.withUnsafeMutableBufferPointer { $0.swapAt(0, last) } }
        let top = items.removeLast()
        if last > 1 { items.withUnsafeMutableBufferPointer { Self.siftDown($0, from: 0) } }
        return top
    }

    private static func isBefore(_ heap: UnsafeMutableBufferPointer<TimerEntry>, _ a: Int, _ b: Int) -> Bool {
        let x = heap[a].time.nanoseconds, y = heap[b].time.nanoseconds
        return x < y || (x == y && heap[a].sequence < heap[b].sequence)
    }

    private static func siftUp(_ heap: UnsafeMutableBufferPointer<TimerEntry>, from start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard isBefore(heap, i, parent) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private static func siftDown(_ heap: UnsafeMutableBufferPointer<TimerEntry>, from start: Int) {
        let count = heap.count
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < count && isBefore(heap, l, m) { m = l }
            if r < count && isBefore(heap, r, m) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
    }

    /// Removes every cancelled timer and restores the heap order (keeping the storage).
    private mutating func dropCancelled() {
        let before = items.count
        items.removeAll { $0.handle.work == nil }
        guard items.count < before, items.count > 1 else { return }
        items.withUnsafeMutableBufferPointer { heap in
            for i in stride(from: heap.count / 2 - 1, through: 0, by: -1) { Self.siftDown(heap, from: i) }
        }
    }
}
