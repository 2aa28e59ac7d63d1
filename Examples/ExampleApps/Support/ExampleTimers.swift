import Dispatch
import Foundation

/// A repeating timer an example started; cancelling it stops it.
public protocol ExampleTimer: Sendable {
    func cancel()
}

/// Starts the examples' repeating timers (the book's `Timer.scheduledTimer(…, repeats: true)`):
/// on the wall clock in the executables, by hand in the tests, whose radio runs on virtual time.
public protocol ExampleTimers: Sendable {
    /// Calls `action` on `queue` (the main queue when nil) every `interval` seconds until cancelled.
    func every(_ interval: Double, on queue: DispatchQueue?, _ action: @escaping @Sendable () -> Void) -> ExampleTimer
}

/// Wall-clock timers from Dispatch.
public struct DispatchTimers: ExampleTimers {
    public init() {}

    public func every(_ interval: Double, on queue: DispatchQueue?, _ action: @escaping @Sendable () -> Void) -> ExampleTimer {
        let source = DispatchSource.makeTimerSource(queue: queue ?? .main)
        source.schedule(deadline: .now() + interval, repeating: interval)
        source.setEventHandler(handler: action)
        source.resume()
        return DispatchTimer(source: source)
    }

    private struct DispatchTimer: ExampleTimer, @unchecked Sendable {
        let source: DispatchSourceTimer
        func cancel() { source.cancel() }
    }
}
