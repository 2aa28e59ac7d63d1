@testable import CoreBluetooth
import Dispatch
import Foundation
import HCI
import Scheduling
import TestSupport
import Testing

/// A peripheral manager answering reads of its protected characteristic with a fixed value and
/// taking writes.
private final class ProtectedServer: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let value = Data("secret".utf8)
    private let written = Locked<[Data]>([])
    var writes: [Data] { written.current }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("state \(peripheral.state.rawValue)") }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        log.append("added \(error == nil ? "ok" : "error")")
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append("advertising \(error == nil ? "ok" : "error")")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        log.append("read")
        request.value = value.subdata(in: min(request.offset, value.count)..<value.count)
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        written.withLock { $0 += requests.compactMap(\.value) }
        log.append("write")
        peripheral.respond(to: requests[0], withResult: .success)
    }
}

/// Counts the questions it is asked and gives the answers a test sets.
final class ScriptedPairingAgent: CBPairingAgent, @unchecked Sendable {
    let ioCapability: CBPairingIOCapability
    private let asked = Locked<[CBPairingRequest.Kind]>([])
    private let methods = Locked<[CBPairingMethod]>([])
    /// The passkey to type when asked; nil rejects.
    let passkey: UInt32?
    /// A passkey this agent showed, for a peer's agent to type.
    let shown = Locked<UInt32?>(nil)
    /// Signalled once `shown` is set.
    let didShow = DispatchSemaphore(value: 0)

    init(_ ioCapability: CBPairingIOCapability, passkey: UInt32? = nil) {
        self.ioCapability = ioCapability
        self.passkey = passkey
    }

    var requests: [CBPairingRequest.Kind] { asked.current }
    var methodsSeen: [CBPairingMethod] { methods.current }

    func handle(_ request: CBPairingRequest) {
        asked.withLock { $0.append(request.kind) }
        methods.withLock { $0.append(request.method) }
        switch request.kind {
        case .confirmPairing, .confirmNumber: request.accept()
        case .displayPasskey(let value):
            shown.withLock { $0 = value }
            didShow.signal()
            request.accept()
        case .enterPasskey:
            if let passkey { request.enterPasskey(passkey) } else { request.reject() }
        case .outOfBandData: request.reject()
        }
    }
}

private let serviceUUID = CBUUID(string: "5E5E0001-0000-1000-8000-00805F9B34FB")
private let secretUUID = CBUUID(string: "5E5E0002-0000-1000-8000-00805F9B34FB")

/// A peripheral manager publishing an encryption-required characteristic and a central, both
/// through Apple's API on one virtual radio: iOS pairs on its own when a request needs it.
private final class PairingRig: @unchecked Sendable {
    let radio = CBVirtualRadio(clock: .virtual)
    let server = ProtectedServer()
    let recorder = CentralRecorder()
    let peripheralManager: CBPeripheralManager
    let central: CBCentralManager

    init(permissions: CBAttributePermissions = [.readEncryptionRequired, .writeEncryptionRequired],
         centralCapture: String? = nil, peripheralOptions: [String: Any]? = nil) throws {
        let (radio, server, recorder) = (radio, server, recorder)
        peripheralManager = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: server, queue: DispatchQueue(label: "pairing peripheral"), options: peripheralOptions)
        }
        let options: [String: Any]? = centralCapture.map { [CBManagerOptionLinuxSnoopPathKey: $0] }
        central = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: recorder, queue: recorder.queue, options: options) }
        guard radio.run(until: { server.log.contains("state 5") && recorder.log.contains("state 5") }, timeout: .seconds(5)) else {
            throw RawDeviceError("managers did not power on")
        }
        let service = CBMutableService(type: serviceUUID, primary: true)
        service.characteristics = [
            CBMutableCharacteristic(type: secretUUID, properties: [.read, .write], value: nil, permissions: permissions)
        ]
        peripheralManager.add(service)
        peripheralManager.startAdvertising([CBAdvertisementDataLocalNameKey: "Vault", CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
        guard radio.run(until: { server.log.contains("advertising ok") }, timeout: .seconds(5)) else {
            throw RawDeviceError("no advertising")
        }
    }

    @discardableResult
    func wait(_ condition: @escaping () -> Bool, timeout: Duration = .seconds(60)) -> Bool {
        let condition = Unchecked(condition)
        return radio.run(until: { condition.value() }, timeout: timeout)
    }

    func connect() throws -> CBPeripheral {
        central.scanForPeripherals(withServices: [serviceUUID])
        guard wait({ [recorder] in recorder.discovered(named: "Vault") != nil }), let peripheral = recorder.discovered(named: "Vault") else {
            throw RawDeviceError("no discovery")
        }
        central.stopScan()
        central.connect(peripheral)
        guard wait({ peripheral.state == .connected }) else { throw RawDeviceError("no connection") }
        return peripheral
    }

    func secret(of peripheral: CBPeripheral) throws -> CBCharacteristic {
        let before = recorder.log.count(prefix: "characteristics")
        peripheral.discoverServices([serviceUUID])
        guard wait({ peripheral.services?.first != nil }), let service = peripheral.services?.first else {
            throw RawDeviceError("no service")
        }
        peripheral.discoverCharacteristics([secretUUID], for: service)
        guard wait({ [recorder] in recorder.log.count(prefix: "characteristics") > before }),
              let characteristic = service.characteristics?.first else { throw RawDeviceError("no characteristic") }
        return characteristic
    }

    /// Reads and returns the log entry of the answer.
    func read(_ characteristic: CBCharacteristic, on peripheral: CBPeripheral) -> String? {
        let key = "value \(secretUUID.uuidString)"
        let before = recorder.log.count(prefix: key)
        peripheral.readValue(for: characteristic)
        guard wait({ [recorder] in recorder.log.count(prefix: key) > before }) else { return nil }
        return recorder.log.all.last { $0.hasPrefix(key) }
    }

    func disconnect(_ peripheral: CBPeripheral) {
        central.cancelPeripheralConnection(peripheral)
        wait { peripheral.state == .disconnected }
    }
}

@Suite struct PairingTests {
    @Test(.disabled(if: DaemonMode.isOn, "reads the process's own btsnoop capture, which on a daemon is the daemon's"))
    func aProtectedCharacteristicIsReadAndWrittenWithNoPairingCallThenAgainOverTheBond() throws {
        let capture = temporaryPath("pairing-central.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: capture) }
        var rig: PairingRig! = try PairingRig(centralCapture: capture)
        let agent = ScriptedPairingAgent(.noInputNoOutput)
        rig.central.linuxPairingAgent = agent
        let peripheral = try rig.connect()
        let secret = try rig.secret(of: peripheral)
        // The read needs encryption: the central pairs (Just Works) and retries, transparently.
        #expect(rig.read(secret, on: peripheral) == "value \(secretUUID.uuidString) \(Data("secret".utf8).hexString)")
        #expect(agent.requests == [.confirmPairing])
        #expect(agent.methodsSeen == [.justWorks])
        peripheral.writeValue(Data([1, 2, 3]), for: secret, type: .withResponse)
        #expect(rig.wait { rig.recorder.log.contains("wrote \(secretUUID.uuidString)") })
        #expect(rig.server.writes == [Data([1, 2, 3])])

        // Reconnected, the bond's key encrypts the link: no second pairing.
        rig.disconnect(peripheral)
        let again = try rig.connect()
        let secretAgain = try rig.secret(of: again)
        #expect(rig.read(secretAgain, on: again) == "value \(secretUUID.uuidString) \(Data("secret".utf8).hexString)")
        #expect(agent.requests == [.confirmPairing])

        // The capture (closed with the central) shows one SMP exchange, decoded cleanly.
        rig.disconnect(again)
        rig = nil
        let result = try Tshark.check(capture: capture)
        #expect(result.isClean, "\(result.malformed) \(result.expertErrors)")
        let smp = result.frameProtocols.filter { $0.hasSuffix(":btsmp") }
        // Pairing Request/Response, Public Keys, Confirm, Randoms, DHKey Checks, and the
        // identity keys each way.
        #expect(smp.count >= 10, "\(smp.count) SMP frames")
        #expect(result.verboseOutput.contains("Pairing Request"))
        #expect(result.verboseOutput.components(separatedBy: "Opcode: Pairing Request").count == 2)
    }

    @Test(.disabled(if: DaemonMode.isOn, "configures the peripheral's in-process host device (its security requirements), which on a daemon is the daemon's"))
    func aPeripheralRequiringMITMThatJustWorksCannotGiveEndsTheReadInAnError() throws {
        let rig = try PairingRig(permissions: [.readEncryptionRequired])
        // Apple's permissions cannot ask for MITM; the peripheral's device policy can.
        let device = try #require(rig.peripheralManager.device)
        let set = Locked(false)
        device.loop.execute {
            device.hostDevice?.securityConfiguration.requireMITM = true
            set.withLock { $0 = true }
        }
        rig.radio.run(for: .milliseconds(10))
        #expect(set.current)
        let agent = ScriptedPairingAgent(.noInputNoOutput)
        rig.central.linuxPairingAgent = agent
        let peripheral = try rig.connect()
        let secret = try rig.secret(of: peripheral)
        // Pairing fails (Authentication Requirements): the read ends in Insufficient
        // Authentication, as on iOS, not in a hang.
        #expect(rig.read(secret, on: peripheral) == "value \(secretUUID.uuidString) error att 5")
        #expect(rig.server.log.count(prefix: "read") == 0)
    }

    @Test func passkeyEntryThroughBothAgents() throws {
        let rig = try PairingRig()
        let display = ScriptedPairingAgent(.displayOnly)
        rig.peripheralManager.linuxPairingAgent = display
        // The central's user types what the peripheral shows: a test can only know it once
        // shown, so the central's agent reads it from the other agent.
        final class Typist: CBPairingAgent, @unchecked Sendable {
            let display: ScriptedPairingAgent
            let asked = Locked(0)
            init(_ display: ScriptedPairingAgent) { self.display = display }
            var ioCapability: CBPairingIOCapability { .keyboardOnly }
            func handle(_ request: CBPairingRequest) {
                asked.withLock { $0 += 1 }
                guard case .enterPasskey = request.kind else { return request.accept() }
                // The displaying side is asked about when this one is: wait for it to show. The
                // stack holds the virtual clock meanwhile, so only a loaded machine's wall time
                // passes (a 500 ms poll here failed under a full parallel test run).
                DispatchQueue.global().async {
                    guard self.display.didShow.wait(timeout: .now() + 30) == .success,
                          let shown = self.display.shown.current else { return request.reject() }
                    request.enterPasskey(shown)
                }
            }
        }
        let typist = Typist(display)
        rig.central.linuxPairingAgent = typist
        let peripheral = try rig.connect()
        let secret = try rig.secret(of: peripheral)
        #expect(rig.read(secret, on: peripheral) == "value \(secretUUID.uuidString) \(Data("secret".utf8).hexString)")
        #expect(display.methodsSeen == [.passkeyDisplay])
    }

    @Test func aWrongPasskeyFailsTheReadAndStoresNothing() throws {
        let rig = try PairingRig()
        rig.peripheralManager.linuxPairingAgent = ScriptedPairingAgent(.displayOnly)
        let typist = ScriptedPairingAgent(.keyboardOnly, passkey: 1_000_000 - 1)
        rig.central.linuxPairingAgent = typist
        let peripheral = try rig.connect()
        let secret = try rig.secret(of: peripheral)
        let answer = rig.read(secret, on: peripheral)
        #expect(answer?.hasSuffix("error att 5") == true || answer?.hasSuffix("error att 15") == true, "\(answer ?? "nil")")
        #expect(typist.requests == [.enterPasskey])
    }
}

/// Holds a peer's out-of-band data, as an app that read it from the peer's NFC tag does.
private final class OutOfBandAgent: CBPairingAgent, @unchecked Sendable {
    let ioCapability = CBPairingIOCapability.noInputNoOutput
    let peerData: CBLinuxOutOfBandData?
    let asked = Locked<[CBPairingMethod]>([])
    init(peerData: CBLinuxOutOfBandData?) { self.peerData = peerData }
    func hasOutOfBandData(for peerIdentifier: UUID) -> Bool { peerData != nil }
    func handle(_ request: CBPairingRequest) {
        asked.withLock { $0.append(request.method) }
        if case .outOfBandData = request.kind, let peerData {
            request.provideOutOfBandData(peerConfirm: peerData.confirm, peerRandom: peerData.random)
        } else {
            request.accept()
        }
    }
}

@Suite(.disabled(if: DaemonMode.isOn, "bonds (linuxBonds), linuxPair and out-of-band data are the daemon's on a daemon, not the process's")) struct OutOfBandPairingTests {
    @Test func outOfBandDataFromThePeripheralAuthenticatesThePairingWithoutAnyInputOrOutput() throws {
        let rig = try PairingRig()
        let data = try #require(rig.peripheralManager.linuxMakeOutOfBandData())
        #expect(data.confirm.count == 16 && data.random.count == 16)
        let central = OutOfBandAgent(peerData: data)
        let peripheral = OutOfBandAgent(peerData: nil)
        rig.central.linuxPairingAgent = central
        rig.peripheralManager.linuxPairingAgent = peripheral
        let connected = try rig.connect()
        let secret = try rig.secret(of: connected)
        #expect(rig.read(secret, on: connected) == "value \(secretUUID.uuidString) \(Data("secret".utf8).hexString)")
        #expect(central.asked.current == [.outOfBand])
        // Out of band is MITM-protected although neither side can show or enter anything.
        #expect(rig.central.linuxBonds.first?.isAuthenticated == true)
    }

    @Test func wrongOutOfBandDataFailsThePairing() throws {
        let rig = try PairingRig()
        _ = try #require(rig.peripheralManager.linuxMakeOutOfBandData())
        let forged = CBLinuxOutOfBandData(confirm: Data(repeating: 1, count: 16), random: Data(repeating: 2, count: 16))
        rig.central.linuxPairingAgent = OutOfBandAgent(peerData: forged)
        rig.peripheralManager.linuxPairingAgent = OutOfBandAgent(peerData: nil)
        let connected = try rig.connect()
        let secret = try rig.secret(of: connected)
        let answer = rig.read(secret, on: connected)
        #expect(answer?.hasSuffix("error att 15") == true || answer?.hasSuffix("error att 5") == true, "\(answer ?? "nil")")
        #expect(rig.central.linuxBonds.isEmpty)
    }
}

@Suite(.disabled(if: DaemonMode.isOn, "bonds (linuxBonds), linuxPair and out-of-band data are the daemon's on a daemon, not the process's")) struct LinuxBondTests {
    @Test func pairingUpFrontListsTheBondOnBothSidesAndForgettingItMeansPairingAgain() throws {
        let rig = try PairingRig()
        let agent = ScriptedPairingAgent(.noInputNoOutput)
        rig.central.linuxPairingAgent = agent
        let peripheral = try rig.connect()
        let result = Locked<String?>(nil)
        rig.central.linuxPair(peripheral) { error in result.withLock { $0 = error.map { "\($0)" } ?? "paired" } }
        #expect(rig.wait { result.current != nil })
        #expect(result.current == "paired")
        let bonds = rig.central.linuxBonds
        #expect(bonds.count == 1)
        #expect(bonds.first?.identifier == peripheral.identifier)
        #expect(bonds.first?.isSecureConnections == true && bonds.first?.keySize == 16)
        #expect(bonds.first?.isAuthenticated == false)
        #expect(rig.peripheralManager.linuxBonds.count == 1)

        // The central forgets the peripheral: a protected read pairs again.
        #expect(rig.central.linuxRemoveBond(peripheral.identifier))
        #expect(rig.central.linuxBonds.isEmpty)
        #expect(!rig.central.linuxRemoveBond(peripheral.identifier))
        rig.disconnect(peripheral)
        let again = try rig.connect()
        let secret = try rig.secret(of: again)
        #expect(rig.read(secret, on: again) == "value \(secretUUID.uuidString) \(Data("secret".utf8).hexString)")
        #expect(agent.requests == [.confirmPairing, .confirmPairing])
    }
}

@Suite(.disabled(if: DaemonMode.isOn, "bonds (linuxBonds), linuxPair and out-of-band data are the daemon's on a daemon, not the process's")) struct PrivacyIdentifierTests {
    /// The address a central's (only) link was made to on the air, read on the device's loop.
    private func peerOnAir(of manager: CBManager) -> LEAddress? {
        guard let device = manager.device else { return nil }
        let result = Locked<LEAddress?>(nil)
        let done = DispatchSemaphore(value: 0)
        device.loop.execute {
            result.withLock { $0 = device.hostDevice?.connections.values.first?.le.peerOnAir }
            done.signal()
        }
        done.wait()
        return result.current
    }

    @Test func aPeripheralWithPrivacyKeepsItsIdentifierAfterBondingAcrossAddressRotations() throws {
        // The peripheral advertises from resolvable private addresses renewed every minute.
        let rig = try PairingRig(peripheralOptions: [CBManagerOptionLinuxPrivacyKey: 60])
        rig.central.linuxPairingAgent = ScriptedPairingAgent(.noInputNoOutput)
        let peripheral = try rig.connect()
        let identifier = peripheral.identifier
        let firstAddress = peripheral.address
        #expect(firstAddress.isResolvablePrivate)
        let identityText = try #require(rig.peripheralManager.linuxDeviceAddress)
        let identity = LEAddress(.randomDevice, try #require(BluetoothAddress(identityText)))
        #expect(rig.radio.identifiers.identifier(for: identity) == nil)

        // Bonding gives the identity the identifier the app holds.
        let result = Locked<String?>(nil)
        rig.central.linuxPair(peripheral) { error in result.withLock { $0 = error.map { "\($0)" } ?? "paired" } }
        #expect(rig.wait { result.current != nil })
        #expect(result.current == "paired")
        #expect(rig.radio.identifiers.identifier(for: identity) == identifier)
        #expect(rig.central.linuxBonds.map(\.identifier) == [identifier])
        rig.disconnect(peripheral)

        // Two rotations later the peripheral advertises from another address; discovered again,
        // it is the same object with the same identifier, now reached by identity.
        rig.radio.run(for: .seconds(130))
        rig.recorder.forget()
        let again = try rig.connect()
        #expect(again === peripheral)
        #expect(again.identifier == identifier)
        #expect(peripheral.address == identity)
        let onAir = peerOnAir(of: rig.central)
        #expect(onAir?.isResolvablePrivate == true && onAir != firstAddress)
        // Over the bond's key: no second pairing.
        let secret = try rig.secret(of: again)
        #expect(rig.read(secret, on: again) == "value \(secretUUID.uuidString) \(Data("secret".utf8).hexString)")
        #expect(rig.central.linuxBonds.count == 1)

        // The app's saved identifier finds it, and reconnects to it by identity.
        rig.disconnect(peripheral)
        let retrieved = rig.central.retrievePeripherals(withIdentifiers: [identifier])
        #expect(retrieved.count == 1 && retrieved.first === peripheral)
        rig.central.connect(retrieved[0])
        #expect(rig.wait { peripheral.state == .connected })
        #expect(rig.radio.identifiers.entries[identity]?.bonded == true)
    }
}

extension Data {
    fileprivate var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
