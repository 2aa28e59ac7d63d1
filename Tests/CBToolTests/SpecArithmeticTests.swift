@testable import CBTool
import Foundation
import Testing

/// What `cbtool simulate` computes from a spec's numbers, at the edges of Int (found while
/// writing the spec fuzz target: a counter from Int.min to Int.max trapped on `end - start`, a
/// step of Int.min on `abs`).
@Suite struct SpecArithmeticTests {
    static func counter(_ start: Int, _ end: Int, step: Int? = nil) -> PeripheralSpec.Notify {
        PeripheralSpec.Notify(interval: 1, counter: PeripheralSpec.Counter(start: start, end: end, step: step, bytes: 8))
    }

    static func int(_ data: Data) -> Int { data.reversed().reduce(0) { $0 << 8 | Int($1) } }

    @Test func countersSpanningAllOfIntNeverTrap() throws {
        let whole = Self.counter(.min, .max)
        #expect(Self.int(SimulatedPeripheral.value(number: 0, of: whole)) == .min)
        #expect(Self.int(SimulatedPeripheral.value(number: 1, of: whole)) == .min + 1)
        let down = Self.counter(.max, .min, step: -1)
        #expect(Self.int(SimulatedPeripheral.value(number: 1, of: down)) == .max - 1)
        let hugeStep = Self.counter(0, .max, step: .min)
        #expect(Self.int(SimulatedPeripheral.value(number: 5, of: hugeStep)) == 0)
        for n in [0, 7, Int.max] {
            _ = SimulatedPeripheral.value(number: n, of: Self.counter(.min, .max, step: .max))
            _ = SimulatedPeripheral.value(number: n, of: Self.counter(-1, .max, step: 3))
        }
        // Ordinary counters are unchanged: 10, 15, 20, 10, …
        let ordinary = Self.counter(10, 20, step: 5)
        #expect((0..<4).map { Self.int(SimulatedPeripheral.value(number: $0, of: ordinary)) } == [10, 15, 20, 10])
        // The spec that held the first of these passes validation.
        try PeripheralSpec(name: "Edge", services: [.init(uuid: "180D", characteristics: [
            .init(uuid: "2A37", properties: ["notify"], notify: whole),
        ])]).validate()
    }
}
