import Scheduling

/// The hand-off between `PeripheralService.acceptUpdate` (or a daemon client's `RemotePeripheralRole`) (any thread, must not block on the
/// loop: `updateValue` on the API side) and the loop.
///
/// A fixed budget of updates may be in flight: accepted by `updateValue` and not yet handed to
/// every subscriber's bearer. `updateValue` takes one slot (or returns false, and readiness is
/// owed), appends the value to `pending`, and asks the loop to drain only when no drain is
/// already asked for, so a burst of calls costs one loop job. The loop swaps `pending` for its
/// own (empty) buffer, so neither side allocates per value once the buffers have grown.
/// Slots come back as values leave the loop's FIFO; readiness is delivered once half the budget
/// is free again, so an app refilling from `peripheralManagerIsReady` sends in batches.
public struct UpdateInbox: Sendable {
    public static let budget = 512

    public private(set) var pending: [PeripheralUpdate] = []
    public private(set) var available = UpdateInbox.budget
    var owesReadiness = false
    var drainRequested = false

    /// The buffers grow as updates come (and keep their capacity from then on, swapped back and
    /// forth): reserving the whole budget up front cost every peripheral manager 16 KiB, most of
    /// what a simulated fleet's idle device took.
    public init() {}

    /// Takes a slot and queues the value; `needsDrain` when the loop must be asked to drain.
    public mutating func accept(_ update: consuming PeripheralUpdate) -> (accepted: Bool, needsDrain: Bool) {
        guard available > 0 else {
            owesReadiness = true
            return (false, false)
        }
        available -= 1
        pending.append(update)
        if drainRequested { return (true, false) }
        drainRequested = true
        return (true, true)
    }

    /// Hands the queued values to the loop (swapped into `buffer`, which must be empty).
    public mutating func take(into buffer: inout [PeripheralUpdate]) {
        swap(&pending, &buffer)
        drainRequested = false
    }

    /// Returns `count` slots; true when the readiness callback is due now.
    public mutating func release(_ count: Int) -> Bool {
        available = min(Self.budget, available + count)
        guard owesReadiness, available >= Self.budget / 2 else { return false }
        owesReadiness = false
        return true
    }

    /// Everything dropped (power off): a full budget, nothing owed.
    public mutating func reset() {
        pending.removeAll(keepingCapacity: true)
        available = Self.budget
        owesReadiness = false
        drainRequested = false
    }
}

extension Locked where Value == UpdateInbox {
    /// `UpdateInbox.accept` under the lock, the update moved in: captured by the lock's
    /// closure it would be copied (a retain and a release of the value).
    public func accept(_ update: consuming PeripheralUpdate) -> (accepted: Bool, needsDrain: Bool) {
        withLock(moving: update) { $0.accept($1) }
    }
}
