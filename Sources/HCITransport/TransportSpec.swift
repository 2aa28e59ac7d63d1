import Foundation

/// Which transport to use, as one string (the `CB_TRANSPORT` environment variable, a command
/// line option):
///
/// | string | transport |
/// | --- | --- |
/// | `virtual` | our virtual controller on an in-process radio |
/// | `virtual:PATH` | our virtual controller on a shared radio at Unix socket PATH |
/// | `tcp:HOST:PORT` | H4 over TCP (`tcp:[::1]:PORT` for IPv6) |
/// | `unix:PATH` | H4 over a Unix stream socket |
/// | `serial:DEVICE[:BAUD][:noflow]` | H4 over a UART, RTS/CTS on unless `noflow` |
/// | `hci:N` or `hciN` | Linux adapter N through the HCI user channel |
public enum TransportSpec: Hashable, Sendable, CustomStringConvertible {
    case virtual(path: String?)
    case tcp(host: String, port: UInt16)
    case unix(path: String)
    case serial(device: String, baudRate: Int, flowControl: Bool)
    case hci(index: UInt16)

    /// The accepted forms, for error messages.
    public static let acceptedForms =
        "virtual, virtual:PATH, tcp:HOST:PORT, tcp:[IPv6]:PORT, unix:PATH, "
        + "serial:DEVICE[:BAUD][:noflow], hci:N or hciN"

    public init(parsing text: String) throws {
        func bad(_ why: String) -> HCITransportError {
            HCITransportError("bad transport \"\(text)\": \(why); accepted forms: \(Self.acceptedForms)")
        }
        let (scheme, rest): (Substring, Substring?) =
            if let colon = text.firstIndex(of: ":") {
                (text[..<colon], text[text.index(after: colon)...])
            } else {
                (text[...], nil)
            }

        switch scheme {
        case "virtual":
            if let rest, rest.isEmpty { throw bad("empty radio socket path") }
            self = .virtual(path: rest.map(String.init))

        case "tcp":
            guard let rest, let colon = rest.lastIndex(of: ":") else { throw bad("expected tcp:HOST:PORT") }
            var host = rest[..<colon]
            let portText = rest[rest.index(after: colon)...]
            if host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 {
                host = host.dropFirst().dropLast()
            } else if host.contains(":") {
                throw bad("write an IPv6 address in brackets, as tcp:[::1]:PORT")
            }
            guard !host.isEmpty else { throw bad("missing host") }
            guard let port = UInt16(portText), port > 0 else { throw bad("port must be 1–65535") }
            self = .tcp(host: String(host), port: port)

        case "unix":
            guard let rest, !rest.isEmpty else { throw bad("expected unix:PATH") }
            self = .unix(path: String(rest))

        case "serial":
            guard let rest, !rest.isEmpty else { throw bad("expected serial:DEVICE") }
            var parts = rest.split(separator: ":", omittingEmptySubsequences: false)
            var flowControl = true
            if parts.count > 1, parts.last == "noflow" {
                flowControl = false
                parts.removeLast()
            }
            var baudRate = SerialTransport.defaultBaudRate
            if parts.count > 1, let last = parts.last, let rate = Int(last) {
                guard SerialTransport.speeds[rate] != nil else {
                    throw bad("unsupported baud rate \(rate); use one of "
                        + SerialTransport.supportedBaudRates.map(String.init).joined(separator: ", "))
                }
                baudRate = rate
                parts.removeLast()
            }
            let device = parts.joined(separator: ":")
            guard !device.isEmpty else { throw bad("missing serial device") }
            self = .serial(device: device, baudRate: baudRate, flowControl: flowControl)

        case "hci":
            guard let rest, let index = UInt16(rest) else { throw bad("expected hci:N with N a number") }
            self = .hci(index: index)

        default:
            // "hci0" and the like.
            if rest == nil, scheme.hasPrefix("hci"), let index = UInt16(scheme.dropFirst(3)) {
                self = .hci(index: index)
            } else {
                throw bad("unknown transport")
            }
        }
    }

    /// The name of the environment variable that selects the transport.
    public static let environmentVariable = "CB_TRANSPORT"

    /// The transport named by `CB_TRANSPORT`, or the in-process virtual controller when it is
    /// unset or empty.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> TransportSpec {
        guard let text = environment[environmentVariable]?.trimmingCharacters(in: .whitespaces),
              !text.isEmpty
        else { return .virtual(path: nil) }
        do {
            return try TransportSpec(parsing: text)
        } catch let error as HCITransportError {
            throw HCITransportError("\(environmentVariable): \(error.message)")
        }
    }

    /// Whether this names our virtual controller, which the VirtualController module builds.
    public var isVirtual: Bool {
        if case .virtual = self { true } else { false }
    }

    /// A transport to an outside controller. Throws for `.virtual`, which the caller builds
    /// itself, and for a serial rate the port doesn't support. Nothing is opened yet.
    public func makeExternalTransport() throws -> HCITransport {
        switch self {
        case .virtual:
            throw HCITransportError("\(self) is the virtual controller: build it with the VirtualController module")
        case .tcp(let host, let port):
            return TCPTransport(host: host, port: port)
        case .unix(let path):
            return UnixSocketTransport(path: path)
        case .serial(let device, let baudRate, let flowControl):
            return try SerialTransport(device: device, baudRate: baudRate, flowControl: flowControl)
        case .hci(let index):
            return HCIUserChannelTransport(index: index)
        }
    }

    /// The string form, which parses back to the same spec.
    public var description: String {
        switch self {
        case .virtual(nil): "virtual"
        case .virtual(let path?): "virtual:\(path)"
        case .tcp(let host, let port): "tcp:\(Sockets.displayName(host: host, port: port))"
        case .unix(let path): "unix:\(path)"
        case .serial(let device, let baudRate, let flowControl):
            "serial:\(device):\(baudRate)" + (flowControl ? "" : ":noflow")
        case .hci(let index): "hci:\(index)"
        }
    }
}
