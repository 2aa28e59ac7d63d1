@testable import CBTool
import CoreBluetooth
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

/// UUIDs and hex in a spec that CBUUID(string:) or the hex decoder would trap on: a clear error.
@Suite struct SpecParsingTests {
    /// The fuzzer's input (Fuzz/Targets/peripheral-spec.swift): "…-000x5F9B34FB" passed the
    /// check before and trapped in CBUUID(string:).
    @Test func malformedUUIDsAreErrorsNotTraps() throws {
        let json = """
            {"name": "AchoChannel", "services": [{"uuid": "5E5E2001-0000-1000-8000-000x5F9B34FB",
             "characteristics": [{"uuid": "2E29", "properties": ["read"], "text": "Core Bluetooth! for Linux"}]}]}
            """
        let spec = try JSONDecoder().decode(PeripheralSpec.self, from: Data(json.utf8))
        #expect(throws: ToolError.self) { try spec.validate() }
        for text in ["5E5E2001-0000-1000-8000-000x5F9B34FB", "\u{FF11}\u{FF18}\u{FF10}D", "+18D", "18-0D", "", "0x"] {
            #expect(throws: ToolError.self, "\(text)") { try InputParsing.uuid(text) }
        }
        #expect(try InputParsing.uuid("0x180d") == CBUUID(string: "180D"))
        #expect(try InputParsing.uuid("6e400001-b5a3-f393-e0a9-e50e24dcca9e") == CBUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
    }

    @Test func fullWidthHexIsAnErrorNotATrap() throws {
        #expect(throws: ToolError.self) { try InputParsing.hex("\u{FF10}\u{FF11}") }
        #expect(try InputParsing.hex("01:0a") == Data([0x01, 0x0A]))
    }
}
