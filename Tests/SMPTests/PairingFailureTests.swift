import HCI
import LECrypto
import Scheduling
import SMP
import Testing

@Suite("Pairing Failed: every reason we produce, and every reason from the peer")
struct PairingFailureTests {
    /// Central mid feature exchange, and peripheral mid confirm exchange.
    @Test(arguments: SMPPairingFailedReason.allCases)
    func everyReasonFromThePeerEndsThePairing(_ reason: SMPPairingFailedReason) {
        let central = LoneSession(role: .central)
        central.manager.pair()
        _ = central.takeSent()
        central.receive(.pairingFailed(reason))
        #expect(central.recorder.results.count == 1)
        #expect(central.recorder.error == .remoteFailure(reason))
        #expect(central.takeSent().isEmpty)  // never answered
        #expect(!central.manager.isPairing)

        let peripheral = LoneSession(role: .peripheral, configuration: .legacy)
        peripheral.receive(SMPPDU.pairingRequest(.peer(auth: [.bonding])))
        #expect(peripheral.takeSent().map(\.code) == [.pairingResponse])
        peripheral.receive(.pairingFailed(reason))
        #expect(peripheral.recorder.error == .remoteFailure(reason))
        #expect(peripheral.takeSent().isEmpty)
        #expect(peripheral.manager.longTermKeyRequest(rand: 0, ediv: 0) == nil)
    }

    @Test func malformedPairingFailedStillEndsThePairingUnanswered() {
        let s = LoneSession(role: .central)
        s.manager.pair()
        _ = s.takeSent()
        s.receive([0x05, 0x42])
        #expect(s.recorder.error == .remoteFailure(.unspecifiedReason))
        #expect(s.takeSent().isEmpty)
    }

    @Test func pairingFailedWhenIdleIsIgnored() {
        let s = LoneSession(role: .peripheral)
        s.receive(.pairingFailed(.confirmValueFailed))
        #expect(s.takeSent().isEmpty && s.recorder.results.isEmpty)
    }

    @Test func unknownCommandCodesAreNotSupported() {
        for code: UInt8 in [0x00, 0x0F, 0x20, 0xFF] {
            let s = LoneSession(role: .central)
            s.manager.pair()
            _ = s.takeSent()
            s.receive([code, 1, 2, 3])
            #expect(s.takeSent() == [.pairingFailed(.commandNotSupported)])
            #expect(s.recorder.error == .localFailure(.commandNotSupported))
        }
    }

    @Test func commandsOfTheOtherRoleAreNotSupported() {
        let central = LoneSession(role: .central)
        central.receive(SMPPDU.pairingRequest(.peer()))
        #expect(central.takeSent() == [.pairingFailed(.commandNotSupported)])
        let peripheral = LoneSession(role: .peripheral)
        peripheral.receive(.securityRequest([.bonding]))
        #expect(peripheral.takeSent() == [.pairingFailed(.commandNotSupported)])
        // A Pairing Response sent to the responder (a hostile central, issue 17).
        let responder = LoneSession(role: .peripheral)
        responder.receive(SMPPDU.pairingResponse(.peer()))
        #expect(responder.takeSent() == [.pairingFailed(.commandNotSupported)])
    }

    @Test func malformedPDUsAreInvalidParameters() {
        let s = LoneSession(role: .central)
        s.manager.pair()
        _ = s.takeSent()
        s.receive([0x02, 0x03, 0x00, 0x01, 0x10, 0x00])  // a Pairing Response one octet short
        #expect(s.takeSent() == [.pairingFailed(.invalidParameters)])
        #expect(s.recorder.error == .localFailure(.invalidParameters))

        let p = LoneSession(role: .peripheral)
        p.receive([0x01, 0x09, 0x00, 0x01, 0x10, 0x00, 0x00])  // IO capability 9
        #expect(p.takeSent() == [.pairingFailed(.invalidParameters)])
    }

    @Test(arguments: [UInt8(0), 6, 17, 0xFF])
    func maximumKeySizesOutside7To16AreInvalidParameters(_ size: UInt8) {
        let p = LoneSession(role: .peripheral, configuration: .with { $0.minimumKeySize = 7 })
        p.receive(SMPPDU.pairingRequest(.peer(keySize: size)))
        #expect(p.takeSent() == [.pairingFailed(.invalidParameters)])
        #expect(p.recorder.error == .localFailure(.invalidParameters))

        let c = LoneSession(role: .central, configuration: .with { $0.minimumKeySize = 7 })
        c.manager.pair()
        _ = c.takeSent()
        c.receive(SMPPDU.pairingResponse(.peer(keySize: size)))
        #expect(c.takeSent() == [.pairingFailed(.invalidParameters)])
    }

    @Test(arguments: [UInt8(7), 12, 15])
    func keysShorterThan16AreRefusedByDefault(_ size: UInt8) {
        let p = LoneSession(role: .peripheral)
        p.receive(SMPPDU.pairingRequest(.peer(keySize: size)))
        #expect(p.takeSent() == [.pairingFailed(.encryptionKeySize)])
        #expect(p.recorder.error == .localFailure(.encryptionKeySize))

        let link = PairedLink(peripheral: .with {
            $0.maximumKeySize = Int(size)
            $0.minimumKeySize = 7
        })
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.error == .localFailure(.encryptionKeySize))
        #expect(link.peripheralRecorder.error == .remoteFailure(.encryptionKeySize))
    }

    @Test(arguments: [false, true])
    func keySizeIsTheSmallerMaximumAndKeysAreMasked(_ legacy: Bool) throws {
        var central = SMPConfiguration.with {
            $0.minimumKeySize = 7
            $0.maximumKeySize = 10
        }
        if legacy { central.supportsSecureConnections = false }
        let link = PairedLink(central: central, peripheral: .with { $0.minimumKeySize = 7 },
                              centralIO: .displayYesNo, peripheralIO: .keyboardDisplay)
        link.central.pair()
        #expect(link.run())
        let outcome = try #require(link.centralRecorder.outcome)
        #expect(outcome.keySize == 10)
        #expect(link.encryptions == [true])
        let linkKey = try #require(link.centralRecorder.startedEncryption.first)
        #expect(linkKey.keySize == 10)
        // LSO first: octets 10…15 are the most significant ones, zeroed.
        #expect(linkKey.key[10...].allSatisfy { $0 == 0 })
        #expect(linkKey.key[..<10].contains { $0 != 0 })
        // Authenticated, but short of a 128-bit key: level 3, not 4.
        #expect(outcome.linkKeySecurity == .authenticatedEncryption)
        if legacy {
            #expect(try #require(outcome.centralLTK).key[10...].allSatisfy { $0 == 0 })
        }
    }

    @Test func requiredMITMWithoutMeansFailsWithAuthenticationRequirements() {
        // Our central requires MITM; the peripheral can neither show nor type.
        let link = PairedLink(central: .with { $0.requireMITM = true }, centralIO: .keyboardDisplay)
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.error == .localFailure(.authenticationRequirements))
        #expect(link.peripheralRecorder.error == .remoteFailure(.authenticationRequirements))
        // And the other way round, the peripheral refusing the request.
        let other = PairedLink(peripheral: .with { $0.requireMITM = true }, peripheralIO: .displayYesNo)
        other.central.pair()
        #expect(other.run())
        #expect(other.peripheralRecorder.error == .localFailure(.authenticationRequirements))
        #expect(other.sentByPeripheral == [[0x05, 0x03]])
    }

    @Test func requiredMITMIsMetByPasskey() {
        let link = PairedLink(central: .with { $0.requireMITM = true }, centralIO: .keyboardOnly,
                              peripheralIO: .displayOnly)
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.outcome?.linkKeySecurity == .authenticatedSecureConnections)
    }

    @Test func secureConnectionsOnlyRefusesLegacy() {
        let link = PairedLink(central: .with { $0.secureConnectionsOnly = true }, peripheral: .legacy)
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.error == .localFailure(.authenticationRequirements))
        let other = PairedLink(central: .legacy, peripheral: .with { $0.secureConnectionsOnly = true })
        other.central.pair()
        #expect(other.run())
        #expect(other.peripheralRecorder.error == .localFailure(.authenticationRequirements))
    }

    @Test func refusedByTheHostIsRepeatedAttempts() {
        let link = PairedLink()
        link.peripheralRecorder.allowPairing = false
        link.central.pair()
        link.loop.run(for: .seconds(1))
        #expect(link.sentByPeripheral == [[0x05, 0x09]])
        #expect(link.centralRecorder.error == .remoteFailure(.repeatedAttempts))
        #expect(link.peripheralRecorder.allowCount == 1)
    }

    /// The agent's refusals, each with the reason that fits its prompt.
    @Test func agentRefusals() {
        struct Case {
            var centralIO: SMPIOCapability
            var peripheralIO: SMPIOCapability
            var reply: PairingReply
            var reason: SMPPairingFailedReason
        }
        let cases = [
            Case(centralIO: .noInputNoOutput, peripheralIO: .noInputNoOutput, reply: .reject, reason: .unspecifiedReason),
            Case(centralIO: .displayYesNo, peripheralIO: .displayYesNo, reply: .reject, reason: .numericComparisonFailed),
            Case(centralIO: .keyboardOnly, peripheralIO: .displayOnly, reply: .reject, reason: .passkeyEntryFailed),
            Case(centralIO: .keyboardOnly, peripheralIO: .displayOnly, reply: .passkey(1_000_000),
                 reason: .passkeyEntryFailed),
            Case(centralIO: .displayOnly, peripheralIO: .keyboardOnly, reply: .reject, reason: .passkeyEntryFailed),
            // A reply that does not answer the prompt counts as a refusal.
            Case(centralIO: .displayYesNo, peripheralIO: .displayYesNo, reply: .passkey(1),
                 reason: .numericComparisonFailed),
        ]
        for (index, c) in cases.enumerated() {
            let link = PairedLink(centralIO: c.centralIO, peripheralIO: c.peripheralIO)
            link.centralAgent.script = { _ in c.reply }
            link.central.pair()
            #expect(link.run(), "case \(index)")
            #expect(link.centralRecorder.error == .localFailure(c.reason), "case \(index)")
            #expect(link.peripheralRecorder.error == .remoteFailure(c.reason), "case \(index)")
            #expect(link.encryptions.isEmpty, "case \(index)")
        }
    }

    @Test func outOfBandDataMissingIsOOBNotAvailable() {
        for legacy in [false, true] {
            for reply in [PairingReply.reject, .outOfBand(PairingOOBData())] {
                let link = PairedLink(central: legacy ? .legacy : SMPConfiguration())
                link.central.hasPeerOutOfBandData = true
                link.peripheral.hasPeerOutOfBandData = true
                link.peripheral.localOutOfBandData = SMPLocalOOBData()
                link.centralAgent.script = { _ in reply }
                link.central.pair()
                #expect(link.run())
                #expect(link.centralRecorder.error == .localFailure(.oobNotAvailable))
            }
        }
        // The peer says it holds our OOB data, but we gave none.
        let link = PairedLink()
        link.central.hasPeerOutOfBandData = true
        link.centralAgent.oob = SMPLocalOOBData().peerData
        link.central.pair()
        #expect(link.run())
        #expect(link.peripheralRecorder.error == .localFailure(.oobNotAvailable))
    }

    @Test func wrongOutOfBandDataFailsTheConfirm() {
        let link = PairedLink()
        link.central.hasPeerOutOfBandData = true
        link.peripheral.localOutOfBandData = SMPLocalOOBData()
        link.centralAgent.oob = SMPLocalOOBData().peerData  // someone else's
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.error == .localFailure(.confirmValueFailed))
        #expect(link.sentByCentral.last == [0x05, 0x04])
    }

    @Test(arguments: [true, false])
    func wrongPasskeyFailsAndYieldsNoKeys(_ legacy: Bool) {
        let board = PasskeyBoard()
        board.typo = 1
        let link = PairedLink(central: legacy ? .legacy : SMPConfiguration(), centralIO: .keyboardOnly,
                              peripheralIO: .displayOnly, board: board)
        link.central.pair()
        #expect(link.run())
        // The responder checks the initiator's confirm first.
        #expect(link.peripheralRecorder.error == .localFailure(.confirmValueFailed))
        #expect(link.centralRecorder.error == .remoteFailure(.confirmValueFailed))
        #expect(link.encryptions.isEmpty && link.centralRecorder.startedEncryption.isEmpty)
        #expect(link.peripheral.longTermKeyRequest(rand: 0, ediv: 0) == nil)
        let sent = link.codes(link.sentByCentral + link.sentByPeripheral)
        #expect(!sent.contains(.pairingDHKeyCheck) && !sent.contains(.encryptionInformation))
    }

    /// A value changed in flight fails the check made on it.
    @Test func tamperedValuesFailTheirChecks() {
        struct Case {
            var legacy: Bool
            var from: LERole
            var code: SMPCommandCode
            var reason: SMPPairingFailedReason
        }
        let cases = [
            Case(legacy: true, from: .central, code: .pairingConfirm, reason: .confirmValueFailed),
            Case(legacy: true, from: .peripheral, code: .pairingConfirm, reason: .confirmValueFailed),
            Case(legacy: true, from: .peripheral, code: .pairingRandom, reason: .confirmValueFailed),
            Case(legacy: false, from: .peripheral, code: .pairingConfirm, reason: .confirmValueFailed),
            Case(legacy: false, from: .central, code: .pairingDHKeyCheck, reason: .dhKeyCheckFailed),
            Case(legacy: false, from: .peripheral, code: .pairingDHKeyCheck, reason: .dhKeyCheckFailed),
            // Na changed: the DHKey checks no longer agree.
            Case(legacy: false, from: .central, code: .pairingRandom, reason: .dhKeyCheckFailed),
        ]
        for c in cases {
            let link = PairedLink(central: c.legacy ? .legacy : SMPConfiguration())
            link.tamper = { from, pdu in
                guard from == c.from, pdu.first == c.code.rawValue else { return pdu }
                var changed = pdu
                changed[5] ^= 0x01
                return changed
            }
            link.central.pair()
            #expect(link.run())
            let (checker, other) = c.from == .central
                ? (link.peripheralRecorder, link.centralRecorder) : (link.centralRecorder, link.peripheralRecorder)
            #expect(checker.error == .localFailure(c.reason), "\(c)")
            #expect(other.error == .remoteFailure(c.reason), "\(c)")
            #expect(link.encryptions.isEmpty, "\(c)")
        }
    }

    @Test func encryptionFailureEndsThePairing() {
        let link = PairedLink()
        link.simulatesEncryption = false
        link.centralRecorder.onStartEncryption = { key in
            var wrong = key
            wrong.key[0] ^= 1
            link.loop.execute { [wrong] in link.encrypt(with: wrong) }
        }
        link.central.pair()
        #expect(link.run())
        #expect(link.centralRecorder.error == .encryptionFailed(.pinOrKeyMissing))
        #expect(link.peripheralRecorder.error == .encryptionFailed(.pinOrKeyMissing))
        #expect(!link.codes(link.sentByPeripheral).contains(.identityInformation))
    }
}
