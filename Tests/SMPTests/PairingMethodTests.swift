import HCI
import Scheduling
import SMP
import Testing

/// One association model between two sessions, and what each side should see.
struct MethodCase: Sendable, CustomTestStringConvertible {
    var name: String
    var legacy: Bool
    var centralIO: SMPIOCapability
    var peripheralIO: SMPIOCapability
    var centralMethod: PairingMethod
    var peripheralMethod: PairingMethod
    var level: LESecurityLevel
    /// OOB: which side holds the other's out-of-band data.
    var centralHasPeerOOB = false
    var peripheralHasPeerOOB = false
    var testDescription: String { name }

    static let all: [MethodCase] = [
        MethodCase(name: "legacy Just Works", legacy: true, centralIO: .noInputNoOutput, peripheralIO: .noInputNoOutput,
                   centralMethod: .justWorks, peripheralMethod: .justWorks, level: .unauthenticatedEncryption),
        MethodCase(name: "legacy Just Works, both DisplayYesNo", legacy: true, centralIO: .displayYesNo,
                   peripheralIO: .displayYesNo, centralMethod: .justWorks, peripheralMethod: .justWorks,
                   level: .unauthenticatedEncryption),
        MethodCase(name: "legacy passkey, peripheral displays", legacy: true, centralIO: .keyboardOnly,
                   peripheralIO: .displayOnly, centralMethod: .passkeyInput, peripheralMethod: .passkeyDisplay,
                   level: .authenticatedEncryption),
        MethodCase(name: "legacy passkey, central displays", legacy: true, centralIO: .displayOnly,
                   peripheralIO: .keyboardOnly, centralMethod: .passkeyDisplay, peripheralMethod: .passkeyInput,
                   level: .authenticatedEncryption),
        MethodCase(name: "legacy passkey, both KeyboardDisplay", legacy: true, centralIO: .keyboardDisplay,
                   peripheralIO: .keyboardDisplay, centralMethod: .passkeyDisplay, peripheralMethod: .passkeyInput,
                   level: .authenticatedEncryption),
        MethodCase(name: "legacy passkey, both type", legacy: true, centralIO: .keyboardOnly,
                   peripheralIO: .keyboardOnly, centralMethod: .passkeyInput, peripheralMethod: .passkeyInput,
                   level: .authenticatedEncryption),
        MethodCase(name: "legacy OOB", legacy: true, centralIO: .noInputNoOutput, peripheralIO: .noInputNoOutput,
                   centralMethod: .outOfBand, peripheralMethod: .outOfBand, level: .authenticatedEncryption,
                   centralHasPeerOOB: true, peripheralHasPeerOOB: true),
        MethodCase(name: "SC Just Works", legacy: false, centralIO: .noInputNoOutput, peripheralIO: .displayYesNo,
                   centralMethod: .justWorks, peripheralMethod: .justWorks, level: .unauthenticatedEncryption),
        MethodCase(name: "SC numeric comparison", legacy: false, centralIO: .displayYesNo, peripheralIO: .displayYesNo,
                   centralMethod: .numericComparison, peripheralMethod: .numericComparison,
                   level: .authenticatedSecureConnections),
        MethodCase(name: "SC numeric comparison, KeyboardDisplay central", legacy: false, centralIO: .keyboardDisplay,
                   peripheralIO: .displayYesNo, centralMethod: .numericComparison,
                   peripheralMethod: .numericComparison, level: .authenticatedSecureConnections),
        MethodCase(name: "SC passkey, peripheral displays", legacy: false, centralIO: .keyboardOnly,
                   peripheralIO: .displayOnly, centralMethod: .passkeyInput, peripheralMethod: .passkeyDisplay,
                   level: .authenticatedSecureConnections),
        MethodCase(name: "SC passkey, central displays", legacy: false, centralIO: .displayYesNo,
                   peripheralIO: .keyboardOnly, centralMethod: .passkeyDisplay, peripheralMethod: .passkeyInput,
                   level: .authenticatedSecureConnections),
        MethodCase(name: "SC passkey, both type", legacy: false, centralIO: .keyboardOnly, peripheralIO: .keyboardOnly,
                   centralMethod: .passkeyInput, peripheralMethod: .passkeyInput,
                   level: .authenticatedSecureConnections),
        MethodCase(name: "SC OOB, both hold the other's data", legacy: false, centralIO: .noInputNoOutput,
                   peripheralIO: .noInputNoOutput, centralMethod: .outOfBand, peripheralMethod: .outOfBand,
                   level: .authenticatedSecureConnections, centralHasPeerOOB: true, peripheralHasPeerOOB: true),
        MethodCase(name: "SC OOB, only the central holds data", legacy: false, centralIO: .displayYesNo,
                   peripheralIO: .noInputNoOutput, centralMethod: .outOfBand, peripheralMethod: .outOfBand,
                   level: .authenticatedSecureConnections, centralHasPeerOOB: true),
        MethodCase(name: "SC OOB, only the peripheral holds data", legacy: false, centralIO: .noInputNoOutput,
                   peripheralIO: .keyboardDisplay, centralMethod: .outOfBand, peripheralMethod: .outOfBand,
                   level: .authenticatedSecureConnections, peripheralHasPeerOOB: true),
    ]

    /// A link set up for this case (not started).
    func makeLink(board: PasskeyBoard = PasskeyBoard()) -> PairedLink {
        var centralConfiguration = SMPConfiguration.with { $0.localIdentity = centralIdentity }
        var peripheralConfiguration = SMPConfiguration.with { $0.localIdentity = peripheralIdentity }
        if legacy { peripheralConfiguration.supportsSecureConnections = false }
        if centralMethod == .passkeyInput && peripheralMethod == .passkeyInput { board.show(271_828) }
        centralConfiguration.minimumKeySize = 16
        let link = PairedLink(central: centralConfiguration, peripheral: peripheralConfiguration,
                              centralIO: centralIO, peripheralIO: peripheralIO, board: board)
        if legacy {
            let tk = PairingOOBData(legacyTemporaryKey: Array(200...215))
            link.central.hasPeerOutOfBandData = centralHasPeerOOB
            link.peripheral.hasPeerOutOfBandData = peripheralHasPeerOOB
            link.centralAgent.oob = tk
            link.peripheralAgent.oob = tk
        } else {
            let centralOOB = SMPLocalOOBData(), peripheralOOB = SMPLocalOOBData()
            if centralHasPeerOOB {
                link.central.hasPeerOutOfBandData = true
                link.centralAgent.oob = peripheralOOB.peerData
                link.peripheral.localOutOfBandData = peripheralOOB
            }
            if peripheralHasPeerOOB {
                link.peripheral.hasPeerOutOfBandData = true
                link.peripheralAgent.oob = centralOOB.peerData
                link.central.localOutOfBandData = centralOOB
            }
        }
        return link
    }
}

@Suite("Pairing: every association model, both roles, back to back")
struct PairingMethodTests {
    @Test(arguments: MethodCase.all)
    func pairsWithEqualKeys(_ method: MethodCase) throws {
        let link = method.makeLink()
        link.central.pair()
        #expect(link.run())
        let central = try #require(link.centralRecorder.outcome, "\(link.centralRecorder.results)")
        let peripheral = try #require(link.peripheralRecorder.outcome, "\(link.peripheralRecorder.results)")

        #expect(central.method == method.centralMethod)
        #expect(peripheral.method == method.peripheralMethod)
        #expect(central.linkKeySecurity == method.level)
        #expect(peripheral.linkKeySecurity == method.level)
        #expect(central.keySize == 16 && peripheral.keySize == 16)
        #expect(central.bonded && peripheral.bonded)
        #expect(link.encryptions == [true])

        // The key the central encrypts with is the one the peripheral answers with.
        let centralLTK = try #require(central.centralLTK)
        #expect(centralLTK == peripheral.peripheralLTK)
        #expect(centralLTK.key.count == 16)
        #expect(centralLTK.securityLevel == method.level)
        if method.legacy {
            let reverse = try #require(central.peripheralLTK)
            #expect(reverse == peripheral.centralLTK)
            #expect(reverse.ediv != 0 || reverse.rand != 0)
            #expect(!centralLTK.secureConnections)
            // Legacy links run on the STK, not on a distributed LTK.
            #expect(link.centralRecorder.startedEncryption.first?.key != centralLTK.key)
        } else {
            #expect(central.peripheralLTK == centralLTK && peripheral.centralLTK == centralLTK)
            #expect(centralLTK.ediv == 0 && centralLTK.rand == 0 && centralLTK.secureConnections)
            #expect(link.centralRecorder.startedEncryption == [centralLTK])
        }
        #expect(central.peerIRK == peripheralIdentity.irk)
        #expect(central.peerIdentityAddress == peripheralIdentity.address)
        #expect(peripheral.peerIRK == centralIdentity.irk)
        #expect(peripheral.peerIdentityAddress == centralIdentity.address)
        #expect(central.peerCSRK != nil && central.peerCSRK == peripheral.localCSRK)
        #expect(peripheral.peerCSRK != nil && peripheral.peerCSRK == central.localCSRK)

        // Nothing is left to answer once the pairing is over.
        #expect(link.peripheral.longTermKeyRequest(rand: 0, ediv: 0) == nil)
        #expect(!link.central.isPairing && !link.peripheral.isPairing)
        link.loop.runUntilIdle()
        #expect(link.centralRecorder.results.count == 1 && link.peripheralRecorder.results.count == 1)
    }

    @Test(arguments: MethodCase.all)
    func agentsAreToldTheMethod(_ method: MethodCase) {
        let link = method.makeLink()
        link.central.pair()
        link.run()
        for (agent, local) in [(link.centralAgent, method.centralMethod), (link.peripheralAgent, method.peripheralMethod)] {
            switch local {
            case .justWorks: #expect(agent.prompts == [.confirmPairing(method: .justWorks)])
            case .numericComparison:
                #expect(agent.prompts.count == 1)
                if case .confirmNumber(let value) = agent.prompts.first { #expect(value <= 999_999) } else { Issue.record() }
            case .passkeyDisplay:
                #expect(agent.prompts.count == 1)
                if case .displayPasskey(let value) = agent.prompts.first { #expect(value <= 999_999) } else { Issue.record() }
            case .passkeyInput: #expect(agent.prompts == [.enterPasskey])
            case .outOfBand:
                let holds = agent === link.centralAgent ? method.centralHasPeerOOB : method.peripheralHasPeerOOB
                #expect(agent.prompts == (holds ? [.outOfBandData] : []))
            }
        }
        if method.centralMethod == .numericComparison {
            #expect(link.centralAgent.prompts == link.peripheralAgent.prompts)
        }
    }

    @Test func secureConnectionsPasskeyRunsExactlyTwentyRounds() {
        let link = MethodCase.all.first { $0.name == "SC passkey, peripheral displays" }!.makeLink()
        link.central.pair()
        #expect(link.run())
        #expect(link.codes(link.sentByCentral).filter { $0 == .pairingConfirm }.count == 20)
        #expect(link.codes(link.sentByPeripheral).filter { $0 == .pairingConfirm }.count == 20)
        #expect(link.codes(link.sentByCentral).filter { $0 == .pairingRandom }.count == 20)
        #expect(link.codes(link.sentByPeripheral).filter { $0 == .pairingRandom }.count == 20)
        #expect(link.centralRecorder.outcome != nil)
    }

    @Test func secureConnectionsPDUOrder() {
        let link = PairedLink(central: .with { $0.localIdentity = centralIdentity },
                              peripheral: .with { $0.localIdentity = peripheralIdentity },
                              centralIO: .displayYesNo, peripheralIO: .displayYesNo)
        link.central.pair()
        #expect(link.run())
        #expect(link.codes(link.sentByCentral) == [
            .pairingRequest, .pairingPublicKey, .pairingRandom, .pairingDHKeyCheck,
            .identityInformation, .identityAddressInformation, .signingInformation,
        ])
        #expect(link.codes(link.sentByPeripheral) == [
            .pairingResponse, .pairingPublicKey, .pairingConfirm, .pairingRandom, .pairingDHKeyCheck,
            .identityInformation, .identityAddressInformation, .signingInformation,
        ])
    }

    @Test func legacyPDUOrderAndKeyDistribution() {
        let link = PairedLink(central: .legacy, peripheral: .with { $0.localIdentity = peripheralIdentity })
        link.central.pair()
        #expect(link.run())
        #expect(link.codes(link.sentByCentral) == [
            .pairingRequest, .pairingConfirm, .pairingRandom, .encryptionInformation, .centralIdentification,
            .signingInformation,
        ])
        #expect(link.codes(link.sentByPeripheral) == [
            .pairingResponse, .pairingConfirm, .pairingRandom, .encryptionInformation, .centralIdentification,
            .identityInformation, .identityAddressInformation, .signingInformation,
        ])
        // The central has no identity to give, so it never offered one.
        #expect(link.peripheralRecorder.outcome?.peerIRK == nil)
    }

    @Test func agentsThatAnswerLateStillPair() {
        for method in MethodCase.all {
            let link = method.makeLink()
            for agent in [link.centralAgent, link.peripheralAgent] {
                let loop = link.loop
                let inner = agent.board
                agent.script = { prompt in
                    // Answer a second later, from the loop's timer, as a user would.
                    let reply = agent.replies.last!
                    loop.schedule(after: .seconds(1)) {
                        switch prompt {
                        case .confirmPairing, .confirmNumber: reply(.accept)
                        case .displayPasskey(let passkey):
                            inner.show(passkey)
                            reply(.accept)
                        case .enterPasskey: inner.read(reply)
                        case .outOfBandData: reply(agent.oob.map { .outOfBand($0) } ?? .reject)
                        }
                    }
                    return nil
                }
            }
            link.central.pair()
            #expect(link.run(), "\(method.name)")
            #expect(link.centralRecorder.outcome?.centralLTK == link.peripheralRecorder.outcome?.peripheralLTK,
                    "\(method.name)")
            #expect(link.centralRecorder.outcome != nil, "\(method.name)")
        }
    }

    @Test func noBondingMeansNoKeyDistribution() throws {
        let link = PairedLink(central: .with { $0.bondable = false }, peripheral: SMPConfiguration())
        link.central.pair()
        #expect(link.run())
        let central = try #require(link.centralRecorder.outcome)
        #expect(!central.bonded)
        #expect(!link.codes(link.sentByCentral + link.sentByPeripheral).contains(.signingInformation))
        #expect(central.centralLTK != nil)  // the derived LTK still encrypts this link
    }
}
