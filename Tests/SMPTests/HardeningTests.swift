import HCI
import LECrypto
import Scheduling
@testable import SMP
import Testing

/// A point that is not on P-256 (the curve's b changed), as an invalid-curve attacker sends.
private let offCurveKey: [UInt8] = {
    var encoding = LECrypto.P256KeyPair().publicKey.smpEncoding
    encoding[40] ^= 0x01  // Y changed, X kept
    return encoding
}()

@Suite("Hardening: public key checks, reflection, debug keys, fresh keys, secrets")
struct HardeningTests {
    /// Peripheral: the central's key is checked before we send ours (or anything else).
    @Test func offCurveKeyIsRefusedBeforeOurPublicKey() {
        #expect((try? LECrypto.P256PublicKey(smpEncoding: offCurveKey)) == nil)
        let s = LoneSession(role: .peripheral)
        s.receive(SMPPDU.pairingRequest(.peer()))
        #expect(s.takeSent().map(\.code) == [.pairingResponse])
        s.receive(.pairingPublicKey(offCurveKey))
        #expect(s.takeSent() == [.pairingFailed(.dhKeyCheckFailed)])
        #expect(s.recorder.error == .localFailure(.dhKeyCheckFailed))
    }

    /// Central: the peripheral's key is checked before our Pairing Random (JW), and before the
    /// passkey rounds start.
    @Test(arguments: [SMPIOCapability.noInputNoOutput, .keyboardOnly])
    func offCurveKeyIsRefusedBeforeOurNextPDU(_ io: SMPIOCapability) {
        let s = LoneSession(role: .central, io: io)
        s.agent.script = { _ in .passkey(1) }
        s.manager.pair()
        _ = s.takeSent()
        s.receive(SMPPDU.pairingResponse(.peer(io: .displayOnly, auth: [.bonding, .mitm, .secureConnections])))
        #expect(s.takeSent().map(\.code) == [.pairingPublicKey])
        s.receive(.pairingPublicKey(offCurveKey))
        #expect(s.takeSent() == [.pairingFailed(.dhKeyCheckFailed)])
        #expect(s.agent.prompts.isEmpty)
    }

    @Test func ourOwnKeyReflectedIsRefused() {
        let s = LoneSession(role: .central, io: .keyboardOnly)
        s.manager.pair()
        _ = s.takeSent()
        s.receive(SMPPDU.pairingResponse(.peer(io: .displayOnly, auth: [.bonding, .mitm, .secureConnections])))
        guard case .pairingPublicKey(let ours) = s.takeSent().first else {
            Issue.record("no public key")
            return
        }
        s.receive(.pairingPublicKey(ours))
        #expect(s.takeSent() == [.pairingFailed(.invalidParameters)])
        #expect(s.recorder.error == .localFailure(.invalidParameters))
        #expect(s.agent.prompts.isEmpty)  // no passkey asked for
    }

    @Test func reflectionOfOurOOBKeyIsRefusedByThePeripheral() {
        let s = LoneSession(role: .peripheral)
        let oob = SMPLocalOOBData()
        s.manager.localOutOfBandData = oob
        s.receive(SMPPDU.pairingRequest(.peer(oob: true)))
        _ = s.takeSent()
        s.receive(.pairingPublicKey(oob.keyPair.publicKey.smpEncoding))
        #expect(s.takeSent() == [.pairingFailed(.invalidParameters)])
    }

    @Test func debugKeyIsRefusedUnlessAllowed() {
        let s = LoneSession(role: .peripheral)
        s.receive(SMPPDU.pairingRequest(.peer()))
        _ = s.takeSent()
        s.receive(.pairingPublicKey(LECrypto.debugKeyPair.publicKey.smpEncoding))
        #expect(s.takeSent() == [.pairingFailed(.keyRejected)])

        let debug = LoneSession(role: .peripheral, configuration: .with { $0.allowDebugKeys = true })
        debug.receive(SMPPDU.pairingRequest(.peer()))
        _ = debug.takeSent()
        debug.receive(.pairingPublicKey(LECrypto.debugKeyPair.publicKey.smpEncoding))
        #expect(debug.takeSent().map(\.code) == [.pairingPublicKey, .pairingConfirm])
    }

    @Test func everyPairingHasAFreshKeyPair() {
        var keys: Set<[UInt8]> = []
        let link = PairedLink()
        for round in 0..<3 {
            link.central.pair()
            link.loop.run(until: { link.centralRecorder.results.count == round + 1 && link.peripheralRecorder.results.count == round + 1 })
        }
        for pdu in link.decoded(link.sentByCentral + link.sentByPeripheral) {
            if case .pairingPublicKey(let key) = pdu { keys.insert(key) }
        }
        #expect(keys.count == 6)
        #expect(link.centralRecorder.results.allSatisfy { (try? $0.get()) != nil })
        // Each SMPLocalOOBData is a new key pair too.
        #expect(SMPLocalOOBData().confirm != SMPLocalOOBData().confirm)
    }

    @Test func confirmValuesCompareInConstantTimeHelper() {
        #expect(constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEqual([0x80, 2, 3], [0, 2, 3]))
        #expect(!constantTimeEqual([1, 2, 3], [1, 2]))
        #expect(constantTimeEqual([], []))
    }

    @Test func maskingAndPasskeyBlocks() {
        let key = [UInt8](1...16)
        #expect(masked(key, to: 16) == key)
        #expect(masked(key, to: 7) == [UInt8](repeating: 0, count: 9) + [10, 11, 12, 13, 14, 15, 16])
        #expect(passkeyBlock(999_999) == [UInt8](repeating: 0, count: 13) + [0x0F, 0x42, 0x3F])
    }

    @Test func logsCarryNoSecrets() throws {
        let board = PasskeyBoard()
        let link = PairedLink(centralIO: .keyboardOnly, peripheralIO: .displayOnly, board: board)
        link.central.pair()
        #expect(link.run())
        let passkey = try #require(board.shown)
        let outcome = try #require(link.centralRecorder.outcome)
        let ltkHex = try #require(outcome.centralLTK).key.map { String($0, radix: 16) }.joined()
        #expect(!link.logs.isEmpty)
        for line in link.logs {
            #expect(!line.contains(String(passkey)), "\(line)")
            #expect(!line.contains(ltkHex))
            // Progress words only: no long runs of digits or hex.
            #expect(!line.contains { $0.isNumber }, "\(line)")
        }
    }
}

@Suite("Unexpected PDUs in every state")
struct UnexpectedPDUTests {
    /// Replaces the nth PDU of a pairing with one the receiver does not expect there: it
    /// answers Pairing Failed (Unspecified Reason) and both sides end without keys.
    @Test(arguments: ["legacy Just Works", "legacy passkey, both type", "SC numeric comparison",
                      "SC passkey, peripheral displays", "SC OOB, both hold the other's data"])
    func everyStateRefusesAnUnexpectedPDU(_ name: String) throws {
        let method = try #require(MethodCase.all.first { $0.name == name })
        // How many PDUs a whole pairing takes.
        let reference = method.makeLink()
        reference.central.pair()
        #expect(reference.run())
        let total = reference.sentByCentral.count + reference.sentByPeripheral.count

        for n in 0..<total {
            let link = method.makeLink()
            var count = 0
            var receiver: LERole?
            link.tamper = { from, pdu in
                defer { count += 1 }
                guard count == n else { return pdu }
                receiver = from == .central ? .peripheral : .central
                let bogus = pdu.first == SMPCommandCode.pairingDHKeyCheck.rawValue
                    ? SMPPDU.pairingConfirm([UInt8](repeating: 0, count: 16))
                    : SMPPDU.pairingDHKeyCheck([UInt8](repeating: 0, count: 16))
                return bogus.encode()
            }
            link.central.pair()
            link.loop.run(for: .seconds(5))
            let role = try #require(receiver)
            let (sent, recorder) = role == .central
                ? (link.sentByCentral, link.centralRecorder) : (link.sentByPeripheral, link.peripheralRecorder)
            #expect(sent.last == [0x05, 0x08], "\(name): PDU \(n)")
            if n > 0 { #expect(recorder.error == .localFailure(.unspecifiedReason), "\(name): PDU \(n)") }
            // The sender either failed too or had already finished (its last key was replaced).
            let other = role == .central ? link.peripheralRecorder : link.centralRecorder
            #expect(other.results.count == 1, "\(name): PDU \(n)")
            if other.outcome == nil { #expect(other.error == .remoteFailure(.unspecifiedReason), "\(name): PDU \(n)") }
            #expect(recorder.outcome == nil)
        }
    }

    @Test func whileWaitingForEncryption() {
        for target in [LERole.central, .peripheral] {
            let link = PairedLink()
            link.simulatesEncryption = false
            link.central.pair()
            link.loop.run(until: { !link.centralRecorder.startedEncryption.isEmpty })
            link.loop.run(for: .milliseconds(10))
            let manager = target == .central ? link.central! : link.peripheral!
            manager.receive(SMPPDU.pairingRandom([UInt8](repeating: 0, count: 16)).encode())
            link.loop.run(for: .seconds(1))
            let sent = target == .central ? link.sentByCentral : link.sentByPeripheral
            #expect(sent.last == [0x05, 0x08])
            #expect((target == .central ? link.centralRecorder : link.peripheralRecorder).error
                    == .localFailure(.unspecifiedReason))
        }
    }

    @Test func whileWaitingForTheAgent() {
        let link = PairedLink(centralIO: .displayYesNo, peripheralIO: .displayYesNo)
        link.centralAgent.script = { _ in nil }  // never answers
        link.central.pair()
        link.loop.run(for: .seconds(1))
        #expect(link.centralAgent.prompts.count == 1)
        link.central.receive(SMPPDU.pairingDHKeyCheck([UInt8](repeating: 0, count: 16)).encode())
        link.loop.run(for: .seconds(1))
        #expect(link.centralRecorder.error == .localFailure(.unspecifiedReason))
        // The agent's late answer changes nothing.
        link.centralAgent.replies.last?(.accept)
        link.loop.run(for: .seconds(1))
        #expect(link.centralRecorder.results.count == 1)
        #expect(link.sentByCentral.last == [0x05, 0x08])
    }

    /// Keys count only over a link reported encrypted: one that arrives before the Encryption
    /// Change may have come in the clear.
    @Test func keysBeforeTheEncryptionChangeAreRefused() throws {
        let link = PairedLink(peripheral: .with { $0.localIdentity = peripheralIdentity })
        link.simulatesEncryption = false
        link.central.pair()
        link.loop.run(until: { !link.centralRecorder.startedEncryption.isEmpty })
        let key = try #require(link.centralRecorder.startedEncryption.first)
        #expect(link.peripheral.longTermKeyRequest(rand: 0, ediv: 0) == key.key)
        link.peripheral.encryptionChanged(status: .success, enabled: true)
        link.loop.run(for: .milliseconds(10))
        #expect(link.centralRecorder.error == .localFailure(.unspecifiedReason))
        #expect(link.sentByCentral.last == [0x05, 0x08])
        #expect(link.centralRecorder.outcome?.peerIRK == nil)
    }
}
