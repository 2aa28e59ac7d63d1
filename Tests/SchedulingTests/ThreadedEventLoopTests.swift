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
