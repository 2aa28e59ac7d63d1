import Testing
import Scheduling

@Suite("RingBuffer")
struct RingBufferTests {
    @Test func emptyBuffer() {
        var buffer = RingBuffer<Int>()
        #expect(buffer.isEmpty)
        #expect(buffer.count == 0)
        #expect(buffer.first == nil)
        #expect(buffer.popFirst() == nil)
    }

    @Test func fifoOrder() {
        var buffer = RingBuffer<String>()
        buffer.append("a")
        buffer.append("b")
        #expect(buffer.first == "a")
        #expect(buffer.count == 2)
        #expect(buffer.popFirst() == "a")
        #expect(buffer.popFirst() == "b")
        #expect(buffer.popFirst() == nil)
        #expect(buffer.isEmpty)
    }

    @Test func growsPastItsCapacity() {
        var buffer = RingBuffer<Int>(capacity: 2)
        for i in 0..<1000 { buffer.append(i) }
        #expect(buffer.count == 1000)
        var out: [Int] = []
        while let i = buffer.popFirst() { out.append(i) }
        #expect(out == Array(0..<1000))
    }

    // Head in the middle of the storage when it has to grow: the order must survive the copy.
    @Test func growsWhileWrappedAround() {
        var buffer = RingBuffer<Int>(capacity: 4)
        for i in 0..<4 { buffer.append(i) }
        #expect(buffer.popFirst() == 0)
        #expect(buffer.popFirst() == 1)
        buffer.append(4)
        buffer.append(5)            // wraps to the start of the storage
        buffer.append(6)            // full: grows
        buffer.append(7)
        #expect(buffer.count == 6)
        var out: [Int] = []
        while let i = buffer.popFirst() { out.append(i) }
        #expect(out == [2, 3, 4, 5, 6, 7])
    }

    @Test func wrapsAroundManyTimesAtSteadyState() {
        var buffer = RingBuffer<Int>(capacity: 3)
        var next = 0, expected = 0
        for _ in 0..<100 {
            buffer.append(next); next += 1
            buffer.append(next); next += 1
            #expect(buffer.popFirst() == expected); expected += 1
            #expect(buffer.popFirst() == expected); expected += 1
        }
        #expect(buffer.isEmpty)
    }

    @Test func zeroCapacityStillWorks() {
        var buffer = RingBuffer<Int>(capacity: 0)
        buffer.append(1)
        buffer.append(2)
        #expect(buffer.popFirst() == 1)
        #expect(buffer.first == 2)
    }

    @Test func removeAllEmptiesAndStaysUsable() {
        var buffer = RingBuffer<Int>()
        for i in 0..<10 { buffer.append(i) }
        buffer.removeAll()
        #expect(buffer.isEmpty)
        #expect(buffer.first == nil)
        buffer.append(42)
        #expect(buffer.popFirst() == 42)
    }

    final class Token {}

    // Popped elements must not stay referenced by the storage.
    @Test func releasesPoppedElements() {
        var buffer = RingBuffer<Token>()
        weak var weakToken: Token?
        do {
            let token = Token()
            weakToken = token
            buffer.append(token)
        }
        #expect(weakToken != nil)
        _ = buffer.popFirst()
        #expect(weakToken == nil)
    }
}
