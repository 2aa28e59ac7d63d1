import Scheduling
import ByteCoding
import Testing
@testable import ATT

/// Random and mutated PDUs: decoding may throw but never traps, and whatever decodes
/// re-encodes to exactly the bytes it came from.
@Suite struct ATTFuzzTests {
    static let definedOpcodes = (0...255).map(UInt8.init).filter { ATTOpcode($0).kind != nil }

    func expectFaithful(_ wire: [UInt8], _ mismatches: inout [String]) -> Bool {
        // The notification's own decoder (in place, the bearer's) decodes exactly what the
        // enum's decodes as a notification, to the same PDU.
        let inPlace = try? ATTPDU.HandleValueNotification(decoding: wire)
        let decoded = try? ATTPDU(decoding: wire)
        if case .handleValueNotification(let notification)? = decoded {
            if inPlace != notification { mismatches.append("in place: " + wire.hexString) }
        } else if inPlace != nil {
            mismatches.append("in place: " + wire.hexString)
        }
        guard let pdu = decoded else { return false }
        if pdu.encode() != wire { mismatches.append(wire.hexString) }
        return true
    }

    @Test func randomPDUsNeverCrashAndRoundTrip() {
        var rng = SeededGenerator(seed: 0xA77_F022)
        var decoded = 0
        var mismatches: [String] = []
        for _ in 0..<100_000 {
            // Mostly defined opcodes, mostly short bodies, so the layouts are hit often.
            let opcode = Int.random(in: 0..<4, using: &rng) == 0
                ? UInt8.random(in: 0...255, using: &rng) : Self.definedOpcodes.randomElement(using: &rng)!
            let length = Bool.random(using: &rng) ? Int.random(in: 0...24, using: &rng) : Int.random(in: 0...600, using: &rng)
            var wire = [opcode]
            for _ in 0..<length { wire.append(UInt8(truncatingIfNeeded: rng.next())) }
            // Small Length / Format / length fields make the list parsers go deep.
            if wire.count > 1, Bool.random(using: &rng) { wire[1] = UInt8.random(in: 0...8, using: &rng) }
            if wire.count > 4, Bool.random(using: &rng) { wire[4] = 0 }
            if expectFaithful(wire, &mismatches) { decoded += 1 }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(3))")
        #expect(decoded > 10_000)
    }

    @Test(arguments: attVectors)
    func mutatedVectorsNeverCrashAndRoundTrip(_ vector: ATTVector) {
        var rng = SeededGenerator(seed: 0xB17_F11B5 ^ UInt64(vector.bytes.count))
        var mismatches: [String] = []
        for _ in 0..<2_000 {
            var wire = vector.bytes
            switch Int.random(in: 0..<4, using: &rng) {
            case 0 where wire.count > 1:
                wire[Int.random(in: 1..<wire.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            case 1:
                wire.removeLast(Int.random(in: 0...wire.count - 1, using: &rng))
            case 2:
                for _ in 0..<Int.random(in: 1...20, using: &rng) { wire.append(UInt8.random(in: 0...255, using: &rng)) }
            default:
                wire.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 1...wire.count, using: &rng))
            }
            _ = expectFaithful(wire, &mismatches)
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(3))")
    }
}
