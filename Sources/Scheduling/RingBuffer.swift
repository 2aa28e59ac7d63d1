/// A growable FIFO queue with O(1) append and pop and no per-element allocation.
public struct RingBuffer<Element> {
    private var storage: [Element?]
    private var head = 0
    public private(set) var count = 0

    public init(capacity: Int = 16) {
        storage = Array(repeating: nil, count: max(1, capacity))
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = element
        count += 1
    }

    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    public var first: Element? { count > 0 ? storage[head] : nil }

    public mutating func removeAll() {
        while popFirst() != nil {}
    }

    private mutating func grow() {
        var bigger: [Element?] = Array(repeating: nil, count: storage.count * 2)
        for i in 0..<count { bigger[i] = storage[(head + i) % storage.count] }
        storage = bigger
        head = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
