import HCI
import LECrypto
import Scheduling
import SMP
import Testing

// The test plays the peer PDU by PDU and computes every value from the specification's
// formulas with the LECrypto toolbox, so a mistake made the same way on both sides of a
// back-to-back pairing (an argument order, a byte order) shows up here.

private func rev(_ bytes: [UInt8]) -> [UInt8] { Array(bytes.reversed()) }
private func random16() -> [UInt8] { (0..<16).map { _ in UInt8.random(in: 0...255) } }
private func field(_ address: LEAddress) -> [UInt8] {
    LECrypto.addressField(type: address.isRandom ? 1 : 0, address: address.address.value)
}
private func ioCap(_ pdu: [UInt8]) -> [UInt8] { [pdu[3], pdu[2], pdu[1]] }

/// The Pairing Request / Response values from decoded PDUs.
private func value(_ pdu: SMPPDU?) -> [UInt8] {
    switch pdu {
    case .pairingConfirm(let v), .pairingRandom(let v), .pairingDHKeyCheck(let v), .pairingPublicKey(let v): rev(v)
    default: []
    }
}

@Suite("Pairing against a peer played from the specification's formulas")
struct ScriptedPeerTests {
    /// Legacy Just Works, we are the peripheral: c1 confirms, s1 STK, then our LTK.
    @Test func legacyJustWorksAsPeripheral() throws {
        let s = LoneSession(role: .peripheral)
        let preq = SMPPDU.pairingRequest(.peer(auth: [.bonding], responderKeys: [.encryptionKey])).encode()
        s.receive(preq)
        let response = s.takeSent()
        guard case .pairingResponse(let features) = response.first, response.count == 1 else {
            Issue.record("\(response)")
            return
        }
        #expect(features.responderKeys == [.encryptionKey] && features.initiatorKeys == [])
        #expect(features.maximumKeySize == 16 && features.ioCapability == .noInputNoOutput)
        let pres = response[0].encode()
        let tk = [UInt8](repeating: 0, count: 16)
        func c1(_ r: [UInt8]) -> [UInt8] {
            LECrypto.c1(k: tk, r: r, preq: rev(preq), pres: rev(pres), iat: 1, ia: rev(centralAddress.address.wire),
                        rat: 0, ra: rev(peripheralAddress.address.wire))
        }
        let mrand = random16()
        s.receive(.pairingConfirm(rev(c1(mrand))))
        let sconfirm = value(s.takeSent().first)
        s.receive(.pairingRandom(rev(mrand)))
        let srand = value(s.takeSent().first)
        #expect(sconfirm == c1(srand))
        let stk = LECrypto.s1(k: tk, r1: srand, r2: mrand)
        #expect(s.manager.longTermKeyRequest(rand: 0, ediv: 0) == rev(stk))
        #expect(s.manager.longTermKeyRequest(rand: 1, ediv: 0) == nil)
        s.manager.encryptionChanged(status: .success, enabled: true)
        let keys = s.takeSent()
        guard case .encryptionInformation(let ltk) = keys.first, case .centralIdentification(let ediv, let rand) = keys.last,
              keys.count == 2
        else {
            Issue.record("\(keys)")
            return
        }
        let outcome = try #require(s.recorder.outcome)
        #expect(outcome.peripheralLTK == SMPLongTermKey(key: ltk, ediv: ediv, rand: rand, keySize: 16,
                                                        authenticated: false, secureConnections: false))
        #expect(outcome.linkKeySecurity == .unauthenticatedEncryption)
    }

    /// Legacy passkey entry, we are the central typing 000123: TK is the passkey.
    @Test func legacyPasskeyAsCentral() throws {
        let s = LoneSession(role: .central, configuration: .legacy, io: .keyboardOnly)
        s.agent.script = { $0 == .enterPasskey ? .passkey(123) : .reject }
        s.manager.pair()
        let preq = s.takeSent()[0].encode()
        let pres = SMPPDU.pairingResponse(.peer(io: .displayOnly, auth: [.bonding, .mitm])).encode()
        s.receive(pres)
        let mconfirm = value(s.takeSent().first)
        var tk = [UInt8](repeating: 0, count: 16)
        tk[15] = 123
        func c1(_ r: [UInt8]) -> [UInt8] {
            LECrypto.c1(k: tk, r: r, preq: rev(preq), pres: rev(pres), iat: 1, ia: rev(centralAddress.address.wire),
                        rat: 0, ra: rev(peripheralAddress.address.wire))
        }
        let srand = random16()
        s.receive(.pairingConfirm(rev(c1(srand))))
        let mrand = value(s.takeSent().first)
        #expect(mconfirm == c1(mrand))
        s.receive(.pairingRandom(rev(srand)))
        let stk = LECrypto.s1(k: tk, r1: srand, r2: mrand)
        #expect(s.recorder.startedEncryption == [
            SMPLongTermKey(key: rev(stk), ediv: 0, rand: 0, keySize: 16, authenticated: true, secureConnections: false),
        ])
    }

    /// LE Secure Connections Just Works, we are the peripheral: f4, f5, f6 by hand.
    @Test func secureConnectionsJustWorksAsPeripheral() throws {
        let s = LoneSession(role: .peripheral)
        let ours = LECrypto.P256KeyPair()
        let preq = SMPPDU.pairingRequest(.peer()).encode()
        s.receive(preq)
        let pres = try #require(s.takeSent().first).encode()
        s.receive(.pairingPublicKey(ours.publicKey.smpEncoding))
        let sent = s.takeSent()
        #expect(sent.map(\.code) == [.pairingPublicKey, .pairingConfirm])
        guard case .pairingPublicKey(let encoding) = sent.first else { throw Failure() }
        let peerKey = try LECrypto.P256PublicKey(smpEncoding: encoding)
        let cb = value(sent.last)
        let na = random16()
        s.receive(.pairingRandom(rev(na)))
        let nb = value(s.takeSent().first)
        #expect(cb == LECrypto.f4(u: peerKey.x, v: ours.publicKey.x, x: nb, z: 0))

        let keys = LECrypto.f5(w: ours.dhKey(with: peerKey), n1: na, n2: nb, a1: field(centralAddress),
                               a2: field(peripheralAddress))
        let zero = [UInt8](repeating: 0, count: 16)
        let ea = LECrypto.f6(w: keys.macKey, n1: na, n2: nb, r: zero, ioCap: ioCap(preq), a1: field(centralAddress),
                             a2: field(peripheralAddress))
        let eb = LECrypto.f6(w: keys.macKey, n1: nb, n2: na, r: zero, ioCap: ioCap(pres), a1: field(peripheralAddress),
                             a2: field(centralAddress))
        s.receive(.pairingDHKeyCheck(rev(ea)))
        #expect(value(s.takeSent().first) == eb)
        #expect(s.manager.longTermKeyRequest(rand: 0, ediv: 0) == rev(keys.ltk))
        s.manager.encryptionChanged(status: .success, enabled: true)
        let outcome = try #require(s.recorder.outcome)
        #expect(outcome.peripheralLTK?.key == rev(keys.ltk))
        #expect(outcome.linkKeySecurity == .unauthenticatedEncryption)
    }

    /// LE Secure Connections OOB, we are the peripheral and the central holds our OOB data
    /// (not we its): our key is the one the OOB confirm commits to; Ea carries our r as rb,
    /// Eb carries ra = 0.
    @Test func secureConnectionsOutOfBandAsPeripheral() throws {
        let s = LoneSession(role: .peripheral)
        let oob = SMPLocalOOBData()
        s.manager.localOutOfBandData = oob
        let ours = LECrypto.P256KeyPair()
        let preq = SMPPDU.pairingRequest(.peer(oob: true)).encode()
        s.receive(preq)
        let pres = try #require(s.takeSent().first).encode()
        #expect(pres[2] == 0)  // we hold no OOB data of the central
        s.receive(.pairingPublicKey(ours.publicKey.smpEncoding))
        let sent = s.takeSent()
        guard case .pairingPublicKey(let encoding) = sent.first, sent.count == 1 else { throw Failure() }
        let peerKey = try LECrypto.P256PublicKey(smpEncoding: encoding)
        let rb = rev(oob.random)
        #expect(rev(oob.confirm) == LECrypto.f4(u: peerKey.x, v: peerKey.x, x: rb, z: 0))
        #expect(s.agent.prompts.isEmpty)
        let na = random16()
        s.receive(.pairingRandom(rev(na)))
        let nb = value(s.takeSent().first)
        let keys = LECrypto.f5(w: ours.dhKey(with: peerKey), n1: na, n2: nb, a1: field(centralAddress),
                               a2: field(peripheralAddress))
        let ea = LECrypto.f6(w: keys.macKey, n1: na, n2: nb, r: rb, ioCap: ioCap(preq), a1: field(centralAddress),
                             a2: field(peripheralAddress))
        let eb = LECrypto.f6(w: keys.macKey, n1: nb, n2: na, r: [UInt8](repeating: 0, count: 16), ioCap: ioCap(pres),
                             a1: field(peripheralAddress), a2: field(centralAddress))
        s.receive(.pairingDHKeyCheck(rev(ea)))
        #expect(value(s.takeSent().first) == eb)
        #expect(s.manager.longTermKeyRequest(rand: 0, ediv: 0) == rev(keys.ltk))
        #expect(s.manager.localOutOfBandData == nil)  // used once
    }

    /// LE Secure Connections passkey entry, we are the central typing 0x5A5A5 (alternating
    /// bits): 20 rounds of f4 with 0x80 | bit i, then f6 with the passkey as r.
    @Test func secureConnectionsPasskeyAsCentral() throws {
        let passkey: UInt32 = 0x5_A5A5
        let s = LoneSession(role: .central, io: .keyboardOnly)
        s.agent.script = { $0 == .enterPasskey ? .passkey(passkey) : .reject }
        let ours = LECrypto.P256KeyPair()
        s.manager.pair()
        let preq = s.takeSent()[0].encode()
        let pres = SMPPDU.pairingResponse(.peer(io: .displayOnly, auth: [.bonding, .mitm, .secureConnections])).encode()
        s.receive(pres)
        guard case .pairingPublicKey(let encoding) = s.takeSent().first else { throw Failure() }
        let peerKey = try LECrypto.P256PublicKey(smpEncoding: encoding)
        s.receive(.pairingPublicKey(ours.publicKey.smpEncoding))
        var na: [UInt8] = [], nb: [UInt8] = []
        for round in 0..<20 {
            let bit = 0x80 | UInt8((passkey >> UInt32(round)) & 1)
            let ca = value(s.takeSent().first)
            #expect(ca.count == 16, "round \(round)")
            nb = random16()
            s.receive(.pairingConfirm(rev(LECrypto.f4(u: ours.publicKey.x, v: peerKey.x, x: nb, z: bit))))
            na = value(s.takeSent().first)
            #expect(ca == LECrypto.f4(u: peerKey.x, v: ours.publicKey.x, x: na, z: bit), "round \(round)")
            s.receive(.pairingRandom(rev(nb)))
        }
        let keys = LECrypto.f5(w: ours.dhKey(with: peerKey), n1: na, n2: nb, a1: field(centralAddress),
                               a2: field(peripheralAddress))
        var r = [UInt8](repeating: 0, count: 16)
        r[13] = 0x05; r[14] = 0xA5; r[15] = 0xA5
        let ea = value(s.takeSent().first)
        #expect(ea == LECrypto.f6(w: keys.macKey, n1: na, n2: nb, r: r, ioCap: ioCap(preq), a1: field(centralAddress),
                                  a2: field(peripheralAddress)))
        let eb = LECrypto.f6(w: keys.macKey, n1: nb, n2: na, r: r, ioCap: ioCap(pres), a1: field(peripheralAddress),
                             a2: field(centralAddress))
        s.receive(.pairingDHKeyCheck(rev(eb)))
        #expect(s.recorder.startedEncryption.map(\.key) == [rev(keys.ltk)])
        #expect(s.recorder.startedEncryption.first?.securityLevel == .authenticatedSecureConnections)
    }

    /// A 21st passkey round is refused: the peripheral waits for the DHKey check after 20.
    @Test func twentyFirstPasskeyRoundIsRefused() throws {
        let s = LoneSession(role: .peripheral, io: .keyboardOnly)
        let passkey: UInt32 = 999_999
        s.agent.script = { $0 == .enterPasskey ? .passkey(passkey) : .reject }
        let ours = LECrypto.P256KeyPair()
        s.receive(SMPPDU.pairingRequest(.peer(io: .displayOnly, auth: [.bonding, .mitm, .secureConnections])))
        _ = s.takeSent()
        s.receive(.pairingPublicKey(ours.publicKey.smpEncoding))
        guard case .pairingPublicKey(let encoding) = s.takeSent().first else { throw Failure() }
        let peerKey = try LECrypto.P256PublicKey(smpEncoding: encoding)
        for round in 0..<21 {
            let bit = 0x80 | UInt8((passkey >> UInt32(min(round, 19))) & 1)
            let na = random16()
            s.receive(.pairingConfirm(rev(LECrypto.f4(u: ours.publicKey.x, v: peerKey.x, x: na, z: bit))))
            let answer = s.takeSent()
            if round == 20 {
                #expect(answer == [.pairingFailed(.unspecifiedReason)])
                #expect(s.recorder.error == .localFailure(.unspecifiedReason))
                return
            }
            #expect(answer.map(\.code) == [.pairingConfirm], "round \(round)")
            s.receive(.pairingRandom(rev(na)))
            #expect(s.takeSent().map(\.code) == [.pairingRandom], "round \(round)")
        }
    }
}

private struct Failure: Error {}
