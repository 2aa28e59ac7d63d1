import Scheduling
import ByteCoding
import HCI
import Testing

private func decode(_ code: UInt8, _ hex: String) throws -> HCIEvent {
    try HCIEvent(decoding: HCIEventPacket(code: code, parameters: [UInt8](hex: hex)!))
}

@Suite struct EventMalformedTests {
    @Test(arguments: EventSamples.all)
    func everyTruncationThrows(_ event: HCIEvent) {
        let parameters = event.packet.parameters
        // Command Complete's return parameters are opaque here: only its 3-byte header is required.
        let required = if case .commandComplete = event { 3 } else { parameters.count }
        for length in 0..<required {
            let truncated = HCIEventPacket(code: event.packet.code, parameters: Array(parameters.prefix(length)))
            #expect(throws: DecodeError.self, "\(event.name) cut to \(length) bytes") {
                try HCIEvent(decoding: truncated)
            }
        }
    }

    @Test func emptyLEMetaEventThrows() {
        #expect(throws: DecodeError.self) { try decode(0x3E, "") }
    }

    @Test func countLargerThanDataThrows() {
        // Num_Handles 3 but one pair.
        #expect(throws: DecodeError.self) { try decode(0x13, "03 40 00 01 00") }
        // Num_Handles 255 with nothing after it.
        #expect(throws: DecodeError.self) { try decode(0x13, "ff") }
        // Num_Reports 2 but one (complete) legacy report.
        #expect(throws: DecodeError.self) { try decode(0x3E, "02 02 00 00 55 44 33 22 11 00 00 c4") }
        // Num_Reports 2 but one extended report.
        #expect(throws: DecodeError.self) {
            try decode(0x3E, "0d 02 13 00 00 55 44 33 22 11 00 01 00 ff 7f ba 00 00 00 00 00 00 00 00 00 00")
        }
        // Num_Reports 2 but one directed report.
        #expect(throws: DecodeError.self) { try decode(0x3E, "0b 02 01 00 55 44 33 22 11 00 01 ff ee dd cc bb 4a d8") }
    }

    @Test func dataLengthBeyondEndThrows() {
        // Legacy report claims 0x1f data octets, carries 3 (and an RSSI).
        #expect(throws: DecodeError.self) { try decode(0x3E, "02 01 00 00 55 44 33 22 11 00 1f 02 01 06 c4") }
        // Data_Length 0xff in the last legacy report, large enough in total to pass the size pre-check.
        #expect(throws: DecodeError.self) {
            try decode(0x3E, "02 02 00 00 55 44 33 22 11 00 00 c4 00 00 55 44 33 22 11 00 ff c4")
        }
        // Extended report claims 0x10 data octets, carries 3.
        #expect(throws: DecodeError.self) {
            try decode(0x3E, "0d 01 13 00 00 55 44 33 22 11 00 01 00 ff 7f ba 00 00 00 00 00 00 00 00 00 10 02 01 06")
        }
    }

    @Test func trailingBytes() throws {
        // Fixed-size events tolerate appended parameters (later spec versions add some)…
        #expect(try decode(0x05, "00 40 00 13 99")
            == .disconnectionComplete(DisconnectionComplete(connectionHandle: 0x40, reason: .remoteUserTerminatedConnection)))
        #expect(try decode(0x3E, "0c 00 40 00 02 02 77")
            == .le(.phyUpdateComplete(LEPHYUpdateComplete(connectionHandle: 0x40, txPhy: 2, rxPhy: 2))))
        // …but where a count defines the size, extra bytes mean the count is wrong.
        #expect(throws: DecodeError.self) { try decode(0x13, "01 40 00 01 00 00") }
        #expect(throws: DecodeError.self) { try decode(0x3E, "02 01 00 00 55 44 33 22 11 00 00 c4 00") }
    }

    @Test func invalidEnumeratedValuesThrow() {
        // Role 0x02.
        #expect(throws: DecodeError.self) {
            try decode(0x3E, "01 00 40 00 02 01 55 44 33 22 11 c0 18 00 00 00 48 00 01")
        }
        // Peer_Address_Type 0x04.
        #expect(throws: DecodeError.self) {
            try decode(0x3E, "01 00 40 00 01 04 55 44 33 22 11 c0 18 00 00 00 48 00 01")
        }
        // Legacy Event_Type 0x05.
        #expect(throws: DecodeError.self) { try decode(0x3E, "02 01 05 00 55 44 33 22 11 00 00 c4") }
        // Extended Address_Type 0x04 (only 0x00–0x03 and 0xff exist).
        #expect(throws: DecodeError.self) {
            try decode(0x3E, "0d 01 13 00 04 55 44 33 22 11 00 01 00 ff 7f ba 00 00 00 00 00 00 00 00 00 00")
        }
    }

    /// Random parameter blocks for every typed event code and LE subevent: decoding may throw but
    /// must never trap, and whatever decodes must survive re-encoding. One seeded run per code.
    @Test(arguments: EventSamples.eventCodes.map { [$0] } + EventSamples.subeventCodes.map { [0x3E, $0] })
    func randomParametersNeverCrash(_ prefix: [UInt8]) {
        var rng = SeededGenerator(seed: 0x5EED_0000 | UInt64(prefix.last!))
        let isLEMeta = prefix.count == 2
        var decoded = 0
        var changedByReencoding: [HCIEvent] = []
        for _ in 0..<20_000 {
            // Mostly short blocks, so fixed-size layouts and small counts are hit often.
            let maxLength = 255 - (prefix.count - 1)
            let length = Bool.random(using: &rng) ? Int.random(in: 0...40, using: &rng)
                                                  : Int.random(in: 0...maxLength, using: &rng)
            var parameters = Array(prefix.dropFirst())
            parameters.reserveCapacity(length + 1)
            for _ in 0..<length { parameters.append(UInt8(truncatingIfNeeded: rng.next())) }
            // A small Num_Reports / Num_Handles makes the array parsers go deep instead of failing
            // the size check up front.
            let countIndex = isLEMeta ? 1 : 0
            if parameters.count > countIndex, Bool.random(using: &rng) {
                parameters[countIndex] = UInt8.random(in: 0...3, using: &rng)
            }
            guard let event = try? HCIEvent(decoding: HCIEventPacket(code: prefix[0], parameters: parameters)) else {
                continue
            }
            decoded += 1
            if (try? HCIEvent(decoding: event.packet)) != event { changedByReencoding.append(event) }
        }
        #expect(changedByReencoding.isEmpty, "\(changedByReencoding.prefix(3))")
        // Fixed-size layouts should decode often; this guards against a generator that only makes junk.
        #expect(decoded > 0)
    }

    /// Mutations of valid events reach the deep paths of the variable-length layouts.
    @Test(arguments: EventSamples.all)
    func mutatedEventsNeverCrash(_ sample: HCIEvent) {
        var rng = SeededGenerator(seed: 0xB17F_11B5)
        let valid = sample.packet
        var changedByReencoding: [HCIEvent] = []
        for _ in 0..<2_000 {
            var parameters = valid.parameters
            for _ in 0..<Int.random(in: 1...3, using: &rng) where !parameters.isEmpty {
                parameters[Int.random(in: 0..<parameters.count, using: &rng)] = UInt8(truncatingIfNeeded: rng.next())
            }
            if Bool.random(using: &rng) { parameters.removeLast(Int.random(in: 0...min(4, parameters.count), using: &rng)) }
            guard let event = try? HCIEvent(decoding: HCIEventPacket(code: valid.code, parameters: parameters)) else {
                continue
            }
            if (try? HCIEvent(decoding: event.packet)) != event { changedByReencoding.append(event) }
        }
        #expect(changedByReencoding.isEmpty, "\(changedByReencoding.prefix(3))")
    }
}
