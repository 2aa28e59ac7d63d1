import Dispatch
import Foundation

/// What an option's value must be.
public enum ExampleOption: Sendable {
    /// A whole number in the range.
    case int(ClosedRange<Int>)
    /// A finite number in the range.
    case number(ClosedRange<Double>)
    /// `X,Y` in metres, each within ±10 km.
    case point
    /// Any text.
    case text
}

/// A bad command line: what is wrong, for one line on stderr.
public struct ExampleUsageError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// The examples' command lines: `--name VALUE` options, `--flag`s and positional words. Every
/// value is checked when parsed, so a bad argument gets a one-line error and the usage (exit
/// status 2), never a crash.
public struct ExampleCommandLine: Sendable {
    public let usage: String
    private var values: [String: String] = [:]
    private var flags: Set<String> = []
    /// The words that are not options.
    public private(set) var positional: [String] = []

    /// Parses the process's arguments; on an error prints it with the usage and exits with
    /// status 2. `--help` prints the usage and exits.
    public init(usage: String, options: [String: ExampleOption] = [:], flags: [String] = []) {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") {
            print("usage: \(usage)")
            exit(0)
        }
        do {
            self = try Self.parse(arguments, usage: usage, options: options, flags: flags)
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\nusage: \(usage)\n".utf8))
            exit(2)
        }
    }

    private init(usage: String) { self.usage = usage }

    /// Parses `arguments`, checking every option's value.
    public static func parse(_ arguments: [String], usage: String = "", options: [String: ExampleOption] = [:],
                             flags knownFlags: [String] = []) throws(ExampleUsageError) -> ExampleCommandLine {
        var line = ExampleCommandLine(usage: usage)
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if knownFlags.contains(word) {
                line.flags.insert(word)
            } else if let kind = options[word] {
                guard index < arguments.count else { throw ExampleUsageError(description: "\(word) needs a value") }
                let value = arguments[index]
                index += 1
                guard Self.isValid(value, kind) else {
                    throw ExampleUsageError(description: "\(word) must be \(Self.describe(kind)), not \(value.debugDescription)")
                }
                line.values[word] = value
            } else if word.hasPrefix("--") {
                throw ExampleUsageError(description: "unknown option \(word)")
            } else {
                line.positional.append(word)
            }
        }
        return line
    }

    private static func isValid(_ value: String, _ kind: ExampleOption) -> Bool {
        switch kind {
        case .int(let range): Int(value).map(range.contains) ?? false
        case .number(let range): Double(value).map { $0.isFinite && range.contains($0) } ?? false
        case .point: pointValue(value) != nil
        case .text: true
        }
    }

    private static func describe(_ kind: ExampleOption) -> String {
        switch kind {
        case .int(let range): "a whole number from \(range.lowerBound) to \(range.upperBound)"
        case .number(let range): "a number from \(range.lowerBound) to \(range.upperBound)"
        case .point: "X,Y in metres"
        case .text: "text"
        }
    }

    private static func pointValue(_ text: String) -> Point? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let x = parts[0], let y = parts[1], x.isFinite, y.isFinite,
              abs(x) <= 10_000, abs(y) <= 10_000 else { return nil }
        return Point(x: x, y: y)
    }

    public func flag(_ name: String) -> Bool { flags.contains(name) }

    public func string(_ name: String, default value: String) -> String { values[name] ?? value }

    /// An `.int` option's value (checked when parsed).
    public func int(_ name: String, default value: Int) -> Int { values[name].flatMap { Int($0) } ?? value }

    /// A `.number` option's value (checked when parsed).
    public func double(_ name: String, default value: Double) -> Double { values[name].flatMap { Double($0) } ?? value }

    /// A `.point` option's value (checked when parsed).
    public func point(_ name: String, default value: Point) -> Point { values[name].flatMap(Self.pointValue) ?? value }
}

/// Running an example's executable: callbacks come on the main queue (the managers' `queue: nil`,
/// as in the book), so the program serves it until the example is done or `timeout` passes.
public enum ExampleMain {
    /// Serves the main queue; exits with status 1 after `timeout` seconds (nil: never).
    public static func run(timeout: Double?) -> Never {
        if let timeout {
            DispatchQueue.main.asyncAfter(deadline: .now() + timeout) {
                FileHandle.standardError.write(Data("error: timed out after \(Int(timeout)) s\n".utf8))
                exit(1)
            }
        }
        dispatchMain()
    }

    /// What a finished central's executable calls: exit 0, or 1 with its failure.
    public static func finish(_ failure: String? = nil) -> Never {
        if let failure {
            FileHandle.standardError.write(Data("error: \(failure)\n".utf8))
            exit(1)
        }
        exit(0)
    }

    /// The log of a peripheral the example started itself, in this process.
    public static func peerLog() -> ExampleLog { ExampleLog(printing: true, prefix: "[in-process peripheral] ") }
}
