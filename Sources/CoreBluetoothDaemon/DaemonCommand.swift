import DaemonProtocol
import Dispatch
import Foundation
import Glibc
import HCI
import HCIDriver
import HCITransport
import HostDevice
import Logging
import Scheduling
import StackLogging
import VirtualController

/// `corebluetoothd [--transport SPEC] [--listen PATH] [--on-event COMMAND]`: opens the
/// controller SPEC names (any `CB_TRANSPORT` value; `CB_TRANSPORT`, else `virtual`, when not
/// given) through one host device, and serves clients on the socket at PATH (default:
/// ``DaemonSocketPath``) until SIGINT or SIGTERM; COMMAND is started when an event arrives for
/// a restorable session no client holds (``DaemonEventCommand``). The executable is a thin
/// entry to this.
public enum DaemonCommand {
    public static let usage = """
        usage: corebluetoothd [--transport SPEC] [--listen PATH] [--on-event COMMAND]
        SIGUSR1 logs one status line (clients, kept sessions, links and their owners).
          --transport SPEC  the controller to own: any CB_TRANSPORT value (virtual:PATH, tcp:HOST:PORT,
                            unix:PATH, serial:DEVICE, hci:N); default $CB_TRANSPORT, else virtual
          --listen PATH     the socket clients connect to; default $XDG_RUNTIME_DIR/\(DaemonSocketPath.fileName),
                            /run/\(DaemonSocketPath.fileName) as root
          --on-event COMMAND
                            run `/bin/sh -c COMMAND` when an event arrives for a restorable session no
                            process holds (once, until a process takes it and goes again), with
                            CB_RESTORE_IDENTIFIER, CB_RESTORE_ROLE, CB_RESTORE_EVENT and CB_RESTORE_UID set
        """

    /// What the arguments ask for, or why they are wrong.
    public struct Options: Sendable, Equatable {
        public var transport: String
        public var listen: String
        /// `--on-event`'s command; nil: none.
        public var onEvent: String?

        public init(transport: String, listen: String, onEvent: String? = nil) {
            self.transport = transport
            self.listen = listen
            self.onEvent = onEvent
        }

        public static func parse(_ arguments: [String], environment: [String: String],
                                 uid: UInt32) -> Result<Options, DaemonServerError> {
            var transport = environment["CB_TRANSPORT"].flatMap { $0.isEmpty ? nil : $0 } ?? "virtual"
            var listen = DaemonSocketPath.defaultPath(environment: environment, uid: uid)
            var onEvent: String?
            var rest = arguments[...]
            while let argument = rest.popFirst() {
                switch argument {
                case "--transport", "--listen", "--on-event":
                    guard let value = rest.popFirst() else {
                        return .failure(DaemonServerError(description: "\(argument) needs a value"))
                    }
                    switch argument {
                    case "--transport": transport = value
                    case "--listen": listen = value
                    default:
                        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else {
                            return .failure(DaemonServerError(description: "--on-event needs a command"))
                        }
                        onEvent = value
                    }
                default:
                    return .failure(DaemonServerError(description: "unknown argument \(argument)"))
                }
            }
            guard let listen else {
                return .failure(DaemonServerError(description: "no XDG_RUNTIME_DIR to put the socket in: name one with --listen PATH"))
            }
            return .success(Options(transport: transport, listen: listen, onEvent: onEvent))
        }
    }

    /// Runs the daemon; returns only when it could not start (the exit status).
    public static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") {
            print(usage)
            return 0
        }
        let options: Options
        switch Options.parse(arguments, environment: ProcessInfo.processInfo.environment, uid: getuid()) {
        case .success(let parsed): options = parsed
        case .failure(let error):
            FileHandle.standardError.write(Data("corebluetoothd: \(error)\n\(usage)\n".utf8))
            return 2
        }
        // Ignored until the status line can be made (the default would end the daemon).
        Glibc.signal(SIGUSR1, SIG_IGN)
        let logger = StackLogging.standard.logger(.daemon)
        let opened: (HostDevice, AnyObject?)
        do {
            opened = try openDevice(options.transport)
        } catch {
            logger.error("\(options.transport): \(error)")
            return 1
        }
        let device = opened.0
        let started = Locked<Result<LEAddress, HCIError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        device.loop.execute {
            device.start { result in
                started.withLock { $0 = result }
                done.signal()
            }
        }
        done.wait()
        guard case .success(let address) = started.current else {
            logger.error("\(options.transport): the controller did not start: \(started.current.map { "\($0)" } ?? "?")")
            return 1
        }
        let server: DaemonServer
        do {
            server = try DaemonServer(path: options.listen, device: device,
                                      onEvent: options.onEvent.map { DaemonEventCommand(command: $0) })
        } catch {
            logger.error("\(error)")
            return 1
        }
        logger.info("serving \(options.transport) (\(address)) on \(options.listen)")
        let keep = Unchecked((opened.1, server))
        for signal in [SIGINT, SIGTERM] {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .main)
            source.setEventHandler {
                keep.value.1.close()
                exit(0)
            }
            source.resume()
            signalSources.withLock { $0.append(Unchecked(source)) }
        }
        // SIGUSR1: one line of what the daemon holds (clients, links and their owners…), on
        // stderr whatever CB_LOG says (asked for, not a diagnostic); the process tests read it
        // to find what a client left behind.
        let status = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .main)
        status.setEventHandler { keep.value.1.status { FileHandle.standardError.write(Data("corebluetoothd: \($0)\n".utf8)) } }
        status.resume()
        signalSources.withLock { $0.append(Unchecked(status)) }
        dispatchMain()
    }

    /// The signal sources, alive as long as the process.
    private static let signalSources = Locked<[Unchecked<any DispatchSourceSignal>]>([])

    /// The host device on the controller `text` names, and what must stay alive with it (a
    /// virtual controller).
    static func openDevice(_ text: String) throws -> (HostDevice, AnyObject?) {
        let spec = try TransportSpec(parsing: text)
        switch spec {
        case .virtual(let path?):
            let proxy = try RadioProxy(path: path)
            // The handshake runs on the socket's thread: attach the controller once joined (and
            // the radio has numbered this process). This runs at start-up, off any loop.
            try proxy.waitUntilJoined()
            // Unique on the shared radio: the number the radio gave this process.
            let controller = VirtualController(radio: proxy, address: BluetoothAddress(value: 0xCB_D0_00_00_00_00 | UInt64(proxy.client) << 8 | 1))
            return (HostDevice(transport: controller.makeHostTransport(), loop: proxy.loop, deviceName: "corebluetoothd"),
                    controller)
        case .virtual(nil):
            let loop = EventLoop(name: "corebluetoothd", pacing: .realTime)
            let controller = VirtualController(radio: VirtualRadio(loop: loop, seed: UInt64(getpid())),
                                               address: BluetoothAddress(value: 0xCB_D0_00_00_00_01))
            return (HostDevice(transport: controller.makeHostTransport(), loop: loop, deviceName: "corebluetoothd"),
                    controller)
        default:
            let loop = EventLoop(name: "corebluetoothd \(spec)", pacing: .realTime)
            return (HostDevice(transport: try spec.makeExternalTransport(), loop: loop, deviceName: "corebluetoothd"), nil)
        }
    }
}

/// A value the compiler cannot prove Sendable, handed across threads once and then only read
/// (the daemon's server and controller, kept alive by the signal handler).
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
