import HCI
import LECrypto
import Scheduling
import SMP
import Testing

@Suite("Random PDUs never trap a session")
struct FuzzTests {
    /// Sessions in both roles get random sequences of PDUs, mostly of the right length and
    /// now and then a real public key, so that they get past the feature exchange; whatever
    /// happens, each pairing ends at most once and nothing traps.
    @Test func randomPDUSequences() {
        var random = SeededGenerator(seed: 0x5EC_0123)
        let validKey = LECrypto.P256KeyPair().publicKey.smpEncoding
        for round in 0..<400 {
            let role: LERole = round % 2 == 0 ? .central : .peripheral
            var configuration = SMPConfiguration()
            configuration.supportsSecureConnections = Bool.random(using: &random)
            configuration.minimumKeySize = Int.random(in: 7...16, using: &random)
            let io = SMPIOCapability.allCases.randomElement(using: &random)!
            let s = LoneSession(role: role, configuration: configuration, io: io)
            s.manager.hasPeerOutOfBandData = Bool.random(using: &random)
            s.agent.oob = PairingOOBData(peerConfirm: Array(repeating: 1, count: 16),
                                         peerRandom: Array(repeating: 2, count: 16),
                                         legacyTemporaryKey: Array(repeating: 3, count: 16))
            s.agent.script = { prompt in
                switch prompt {
                case .enterPasskey: .passkey(123_456)
                case .outOfBandData: .outOfBand(s.agent.oob!)
                default: .accept
                }
            }
            if Bool.random(using: &random) { s.manager.pair() }
            for _ in 0..<Int.random(in: 1...25, using: &random) {
                let code = UInt8.random(in: 0...0x0F, using: &random)
                var pdu: [UInt8]
                if code == 0x0C && Bool.random(using: &random) {
                    pdu = [0x0C] + validKey
                } else if code == 0x01 || code == 0x02, Int.random(in: 0..<3, using: &random) > 0 {
                    // A well-formed Pairing Request/Response with random choices.
                    pdu = [code, UInt8.random(in: 0...4, using: &random), UInt8.random(in: 0...1, using: &random),
                           UInt8.random(in: 0...0x3F, using: &random), UInt8.random(in: 5...17, using: &random),
                           UInt8.random(in: 0...7, using: &random), UInt8.random(in: 0...7, using: &random)]
                } else {
                    let length = SMPCommandCode(rawValue: code).map { Int.random(in: 0...3, using: &random) > 0 ? $0.pduLength : 0 }
                        ?? 0
                    let count = length > 0 ? length - 1 : Int.random(in: 0...70, using: &random)
                    pdu = [code] + (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
                }
                s.receive(pdu)
                if Int.random(in: 0..<8, using: &random) == 0 {
                    s.manager.encryptionChanged(status: .success, enabled: true)
                }
                _ = s.manager.longTermKeyRequest(rand: 0, ediv: 0)
            }
            s.loop.run(for: .seconds(40))
            #expect(s.recorder.results.count <= 26)
            #expect(!s.manager.isPairing)
        }
    }
}
