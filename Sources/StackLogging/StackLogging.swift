import Foundation
import Logging
import Scheduling

/// The stack's layers that log, one `Logger` label each (`corebluetooth.hci`, …). A message goes
/// to the layer it is about: an ATT timeout to `att` whichever object noticed it.
public enum LogLayer: String, Sendable, CaseIterable {
    /// The host side of HCI and the LE host: commands, connections, disconnections, ACL.
    case hci
    /// The virtual controller and the virtual radio.
    case controller
    case l2cap
    case att
    case gatt
    /// The Security Manager, pairing and the bond store (never a key or a passkey).
    case smp
    /// Core Bluetooth's API and the role services under it (API misuse, unusable devices).
    case api
    /// corebluetoothd: its clients and their sessions.
    case daemon

    /// The `Logger` label: `corebluetooth.` and the layer. Literals, so that a logger's label
    /// allocates nothing (an interpolated one was a heap string per logger).
    public var label: String {
        switch self {
        case .hci: "corebluetooth.hci"
        case .controller: "corebluetooth.controller"
        case .l2cap: "corebluetooth.l2cap"
        case .att: "corebluetooth.att"
        case .gatt: "corebluetooth.gatt"
        case .smp: "corebluetooth.smp"
        case .api: "corebluetooth.api"
        case .daemon: "corebluetooth.daemon"
        }
    }
}

/// Where the stack's loggers come from: the process's logging system (what an app bootstrapped
/// with `LoggingSystem.bootstrap`, else swift-log's standard-error handler) or, for a test, a
/// handler of its own; and the level they start at. The library never bootstraps: an app or a
/// tool does, once per process (`bootstrapStandardError` for ours).
///
/// Objects that log take one of these (``standard`` unless told otherwise) and make their
/// loggers when they are made, a link's with its connection's metadata: nothing per packet.
public struct StackLogging: Sendable {
    /// The level every logger made here starts at.
    public var level: Logger.Level
    private let factory: (@Sendable (String) -> any LogHandler)?

    /// Loggers from `factory` (nil: the logging system's), starting at `level`.
    public init(level: Logger.Level = StackLogging.defaultLevel, factory: (@Sendable (String) -> any LogHandler)? = nil) {
        self.level = level
        self.factory = factory
    }

    /// The logging system's handlers at ``defaultLevel``, read when this is called.
    public static var standard: StackLogging { StackLogging() }

    /// A logger for `layer`.
    public func logger(_ layer: LogLayer) -> Logger {
        var logger: Logger
        if let factory {
            logger = Logger(label: layer.label, factory: { (label: String) -> any LogHandler in factory(label) })
        } else {
            logger = Logger(label: layer.label)
        }
        logger.logLevel = level
        return logger
    }

    /// A logger for `layer` about one link: `connection` (the handle, `0x0040`), and `peer` and
    /// `role` where known. Made once per link, never per packet.
    public func logger(_ layer: LogLayer, connection handle: UInt16, peer: String? = nil, role: String? = nil) -> Logger {
        var logger = logger(layer)
        logger.attach(connection: handle, peer: peer, role: role)
        return logger
    }

    // MARK: - The level

    /// The level the stack's loggers start at: `CB_LOG`'s (``level(cbLog:)``), else
    /// ``fallbackLevel`` (`.error`: only why a manager has no usable device, as before loggers).
    public static var defaultLevel: Logger.Level { environmentLevel ?? fallbackLevel }

    /// `CB_LOG` as this process started with it; nil when unset or empty.
    public static let environmentLevel: Logger.Level? = level(cbLog: ProcessInfo.processInfo.environment["CB_LOG"])

    /// The level when `CB_LOG` is unset: `.error` unless the process changes it before it makes
    /// its managers (corebluetoothd says `.info`, an app wanting the stack's connection logs in
    /// its own handler says `.info` or `.debug`).
    public static var fallbackLevel: Logger.Level {
        get { fallback.current }
        set { fallback.withLock { $0 = newValue } }
    }
    private static let fallback = Locked<Logger.Level>(.error)

    /// What `CB_LOG` means: unset or empty → nil (the default); `0` → `.critical` (quiet: not
    /// even why a device is unusable, for a tool that reports it itself); a level's name
    /// (`trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`, any case) → that
    /// level; `1` or anything else → `.debug` (the stack's diagnostics, not its per-packet trace).
    public static func level(cbLog text: String?) -> Logger.Level? {
        guard let text = text?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        if text == "0" { return .critical }
        return Logger.Level(rawValue: text.lowercased()) ?? .debug
    }

    /// For an executable's start (never the library's): every logger of the process writes to
    /// standard error, from ``defaultLevel``. Call it once, before anything logs.
    public static func bootstrapStandardError() {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = defaultLevel
            return handler
        }
    }
}

/// What the loggers of one link share: where they come from and the link's metadata
/// (`connection`, `peer`, `role`). One per link, referenced by each of its layers, which make
/// their `Logger` from it only when they first log (``LazyLogger``): a `Logger` with metadata is
/// a handler, a dictionary and strings, several hundred bytes, and a fleet of thousands of links
/// that never log should not pay that for each layer on each end.
public final class LinkLogContext: Sendable {
    public let logging: StackLogging
    public let connection: UInt16
    /// Described (`"\(peer)"`) when a logger is made, not before.
    public let peer: (any CustomStringConvertible & Sendable)?
    public let role: String?

    /// `role`: `"central"` or `"peripheral"` (literals: nothing to allocate).
    public init(logging: StackLogging, connection handle: UInt16, peer: (any CustomStringConvertible & Sendable)?, role: String?) {
        self.logging = logging
        self.connection = handle
        self.peer = peer
        self.role = role
    }

    /// A logger for `layer` tagged with the link.
    public func logger(_ layer: LogLayer) -> Logger {
        logging.logger(layer, connection: connection, peer: peer.map { "\($0)" }, role: role)
    }
}

/// A layer's logger, made when first read: from a link's ``LinkLogContext`` (tagged with the
/// link) or from ``StackLogging/standard``. An object that logs keeps one of these and reads
/// `logger` from it; one that never logs never makes its `Logger`. Reading it is a switch once
/// made: nothing per packet.
public struct LazyLogger: Sendable {
    private enum Source: Sendable {
        case made(Logger)
        case link(LinkLogContext, LogLayer)
        case standard(LogLayer)
    }
    private var source: Source

    /// `logger` itself.
    public init(_ logger: Logger) { source = .made(logger) }
    /// `layer`'s logger of the link, made when first read.
    public init(_ layer: LogLayer, link: LinkLogContext) { source = .link(link, layer) }
    /// `layer`'s logger from ``StackLogging/standard`` (as it is when first read).
    public init(standard layer: LogLayer) { source = .standard(layer) }

    /// The logger, made now if it was not yet.
    public var logger: Logger {
        mutating get {
            switch source {
            case .made(let logger): return logger
            case .link(let link, let layer):
                let made = link.logger(layer)
                source = .made(made)
                return made
            case .standard(let layer):
                let made = StackLogging.standard.logger(layer)
                source = .made(made)
                return made
            }
        }
        set { source = .made(newValue) }
    }

    /// Whether a message at `level` would be logged, without making the logger: a message at
    /// a level that is off should not make a link's `Logger` (a GATT discovery's normal end,
    /// an error response, made one on every link of a fleet).
    public func allows(_ level: Logger.Level) -> Bool {
        switch source {
        case .made(let logger): logger.logLevel <= level
        case .link(let link, _): link.logging.level <= level
        case .standard: StackLogging.defaultLevel <= level
        }
    }
}

extension Logger {
    /// Tags this logger with a link: `connection` (`0x0040`), and `peer`, `role` where given.
    public mutating func attach(connection handle: UInt16, peer: String? = nil, role: String? = nil) {
        self[metadataKey: "connection"] = .string(Self.hex(handle))
        if let peer { self[metadataKey: "peer"] = .string(peer) }
        if let role { self[metadataKey: "role"] = .string(role) }
    }

    /// `0x0040`: a handle, a CID or a PSM as the logs write them.
    public static func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
