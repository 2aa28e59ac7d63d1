import Logging
import Scheduling
import StackLogging

/// A test double for the stack's logging: a ``StackLogging`` whose loggers record every record
/// (label, level, message, metadata) here instead of printing it; no `LoggingSystem.bootstrap`,
/// so tests running at once each keep their own records.
public final class LogCapture: Sendable {
    public struct Record: Sendable, CustomStringConvertible {
        public let label: String
        public let level: Logger.Level
        public let message: String
        public let metadata: Logger.Metadata

        /// The record as one line: level, label, metadata (sorted) and message.
        public var description: String {
            let tags = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            return "\(level) \(label) [\(tags)] \(message)"
        }
    }

    private let storage = Locked<[Record]>([])
    /// The level the loggers start at (`.trace`: everything).
    public let level: Logger.Level

    public init(level: Logger.Level = .trace) { self.level = level }

    /// Loggers recording here, for the objects under test.
    public var logging: StackLogging {
        StackLogging(level: level) { [self] label in Handler(label: label, capture: self) }
    }

    /// A logger for `layer` recording here.
    public func logger(_ layer: LogLayer) -> Logger { logging.logger(layer) }

    /// Every record so far, oldest first.
    public var records: [Record] { storage.current }

    /// Every record as one line each (``Record/description``): what a search for bytes that must
    /// never be logged reads.
    public var text: String { records.map(\.description).joined(separator: "\n") }

    func append(_ record: Record) { storage.withLock { $0.append(record) } }

    struct Handler: LogHandler {
        let label: String
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append(Record(label: label, level: event.level, message: "\(event.message)", metadata: merged))
        }
    }
}
