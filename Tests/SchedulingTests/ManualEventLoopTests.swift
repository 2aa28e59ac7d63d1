import Foundation
import Testing
@testable import Scheduling

/// Collects what jobs did. Manual loops run their jobs on the test's thread; the lock is for
/// the tests that hand work in from other threads.
final class Log<Entry: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Entry] = []

    func append(_ entry: Entry) { lock.withLock { storage.append(entry) } }
    var entries: [Entry] { lock.withLock { storage } }
    var count: Int { lock.withLock { storage.count } }
}

extension LoopInstant {
    static func ms(_ milliseconds: Int64) -> LoopInstant { LoopInstant(nanoseconds: milliseconds * 1_000_000) }
}

@Suite("EventLoop, manual pacing")
struct ManualEventLoopTests {
    @Test func executeRunsJobsInFIFOOrderOnlyWhenDriven() {
        let loop = EventLoop()
        let log = Log<Int>()
        for i in 0..<100 { loop.execute { log.append(i) } }
        #expect(log.count == 0)
        loop.runUntilIdle()
        #expect(log.entries == Array(0..<100))
        #expect(loop.now == .zero)
    }

    @Test func inLoopOnlyInsideJobs() {
        let loop = EventLoop()
        let other = EventLoop()
        let log = Log<Bool>()
        #expect(!loop.inLoop)
        loop.execute {
            log.append(loop.inLoop)
            log.append(other.inLoop)
        }
        loop.runUntilIdle()
        #expect(log.entries == [true, false])
        #expect(!loop.inLoop)
    }

    @Test func timersFireInTimeOrderAtTheirTime() {
        let loop = EventLoop()
        let log = Log<(String, LoopInstant)>()
        loop.schedule(after: .milliseconds(30)) { log.append(("c", loop.now)) }
        loop.schedule(after: .milliseconds(10)) { log.append(("a", loop.now)) }
        loop.schedule(after: .milliseconds(20)) { log.append(("b", loop.now)) }
        loop.runUntilIdle()
        #expect(log.entries.map(\.0) == ["a", "b", "c"])
        #expect(log.entries.map(\.1) == [.ms(10), .ms(20), .ms(30)])
        #expect(loop.now == .ms(30))
    }

    @Test func timersAtTheSameTimeFireInSchedulingOrder() {
        let loop = EventLoop()
        let log = Log<Int>()
        for i in 0..<20 { loop.schedule(after: .milliseconds(5)) { log.append(i) } }
        loop.execute {
            // Scheduled on the loop this time, still after the ones above.
            for i in 20..<25 { loop.schedule(after: .milliseconds(5)) { log.append(i) } }
        }
        loop.runUntilIdle()
        #expect(log.entries == Array(0..<25))
    }

    /// Thousands of timers at random times (many at the same time), a third cancelled, more
    /// scheduled while they fire: each fires once, at its time, in time and then scheduling
    /// order (the heap's sifts, its pops and its sweep of cancelled entries as it grows).
    @Test func manyTimersFireInTimeThenSchedulingOrder() {
        let loop = EventLoop()
        let log = Log<(Int, LoopInstant)>()
        var generator = SystemRandomNumberGenerator()
        var expected: [(at: Int64, id: Int)] = []
        var handles: [TimerHandle] = []
        for id in 0..<3_000 {
            let at = Int64.random(in: 0...500, using: &generator) * 1_000
            handles.append(loop.schedule(afterNanoseconds: at) { log.append((id, loop.now)) })
            expected.append((at, id))
        }
        var cancelled = Set<Int>()
        for id in stride(from: 0, to: 3_000, by: 3) {
            handles[id].cancel()
            cancelled.insert(id)
        }
        // Timers scheduled from a firing one land among those still waiting.
        loop.schedule(afterNanoseconds: 250_000) {
            for id in 3_000..<3_200 {
                let delay = Int64(id % 50) * 2_000
                loop.schedule(afterNanoseconds: delay) { log.append((id, loop.now)) }
            }
        }
        for id in 3_000..<3_200 { expected.append((250_000 + Int64(id % 50) * 2_000, id)) }
        loop.runUntilIdle()
        let order = expected.filter { !cancelled.contains($0.id) }
            .sorted { $0.at != $1.at ? $0.at < $1.at : $0.id < $1.id }
        #expect(log.entries.map(\.0) == order.map(\.id))
        #expect(log.entries.map(\.1.nanoseconds) == order.map(\.at))
    }

    @Test func readyJobsRunBeforeDueTimers() {
        let loop = EventLoop()
        let log = Log<String>()
        loop.schedule(after: .zero) { log.append("timer") }
        loop.execute { log.append("job") }
        loop.runUntilIdle()
        #expect(log.entries == ["job", "timer"])
    }

    @Test func cancelledTimerNeverFires() {
        let loop = EventLoop()
        let log = Log<String>()
        let handle = loop.schedule(after: .seconds(1)) { log.append("fired") }
        loop.schedule(after: .seconds(2)) { log.append("kept") }
        handle.cancel()   // from outside the loop: takes effect before any timer is due
        loop.run(for: .seconds(5))
        #expect(log.entries == ["kept"])
        #expect(!handle.isPending)
    }

    @Test func timerCancelledOnTheLoopByAnEarlierTimer() {
        let loop = EventLoop()
        let log = Log<String>()
        let late = loop.schedule(after: .milliseconds(10)) { log.append("late") }
        loop.schedule(after: .milliseconds(5)) {
            #expect(late.isPending)
            late.cancel()
            #expect(!late.isPending)
            log.append("early")
        }
        loop.runUntilIdle()
        #expect(log.entries == ["early"])
    }

    @Test func firedTimerIsNoLongerPending() {
        let loop = EventLoop()
        let handle = loop.schedule(after: .milliseconds(1)) {}
        loop.runUntilIdle()
        #expect(!handle.isPending)
        handle.cancel()   // harmless after firing
        loop.runUntilIdle()
    }

    // A cancelled timeout (the usual fate of a command timer) must not move the clock.
    @Test func cancelledTimersDoNotAdvanceTheClock() {
        let loop = EventLoop()
        let handle = loop.schedule(after: .seconds(30)) {}
        loop.schedule(after: .milliseconds(2)) {}
        handle.cancel()
        loop.runUntilIdle()
        #expect(loop.now == .ms(2))
    }

    @Test func runForLeavesTheClockAtTheDeadline() {
        let loop = EventLoop()
        let log = Log<LoopInstant>()
        loop.schedule(after: .milliseconds(10)) { log.append(loop.now) }
        loop.schedule(after: .milliseconds(25)) { log.append(loop.now) }   // exactly at the deadline
        loop.schedule(after: .milliseconds(26)) { log.append(loop.now) }   // just after it
        loop.run(for: .milliseconds(25))
        #expect(log.entries == [.ms(10), .ms(25)])
        #expect(loop.now == .ms(25))
        loop.run(for: .milliseconds(25))
        #expect(log.entries == [.ms(10), .ms(25), .ms(26)])
        #expect(loop.now == .ms(50))
    }

    @Test func runForWithNothingToDoStillMovesTheClock() {
        let loop = EventLoop()
        loop.run(for: .seconds(3))
        #expect(loop.now == .ms(3000))
    }

    @Test func runUntilReturnsTrueAndStopsTheClockWhenThePredicateHolds() {
        let loop = EventLoop()
        let log = Log<String>()
        loop.schedule(after: .seconds(2)) { log.append("done") }
        loop.schedule(after: .seconds(4)) { log.append("later") }
        let held = loop.run(until: { log.count == 1 }, timeout: .seconds(10))
        #expect(held)
        #expect(loop.now == .ms(2000))        // not the 10 s timeout
        #expect(log.entries == ["done"])      // stopped right after the job that satisfied it
        loop.runUntilIdle()
        #expect(log.entries == ["done", "later"])
    }

    @Test func runUntilChecksThePredicateAfterEachJob() {
        let loop = EventLoop()
        let log = Log<Int>()
        for i in 0..<5 { loop.execute { log.append(i) } }
        #expect(loop.run(until: { log.count == 2 }))
        #expect(log.entries == [0, 1])
        loop.runUntilIdle()
        #expect(log.entries == [0, 1, 2, 3, 4])
    }

    @Test func runUntilReturnsFalseAtTheTimeout() {
        let loop = EventLoop()
        let log = Log<String>()
        loop.schedule(after: .seconds(1)) { log.append("1 s") }
        loop.schedule(after: .seconds(5)) { log.append("5 s") }
        let held = loop.run(until: { false }, timeout: .seconds(3))
        #expect(!held)
        #expect(loop.now == .ms(3000))
        #expect(log.entries == ["1 s"])
    }

    @Test func runUntilWithAHeldPredicateDoesNothing() {
        let loop = EventLoop()
        let log = Log<String>()
        loop.execute { log.append("job") }
        #expect(loop.run(until: { true }, timeout: .seconds(3)))
        #expect(loop.now == .zero)
        #expect(log.count == 0)
    }

    @Test func runUntilIdleSkipsIdleTime() {
        let loop = EventLoop()
        let log = Log<LoopInstant>()
        loop.schedule(after: .seconds(30)) { log.append(loop.now) }
        let wall = ContinuousClock()
        let elapsed = wall.measure { loop.runUntilIdle() }
        #expect(log.entries == [.ms(30_000)])
        #expect(loop.now == .ms(30_000))
        #expect(elapsed < .seconds(1))
    }

    @Test func runUntilIdleStopsAtItsLimit() {
        let loop = EventLoop()
        let log = Log<String>()
        loop.schedule(after: .seconds(10)) { log.append("fired") }
        loop.runUntilIdle(limit: .seconds(5))
        #expect(log.count == 0)
        // Stopping at the limit is not idle time passing: the clock stays put.
        #expect(loop.now == .zero)
        loop.runUntilIdle(limit: .seconds(10))
        #expect(log.entries == ["fired"])
        #expect(loop.now == .ms(10_000))
    }

    @Test func workScheduledFromInsideJobs() {
        let loop = EventLoop()
        let log = Log<(String, LoopInstant)>()
        loop.schedule(after: .milliseconds(10)) {
            log.append(("timer", loop.now))
            loop.execute { log.append(("job from timer", loop.now)) }
            // Relative to the time the scheduling timer fired.
            loop.schedule(after: .milliseconds(5)) { log.append(("nested timer", loop.now)) }
        }
        loop.execute {
            loop.execute { log.append(("job from job", loop.now)) }
            loop.schedule(at: .ms(1)) { log.append(("at 1 ms", loop.now)) }
        }
        loop.runUntilIdle()
        #expect(log.entries.map(\.0) == ["job from job", "at 1 ms", "timer", "job from timer", "nested timer"])
        #expect(log.entries.map(\.1) == [.zero, .ms(1), .ms(10), .ms(10), .ms(15)])
    }

    @Test func scheduleAtAPastInstantRunsNow() {
        let loop = EventLoop()
        let log = Log<LoopInstant>()
        loop.run(for: .milliseconds(20))
        loop.execute { loop.schedule(at: .ms(5)) { log.append(loop.now) } }
        loop.runUntilIdle()
        #expect(log.entries == [.ms(20)])
    }

    @Test func executeFromAnotherThreadIsPickedUpByTheNextRun() {
        let loop = EventLoop()
        let log = Log<String>()
        let posted = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            loop.execute { log.append("job") }
            loop.schedule(after: .milliseconds(7)) { log.append("timer at \(loop.now)") }
            posted.signal()
        }
        #expect(posted.wait(timeout: .now() + 2) == .success)
        #expect(log.count == 0)   // nothing runs until the test drives the loop
        loop.runUntilIdle()
        #expect(log.entries == ["job", "timer at \(LoopInstant.ms(7))"])
    }
}

@Suite("LoopInstant and Duration")
struct LoopTimeTests {
    @Test func arithmetic() {
        #expect(LoopInstant.ms(5) + .milliseconds(3) == .ms(8))
        #expect(LoopInstant.ms(8) - .ms(5) == .milliseconds(3))
        #expect(LoopInstant.ms(1) < .ms(2))
        #expect(LoopInstant.ms(2).description == "t=2.0ms")
    }

    @Test func durationNanoseconds() {
        #expect(Duration.seconds(2).nanoseconds == 2_000_000_000)
        #expect(Duration.microseconds(-3).nanoseconds == -3_000)
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
    }
}
