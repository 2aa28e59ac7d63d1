import ATT
import Scheduling

/// A value the GATT server sends without copying it first. `[UInt8]` and `ArraySlice<UInt8>`
/// are such values; a caller conforms its own byte container (Core Bluetooth conforms
/// Foundation's `Data`), so a notification is encoded straight from the caller's bytes and an
/// update that has to wait keeps the caller's value as it is.
///
/// The one requirement is not generic, so that a conformance compiles to a direct call of its
/// container's accessor (a generic one runs `Data`'s unspecialised).
public protocol GATTValueBytes {
    /// Calls `body` with the value's bytes, valid only during the call; returns what it returns.
    func withValueBytes(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool
}

extension Array: GATTValueBytes where Element == UInt8 {
    public func withValueBytes(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool { withUnsafeBytes(body) }
}

extension ArraySlice: GATTValueBytes where Element == UInt8 {
    public func withValueBytes(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool { withUnsafeBytes(body) }
}

extension GATTValueBytes {
    /// The bytes, copied.
    var byteArray: [UInt8] {
        var bytes: [UInt8] = []
        _ = withValueBytes { bytes = Array($0); return true }
        return bytes
    }
}

// MARK: - Server-initiated updates

extension GATTServer {
    /// Sends `value` (cut to ATT_MTU − 3) to each subscriber of the characteristic whose value
    /// has `valueHandle` — to every one, or only to those among `targets` — as a notification
    /// or an indication, as its CCCD says (a notification when both are enabled).
    ///
    /// Each connection gets its updates in the order they were given, Service Changed
    /// included. One whose send queue refuses, or whose `indicationWindow` is full, keeps the
    /// update and every later one for it in its own queue, and takes them as it can (its
    /// bearer is ready to send, a confirmation arrives); the other connections are not held
    /// up. Whether to notify or indicate, and whether to send at all, is decided when the
    /// update leaves the queue: what waits for a client that unsubscribed meanwhile is dropped,
    /// and so is what waits for a removed characteristic or a closed connection.
    ///
    /// The caller bounds how many updates may wait (Core Bluetooth's `updateValue` budget):
    /// this queues whatever it is given.
    ///
    /// - Returns: true when every subscribed target took the update now (or none is
    ///   subscribed); false when it waits for some. Each update that waited is counted once in
    ///   `onUpdatesHandedOver` when the last connection it waited for took it (or dropped it).
    ///   `owner` (0 and up) says whose count it goes to.
    @discardableResult
    public func updateValue(_ value: consuming any GATTValueBytes, forCharacteristic valueHandle: ATTHandle,
                            onlyTo targets: [any GATTServerConnection]? = nil, owner: Int = 0) -> Bool {
        update(MovedValue(value: value), valueHandle, targets, owner)
    }

    /// The value in a noncopyable struct, taken out by a consuming method, so that it is moved
    /// from the caller into the queue. Passed as a bare existential, the optimiser specialised
    /// `update` for the value's type behind a thunk that copied it (and destroyed the original:
    /// a retain and a release of a `Data`); read as a field, it was copied into the queue. An
    /// existential, not a generic, for the same reason: the caller's module knows the value's
    /// type and boxes it once; unspecialised generic code here copied it.
    private struct MovedValue: ~Copyable {
        var value: any GATTValueBytes
        consuming func take() -> any GATTValueBytes { value }
    }

    private func update(_ moved: consuming MovedValue, _ valueHandle: ATTHandle,
                        _ targets: [any GATTServerConnection]?, _ owner: Int) -> Bool {
        var waiting = Waiting(owner: max(0, owner))
        if let targets {
            for target in targets {
                guard let state = connections[ObjectIdentifier(target)] else { continue }
                offer(moved.value, valueHandle, to: state, &waiting)
            }
        } else {
            for state in connectionList { offer(moved.value, valueHandle, to: state, &waiting) }
        }
        guard let first = waiting.first else { return true }
        // The first connection that has to wait for it keeps the value itself (the others, if
        // any, queued copies).
        first.updates.append(valueHandle, moved.take(), ticket: waiting.ticket, owner: waiting.owner)
        return false
    }

    /// `updateValue` for an array (so that literals choose it).
    @discardableResult
    public func updateValue(_ value: [UInt8], forCharacteristic valueHandle: ATTHandle,
                            onlyTo targets: [any GATTServerConnection]? = nil, owner: Int = 0) -> Bool {
        update(MovedValue(value: value), valueHandle, targets, owner)
    }

    /// Where one update waits, as `updateValue` goes through its targets: nowhere yet; for
    /// `first` alone (`QueuedUpdate.sole`: no ticket is needed while one connection alone has
    /// to take it); or for several, under `ticket`.
    private struct Waiting {
        var first: ConnectionState?
        var ticket = QueuedUpdate.sole
        let owner: Int
    }

    /// Updates that `updateValue` returned false for and that some connection has still to
    /// take.
    public var waitingUpdates: Int { tickets.waiting }

    /// Updates waiting for `connection` (the server's own Service Changed included).
    public func waitingUpdates(for connection: any GATTServerConnection) -> Int {
        connections[ObjectIdentifier(connection)]?.updates.count ?? 0
    }

    /// The connection's send queue has room again: what waits for it goes out.
    public func connectionIsReadyToSend(_ connection: any GATTServerConnection) {
        guard let state = connections[ObjectIdentifier(connection)], !state.updates.isEmpty else { return }
        pump(state)
        reportHandedOver()
    }

    /// Hands an update to a subscribed connection now if nothing waits there before it and
    /// the connection takes it; otherwise it waits there (the first such connection's queue
    /// takes it when `updateValue` has been through all; the others get a copy now).
    @inline(__always)
    private func offer(_ value: borrowing any GATTValueBytes, _ handle: ATTHandle, to state: ConnectionState,
                       _ waiting: inout Waiting) {
        guard let configuration = state.clientConfigurations[handle] else { return }
        if state.updates.isEmpty, send(value, handle, configuration, to: state) { return }
        guard waiting.first != nil else {
            waiting.first = state
            tickets.waitingAlone()
            return
        }
        if waiting.ticket == QueuedUpdate.sole {
            // A second connection has to wait for it: from now on it needs a count.
            waiting.ticket = tickets.issue(targets: 2, owner: waiting.owner)
        } else {
            tickets.addTarget(waiting.ticket)
        }
        state.updates.append(handle, copy value, ticket: waiting.ticket, owner: waiting.owner)
    }

    /// The server's own update (Service Changed), in order with the connection's others and
    /// counted in no ticket.
    func offerOwnUpdate(_ value: [UInt8], _ handle: ATTHandle, to state: ConnectionState) {
        guard let configuration = state.clientConfigurations[handle] else { return }
        if state.updates.isEmpty, send(value, handle, configuration, to: state) { return }
        state.updates.append(handle, value, ticket: QueuedUpdate.own, owner: 0)
    }

    /// Hands one update to the connection (which cuts it to ATT_MTU − 3): false when it must
    /// wait (its send queue refused the notification, or its indication window is full).
    private func send(_ value: borrowing any GATTValueBytes, _ handle: ATTHandle,
                      _ configuration: GATTClientConfiguration, to state: ConnectionState) -> Bool {
        if configuration.contains(.notification) {
            let connection = state.connection
            return value.withValueBytes { connection.notify(handle: handle, bytes: $0) }
        }
        return indicate(value.byteArray, handle, to: state)
    }

    private func indicate(_ bytes: [UInt8], _ handle: ATTHandle, to state: ConnectionState) -> Bool {
        guard state.indicationsInFlight < indicationWindow else { return false }
        state.indicationsInFlight += 1
        state.connection.indicate(handle: handle, value: bytes) { [weakSelf = WeakHandle(self), weakState = WeakHandle(state)] confirmed in
            let `self` = weakSelf.object
            let state = weakState.object
            guard let self, let state else { return }
            self.indicationFinished(state, handle: handle, confirmed: confirmed)
        }
        return true
    }

    private func indicationFinished(_ state: ConnectionState, handle: ATTHandle, confirmed: Bool) {
        guard state.isOpen else { return }
        state.indicationsInFlight -= 1
        // A confirmed Service Changed indication makes the client change-aware.
        if confirmed && handle == gattService.characteristics[0].value { state.isChangeAware = true }
        // Failed at once, inside a send of `pump`: that pump goes on (and its caller reports),
        // so that nothing the owner does on hearing changes the queue under it.
        if state.isPumping {
            state.pumpAgain = true
            return
        }
        pump(state)
        reportHandedOver()
    }

    /// Sends what waits for the connection, in order, until it refuses. Updates for a
    /// characteristic the client no longer subscribes to are dropped on the way.
    func pump(_ state: ConnectionState) {
        guard !state.isPumping else {
            state.pumpAgain = true
            return
        }
        state.isPumping = true
        defer { state.isPumping = false }
        repeat {
            state.pumpAgain = false
            while state.isOpen, let handle = state.updates.firstHandle {
                if let configuration = state.clientConfigurations[handle] {
                    // Moved out for the send and back if refused: borrowed from the queue's
                    // buffer, the update was copied whole (its value retained) and destroyed.
                    let value = state.updates.takeFirstValue()
                    guard send(value, handle, configuration, to: state) else {
                        state.updates.putBackFirstValue(value)
                        break
                    }
                }
                let (ticket, owner) = state.updates.removeFirst()
                tickets.targetDone(ticket, owner: owner)
            }
        } while state.pumpAgain && state.isOpen
    }

    /// Drops the connection's waiting updates for the value handles `matches` picks, then
    /// sends what may go now.
    func dropUpdates(of state: ConnectionState, where matches: (ATTHandle) -> Bool) {
        guard !state.updates.isEmpty else { return }
        for dropped in state.updates.remove(where: matches) { tickets.targetDone(dropped.ticket, owner: dropped.owner) }
        if state.isOpen { pump(state) }
    }

    /// Tells the owner how many waiting updates were handed over since it last heard.
    func reportHandedOver() {
        guard tickets.finishedSinceReport > 0 else { return }
        tickets.finishedSinceReport = 0
        for owner in tickets.finishedByOwner.indices where tickets.finishedByOwner[owner] > 0 {
            let count = tickets.finishedByOwner[owner]
            tickets.finishedByOwner[owner] = 0
            onUpdatesHandedOver?(count, owner)
        }
    }
}

/// What a queued update's value is while it is out for a send: no bytes, nothing to release.
private struct NoValueBytes: GATTValueBytes {
    func withValueBytes(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool { body(UnsafeRawBufferPointer(start: nil, count: 0)) }
}

/// An update waiting in one connection's queue.
struct QueuedUpdate {
    /// The server's own update (Service Changed): counted nowhere.
    static let own = -1
    /// An update only this connection has to take.
    static let sole = -2

    let handle: ATTHandle
    var value: any GATTValueBytes
    /// `own`, `sole`, or its ticket in `UpdateTickets` (several connections have to take it).
    var ticket: Int
    /// Whose count it goes to when handed over.
    var owner: Int
}

/// One connection's waiting updates, oldest first: an array consumed from `head` and compacted
/// as it empties, so that once grown neither appending nor taking the first allocates. The
/// first one is used in place: copying a value (an existential) goes through its type's value
/// witnesses.
struct UpdateQueue {
    private var items: [QueuedUpdate] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    /// Through the buffer, as every read of an element here: the array's subscript copies the
    /// whole element out (its value retained and released) to read one field.
    var firstHandle: ATTHandle? { head < items.count ? items.withUnsafeBufferPointer { $0[head].handle } : nil }

    /// Moves the first update's value out, an empty one left in its place, until
    /// `putBackFirstValue` or `removeFirst` (the queue must not change meanwhile).
    mutating func takeFirstValue() -> any GATTValueBytes {
        var value: any GATTValueBytes = NoValueBytes()
        let head = head
        items.withUnsafeMutableBufferPointer { swap(&value, &$0[head].value) }
        return value
    }

    /// Returns the value `takeFirstValue` took.
    mutating func putBackFirstValue(_ value: consuming any GATTValueBytes) {
        var value = value
        let head = head
        items.withUnsafeMutableBufferPointer { swap(&value, &$0[head].value) }
    }

    mutating func append(_ handle: ATTHandle, _ value: consuming any GATTValueBytes, ticket: Int, owner: Int) {
        items.append(QueuedUpdate(handle: handle, value: value, ticket: ticket, owner: owner))
    }

    /// Removes the first update; returns its ticket and owner.
    mutating func removeFirst() -> (ticket: Int, owner: Int) {
        let (ticket, owner) = items.withUnsafeBufferPointer { ($0[head].ticket, $0[head].owner) }
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return (ticket, owner)
    }

    /// Removes the updates whose value handle `matches` picks; returns them, oldest first.
    mutating func remove(where matches: (ATTHandle) -> Bool) -> [QueuedUpdate] {
        var removed: [QueuedUpdate] = []
        var kept: [QueuedUpdate] = []
        for update in items[head...] {
            if matches(update.handle) { removed.append(update) } else { kept.append(update) }
        }
        items = kept
        head = 0
        return removed
    }
}

/// Which waiting updates some connection still has to take. An update that waits for one
/// connection alone needs no more than its mark in that queue; one that waits for several gets
/// a ticket, a count of the connections it waits for, one less as each takes or drops it.
/// Tickets are consecutive numbers; their counts are kept in an array from ticket `base` on,
/// finished ones trimmed from the front.
struct UpdateTickets {
    private var counts: [Int] = []
    /// Each ticket's owner, beside `counts`.
    private var owners: [Int] = []
    /// The first count not known to be zero.
    private var head = 0
    /// The ticket of `counts[0]`.
    private var base = 0
    /// Tickets not finished.
    private(set) var waiting = 0
    /// Tickets finished since the owners last heard: in all, and by owner.
    var finishedSinceReport = 0
    var finishedByOwner: [Int] = []

    /// An update waits for one connection alone (its entry there is marked `sole`).
    mutating func waitingAlone() { waiting += 1 }

    /// A ticket for an update (already counted as waiting) that `targets` connections queued.
    mutating func issue(targets: Int, owner: Int) -> Int {
        counts.append(targets)
        owners.append(owner)
        return base + counts.count - 1
    }

    /// One more connection queued the update.
    mutating func addTarget(_ ticket: Int) {
        counts[ticket - base] += 1
    }

    /// One connection took (or dropped) an update queued with `ticket` (`QueuedUpdate`'s).
    mutating func targetDone(_ ticket: Int, owner: Int) {
        if ticket == QueuedUpdate.sole {
            waiting -= 1
            finished(owner)
            return
        }
        guard ticket >= 0 else { return } // the server's own
        let index = ticket - base
        counts[index] -= 1
        guard counts[index] == 0 else { return }
        waiting -= 1
        finished(owners[index])
        while head < counts.count && counts[head] == 0 { head += 1 }
        if head == counts.count {
            base += counts.count
            counts.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= counts.count {
            counts.removeFirst(head)
            owners.removeFirst(head)
            base += head
            head = 0
        }
    }

    private mutating func finished(_ owner: Int) {
        finishedSinceReport += 1
        if owner >= finishedByOwner.count { finishedByOwner += Array(repeating: 0, count: owner + 1 - finishedByOwner.count) }
        finishedByOwner[owner] += 1
    }
}
