import Foundation
import Scheduling

/// **Linux extension.** A one-shot timer on a manager's clock, from
/// ``CBManager/linuxSchedule(after:_:)``.
public final class CBLinuxTimer: Sendable {
    private let handle: TimerHandle?

    init(_ handle: TimerHandle?) { self.handle = handle }

    /// Cancels the timer; safe from any thread. A block already on the delegate queue still runs.
    public func cancel() { handle?.cancel() }
}

extension CBManager {
    /// **Linux extension.** Runs `body` on the delegate queue `delay` seconds from now on this
    /// manager's clock: its virtual radio's time (so a test on a virtual clock sees timers fire
    /// in step with the air, and as fast as the work allows), else the wall clock. What a
    /// simulated device that sends on a schedule needs; `DispatchQueue.asyncAfter` would follow
    /// the wall clock whatever the radio.
    @discardableResult
    public func linuxSchedule(after delay: TimeInterval, _ body: @escaping @Sendable () -> Void) -> CBLinuxTimer {
        guard let device else { return CBLinuxTimer(nil) }
        let callbacks = self.callbacks
        return CBLinuxTimer(device.loop.schedule(afterNanoseconds: Self.loopNanoseconds(after: delay)) {
            callbacks.async(body)
        })
    }

    /// Longest delay kept as given (about 31 years); longer ones wait this long.
    static let longestScheduleDelay: TimeInterval = 1e9

    /// `delay` in the loop's nanoseconds. Negative and NaN delays are now; delays beyond
    /// ``longestScheduleDelay`` (a spec's or capture's absurd interval, infinity) are capped, so
    /// the conversion never traps and the deadline never wraps past `Int64.max` into the past.
    static func loopNanoseconds(after delay: TimeInterval) -> Int64 {
        guard delay > 0 else { return 0 }
        return Int64((min(delay, longestScheduleDelay) * 1e9).rounded())
    }
}
