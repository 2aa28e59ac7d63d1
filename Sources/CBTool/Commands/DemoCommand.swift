import ArgumentParser
import CoreBluetooth
import Foundation

/// `cbtool demo`: the first thing to run. The book's EchoServer and LedRemote peripherals and a
/// central that finds, explores and uses them, all through Apple's Core Bluetooth API on the
/// in-process virtual radio.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "The book's EchoServer and LedRemote peripherals, and a central that scans, explores, echoes and switches the LED.",
        discussion: """
            Everything goes through the Core Bluetooth API (CBPeripheralManager, CBCentralManager, CBPeripheral) \
            on the embedded virtual radio: no Bluetooth hardware needed. `cbtool hci-demo` shows the same kind of \
            exchange one layer down, in raw HCI.
            """)

    @Option(name: .long, help: "The message to echo.")
    var message = "Hello from cbtool! This message is longer than one 20-byte packet."

    static let echoService = CBUUID(string: "180C")
    static let ledService = CBUUID(string: "1815")

    func run() throws {
        let context = ToolContext.current
        let say = context.print
        let started = Date()
        say("== The book's peripherals start: EchoServer (service 180C) and LedRemote (service 1815)")
        let peripherals = [BookPeripheralSpecs.echoServer, BookPeripheralSpecs.ledRemote].map {
            SimulatedPeripheral(spec: $0, context: context, log: say)
        }
        defer { peripherals.forEach { $0.stop() } }
        let advertising = context.wait(seconds: 10) {
            peripherals.allSatisfy(\.isAdvertising) || peripherals.contains { $0.problem != nil }
        }
        if let problem = peripherals.lazy.compactMap(\.problem).first { throw ToolError(problem) }
        guard advertising else { throw ToolError("the peripherals did not start advertising") }

        say("== A central scans")
        let session = CentralSession(context: context)
        try session.waitPoweredOn()
        session.scan(services: nil, duplicates: false)
        let names = ["EchoServer", "LedRemote"]
        // The wait's condition may run on any callback's thread: it only reads, and the result
        // is taken once the wait is over.
        let byName = { Dictionary(session.sightings.compactMap { s in s.localName.map { ($0, s) } }) { a, _ in a } }
        context.wait(seconds: 5) {
            let found = byName()
            return names.allSatisfy { found[$0] != nil && !(found[$0]!.services.isEmpty) }
        }
        session.stopScan()
        let found = byName()
        for sighting in session.sightings {
            say("found \(ScanCommand.line(sighting))")
        }
        guard let echo = found["EchoServer"], let led = found["LedRemote"] else {
            throw ToolError("the scan did not find both EchoServer and LedRemote")
        }

        say("== EchoServer: connect and explore")
        try session.connect(echo.peripheral)
        say("connected to EchoServer")
        try session.discoverAll(echo.peripheral)
        session.printTree(of: echo.peripheral, indent: "  ", to: say)
        let echoChar = try session.characteristic(CBUUID(string: "2A56"), of: echo.peripheral)
        let writeChar = try session.characteristic(CBUUID(string: "2A57"), of: echo.peripheral)
        try session.setNotify(true, for: echoChar)
        say("subscribed to 2A56; sending \"\(message)\" to 2A57 in 20-byte chunks, each after the previous one's echo")
        let outbound = Array((message + "\n").utf8)
        var echoed = Data()
        for start in stride(from: 0, to: outbound.count, by: 20) {
            let chunk = Data(outbound[start..<min(start + 20, outbound.count)])
            let before = session.updateCount(echoChar)
            try session.write(chunk, to: writeChar, type: .withResponse)
            let back = try session.nextValue(of: echoChar, after: before, seconds: 5)
            say("  sent \(Self.quoted(chunk))  echoed \(Self.quoted(back))")
            echoed.append(back)
        }
        let intact = echoed == Data(outbound)
        say("echo: \(intact ? "the whole message came back intact" : "the message came back damaged")")
        session.disconnect(echo.peripheral)
        say("disconnected from EchoServer")
        guard intact else { throw ToolError("the echo did not match") }

        say("== LedRemote: connect, explore, switch the LED on and off (2-byte commands [state, 0x01])")
        try session.connect(led.peripheral)
        say("connected to LedRemote")
        try session.discoverAll(led.peripheral)
        session.printTree(of: led.peripheral, indent: "  ", to: say)
        let response = try session.characteristic(CBUUID(string: "2A57"), of: led.peripheral)
        let command = try session.characteristic(CBUUID(string: "2A56"), of: led.peripheral)
        try session.setNotify(true, for: response)
        for (state, name) in [(UInt8(1), "on"), (UInt8(2), "off")] {
            let before = session.updateCount(response)
            let type: CBCharacteristicWriteType = command.properties.contains(.writeWithoutResponse) ? .withoutResponse : .withResponse
            try session.write(Data([state, 0x01]), to: command, type: type)
            let confirmation = try session.nextValue(of: response, after: before, seconds: 5)
            let bytes = [UInt8](confirmation)
            guard bytes.count == 2, bytes[1] == 0x01, bytes[0] == state else {
                throw ToolError("LedRemote answered \(GATTDescription.hex(confirmation)) to LED \(name)")
            }
            say("LED \(name): wrote \(GATTDescription.hex(Data([state, 0x01]))) to 2A56, confirmed \(GATTDescription.hex(confirmation)) on 2A57: the LED is \(name)")
        }
        session.disconnect(led.peripheral)
        say("disconnected from LedRemote")
        say(String(format: "demo finished in %.1f s", Date().timeIntervalSince(started)))
    }

    private static func quoted(_ data: Data) -> String {
        "\"" + String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}
