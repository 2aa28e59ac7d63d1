import HCI
import Scheduling
import SMP
import Testing

@Suite("The SMP timeout, link loss, agent replies")
struct TimeoutTests {
    @Test func noAnswerTimesOutAfter30SecondsOfLoopTime() {
        let s = LoneSession(role: .central)
        s.manager.pair()
        #expect(s.takeSent().map(\.code) == [.pairingRequest])
        s.loop.run(for: .milliseconds(29_990))
        #expect(s.recorder.results.isEmpty)
        s.loop.run(for: .milliseconds(20))
        #expect(s.recorder.error == .timeout)
        #expect(!s.manager.isPairing)

        // No SMP on this link any more: the answer is dropped, a new pairing refused.
        s.receive(SMPPDU.pairingResponse(.peer()))
        s.manager.pair()
        #expect(s.takeSent().isEmpty)
        #expect(s.recorder.results.count == 2)
        if case .failure(.timeout) = s.recorder.results.last {} else { Issue.record("\(s.recorder.results)") }
    }

    @Test func eachPDURestartsTheTimer() {
        let s = LoneSession(role: .central)
        s.manager.pair()
        _ = s.takeSent()
        s.loop.run(for: .seconds(20))
        s.receive(SMPPDU.pairingResponse(.peer()))  // at 20 s: we send our public key
        #expect(s.takeSent().map(\.code) == [.pairingPublicKey])
        s.loop.run(for: .seconds(29))  // 49 s
        #expect(s.recorder.results.isEmpty)
        s.loop.run(for: .seconds(2))  // 51 s
        #expect(s.recorder.error == .timeout)
    }

    @Test func configuredTimeout() {
        let s = LoneSession(role: .central, configuration: .with { $0.timeout = .seconds(5) })
        s.manager.pair()
        s.loop.run(for: .seconds(4))
        #expect(s.recorder.results.isEmpty)
        s.loop.run(for: .seconds(2))
        #expect(s.recorder.error == .timeout)
    }

    @Test func anAgentThatNeverAnswersTimesBothSidesOut() {
        let link = PairedLink(centralIO: .keyboardOnly, peripheralIO: .displayOnly)
        link.centralAgent.script = { _ in nil }
        link.central.pair()
        link.loop.run(for: .seconds(31))
        #expect(link.centralRecorder.error == .timeout)
        #expect(link.peripheralRecorder.error == .timeout)
        // Nothing was sent after the timeout, and the late answer changes nothing.
        let sent = link.sentByCentral.count + link.sentByPeripheral.count
        link.centralAgent.replies.last?(.passkey(123_456))
        link.loop.run(for: .seconds(60))
        #expect(link.sentByCentral.count + link.sentByPeripheral.count == sent)
        #expect(link.centralRecorder.results.count == 1)
    }

    @Test func linkLossEndsThePairingAndStopsTheTimer() {
        let s = LoneSession(role: .central)
        s.manager.pair()
        s.loop.run(for: .seconds(1))
        s.manager.linkClosed()
        #expect(s.recorder.error == .disconnected)
        s.loop.run(for: .seconds(60))
        #expect(s.recorder.results.count == 1)
        s.receive(SMPPDU.pairingResponse(.peer()))
        #expect(s.takeSent().map(\.code) == [.pairingRequest])
        s.manager.pair()
        if case .failure(.disconnected) = s.recorder.results.last {} else { Issue.record("\(s.recorder.results)") }
        s.manager.linkClosed()
        #expect(s.recorder.results.count == 2)
    }

    @Test func linkLossWithoutAPairingReportsNothing() {
        let s = LoneSession(role: .peripheral)
        s.manager.linkClosed()
        #expect(s.recorder.results.isEmpty)
    }

    @Test func secondAndStaleRepliesAreIgnored() {
        let link = PairedLink(centralIO: .displayYesNo, peripheralIO: .displayYesNo)
        // Each agent answers twice, once of them a refusal: only the first counts.
        for agent in [link.centralAgent, link.peripheralAgent] {
            agent.script = { _ in
                let reply = agent.replies.last!
                reply(.accept)
                reply(.reject)
                return nil
            }
        }
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.outcome?.method == .numericComparison)
        #expect(link.peripheralRecorder.outcome != nil)

        // A reply to the first pairing's prompt, arriving during a second pairing, is stale.
        let stale = link.centralAgent.replies[0]
        link.centralAgent.script = { _ in nil }
        link.peripheralAgent.script = { _ in nil }
        link.central.pair()
        link.loop.run(for: .seconds(1))
        stale(.reject)
        link.loop.run(for: .seconds(1))
        #expect(link.centralRecorder.results.count == 1 && link.central.isPairing)
    }

    @Test func repliesFromOtherThreadsHopToTheLoop() async {
        let link = PairedLink(centralIO: .displayYesNo, peripheralIO: .displayYesNo)
        for agent in [link.centralAgent, link.peripheralAgent] {
            agent.script = { _ in
                let reply = agent.replies.last!
                Task.detached { reply(.accept) }
                return nil
            }
        }
        link.central.pair()
        for _ in 0..<200 where !link.bothFinished {
            link.loop.run(for: .milliseconds(10))
            try? await Task.sleep(for: .milliseconds(5))
        }
        #expect(link.centralRecorder.outcome != nil && link.peripheralRecorder.outcome != nil)
    }
}

@Suite("Security Request")
struct SecurityRequestTests {
    @Test func peripheralAsksAndTheCentralPairs() throws {
        let link = PairedLink(peripheral: .with { $0.requireMITM = true }, centralIO: .displayYesNo,
                              peripheralIO: .displayYesNo)
        link.peripheral.pair()
        #expect(link.peripheral.isPairing)
        #expect(link.run())
        #expect(link.centralRecorder.securityRequests == [[.bonding, .mitm, .secureConnections]])
        #expect(link.codes(link.sentByPeripheral).first == .securityRequest)
        #expect(link.codes(link.sentByCentral).first == .pairingRequest)
        #expect(link.centralRecorder.results.count == 1 && link.peripheralRecorder.results.count == 1)
        #expect(link.peripheralRecorder.outcome?.linkKeySecurity == .authenticatedSecureConnections)
        #expect(link.centralRecorder.allowCount == 1 && link.peripheralRecorder.allowCount == 1)
    }

    @Test func centralRefusesWithRepeatedAttempts() {
        let link = PairedLink()
        link.centralRecorder.allowPairing = false
        link.peripheral.pair()
        link.loop.run(for: .seconds(1))
        #expect(link.sentByCentral == [[0x05, 0x09]])
        #expect(link.peripheralRecorder.error == .remoteFailure(.repeatedAttempts))
        #expect(link.centralRecorder.securityRequests.isEmpty)
    }

    @Test func anUnansweredSecurityRequestTimesOutOnlyThePeripheral() {
        let link = PairedLink()
        link.centralRecorder.onSecurityRequest = nil  // e.g. the host re-encrypts with a bond instead
        link.peripheral.pair()
        link.loop.run(for: .seconds(31))
        #expect(link.centralRecorder.securityRequests.count == 1)
        #expect(link.peripheralRecorder.error == .timeout)
        #expect(link.centralRecorder.results.isEmpty)
        link.loop.run(for: .seconds(60))
        #expect(link.centralRecorder.results.isEmpty)
    }

    @Test func aSecurityRequestAnsweredWithABondsKeyEndsQuietly() {
        let link = PairedLink()
        link.centralRecorder.onSecurityRequest = { _ in
            // The host has a bond: it encrypts instead of pairing.
            link.peripheral.encryptionChanged(status: .success, enabled: true)
            link.central.encryptionChanged(status: .success, enabled: true)
        }
        link.peripheral.pair()
        link.loop.run(for: .seconds(1))
        #expect(!link.peripheral.isPairing)
        link.loop.run(for: .seconds(60))
        #expect(link.peripheralRecorder.results.isEmpty && link.centralRecorder.results.isEmpty)
        // SMP still works on the link: no timeout happened.
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.outcome != nil && link.peripheralRecorder.outcome != nil)
    }

    @Test func securityRequestDuringPairingIsIgnored() {
        let s = LoneSession(role: .central)
        s.manager.pair()
        _ = s.takeSent()
        s.receive(.securityRequest([.bonding]))
        #expect(s.takeSent().isEmpty)
        #expect(s.recorder.securityRequests.isEmpty && s.manager.isPairing)
    }

    @Test func pairingAgainWhilePairingChangesNothing() {
        let link = PairedLink()
        link.peripheral.pair()
        link.peripheral.pair()
        link.central.pair()
        link.central.pair()
        #expect(link.run())
        #expect(link.codes(link.sentByPeripheral).filter { $0 == .securityRequest }.count == 1)
        #expect(link.codes(link.sentByCentral).filter { $0 == .pairingRequest }.count == 1)
        #expect(link.centralRecorder.outcome != nil && link.peripheralRecorder.outcome != nil)
    }

    @Test func peripheralAnswersOnlyItsPairingsLTKRequest() throws {
        let link = PairedLink()
        link.simulatesEncryption = false
        link.central.pair()
        link.loop.run(until: { !link.centralRecorder.startedEncryption.isEmpty })
        let key = try #require(link.centralRecorder.startedEncryption.first)
        #expect(link.peripheral.longTermKeyRequest(rand: 0, ediv: 0) == key.key)
        #expect(link.peripheral.longTermKeyRequest(rand: 5, ediv: 0) == nil)
        #expect(link.peripheral.longTermKeyRequest(rand: 0, ediv: 7) == nil)
        #expect(link.central.longTermKeyRequest(rand: 0, ediv: 0) == nil)
    }
}
