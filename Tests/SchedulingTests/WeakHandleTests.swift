import Testing
@testable import Scheduling

@Suite("WeakHandle")
struct WeakHandleTests {
    final class Probe: Sendable {
        let value: Int
        init(_ value: Int) { self.value = value }
    }

    /// Deinit reads the handle: the object is already going (nil), as with `weak`.
    final class ReadsInDeinit {
        var handle: WeakHandle<ReadsInDeinit>?
        var sawInDeinit: ((Bool) -> Void)?
        deinit { sawInDeinit?(handle?.object != nil) }
    }

    @Test func readsTheObjectWhileItLivesAndNilOnceItIsGone() {
        var probe: Probe? = Probe(7)
        let handle = WeakHandle(probe!)
        #expect(handle.object?.value == 7)
        #expect(handle.object === probe)
        probe = nil
        #expect(handle.object == nil)
        // Copies tell too (each keeps the memory, never the object).
        let copy = handle
        #expect(copy.object == nil)
    }

    @Test func doesNotKeepTheObjectAlive() {
        var probe: Probe? = Probe(1)
        let handles = (0..<100).map { _ in WeakHandle(probe!) }
        #expect(isKnownUniquelyReferenced(&probe))
        probe = nil
        #expect(handles.allSatisfy { $0.object == nil })
    }

    @Test func isNilInTheObjectsOwnDeinit() {
        var saw: [Bool] = []
        do {
            let object = ReadsInDeinit()
            object.handle = WeakHandle(object)
            object.sawInDeinit = { saw.append($0) }
            #expect(object.handle?.object === object)
        }
        #expect(saw == [false])
    }

    protocol Listener: AnyObject { var value: Int { get } }
    final class Probing: Listener {
        let value: Int
        init(_ value: Int) { self.value = value }
    }
    struct Slot {
        @WeakHeldExistential var listener: (any Listener)?
        var isAlive: Bool { _listener.isAlive }
    }
    struct ConcreteSlot { @WeakHeld var probe: Probing? }

    /// Arrays of wrapped fields, copied and iterated as the stack's listener lists are (a debug
    /// build once iterated past the end of such an array: see `MemoryKeeper`).
    @Test func wrappedFieldsReadTheirObjectsUntilTheyGo() {
        var objects = (0..<10).map { Probing($0) }
        var slots = objects.map { Slot(listener: $0) }
        var concrete = objects.map { ConcreteSlot(probe: $0) }
        var seen = 0
        for round in 0..<100 {
            let current = slots
            for slot in current { seen += slot.listener?.value ?? 0 }
            for slot in concrete { seen += slot.probe?.value ?? 0 }
            if round == 49 { objects.removeFirst(5) }
            slots.removeAll { $0.listener == nil }
            concrete.removeAll { $0.probe == nil }
        }
        #expect(seen == 2 * (50 * 45 + 50 * 35))
        #expect(slots.count == 5 && concrete.count == 5)
        #expect(slots.map { $0.listener?.value } == [5, 6, 7, 8, 9])
        objects.removeAll()
        #expect(slots.allSatisfy { $0.listener == nil } && concrete.allSatisfy { $0.probe == nil })
    }

    /// A read moves the retain it took into the value it returns, and `isAlive` takes none: after
    /// a thousand of each the object is still uniquely referenced (a leaked retain would show,
    /// an extra release would free it early).
    @Test func existentialReadsBalanceTheirRetains() {
        var object: Probing? = Probing(7)
        let slot = Slot(listener: object)
        for _ in 0..<1_000 {
            #expect(slot.listener?.value == 7)
            #expect(slot.isAlive)
        }
        #expect(isKnownUniquelyReferenced(&object))
        object = nil
        #expect(slot.listener == nil && !slot.isAlive)
        #expect(!Slot(listener: nil).isAlive)
    }
}
