import Foundation
import Testing
@testable import Scheduling

/// Threaded loops run on their own thread, so these tests wait for them — never longer than
/// `bound`, and they return as soon as the loop signals.
@Suite("EventLoop, threaded pacing")
struct ThreadedEventLoopTests {
    static let bound: DispatchTimeInterval = .seconds(2)

    @Test func unpacedLoopRunsATimerChainQuicklyOnItsOwnThread() {
        let loop = EventLoop(name: "unpaced", pacing: .unpaced)
        defer { loop.shutdown() }
        let done = DispatchSemaphore(value: 0)
        let log = Log<LoopInstant>()

        // 1000 timers of one virtual second each, every one armed by the previous one.
        @Sendable func step(_ remaining: Int) {
            log.append(loop.now)
            if remaining == 0 {
                #expect(loop.inLoop)   // on the loop's own thread
                done.signal()
                return
            }
            loop.schedule(after: .seconds(1)) { step(remaining - 1) }
        }
        let wall = ContinuousClock()
        let start = wall.now
        loop.execute { step(1000) }
        #expect(done.wait(timeout: .now() + Self.bound) == .success)
        #expect(wall.now - start < .seconds(2))
        #expect(log.count == 1001)
        #expect(log.entries.last.map { $0 - log.entries[0] } == .seconds(1000))
    }

    /// `execute` keeps the order of posting across threads: a job the loop posts for itself
    /// does not overtake one another thread posted first (the inbox is taken first).
    @Test func workPostedOnTheLoopGoesAfterWorkOtherThreadsPostedBefore() {
        let loop = EventLoop(name: "order", pacing: .unpaced)
        defer { loop.shutdown() }
        let posted = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let log = Log<String>()
        loop.execute {
            // While this job runs, another thread posts; only then does the loop post.
            DispatchQueue.global().async {
                loop.execute { log.append("from another thread") }
                posted.signal()
            }
            _ = posted.wait(timeout: .now() + Self.bound)
            loop.execute {
                log.append("from the loop")
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + Self.bound) == .success)
        #expect(log.entries == ["from another thread", "from the loop"])
    }

    /// Once the loop has run what was posted to it, polls (bounded, yielding) until its thread
    /// sleeps again: nothing signals that.
    static func untilAsleep(_ loop: EventLoop) -> Bool {
        let ran = DispatchSemaphore(value: 0)
        loop.execute { ran.signal() }
        guard ran.wait(timeout: .now() + bound) == .success else { return false }
        let deadline = ContinuousClock.now + .seconds(2)
        while !loop.threadSleeps {
            if ContinuousClock.now > deadline { return false }
            sched_yield()
        }
        return true
    }

    /// A callback's request runs on the callback's thread once it returns, while the loop's
    /// thread sleeps, whether it sleeps waiting for the clock (a timer pending) or for work.
    @Test(arguments: [true, false])
    func workPostedInAHandOffRunsOnTheCallingThreadWhileTheLoopSleeps(timerPending: Bool) {
        let loop = EventLoop(name: "hand-off", pacing: .unpaced)
        defer { loop.shutdown() }
        loop.holdClock()   // as a delegate callback does
        if timerPending { loop.schedule(after: .seconds(30)) {} }
        #expect(Self.untilAsleep(loop))
        let log = Log<String>()
        let caller = pthread_self()
        let timeBefore = loop.currentTime
        loop.handingOffInline {
            loop.execute {
                log.append(pthread_equal(pthread_self(), caller) != 0 && loop.inLoop ? "job, inline" : "job, elsewhere")
                loop.execute { log.append("its follow-up") }
            }
            log.append("callback returns")
        }
        #expect(log.entries == ["callback returns", "job, inline", "its follow-up"])
        #expect(!loop.inLoop)
        #expect(loop.currentTime == timeBefore)   // the clock did not move
        loop.releaseClock()
    }

    /// A timer the inline work arms, with the clock free, still fires: the loop's thread is
    /// told to look again.
    @Test func aTimerArmedByInlineWorkWakesTheSleepingLoop() {
        let loop = EventLoop(name: "hand-off timer", pacing: .unpaced)
        defer { loop.shutdown() }
        #expect(Self.untilAsleep(loop))
        let fired = DispatchSemaphore(value: 0)
        loop.handingOffInline {
            loop.execute { loop.schedule(after: .seconds(5)) { fired.signal() } }
        }
        #expect(fired.wait(timeout: .now() + Self.bound) == .success)
    }

    /// A callback that blocks until the loop ran what it posted is not stuck: the sleeping
    /// thread looks on its own after `handOffSafetyWait`.
    @Test func aCallbackWaitingForItsOwnRequestIsNotStuck() {
        let loop = EventLoop(name: "hand-off wait", pacing: .unpaced)
        defer { loop.shutdown() }
        loop.holdClock()
        loop.schedule(after: .seconds(30)) {}
        #expect(Self.untilAsleep(loop))
        let ran = DispatchSemaphore(value: 0)
        loop.handingOffInline {
            loop.execute { ran.signal() }
            #expect(ran.wait(timeout: .now() + Self.bound) == .success)
        }
        loop.releaseClock()
    }

    /// `sync` runs its body on the loop and hands the answer back, from any thread; on the
    /// loop's own thread, and on a manual loop, it runs at once.
    @Test func syncRunsOnTheLoopFromAnyThread() {
        let loop = EventLoop(name: "sync", pacing: .unpaced)
        defer { loop.shutdown() }
        let answers = Log<Int>()
        DispatchQueue.concurrentPerform(iterations: 4) { i in
            answers.append(loop.sync { loop.inLoop ? i : -1 })
        }
        #expect(answers.entries.sorted() == [0, 1, 2, 3])
        let nested = DispatchSemaphore(value: 0)
        let inner = Log<String>()
        loop.execute {
            inner.append(loop.sync { "inline on the loop" })
            nested.signal()
        }
        #expect(nested.wait(timeout: .now() + Self.bound) == .success)
        #expect(inner.entries == ["inline on the loop"])
        let manual = EventLoop(name: "sync manual")
        #expect(manual.sync { manual.inLoop })
    }

    /// A delegate callback asking for an answer (`sync`) wakes the sleeping loop at once,
    /// though its other requests' wake-ups are held back: with a safety wait of ten minutes,
    /// the answer comes anyway (a `sync` that waited for it would hang this test).
    @Test func syncFromACallbackWakesTheLoopAtOnce() {
        let loop = EventLoop(name: "sync hand-off", pacing: .unpaced, handOffSafetyWait: 600)
        defer { loop.shutdown() }
        loop.holdClock()
        loop.schedule(after: .seconds(30)) {}
        #expect(Self.untilAsleep(loop))
        let log = Log<String>()
        let start = ContinuousClock.now
        loop.handingOffInline {
            loop.execute { log.append("posted before") }
            log.append(loop.sync { "answer" })
        }
        #expect(ContinuousClock.now - start < .seconds(60))
        #expect(log.entries == ["posted before", "answer"])
        loop.releaseClock()
    }

    /// A queue whose blocks can tell they run on it.
    static func markedQueue(_ label: String) -> (DispatchQueue, DispatchSpecificKey<String>) {
        let queue = DispatchQueue(label: label)
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: label)
        return (queue, key)
    }

    /// `dispatchAfterBurst` on an unpaced loop: the loop's own thread runs the block on the
    /// queue (`queue.sync`) once the burst has ended, not being the loop's meanwhile; work the
    /// block posts as a callback does (`handingOffInline`) runs after it, on the same thread.
    @Test func theLoopsThreadRunsADispatchedBlockOnTheQueueItself() {
        let loop = EventLoop(name: "lend", pacing: .unpaced)
        defer { loop.shutdown() }
        let (queue, key) = Self.markedQueue("lend queue")
        let log = Log<String>()
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            let loopThread = pthread_self()
            loop.dispatchAfterBurst(on: queue) {
                let same = pthread_equal(pthread_self(), loopThread) != 0
                log.append("block: on the queue \(DispatchQueue.getSpecific(key: key) != nil), loop's thread \(same), in loop \(loop.inLoop)")
                // As a delegate callback's request: held back, not waking anyone.
                loop.handingOffInline {
                    loop.execute {
                        log.append("posted by the block: loop's thread \(pthread_equal(pthread_self(), loopThread) != 0)")
                        done.signal()
                    }
                }
            }
            log.append("burst goes on")
        }
        #expect(done.wait(timeout: .now() + Self.bound) == .success)
        #expect(log.entries == [
            "burst goes on",
            "block: on the queue true, loop's thread true, in loop false",
            "posted by the block: loop's thread true",
        ])
    }

    /// A block dispatched by work a callback's thread ran for the sleeping loop
    /// (`handingOffInline`) goes to the loop's own thread too, which wakes for it: sent with
    /// `async`, it would run on a worker, and the requests of that callback would keep the
    /// loop's work off its thread.
    @Test(arguments: [true, false])
    func aBlockDispatchedByHeldBackWorkRunsOnTheLoopsThread(timerPending: Bool) {
        let loop = EventLoop(name: "lend held back", pacing: .unpaced)
        defer { loop.shutdown() }
        let (queue, key) = Self.markedQueue("lend held back queue")
        let loopThread = Locked<pthread_t?>(nil)
        loop.execute { loopThread.withLock { $0 = pthread_self() } }
        loop.holdClock()   // as a delegate callback does
        if timerPending { loop.schedule(after: .seconds(30)) {} }
        #expect(Self.untilAsleep(loop))
        let log = Log<String>()
        let done = DispatchSemaphore(value: 0)
        let caller = pthread_self()
        @Sendable func onLoopsThread() -> Bool {
            loopThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        }
        loop.handingOffInline {
            loop.execute {
                log.append("job: caller's thread \(pthread_equal(pthread_self(), caller) != 0)")
                loop.dispatchAfterBurst(on: queue) {
                    log.append("block: on the queue \(DispatchQueue.getSpecific(key: key) != nil), loop's thread \(onLoopsThread()), in loop \(loop.inLoop)")
                    done.signal()
                }
            }
        }
        loop.releaseClock()
        #expect(done.wait(timeout: .now() + Self.bound) == .success)
        #expect(log.entries == [
            "job: caller's thread true",
            "block: on the queue true, loop's thread true, in loop false",
        ])
    }

    /// Off the loop's own thread (a manual loop's driver), the block goes to its queue with
    /// `async` at the burst's end.
    @Test func aManualLoopDispatchesTheBlockAsynchronously() {
        let loop = EventLoop(name: "lend manual")
        let (queue, key) = Self.markedQueue("lend manual queue")
        let ran = DispatchSemaphore(value: 0)
        loop.execute {
            loop.dispatchAfterBurst(on: queue) {
                #expect(DispatchQueue.getSpecific(key: key) != nil)
                ran.signal()
            }
        }
        loop.runUntilIdle()
        #expect(ran.wait(timeout: .now() + Self.bound) == .success)
    }

    /// A lent block that waits for the loop gets its answer: the standby thread takes the
    /// loop over at once for work posted with a wake-up (`sync`, `execute`), and within a
    /// safety wait for work held back by `handingOffInline`; a timer already due fires too.
    @Test(arguments: ["sync", "execute", "held back"])
    func aLentBlockWaitingForTheLoopIsAnswered(how: String) {
        let loop = EventLoop(name: "lend wait", pacing: .unpaced)
        defer { loop.shutdown() }
        let (queue, _) = Self.markedQueue("lend wait queue")
        let answered = DispatchSemaphore(value: 0)
        loop.execute {
            loop.dispatchAfterBurst(on: queue) {
                switch how {
                case "sync":
                    #expect(loop.sync { loop.inLoop })
                case "execute":
                    let ran = DispatchSemaphore(value: 0)
                    loop.execute { ran.signal() }
                    #expect(ran.wait(timeout: .now() + Self.bound) == .success)
                default:
                    let ran = DispatchSemaphore(value: 0)
                    loop.handingOffInline { loop.execute { ran.signal() } }
                    #expect(ran.wait(timeout: .now() + Self.bound) == .success)
                }
                answered.signal()
            }
        }
        #expect(answered.wait(timeout: .now() + Self.bound) == .success)
        // The loop's thread has its loop back.
        #expect(loop.sync { loop.inLoop })
    }

    /// A lent block waiting for another block dispatched in the same burst (another queue):
    /// the standby sends the waiting ones to their queues.
    @Test func aLentBlockWaitingForTheNextOneIsNotStuck() {
        let loop = EventLoop(name: "lend two", pacing: .unpaced)
        defer { loop.shutdown() }
        let (first, _) = Self.markedQueue("lend first")
        let (second, secondKey) = Self.markedQueue("lend second")
        let secondRan = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            loop.dispatchAfterBurst(on: first) {
                #expect(secondRan.wait(timeout: .now() + Self.bound) == .success)
                done.signal()
            }
            loop.dispatchAfterBurst(on: second) {
                #expect(DispatchQueue.getSpecific(key: secondKey) != nil)
                secondRan.signal()
            }
        }
        #expect(done.wait(timeout: .now() + Self.bound) == .success)
    }

    /// The queue is busy with an app's block that waits for the loop (posting with
    /// `execute`, then waiting): the loop's thread waits in `queue.sync`, and the standby
    /// runs the app's request.
    @Test func aQueueBusyWithABlockWaitingForTheLoopIsNotADeadlock() {
        let loop = EventLoop(name: "lend busy", pacing: .unpaced)
        defer { loop.shutdown() }
        let (queue, _) = Self.markedQueue("lend busy queue")
        let appBlockStarted = DispatchSemaphore(value: 0)
        let log = Log<String>()
        let done = DispatchSemaphore(value: 0)
        queue.async {
            appBlockStarted.signal()
            // Until the loop is lent to this queue (it then waits behind this block).
            let deadline = ContinuousClock.now + .seconds(2)
            while !loop.isLent && ContinuousClock.now < deadline { sched_yield() }
            let ran = DispatchSemaphore(value: 0)
            loop.execute {
                log.append("app's request")
                ran.signal()
            }
            #expect(ran.wait(timeout: .now() + Self.bound) == .success)
        }
        #expect(appBlockStarted.wait(timeout: .now() + Self.bound) == .success)
        loop.execute {
            loop.dispatchAfterBurst(on: queue) {
                log.append("dispatched block")
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + Self.bound) == .success)
        #expect(log.entries == ["app's request", "dispatched block"])
    }

    @Test func shutdownStopsAThreadedLoop() {
        let loop = EventLoop(name: "stopping", pacing: .unpaced)
        let ran = DispatchSemaphore(value: 0)
        loop.execute { ran.signal() }
        #expect(ran.wait(timeout: .now() + Self.bound) == .success)

        loop.shutdown()
        let afterShutdown = DispatchSemaphore(value: 0)
        loop.execute { afterShutdown.signal() }
        // Work posted after shutdown never runs; a short bounded wait shows it did not.
        #expect(afterShutdown.wait(timeout: .now() + .milliseconds(100)) == .timedOut)
    }

    @Test func realTimeLoopAtSpeed1000FiresAOneSecondTimerInAboutAMillisecond() {
        let loop = EventLoop(name: "fast", pacing: .realTime(speed: 1000))
        defer { loop.shutdown() }
        let fired = DispatchSemaphore(value: 0)
        let times = Log<LoopInstant>()
        let wall = ContinuousClock()
        let start = wall.now
        loop.execute {
            times.append(loop.now)
            loop.schedule(after: .seconds(1)) {
                times.append(loop.now)
                fired.signal()
            }
        }
        #expect(fired.wait(timeout: .now() + Self.bound) == .success)
        let elapsed = wall.now - start
        #expect(elapsed >= .microseconds(990))   // 1 s of loop time is 1 ms of wall time
        #expect(elapsed < .seconds(2))
        let entries = times.entries
        #expect(entries.count == 2)
        if entries.count == 2 { #expect(entries[1] - entries[0] >= .seconds(1)) }
    }

    @Test func executeFromManyThreadsReachesAThreadedLoop() {
        let loop = EventLoop(name: "inbox", pacing: .realTime)
        defer { loop.shutdown() }
        let log = Log<Int>()
        let all = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<100 {
                loop.execute {
                    log.append(thread * 1000 + i)
                    if log.count == 800 { all.signal() }
                }
            }
        }
        #expect(all.wait(timeout: .now() + Self.bound) == .success)
        // Each thread's jobs ran in the order that thread posted them.
        let entries = log.entries
        for thread in 0..<8 {
            #expect(entries.filter { $0 / 1000 == thread } == (0..<100).map { thread * 1000 + $0 })
        }
    }
}
