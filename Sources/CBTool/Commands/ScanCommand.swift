import ArgumentParser
import CoreBluetooth
import Foundation

/// `cbtool scan`: what is advertising around.
struct ScanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan and list devices: name, identifier, RSSI, services, manufacturer data, connectable.",
        discussion: """
            On a terminal the table is redrawn in place; piped, each report is a plain line, or a JSON \
            object per line with --json.
            Example: cbtool scan --seconds 5 --service 180D
            """)

    @Option(name: .long, help: "How long to scan.")
    var seconds: Double = 10
    @Option(name: .long, parsing: .upToNextOption, help: ArgumentHelp("Only devices advertising these services.", valueName: "uuid"))
    var service: [String] = []
    @Flag(name: .long, help: "Report every advertisement, not only new devices and changed data.")
    var duplicates = false
    @Flag(name: .long, help: "One JSON object per report.")
    var json = false
    @OptionGroup var central: CentralOptions

    func validate() throws {
        guard seconds > 0 else { throw ValidationError("--seconds must be positive") }
    }

    func run() throws {
        let services = try service.map(InputParsing.uuid)
        let session = try central.makeSession()
        let context = ToolContext.current
        let live = context.isTerminal && !json
        let asJSON = json
        if !live {
            session.onSighting = { sighting in
                context.print(asJSON ? Self.json(sighting) : Self.line(sighting))
            }
        }
        session.scan(services: services.isEmpty ? nil : services, duplicates: duplicates)
        progress("scanning for \(CentralSession.format(seconds)) s…")
        if live {
            var drawn = 0
            let start = Date()
            repeat {
                context.wait(seconds: min(0.5, seconds)) { false }
                drawn = redraw(session.sightings, over: drawn, context: context)
            } while Date().timeIntervalSince(start) < seconds && context.radio == nil
        } else {
            context.wait(seconds: seconds) { false }
        }
        session.stopScan()
        session.onSighting = nil
        let count = session.sightings.count
        progress("\(count) device\(count == 1 ? "" : "s") found")
    }

    /// Draws the table over the `previous` lines drawn before; returns how many it drew.
    private func redraw(_ sightings: [Sighting], over previous: Int, context: ToolContext) -> Int {
        var lines = [Self.pad("NAME", 20) + Self.pad("IDENTIFIER", 38) + Self.pad("RSSI", 6) + Self.pad("CONN", 5)
                     + Self.pad("SERVICES", 24) + "MANUFACTURER"]
        for s in sightings.sorted(by: { $0.rssi > $1.rssi }) {
            lines.append(Self.pad(s.name ?? "-", 20) + Self.pad(s.peripheral.identifier.uuidString, 38)
                         + Self.pad("\(s.rssi)", 6) + Self.pad(s.isConnectable ? "yes" : "no", 5)
                         + Self.pad(s.services.map(\.uuidString).joined(separator: ","), 24)
                         + (s.manufacturerData.map(GATTDescription.hex) ?? "-"))
        }
        var text = previous > 0 ? "\u{1B}[\(previous)A\u{1B}[J" : ""
        text += lines.joined(separator: "\n") + "\n"
        context.write(raw: text)
        return lines.count
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? String(text.prefix(width - 1)) + " " : text + String(repeating: " ", count: width - text.count)
    }

    static func line(_ s: Sighting) -> String {
        let services = s.services.map(\.uuidString).joined(separator: ",")
        return "\(s.name ?? "-")  \(s.peripheral.identifier.uuidString)  RSSI \(s.rssi)"
            + "  services \(services.isEmpty ? "-" : services)"
            + "  manufacturer \(s.manufacturerData.map { GATTDescription.hex($0).replacingOccurrences(of: " ", with: "") } ?? "-")"
            + "  \(s.isConnectable ? "connectable" : "not connectable")"
    }

    static func json(_ s: Sighting) -> String {
        let object: [String: Any] = [
            "name": s.name ?? NSNull(),
            "identifier": s.peripheral.identifier.uuidString,
            "rssi": s.rssi,
            "services": s.services.map(\.uuidString),
            "manufacturerData": s.manufacturerData.map { $0.map { String(format: "%02x", $0) }.joined() } ?? NSNull(),
            "connectable": s.isConnectable,
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
