/// A growable FIFO queue with O(1) append and pop and no per-element allocation. Its storage
/// is made at the first append: a connection keeps several queues that mostly stay empty, and
/// thousands of connections paid for all of them up front.
public struct RingBuffer<Element> {
    // Inlinable, so that each user specialises it for its element type: unspecialised generic
    // code looked up metadata and copied elements through witnesses on every append and pop.
    @usableFromInline var storage: [Element?] = []
    @usableFromInline var head = 0
    @usableFromInline var _count = 0
    /// How many elements the first append makes room for: a power of two, as every capacity
    /// after it (doubled), so that an index wraps with a mask rather than a division.
    @usableFromInline let initialCapacity: Int

    @inlinable
    public var count: Int { _count }

    /// An empty queue; the first append makes room for `capacity` elements.
    @inlinable
    public init(capacity: Int = 16) {
        var rounded = 1
        while rounded < capacity { rounded <<= 1 }
        initialCapacity = rounded
    }

    @inlinable
    public var isEmpty: Bool { count == 0 }

    /// Moves `element` in (a borrowed one was copied: a retain and a release of each reference
    /// it holds, per element).
    @inlinable
    public mutating func append(_ element: consuming Element) {
        if count == storage.count { grow() }
        storage[(head &+ count) & (storage.count &- 1)] = consume element
        _count += 1
    }

    @inlinable
    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head].take()
        head = (head &+ 1) & (storage.count &- 1)
        _count -= 1
        return element
    }

    @inlinable
    public var first: Element? { count > 0 ? storage[head] : nil }

    @inlinable
    public mutating func removeAll() {
        while popFirst() != nil {}
    }

    @inlinable
    mutating func grow() {
        var bigger: [Element?] = Array(repeating: nil, count: storage.isEmpty ? initialCapacity : storage.count * 2)
        for i in 0..<count { bigger[i] = storage[(head &+ i) & (storage.count &- 1)] }
        storage = bigger
        head = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
