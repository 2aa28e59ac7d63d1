import ArgumentParser
import Foundation

/// `cbtool spec-from-capture`: the spec of a device, from a btsnoop capture of a session with it.
struct SpecFromCaptureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spec-from-capture",
        abstract: "Make a spec for `cbtool simulate` from a btsnoop capture of a session with a device.",
        discussion: """
            Reads the capture (Android's HCI snoop log, Wireshark's or btmon's btsnoop, CB_SNOOP or --snoop) \
            with the stack's decoders: the device's advertising and scan response from its advertising reports, \
            its services, characteristics and descriptors from the discovery responses, values from the read \
            responses (long reads put together), notifications and indications timed from the subscription, and \
            what a write changed in later reads. What the capture does not show is left out and listed on stderr. \
            A malformed or truncated capture is an error naming the record (numbered from 1, as Wireshark does).
            Example: cbtool spec-from-capture session.btsnoop -o device.json
            """)

    @Argument(help: ArgumentHelp("The btsnoop capture.", valueName: "capture.btsnoop"))
    var capture: String
    @Option(name: .long, help: ArgumentHelp("The device's address (default: the only device the capture connected to).",
                                            valueName: "address"))
    var device: String?
    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("Where to write the spec.", valueName: "spec.json"))
    var output: String

    func run() throws {
        guard let data = FileManager.default.contents(atPath: capture) else { throw ToolError("cannot read \(capture)") }
        let session: CaptureSession
        do {
            session = try CaptureReader.read([UInt8](data), device: device)
        } catch {
            throw ToolError("capture \(capture): \(error.description)")
        }
        let (spec, notes) = session.spec()
        if spec.services.isEmpty { throw ToolError("capture \(capture): no service of \(spec.name) to simulate (notes: \(notes.joined(separator: "; ")))") }
        try SpecText.write(spec, to: output)
        notes.forEach { progress("not in the spec: \($0)") }
        let count = spec.services.reduce(0) { $0 + ($1.characteristics?.count ?? 0) }
        let sequences = spec.services.flatMap { $0.characteristics ?? [] }.compactMap(\.notify?.sequence)
        emit("\(spec.name) (\(session.address.map(\.description) ?? "?")): \(spec.services.count) services, \(count) characteristics, "
             + "\(sequences.reduce(0) { $0 + $1.count }) notified values in \(sequences.count) sequences → \(output)")
    }
}
