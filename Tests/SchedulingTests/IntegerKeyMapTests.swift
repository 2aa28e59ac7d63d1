import Testing
@testable import Scheduling

@Suite struct IntegerKeyMapTests {
    @Test func insertsFindsAndRemoves() {
        var map = IntegerKeyMap<UInt16, String>()
        #expect(map.isEmpty && map[0x40] == nil)
        map[0x40] = "a"
        map[0x41] = "b"
        #expect(map.count == 2 && map[0x40] == "a" && map[0x41] == "b")
        #expect(map.updateValue("c", forKey: 0x40) == "a")
        #expect(map[0x40] == "c" && map.count == 2)
        #expect(map.removeValue(forKey: 0x40) == "c")
        #expect(map.removeValue(forKey: 0x40) == nil)
        map[0x41] = nil
        #expect(map.isEmpty && map.keys.isEmpty)
    }

    /// Random inserts, overwrites and removals agree with `Dictionary` at every step, through
    /// growth and backward-shift deletion (keys chosen to collide in a small table).
    @Test func agreesWithDictionary() {
        var rng = SeededGenerator(seed: 7)
        var map = IntegerKeyMap<UInt32, Int>()
        var reference: [UInt32: Int] = [:]
        for step in 0..<20_000 {
            let key = UInt32.random(in: 0..<300, using: &rng) * 64
            if Bool.random(using: &rng) || reference.count < 20 {
                #expect(map.updateValue(step, forKey: key) == reference.updateValue(step, forKey: key))
            } else {
                #expect(map.removeValue(forKey: key) == reference.removeValue(forKey: key))
            }
            #expect(map.count == reference.count)
            if step % 997 == 0 {
                for probe in stride(from: UInt32(0), to: 300 * 64, by: 64) { #expect(map[probe] == reference[probe]) }
                #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == reference)
                #expect(Set(map.keys) == Set(reference.keys))
                #expect(map.values.sorted() == reference.values.sorted())
            }
        }
    }

    /// A map that never held two entries keeps its entry inline; the second moves both to slots.
    @Test func oneEntryIsInline() {
        var map = IntegerKeyMap<UInt16, String>()
        map[7] = "a"
        #expect(map.slotKeys.isEmpty && map.count == 1 && map[7] == "a" && map[8] == nil)
        #expect(map.updateValue("b", forKey: 7) == "a" && map.count == 1)
        #expect(Array(map).map(\.value) == ["b"] && map.keys == [7] && map.values == ["b"])
        #expect(map.removeValue(forKey: 8) == nil && map.removeValue(forKey: 7) == "b" && map.isEmpty)
        #expect(Array(map).isEmpty && map.keys.isEmpty)
        map[7] = "c"
        map[9] = "d"
        #expect(!map.slotKeys.isEmpty && map.single == nil && map.count == 2)
        #expect(map[7] == "c" && map[9] == "d" && Set(map.keys) == [7, 9])
        map.removeAll(keepingCapacity: true)
        #expect(map.isEmpty && map[7] == nil && !map.slotKeys.isEmpty)
    }

    @Test func objectIdentifiersAreKeys() {
        final class Thing {}
        let things = (0..<100).map { _ in Thing() }
        var map = IntegerKeyMap<ObjectIdentifier, Int>()
        for (i, thing) in things.enumerated() { map[ObjectIdentifier(thing)] = i }
        for (i, thing) in things.enumerated() { #expect(map[ObjectIdentifier(thing)] == i) }
        map.removeAll()
        #expect(map.isEmpty && map[ObjectIdentifier(things[0])] == nil)
    }
}
