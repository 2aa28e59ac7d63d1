// SMP (Vol 3 Part H): a pairing session in either role, with the configuration and IO
// capability the first bytes pick, fed arbitrary PDUs from the peer, with encryption changes,
// long term key requests, time passing (the 30 s SMP timeout) and a local pair() between them.
import HCI
import LECrypto
import Scheduling
import SMP

/// Answers every prompt at once (a passkey, OOB data, or accept), as a headless agent does.
final class FuzzAgent: PairingAgent, @unchecked Sendable {
    let ioCapability: SMPIOCapability
    let rejects: Bool
    init(_ io: SMPIOCapability, rejects: Bool) {
        ioCapability = io
        self.rejects = rejects
    }

    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        if rejects { return reply(.reject) }
        switch prompt {
        case .enterPasskey: reply(.passkey(123_456))
        case .outOfBandData:
            reply(.outOfBand(PairingOOBData(peerConfirm: Array(repeating: 1, count: 16), peerRandom: Array(repeating: 2, count: 16),
                                            legacyTemporaryKey: Array(repeating: 3, count: 16))))
        default: reply(.accept)
        }
    }

    func hasOutOfBandData(for peer: LEAddress) -> Bool { ioCapability == .keyboardDisplay }
}

final class FuzzDelegate: SecurityManagerDelegate {
    var results = 0
    func securityManager(_ manager: SecurityManager, startEncryptionWith key: SMPLongTermKey) {}
    func securityManager(_ manager: SecurityManager, didFinishPairing result: Result<PairingOutcome, SMPError>) { results += 1 }
    func securityManager(_ manager: SecurityManager, didReceiveSecurityRequest requirements: SMPAuthRequirements) {}
}

let central = LEAddress(.randomDevice, BluetoothAddress("C1:22:33:44:55:66")!)
let peripheral = LEAddress(.publicDevice, BluetoothAddress("00:1B:DC:07:32:A1")!)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let loop = EventLoop(pacing: .manual)
    let setup = input.u8()
    let role: LERole = setup & 1 == 0 ? .central : .peripheral
    var configuration = SMPConfiguration()
    configuration.supportsSecureConnections = setup & 2 == 0
    configuration.requireMITM = setup & 4 != 0
    configuration.secureConnectionsOnly = setup & 8 != 0
    configuration.allowDebugKeys = setup & 0x10 != 0
    configuration.minimumKeySize = 7 + Int(setup >> 5)
    configuration.localIdentity = SMPLocalIdentity(irk: Array(1...16), address: role == .central ? central : peripheral)
    let io = SMPIOCapability(rawValue: input.u8() % 5) ?? .noInputNoOutput
    let agent = FuzzAgent(io, rejects: setup & 0x80 != 0 && setup & 0x40 != 0)
    let delegate = FuzzDelegate()
    let manager = SecurityManager(role: role, localAddress: role == .central ? central : peripheral,
                                  peerAddress: role == .central ? peripheral : central,
                                  configuration: configuration, agent: agent, loop: loop) { _ in }
    manager.delegate = delegate
    while !input.isEmpty {
        let op = input.u8()
        switch op & 7 {
        case 0, 1, 2, 3:
            manager.receive(input.record())
        case 4:
            // The debug key is a valid point: gets a Secure Connections pairing past the key check.
            manager.receive([0x0C] + LECrypto.debugKeyPair.publicKey.smpEncoding)
        case 5:
            manager.encryptionChanged(status: op & 8 == 0 ? .success : HCIStatus(0x06), enabled: op & 0x10 == 0)
        case 6:
            loop.run(for: .seconds(Int64(op >> 3)))
        default:
            if op & 8 == 0 { manager.pair() } else { _ = manager.longTermKeyRequest(rand: UInt64(op), ediv: UInt16(op)) }
        }
        loop.run(for: .milliseconds(10))
    }
    loop.run(for: .seconds(40))
    manager.linkClosed()
    loop.runUntilIdle()
    return 0
}
