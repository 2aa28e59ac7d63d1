import Dispatch
import ExampleApps
import Foundation

/// The examples' repeating timers, fired by the test: the radio runs on virtual time, so the
/// test lets the radio's time pass (`radio.run(for:)`) and then fires what is due by hand.
final class ManualTimers: ExampleTimers, @unchecked Sendable {
    private final class Entry: ExampleTimer, @unchecked Sendable {
        let interval: Double
        let queue: DispatchQueue
        let action: @Sendable () -> Void
        private let cancelled = Protected(false)
        init(interval: Double, queue: DispatchQueue, action: @escaping @Sendable () -> Void) {
            self.interval = interval
            self.queue = queue
            self.action = action
        }
        var isCancelled: Bool { cancelled.value }
        func cancel() { cancelled.update { $0 = true } }
    }
    private let entries = Protected<[Entry]>([])

    func every(_ interval: Double, on queue: DispatchQueue?, _ action: @escaping @Sendable () -> Void) -> ExampleTimer {
        // Tests always give the managers a queue of their own; the main queue is not served.
        let entry = Entry(interval: interval, queue: queue!, action: action)
        entries.update { $0.append(entry) }
        return entry
    }

    /// Timers started and not cancelled.
    var active: Int { entries.value.filter { !$0.isCancelled }.count }
    /// The intervals of the active timers.
    var intervals: [Double] { entries.value.filter { !$0.isCancelled }.map(\.interval) }

    /// One tick of every active timer, each run on its queue before this returns.
    func fire() {
        for entry in entries.value where !entry.isCancelled {
            entry.queue.sync { if !entry.isCancelled { entry.action() } }
        }
    }
}
