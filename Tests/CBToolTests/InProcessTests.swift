import CBTool
import CoreBluetooth
import Foundation
import Testing

/// cbtool's commands run in-process on a test radio with a virtual clock.
@Suite struct InProcessTests {
    @Test func demoEchoesAndSwitchesTheLed() {
        let radio = CBVirtualRadio(clock: .virtual)
        let run = CapturedRun.run(["demo"], radio: radio)
        #expect(run.status == 0, "\(run.err)")
        let output = run.output
        #expect(output.contains("found EchoServer"))
        #expect(output.contains("found LedRemote"))
        #expect(output.contains("services 180C"))
        #expect(output.contains("characteristic 2A56 (Digital) [read, notify]"))
        #expect(output.contains("echo: the whole message came back intact"))
        #expect(output.contains("confirmed 01 01 on 2A57: the LED is on"))
        #expect(output.contains("confirmed 02 01 on 2A57: the LED is off"))
        #expect(run.errors.isEmpty)
    }

    @Test func shippedSpecsParse() throws {
        for name in ["heart-rate.json", "echo-server.json", "led-remote.json", "secure-sensor.json"] {
            let spec = try PeripheralSpec.load(path: Repository.spec(name))
            #expect(!spec.services.isEmpty)
        }
    }

    @Test func simulatedHeartRateIsSeenExploredAndRead() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let spec = try PeripheralSpec.load(path: Repository.spec("heart-rate.json"))
        let quiet = CapturedRun()
        let peripheral = SimulatedPeripheral(spec: spec, context: quiet.context(radio: radio))
        defer { peripheral.stop() }
        #expect(radio.run(until: { peripheral.isAdvertising }, timeout: .seconds(10)))

        let scan = CapturedRun.run(["scan", "--json", "--seconds", "1", "--service", "180D"], radio: radio)
        #expect(scan.status == 0, "\(scan.err)")
        let seen = scan.out.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let heartRate = try #require(seen.first { $0["name"] as? String == "HeartRate" })
        #expect(heartRate["services"] as? [String] == ["180D", "180F"])
        #expect(heartRate["connectable"] as? Bool == true)
        // The spec's manufacturer data, advertised through CBAdvertisementDataLinuxManufacturerDataKey.
        #expect(heartRate["manufacturerData"] as? String == "ffff4842")

        let explore = CapturedRun.run(["explore", "HeartRate"], radio: radio)
        #expect(explore.status == 0, "\(explore.err)")
        #expect(explore.output.contains("service 180D (Heart Rate)"))
        #expect(explore.output.contains("characteristic 2A37 (Heart Rate Measurement) [notify]"))
        #expect(explore.output.contains("\"Heart rate, bpm (8-bit format, contact detected)\""))
        #expect(explore.output.contains("characteristic 2A38 (Body Sensor Location) [read] = chest"))
        #expect(explore.output.contains("characteristic 2A24 (Model Number String) [read] = \"HRM-1\""))

        let read = CapturedRun.run(["read", heartRate["identifier"] as! String, "2A19"], radio: radio)
        #expect(read.status == 0, "\(read.err)")
        #expect(read.out == ["87 %  [57]"])
    }

    @Test func writesReachTheSimulatedPeripheralAndEcho() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let spec = try PeripheralSpec.load(path: Repository.spec("led-remote.json"))
        let log = CapturedRun()
        let peripheral = SimulatedPeripheral(spec: spec, context: log.context(radio: radio))
        defer { peripheral.stop() }
        #expect(radio.run(until: { peripheral.isAdvertising }, timeout: .seconds(10)))
        let write = CapturedRun.run(["write", "LedRemote", "2A56", "01 01"], radio: radio)
        #expect(write.status == 0, "\(write.err)")
        #expect(write.out == ["wrote 01 01 to 2A56"])
        #expect(log.err.contains("[LedRemote] 2A56 written: 01 01"))
        let read = CapturedRun.run(["read", "LedRemote", "2A57"], radio: radio)
        #expect(read.out == ["01 01"])
    }

    @Test(arguments: [
        (["read", "HeartRate", "2A1Z"], "malformed UUID \"2A1Z\""),
        (["write", "HeartRate", "2A19", "0g"], "bad hex \"0g\""),
        (["scan", "--service", "not-a-uuid"], "malformed UUID \"not-a-uuid\""),
        (["simulate", "/nonexistent/spec.json"], "cannot read spec /nonexistent/spec.json"),
        (["read", "Nobody", "2A19", "--timeout", "2"], "no device \"Nobody\" found in 2 s of scanning"),
        (["scan", "--bogus"], "Unknown option '--bogus'"),
        (["pair", "SecureSensor", "--io", "display", "--passkey", "1"], "--passkey needs --io keyboard or display-keyboard"),
        (["pair", "SecureSensor", "--io", "keyboard", "--passkey", "1000000"], "--passkey must be 0–999999"),
        (["pair", "SecureSensor", "--io", "telepathy"], "telepathy"),
        (["pair", "Nobody", "--timeout", "1"], "no device \"Nobody\" found in 1 s of scanning"),
    ])
    func badArgumentsGiveOneLine(arguments: [String], message: String) {
        let radio = CBVirtualRadio(clock: .virtual)
        let run = CapturedRun.run(arguments, radio: radio)
        #expect(run.status != 0)
        #expect(run.errors.count == 1)
        #expect(run.errors.first?.contains(message) == true, "\(run.errors)")
        #expect(run.out.isEmpty)
    }

    @Test func unreachableTransportIsOneLine() {
        let run = CapturedRun.run(["scan", "--transport", "virtual:/nonexistent/radio.sock"], radio: nil)
        #expect(run.status != 0)
        #expect(run.err == ["cbtool: virtual:/nonexistent/radio.sock: no radio there (start one with `cbtool radio --listen /nonexistent/radio.sock`)"])
        let bad = CapturedRun.run(["explore", "X", "--transport", "bogus"], radio: nil)
        #expect(bad.errors.count == 1)
        #expect(bad.errors.first?.contains("bad transport \"bogus\"") == true)
    }

    @Test func malformedSpecsAreOneLine() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbtool-specs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            ("{\"name\": \"x\"", "not valid JSON"),
            ("{\"name\": \"x\", \"services\": [{\"uuid\": \"12\"}]}", "malformed UUID \"12\""),
            ("{\"services\": []}", "missing \"name\""),
            ("{\"name\": \"x\", \"services\": [{\"uuid\": \"180D\", \"characteristics\": [{\"uuid\": \"2A37\", \"properties\": [\"shout\"]}]}]}",
             "unknown property \"shout\""),
            ("{\"name\": \"x\", \"pairing\": {\"io\": \"telepathy\"}, \"services\": [{\"uuid\": \"180D\"}]}",
             "pairing.io \"telepathy\" is not one of display, keyboard, display-keyboard, yes-no, none"),
            ("{\"name\": \"x\", \"pairing\": {\"passkey\": 1000000}, \"services\": [{\"uuid\": \"180D\"}]}",
             "pairing.passkey must be 0–999999"),
        ]
        for (index, (text, message)) in cases.enumerated() {
            let path = directory.appendingPathComponent("\(index).json").path
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            let run = CapturedRun.run(["simulate", path], radio: CBVirtualRadio(clock: .virtual))
            #expect(run.status != 0)
            #expect(run.err.count == 1)
            #expect(run.err.first?.contains(message) == true, "\(run.err)")
        }
    }

    @Test func heartRateMeasurementsDecodePerTheSIGFormat() {
        let uuid = CBUUID(string: "2A37")
        #expect(GATTDescriptionProbe.describe(Data([0x06, 0x48]), uuid) == "72 bpm, contact  [06 48]")
        // 16-bit rate, energy expended, two RR intervals (1/1024 s).
        #expect(GATTDescriptionProbe.describe(Data([0x19, 0x2C, 0x01, 0x10, 0x00, 0x00, 0x04, 0x00, 0x02]), uuid)
                == "300 bpm, energy 16 kJ, RR 1.000 s, 0.500 s  [19 2c 01 10 00 00 04 00 02]")
        #expect(GATTDescriptionProbe.describe(Data([0x57]), CBUUID(string: "2A19")) == "87 %  [57]")
    }
}
