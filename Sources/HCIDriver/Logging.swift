/// How much a driver log message matters.
public enum HCILogLevel: Int, Comparable, Sendable {
    case debug, info, warning, error
    public static func < (a: HCILogLevel, b: HCILogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where the driver's diagnostics go. A plain closure keeps the driver free of logging
/// dependencies; the default, `.silent`, drops everything without building the messages.
public struct HCILogger: Sendable {
    public var minimumLevel: HCILogLevel
    public var sink: (@Sendable (HCILogLevel, String) -> Void)?

    public init(minimumLevel: HCILogLevel = .info, _ sink: @escaping @Sendable (HCILogLevel, String) -> Void) {
        self.minimumLevel = minimumLevel
        self.sink = sink
    }

    private init() {
        minimumLevel = .error
        sink = nil
    }

    public static let silent = HCILogger()

    /// Builds the message only when it will be written.
    public func log(_ level: HCILogLevel, _ message: @autoclosure () -> String) {
        guard let sink, level >= minimumLevel else { return }
        sink(level, message())
    }
}
