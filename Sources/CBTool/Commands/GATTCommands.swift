import ArgumentParser
import CoreBluetooth
import Foundation

/// `cbtool explore`: the whole GATT database of one device.
struct ExploreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explore",
        abstract: "Find a device, connect, and print its GATT tree with properties, values and descriptors.",
        discussion: """
            Values are read and decoded where the SIG type is known (Device Name, Appearance, Battery Level, \
            Heart Rate Measurement…) or the bytes are text; otherwise shown in hex.
            Example: cbtool explore HeartRate
            """)

    @OptionGroup var target: TargetOptions
    @OptionGroup var central: CentralOptions

    func run() throws {
        let session = try central.makeSession()
        let sighting = try target.connect(session)
        defer { session.disconnect(sighting.peripheral) }
        let peripheral = sighting.peripheral
        emit("\(sighting.name ?? "(no name)")  identifier \(peripheral.identifier.uuidString)  RSSI \(sighting.rssi) dBm")
        session.printTree(of: peripheral, indent: "  ", to: emit)
    }
}

/// `cbtool read`: one characteristic's value.
struct ReadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read a characteristic's value.",
        discussion: "Prints the value in hex, decoded where the type is known. Example: cbtool read HeartRate 2A19")

    @OptionGroup var target: TargetOptions
    @Argument(help: ArgumentHelp("The characteristic's UUID (2A19, or the 128-bit form).", valueName: "characteristic"))
    var characteristic: String
    @OptionGroup var central: CentralOptions

    func run() throws {
        let uuid = try InputParsing.uuid(characteristic)
        let session = try central.makeSession()
        let sighting = try target.connect(session)
        defer { session.disconnect(sighting.peripheral) }
        let found = try session.characteristic(uuid, of: sighting.peripheral)
        let value = try session.read(found)
        emit(GATTDescription.value(value, of: uuid))
    }
}

/// `cbtool write`: one write.
struct WriteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Write a value to a characteristic.",
        discussion: """
            VALUE is hex (0101, "01 01", 0x0101) unless --utf8. The write waits for the device's \
            response unless --without-response.
            Example: cbtool write LedRemote 2A56 0101
            """)

    @OptionGroup var target: TargetOptions
    @Argument(help: ArgumentHelp("The characteristic's UUID.", valueName: "characteristic"))
    var characteristic: String
    @Argument(help: ArgumentHelp("The value: hex, or text with --utf8.", valueName: "value"))
    var value: String
    @Flag(name: .long, help: "VALUE is UTF-8 text, not hex.")
    var utf8 = false
    @Flag(name: .long, help: "Write without response (a Write Command).")
    var withoutResponse = false
    @OptionGroup var central: CentralOptions

    func run() throws {
        let uuid = try InputParsing.uuid(characteristic)
        let data = utf8 ? Data(value.utf8) : try InputParsing.hex(value)
        let session = try central.makeSession()
        let sighting = try target.connect(session)
        defer { session.disconnect(sighting.peripheral) }
        let found = try session.characteristic(uuid, of: sighting.peripheral)
        try session.write(data, to: found, type: withoutResponse ? .withoutResponse : .withResponse)
        emit("wrote \(GATTDescription.hex(data)) to \(uuid.uuidString)\(withoutResponse ? " (without response)" : "")")
    }
}

/// `cbtool subscribe`: notifications or indications as they come.
struct SubscribeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a characteristic and print each value it notifies or indicates.",
        discussion: "Stops after --count values or --seconds, whichever comes first. Example: cbtool subscribe HeartRate 2A37 --count 5")

    @OptionGroup var target: TargetOptions
    @Argument(help: ArgumentHelp("The characteristic's UUID.", valueName: "characteristic"))
    var characteristic: String
    @Option(name: .long, help: "Stop after this many values.")
    var count: Int?
    @Option(name: .customLong("seconds"), help: "Stop after this many seconds (default: 30 without --count).")
    var duration: Double?
    @OptionGroup var central: CentralOptions

    func validate() throws {
        if let count, count <= 0 { throw ValidationError("--count must be positive") }
        if let duration, duration <= 0 { throw ValidationError("--seconds must be positive") }
    }

    func run() throws {
        let uuid = try InputParsing.uuid(characteristic)
        let session = try central.makeSession()
        let sighting = try target.connect(session)
        defer { session.disconnect(sighting.peripheral) }
        let found = try session.characteristic(uuid, of: sighting.peripheral)
        let print = ToolContext.current.print
        let received = Counter()
        session.onValue = { characteristic, value, error in
            guard characteristic === found, let value, error == nil else { return }
            received.increment()
            print(GATTDescription.value(value, of: uuid))
        }
        try session.setNotify(true, for: found)
        progress("subscribed to \(uuid.uuidString)")
        let seconds = duration ?? (count == nil ? 30 : 3600)
        let limit = count
        ToolContext.current.wait(seconds: seconds) { [peripheral = sighting.peripheral] in
            (limit.map { received.value >= $0 } ?? false) || !session.isConnected(peripheral)
        }
        session.onValue = nil
        if !session.isConnected(sighting.peripheral) { throw ToolError("the device disconnected") }
        try? session.setNotify(false, for: found)
    }
}

/// A count other threads bump.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}
