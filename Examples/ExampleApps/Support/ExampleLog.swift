import Foundation

/// Where an example writes what it does, one line at a time, as the book's apps print to the
/// console: printed by the executables, kept for the tests to read.
public final class ExampleLog: Sendable {
    private let lines = Protected<[String]>([])
    private let printing: Bool
    private let prefix: String

    /// `printing`: also print each line (with `prefix`, e.g. "[peripheral] ").
    public init(printing: Bool = false, prefix: String = "") {
        self.printing = printing
        self.prefix = prefix
    }

    public func callAsFunction(_ line: String) {
        lines.update { $0.append(line) }
        if printing { print(prefix + line) }
    }

    /// Every line so far.
    public var all: [String] { lines.value }

    public func contains(_ line: String) -> Bool { all.contains(line) }
}
