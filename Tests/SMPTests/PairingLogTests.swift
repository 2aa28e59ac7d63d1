import HCI
import Logging
import LogTesting
import SMP
import StackLogging
import Testing

/// What a pairing logs: progress and outcome on `corebluetooth.smp`, tagged with the link, and
/// never a key or a passkey (developers' guide), in every association model, both pairings.
@Suite("Pairing logs")
struct PairingLogTests {
    /// `bytes` as the logs would write them if they wrote them: lower- and upper-case hex, with
    /// and without separators, and reversed (little-endian on the wire).
    private static func spellings(_ bytes: [UInt8]) -> [String] {
        [bytes, bytes.reversed()].flatMap { order -> [String] in
            let pairs = order.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }
            return [pairs.joined(), pairs.joined(separator: " "), pairs.joined(separator: ":"), "\(order)"]
                .flatMap { [$0, $0.uppercased()] }
        }
    }

    @Test(arguments: MethodCase.all)
    func logsCarryNoKeyOrPasskey(_ method: MethodCase) throws {
        let board = PasskeyBoard()
        let link = method.makeLink(board: board)
        link.central.pair()
        #expect(link.run())
        let central = try #require(link.centralRecorder.outcome, "\(link.centralRecorder.results)")
        let peripheral = try #require(link.peripheralRecorder.outcome, "\(link.peripheralRecorder.results)")
        let text = link.logCapture.text

        // The outcome, as facts: both sides, with the method and the bond.
        let records = link.logCapture.records
        #expect(records.allSatisfy { $0.label == "corebluetooth.smp" })
        let succeeded = records.filter { $0.message.hasPrefix("pairing succeeded") }
        #expect(succeeded.count == 2, "\(text)")
        #expect(succeeded.contains { $0.metadata["role"] == "central" && $0.metadata["connection"] == "0x0040" })
        #expect(succeeded.contains { $0.message.contains("method \(central.method.rawValue)") }, "\(text)")
        #expect(records.contains { $0.message.contains(method.legacy ? "LE legacy pairing" : "LE Secure Connections") })

        var secrets: [[UInt8]] = []
        for outcome in [central, peripheral] {
            secrets += [outcome.centralLTK?.key, outcome.peripheralLTK?.key, outcome.peerIRK, outcome.peerCSRK,
                        outcome.localCSRK].compactMap { $0 }
        }
        secrets += [centralIdentity.irk, peripheralIdentity.irk]
        // Legacy OOB's temporary key (what `makeLink` hands both agents).
        if method.legacy && method.centralMethod == .outOfBand { secrets.append(Array(200...215)) }
        #expect(!secrets.isEmpty)
        for secret in secrets {
            for spelling in Self.spellings(secret) { #expect(!text.contains(spelling), "a key in the logs: \(text)") }
        }
        if let passkey = board.shown {
            let digits = String(passkey), padded = String(repeating: "0", count: max(0, 6 - digits.count)) + digits
            #expect(!text.contains(padded), "the passkey in the logs: \(text)")
        }
    }
}
