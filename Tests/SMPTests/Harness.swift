import HCI
import LECrypto
import LogTesting
import Scheduling
import SMP
import Testing

// Test doubles for pairing sessions. Everything runs on a manually paced loop driven by the
// test's thread, so the doubles' state needs no locks (hence `@unchecked Sendable`).

let centralAddress = LEAddress(.randomDevice, BluetoothAddress("C1:22:33:44:55:66")!)
let peripheralAddress = LEAddress(.publicDevice, BluetoothAddress("00:1B:DC:07:32:A1")!)
let centralIdentity = SMPLocalIdentity(irk: Array(1...16), address: LEAddress(.randomDevice, BluetoothAddress("C5:00:00:00:00:01")!))
let peripheralIdentity = SMPLocalIdentity(irk: Array(101...116), address: peripheralAddress)

/// Where a passkey shown by one agent is read by the other (a user looking at a screen).
final class PasskeyBoard: @unchecked Sendable {
    var shown: UInt32?
    /// Added to what the typing user enters: a user who mistypes.
    var typo: UInt32 = 0
    private var waiting: [@Sendable (PairingReply) -> Void] = []

    func show(_ passkey: UInt32) {
        shown = passkey
        for reply in waiting { reply(.passkey(passkey + typo)) }
        waiting = []
    }

    func read(_ reply: @escaping @Sendable (PairingReply) -> Void) {
        if let shown { reply(.passkey(shown + typo)) } else { waiting.append(reply) }
    }
}

/// An agent following a script: by default it accepts, types what the board shows and
/// answers OOB prompts with `oob`.
final class ScriptedAgent: PairingAgent, @unchecked Sendable {
    let ioCapability: SMPIOCapability
    let board: PasskeyBoard
    var oob: PairingOOBData?
    var prompts: [PairingPrompt] = []
    var replies: [@Sendable (PairingReply) -> Void] = []
    /// Overrides the default answer (nil from it: never answer).
    var script: ((PairingPrompt) -> PairingReply?)?

    init(_ ioCapability: SMPIOCapability, board: PasskeyBoard = PasskeyBoard()) {
        self.ioCapability = ioCapability
        self.board = board
    }

    func prompt(_ prompt: PairingPrompt, peer: LEAddress, reply: @escaping @Sendable (PairingReply) -> Void) {
        prompts.append(prompt)
        replies.append(reply)
        if let script {
            if let answer = script(prompt) { reply(answer) }
            return
        }
        switch prompt {
        case .confirmPairing, .confirmNumber: reply(.accept)
        case .displayPasskey(let passkey):
            board.show(passkey)
            reply(.accept)
        case .enterPasskey: board.read(reply)
        case .outOfBandData: reply(oob.map { .outOfBand($0) } ?? .reject)
        }
    }
}

/// Records what a session tells its host; simulates link encryption through the link.
final class Recorder: SecurityManagerDelegate {
    var results: [Result<PairingOutcome, SMPError>] = []
    var securityRequests: [SMPAuthRequirements] = []
    var startedEncryption: [SMPLongTermKey] = []
    var allowPairing = true
    var allowCount = 0
    var onSecurityRequest: ((SecurityManager) -> Void)?
    var onStartEncryption: ((SMPLongTermKey) -> Void)?

    func securityManager(_ manager: SecurityManager, startEncryptionWith key: SMPLongTermKey) {
        startedEncryption.append(key)
        onStartEncryption?(key)
    }

    func securityManager(_ manager: SecurityManager, didFinishPairing result: Result<PairingOutcome, SMPError>) {
        results.append(result)
    }

    func securityManager(_ manager: SecurityManager, didReceiveSecurityRequest requirements: SMPAuthRequirements) {
        securityRequests.append(requirements)
        onSecurityRequest?(manager)
    }

    func securityManagerShouldAllowPairing(_ manager: SecurityManager) -> Bool {
        allowCount += 1
        return allowPairing
    }

    var outcome: PairingOutcome? {
        guard results.count == 1, case .success(let outcome) = results[0] else { return nil }
        return outcome
    }

    var error: SMPError? {
        guard results.count == 1, case .failure(let error) = results[0] else { return nil }
        return error
    }
}

/// Two sessions back to back: each one's `send` reaches the other's `receive` through the
/// loop; the central's encryption request is checked against the peripheral's LTK answer.
final class PairedLink: @unchecked Sendable {
    let loop = EventLoop()
    var central: SecurityManager!
    var peripheral: SecurityManager!
    let centralRecorder = Recorder()
    let peripheralRecorder = Recorder()
    let centralAgent: ScriptedAgent
    let peripheralAgent: ScriptedAgent
    /// Every PDU each side sent, in order.
    var sentByCentral: [[UInt8]] = []
    var sentByPeripheral: [[UInt8]] = []
    /// Sees every PDU before delivery: returns what to deliver (nil drops it).
    var tamper: ((LERole, [UInt8]) -> [UInt8]?)?
    /// Results of simulated encryptions: whether the keys matched.
    var encryptions: [Bool] = []
    var simulatesEncryption = true
    /// What both managers logged (`corebluetooth.smp`, each tagged with its side of the link).
    let logCapture = LogCapture()
    var logs: [String] { logCapture.records.map(\.message) }

    init(central centralConfiguration: SMPConfiguration = SMPConfiguration(),
         peripheral peripheralConfiguration: SMPConfiguration = SMPConfiguration(),
         centralIO: SMPIOCapability = .noInputNoOutput, peripheralIO: SMPIOCapability = .noInputNoOutput,
         board: PasskeyBoard = PasskeyBoard()) {
        centralAgent = ScriptedAgent(centralIO, board: board)
        peripheralAgent = ScriptedAgent(peripheralIO, board: board)
        central = SecurityManager(role: .central, localAddress: centralAddress, peerAddress: peripheralAddress,
                                  configuration: centralConfiguration, agent: centralAgent, loop: loop) { [unowned self] in
            self.sentByCentral.append($0)
            self.post($0, to: .peripheral)
        }
        peripheral = SecurityManager(role: .peripheral, localAddress: peripheralAddress,
                                     peerAddress: centralAddress, configuration: peripheralConfiguration,
                                     agent: peripheralAgent, loop: loop) { [unowned self] in
            self.sentByPeripheral.append($0)
            self.post($0, to: .central)
        }
        central.delegate = centralRecorder
        peripheral.delegate = peripheralRecorder
        central.logger = logCapture.logging.logger(.smp, connection: 0x0040, peer: "\(peripheralAddress)", role: "central")
        peripheral.logger = logCapture.logging.logger(.smp, connection: 0x0041, peer: "\(centralAddress)", role: "peripheral")
        centralRecorder.onStartEncryption = { [unowned self] key in
            guard self.simulatesEncryption else { return }
            self.loop.execute { self.encrypt(with: key) }
        }
        centralRecorder.onSecurityRequest = { $0.pair() }
    }

    private func post(_ pdu: [UInt8], to role: LERole) {
        loop.execute { [self] in
            var delivered: [UInt8]? = pdu
            if let tamper { delivered = tamper(role == .central ? .peripheral : .central, pdu) }
            guard let delivered else { return }
            (role == .central ? central : peripheral).receive(delivered)
        }
    }

    /// What a controller pair does on LE Enable Encryption: the peripheral's host is asked
    /// for the key; both hosts hear the result.
    func encrypt(with key: SMPLongTermKey) {
        let answer = peripheral.longTermKeyRequest(rand: key.rand, ediv: key.ediv)
        let matched = answer == key.key
        encryptions.append(matched)
        let status: HCIStatus = matched ? .success : .pinOrKeyMissing
        peripheral.encryptionChanged(status: status, enabled: matched)
        central.encryptionChanged(status: status, enabled: matched)
    }

    var bothFinished: Bool { !centralRecorder.results.isEmpty && !peripheralRecorder.results.isEmpty }

    /// Runs until both sides finished (or 20 s of loop time, well inside the SMP timeout).
    @discardableResult
    func run() -> Bool { loop.run(until: { self.bothFinished }, timeout: .seconds(20)) }

    func decoded(_ pdus: [[UInt8]]) -> [SMPPDU] { pdus.compactMap { try? SMPPDU(decoding: $0) } }
    func codes(_ pdus: [[UInt8]]) -> [SMPCommandCode] { decoded(pdus).map(\.code) }
}

extension SMPConfiguration {
    static func with(_ change: (inout SMPConfiguration) -> Void) -> SMPConfiguration {
        var configuration = SMPConfiguration()
        change(&configuration)
        return configuration
    }

    static let legacy = SMPConfiguration.with { $0.supportsSecureConnections = false }
}

/// One session facing a test that plays the peer PDU by PDU.
final class LoneSession: @unchecked Sendable {
    let loop = EventLoop()
    let manager: SecurityManager
    let recorder = Recorder()
    let agent: ScriptedAgent
    var sent: [[UInt8]] = []

    init(role: LERole, configuration: SMPConfiguration = SMPConfiguration(), io: SMPIOCapability = .noInputNoOutput) {
        let agent = ScriptedAgent(io)
        self.agent = agent
        let box = SentBox()
        manager = SecurityManager(role: role, localAddress: role == .central ? centralAddress : peripheralAddress,
                                  peerAddress: role == .central ? peripheralAddress : centralAddress,
                                  configuration: configuration, agent: agent, loop: loop) { box.pdus.append($0) }
        manager.delegate = recorder
        self.box = box
    }

    private let box: SentBox
    /// What the session sent since the last call.
    func takeSent() -> [SMPPDU] {
        let pdus = box.pdus
        box.pdus = []
        sent += pdus
        return pdus.compactMap { try? SMPPDU(decoding: $0) }
    }

    func receive(_ pdu: SMPPDU) { receive(pdu.encode()) }
    func receive(_ bytes: [UInt8]) {
        manager.receive(bytes)
        loop.run(for: .milliseconds(10))
    }

    private final class SentBox: @unchecked Sendable { var pdus: [[UInt8]] = [] }
}

extension SMPPairingFeatures {
    static func peer(io: SMPIOCapability = .noInputNoOutput, auth: SMPAuthRequirements = [.bonding, .secureConnections],
                     oob: Bool = false, keySize: UInt8 = 16,
                     initiatorKeys: SMPKeyDistribution = [], responderKeys: SMPKeyDistribution = []) -> Self {
        SMPPairingFeatures(ioCapability: io, oobDataPresent: oob, authRequirements: auth, maximumKeySize: keySize,
                           initiatorKeys: initiatorKeys, responderKeys: responderKeys)
    }
}
