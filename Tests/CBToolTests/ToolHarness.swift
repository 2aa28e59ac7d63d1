import CBTool
import CoreBluetooth
import Foundation

/// Runs cbtool commands in-process with their output captured, on a test radio.
final class CapturedRun: @unchecked Sendable {
    private let lock = NSLock()
    private var outLines: [String] = []
    private var errLines: [String] = []
    var out: [String] { lock.withLock { outLines } }
    var err: [String] { lock.withLock { errLines } }
    var output: String { out.joined(separator: "\n") }
    private(set) var status: Int32 = -1

    /// `input` stands for stdin: the user's lines (none by default: a test never reads the real one).
    func context(radio: CBVirtualRadio?, input: @escaping @Sendable () -> String? = { nil }) -> ToolContext {
        ToolContext(print: { line in self.lock.withLock { self.outLines.append(line) } },
                    error: { line in self.lock.withLock { self.errLines.append(line) } },
                    radio: radio, isTerminal: false, readLine: input)
    }

    /// Runs `arguments` on `radio` (nil: the tool's default radio), with `input` as stdin.
    @discardableResult
    static func run(_ arguments: [String], radio: CBVirtualRadio?,
                    input: @escaping @Sendable () -> String? = { nil }) -> CapturedRun {
        let run = CapturedRun()
        run.status = CBToolRunner.run(arguments, context: run.context(radio: radio, input: input))
        return run
    }

    /// The lines of ours on the error stream that are errors ("cbtool: …").
    var errors: [String] { err.filter { $0.hasPrefix("cbtool: ") } }
}

enum Repository {
    /// The package root (this file is Tests/CBToolTests/ToolHarness.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func spec(_ name: String) -> String { root.appendingPathComponent("specs/\(name)").path }
}

/// Lines logged from other threads (a simulated peripheral's), which a test can wait for: the
/// wait wakes on each line, bounded in wall time, never by sleeping.
final class LogWatcher: @unchecked Sendable {
    private let condition = NSCondition()
    private var lines: [String] = []

    var all: [String] {
        condition.lock()
        defer { condition.unlock() }
        return lines
    }

    @Sendable func append(_ line: String) {
        condition.lock()
        lines.append(line)
        condition.broadcast()
        condition.unlock()
    }

    /// The first line containing `text`, waiting up to `seconds` of wall time for it.
    func line(containing text: String, seconds: Double) -> String? {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let line = lines.first(where: { $0.contains(text) }) { return line }
            if !condition.wait(until: deadline) { return lines.first { $0.contains(text) } }
        }
    }
}
