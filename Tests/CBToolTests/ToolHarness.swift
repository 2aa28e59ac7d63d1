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

    func context(radio: CBVirtualRadio?) -> ToolContext {
        ToolContext(print: { line in self.lock.withLock { self.outLines.append(line) } },
                    error: { line in self.lock.withLock { self.errLines.append(line) } },
                    radio: radio, isTerminal: false)
    }

    /// Runs `arguments` on `radio` (nil: the tool's default radio).
    @discardableResult
    static func run(_ arguments: [String], radio: CBVirtualRadio?) -> CapturedRun {
        let run = CapturedRun()
        run.status = CBToolRunner.run(arguments, context: run.context(radio: radio))
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
