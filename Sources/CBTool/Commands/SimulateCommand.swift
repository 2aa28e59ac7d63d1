import ArgumentParser
import CoreBluetooth
import Foundation

/// `cbtool simulate`: peripherals from JSON specs.
struct SimulateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run simulated peripherals described in JSON specs (one CBPeripheralManager each).",
        discussion: """
            A spec gives the advertised name and services, the GATT tree (services, characteristics with \
            properties, permissions, initial values, descriptors), periodic notifications, how it pairs and a \
            position on the virtual radio; see specs/*.json. Permissions readEncryptionRequired and \
            writeEncryptionRequired (properties notifyEncryptionRequired, indicateEncryptionRequired) make \
            a central pair first; "pairing": {"io": "display"} shows a passkey in the log. Specs from `cbtool record` \
            and `cbtool spec-from-capture` add the recorded advertising bytes, notification sequences replayed \
            with their timing from each subscription, and write effects. Runs until interrupted or --seconds. To be seen by other \
            processes, share a radio: cbtool radio --listen /tmp/r.sock, then CB_TRANSPORT=virtual:/tmp/r.sock.
            Example: cbtool simulate specs/heart-rate.json specs/echo-server.json
            """)

    @Argument(help: ArgumentHelp("Spec files (JSON).", valueName: "spec.json"))
    var specs: [String]
    @Option(name: .long, help: "Stop after this many seconds (default: run until interrupted).")
    var seconds: Double?
    @Option(name: .long, help: ArgumentHelp("The controller, as CB_TRANSPORT takes it.", valueName: "spec"))
    var transport: String?
    @Option(name: .long, help: ArgumentHelp("Where the controller's bonds are kept (default: CB_BOND_DIR; a virtual controller keeps them in memory unless one is named).",
                                            valueName: "path"))
    var bondDir: String?

    func validate() throws {
        guard !specs.isEmpty else { throw ValidationError("give at least one spec file") }
        if let seconds, seconds <= 0 { throw ValidationError("--seconds must be positive") }
    }

    func run() throws {
        let loaded = try specs.map(PeripheralSpec.load(path:))
        try CentralOptions.checkTransport(transport)
        let context = ToolContext.current
        let peripherals = loaded.map { SimulatedPeripheral(spec: $0, context: context, transport: transport, bondDirectory: bondDir) }
        defer { peripherals.forEach { $0.stop() } }
        let started = context.wait(seconds: 10) {
            peripherals.allSatisfy(\.isAdvertising) || peripherals.contains { $0.problem != nil }
        }
        if let problem = peripherals.lazy.compactMap(\.problem).first { throw ToolError(problem) }
        guard started else { throw ToolError("the peripherals did not start advertising in 10 s") }
        emit("simulating \(loaded.map(\.name).joined(separator: ", "))\(seconds == nil ? " (Ctrl-C stops)" : "")")
        if let seconds {
            context.wait(seconds: seconds) { false }
        } else {
            while true { context.wait(seconds: 3600) { false } }
        }
    }
}
