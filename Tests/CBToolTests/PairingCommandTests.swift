import CBTool
import CoreBluetooth
import Foundation
import Testing

/// `cbtool pair`, `bonds` and `unpair` in-process, against specs/secure-sensor.json (an
/// encryption-required characteristic) simulated on a test radio with a virtual clock. Bonds
/// across runs of the tool need a controller that outlives a run: MultiProcessTests.
@Suite struct PairingCommandTests {
    static let secret = "5E5E0002-0000-1000-8000-00805F9B34FB"

    /// The secure sensor advertising on `radio`, pairing as `pairing` (JSON) says, else as its
    /// spec does (it shows a passkey); its log lines go to the returned watcher.
    static func startSensor(on radio: CBVirtualRadio, pairing: String? = nil) throws -> (SimulatedPeripheral, LogWatcher) {
        var spec = try PeripheralSpec.load(path: Repository.spec("secure-sensor.json"))
        if let pairing { spec.pairing = try JSONDecoder().decode(PeripheralSpec.Pairing.self, from: Data(pairing.utf8)) }
        let log = LogWatcher()
        let peripheral = SimulatedPeripheral(spec: spec, context: CapturedRun().context(radio: radio), log: log.append)
        #expect(radio.run(until: { peripheral.isAdvertising }, timeout: .seconds(10)))
        return (peripheral, log)
    }

    @Test func justWorksPairsBondsAndSaysThereIsNoMITMProtection() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, log) = try Self.startSensor(on: radio)
        defer { sensor.stop() }
        let run = CapturedRun.run(["pair", "SecureSensor", "--io", "none"], radio: radio)
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out.first == "method: Just Works")
        #expect(run.output.contains("no protection against a man in the middle"))
        #expect(run.output.contains("paired with SecureSensor (Just Works), bonded:"))
        let bond = try #require(run.out.last)
        #expect(bond.contains("authenticated no  secure-connections yes  key-size 16  irk yes"), "\(bond)")
        #expect(log.all.contains("[SecureSensor] pairing: Just Works, accepted"))
    }

    @Test func aPasskeyShownByTheDeviceIsTypedOnStdin() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, log) = try Self.startSensor(on: radio)
        defer { sensor.stop() }
        // The user reads the passkey off the device (its log) and types it. The stack holds
        // the virtual clock while the agent waits for the line.
        let run = CapturedRun.run(["pair", "SecureSensor", "--io", "keyboard"], radio: radio) {
            log.line(containing: "passkey ", seconds: 10).map { String($0.suffix(6)) }
        }
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out.first == "method: Passkey Entry (this side types)")
        #expect(run.err.contains("enter the passkey the device shows (6 digits):"))
        #expect(run.out.last?.contains("authenticated yes") == true, "\(run.out)")
        #expect(log.all.contains { $0.hasPrefix("[SecureSensor] pairing: Passkey Entry (this side displays), passkey ") })
    }

    @Test func bothSidesTypeTheSamePasskey() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, log) = try Self.startSensor(on: radio, pairing: #"{"io": "keyboard", "passkey": 4321}"#)
        defer { sensor.stop() }
        let run = CapturedRun.run(["pair", "SecureSensor", "--io", "keyboard", "--passkey", "004321"], radio: radio)
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out.prefix(2) == ["method: Passkey Entry (this side types)", "typing the passkey given with --passkey"])
        #expect(run.out.last?.contains("authenticated yes") == true, "\(run.out)")
        #expect(log.all.contains("[SecureSensor] pairing: Passkey Entry (this side types), typing 004321"))
    }

    @Test func aWrongPasskeyFailsInOneLine() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, _) = try Self.startSensor(on: radio, pairing: #"{"io": "keyboard", "passkey": 4321}"#)
        defer { sensor.stop() }
        let run = CapturedRun.run(["pair", "SecureSensor", "--io", "keyboard", "--passkey", "1234"], radio: radio)
        #expect(run.status != 0)
        #expect(run.out.first == "method: Passkey Entry (this side types)")
        #expect(run.errors.count == 1)
        #expect(run.errors.first?.hasPrefix("cbtool: pairing with SecureSensor failed (Passkey Entry (this side types)): ") == true,
                "\(run.errors)")
        #expect(!run.output.contains("paired with"))
    }

    @Test func numericComparisonShowsTheNumberBothSidesSee() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, log) = try Self.startSensor(on: radio, pairing: #"{"io": "yes-no"}"#)
        defer { sensor.stop() }
        let run = CapturedRun.run(["pair", "SecureSensor", "--yes"], radio: radio)
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out.first == "method: Numeric Comparison")
        let shown = try #require(run.out.first { $0.hasPrefix("number: ") })
        let number = String(shown.dropFirst("number: ".count).prefix(6))
        #expect(log.all.contains("[SecureSensor] pairing: Numeric Comparison, number \(number), accepted"))
        #expect(run.output.contains("confirmed with --yes"))
    }

    @Test func aNumberTheUserDoesNotConfirmFailsThePairing() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, _) = try Self.startSensor(on: radio, pairing: #"{"io": "yes-no"}"#)
        defer { sensor.stop() }
        let run = CapturedRun.run(["pair", "SecureSensor"], radio: radio) { "n" }
        #expect(run.status != 0)
        #expect(run.out.first == "method: Numeric Comparison")
        #expect(run.errors.count == 1)
        #expect(run.errors.first?.contains("failed (Numeric Comparison)") == true, "\(run.errors)")
    }

    @Test func readingTheEncryptedCharacteristicPairsOnItsOwn() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let (sensor, log) = try Self.startSensor(on: radio)
        defer { sensor.stop() }
        // As on iOS: Insufficient Encryption, Just Works with the default agent, the read again.
        let read = CapturedRun.run(["read", "SecureSensor", Self.secret], radio: radio)
        #expect(read.status == 0, "\(read.err)")
        #expect(read.out == ["\"secret\"  [73 65 63 72 65 74]"])
        #expect(log.all.contains("[SecureSensor] pairing: Just Works, accepted"))
    }

    @Test func aFreshVirtualControllerHasNoBondsToListOrRemove() {
        let radio = CBVirtualRadio(clock: .virtual)
        let bonds = CapturedRun.run(["bonds"], radio: radio)
        #expect(bonds.status == 0, "\(bonds.err)")
        #expect(bonds.out.isEmpty)
        #expect(bonds.err.last?.hasPrefix("0 bonds (a virtual controller is a new device in every run") == true, "\(bonds.err)")
        let unpair = CapturedRun.run(["unpair", "CB:00:01:00:00:09"], radio: radio)
        #expect(unpair.status != 0)
        #expect(unpair.errors.count == 1)
        #expect(unpair.errors.first?.hasPrefix("cbtool: no bond with CB:00:01:00:00:09") == true, "\(unpair.errors)")
    }
}
