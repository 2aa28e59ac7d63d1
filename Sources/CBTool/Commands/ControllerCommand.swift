import ArgumentParser
import Foundation
import HCI
import HCITransport
import Scheduling
import VirtualController

/// Serves virtual controllers, all on one virtual radio, as H4 TCP servers.
struct ControllerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "controller",
        abstract: "Serve virtual LE controllers over H4 TCP (one per --listen, all on one radio).",
        discussion: """
            Any host that speaks H4 over TCP can drive them: ours (CB_TRANSPORT=tcp:HOST:PORT),
            Bumble's (transport tcp-client:HOST:PORT), and so on. Runs until interrupted.
            Example: cbtool controller --listen 127.0.0.1:9001 --listen 127.0.0.1:9002
            """
    )

    @Option(name: .long, help: "HOST:PORT to listen on (repeat for more controllers; port 0 picks one).")
    var listen: [String] = ["127.0.0.1:0"]

    @Option(name: .long, help: "Air time model: instant or timed.")
    var airTime: AirTimeMode = .instant

    @Option(name: .long, help: "Stop after this many seconds (default: run until interrupted).")
    var seconds: Double?

    func run() throws {
        let mode = airTime
        let loop = EventLoop(name: "radio", pacing: .realTime)
        let radio = VirtualRadio(loop: loop, airTime: mode, seed: UInt64(UInt32.random(in: 1...UInt32.max)))
        var servers: [H4TCPServer] = []
        for (index, spec) in listen.enumerated() {
            guard let colon = spec.lastIndex(of: ":"), let port = UInt16(spec[spec.index(after: colon)...]) else {
                throw ToolError("--listen wants HOST:PORT, not \(spec)")
            }
            let host = String(spec[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            // A static random address per controller, distinct on the radio.
            let address = BluetoothAddress(value: 0xC0_00_00_00_00_00 | UInt64(UInt32.random(in: 0...UInt32.max)) << 8 | UInt64(index))
            let controller = VirtualController(radio: radio, address: address,
                                               position: RadioPosition(x: Double(index)))
            let server: H4TCPServer
            do {
                server = try H4TCPServer(host: host, port: port) { transport in controller.attachHost(transport) }
            } catch {
                throw ToolError("cannot listen on \(spec): \(error)")
            }
            servers.append(server)
            emit("virtual controller \(address) listening on \(host):\(server.port)")
        }
        if let seconds {
            Thread.sleep(forTimeInterval: seconds)
        } else {
            while true { Thread.sleep(forTimeInterval: 3600) }
        }
        servers.forEach { $0.close() }
        loop.shutdown()
    }
}
