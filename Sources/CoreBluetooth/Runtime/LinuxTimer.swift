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
        let nanoseconds = Int64((max(0, delay) * 1e9).rounded())
        let callbacks = self.callbacks
        return CBLinuxTimer(device.loop.schedule(after: .nanoseconds(nanoseconds)) { callbacks.async(body) })
    }
}
