import ArgumentParser
import Dispatch
import Foundation
import Scheduling
import StackLogging
import VirtualController

#if canImport(Glibc)
import Glibc
#endif

/// `cbtool radio --listen PATH`: one virtual radio for several processes.
struct RadioCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "radio",
        abstract: "Host the virtual radio on a Unix-domain socket, so that several processes share it.",
        discussion: """
            Managers join it with CB_TRANSPORT=virtual:PATH (or the CBManagerOptionLinuxTransportKey option). \
            The radio carries the link-layer PDUs between their controllers in real time, with RSSI from \
            their positions. Runs until interrupted or --seconds.
            Example: cbtool radio --listen /tmp/r.sock &
                     CB_TRANSPORT=virtual:/tmp/r.sock cbtool simulate specs/heart-rate.json &
                     CB_TRANSPORT=virtual:/tmp/r.sock cbtool scan --seconds 3
            """)

    @Option(name: .long, help: ArgumentHelp("The socket path to listen on.", valueName: "path"))
    var listen: String
    @Option(name: .long, help: "Air time model: instant or timed.")
    var airTime: AirTimeMode = .instant
    @Option(name: .long, help: "Stop after this many seconds (default: run until interrupted).")
    var seconds: Double?

    func run() throws {
        let mode = airTime
        let loop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { loop.shutdown() }
        let radio = VirtualRadio(loop: loop, airTime: mode, seed: UInt64.random(in: 1...UInt64.max))
        let server: RadioServer
        do { server = try RadioServer(path: listen, radio: radio) } catch { throw ToolError("\(error)") }
        defer { server.close() }
        let context = ToolContext.current
        // Processes joining and leaving are what this command shows: info unless CB_LOG says.
        server.logger = StackLogging(level: StackLogging.environmentLevel ?? .info).logger(.controller)
        emit("virtual radio listening on \(listen) (join it with CB_TRANSPORT=virtual:\(listen))")

        let done = DispatchSemaphore(value: 0)
        var sources: [DispatchSourceSignal] = []
        if context.radio == nil {
            // Ctrl-C and kill remove the socket file on the way out.
            for sig in [SIGINT, SIGTERM] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler { done.signal() }
                source.resume()
                sources.append(source)
            }
        }
        if let seconds {
            _ = done.wait(timeout: .now() + seconds)
        } else {
            done.wait()
        }
        sources.forEach { $0.cancel() }
    }
}
