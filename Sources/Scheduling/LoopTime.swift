/// A point on an event loop's clock, in nanoseconds since the loop started.
///
/// A loop's clock is virtual: in manual pacing it moves only when a test advances it, so a
/// 30-second timeout is tested in microseconds of wall time.
public struct LoopInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public static let zero = LoopInstant(nanoseconds: 0)

    public static func < (a: LoopInstant, b: LoopInstant) -> Bool { a.nanoseconds < b.nanoseconds }
    public static func + (a: LoopInstant, d: Duration) -> LoopInstant {
        LoopInstant(nanoseconds: a.nanoseconds &+ d.nanoseconds)
    }
    public static func - (a: LoopInstant, b: LoopInstant) -> Duration { .nanoseconds(a.nanoseconds - b.nanoseconds) }
    public var description: String { "t=\(Double(nanoseconds) / 1e6)ms" }
}

extension Duration {
    /// Whole nanoseconds (saturating), the unit event loops count in.
    public var nanoseconds: Int64 {
        let (s, atto) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? .min : .max }
        return ns &+ atto / 1_000_000_000
    }
}
