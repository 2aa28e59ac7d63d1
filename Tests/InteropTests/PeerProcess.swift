import Foundation
import Testing
import TestSupport

/// Where the repository and its interop venv are.
enum Interop {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let python = repository.appendingPathComponent(".venv/bin/python").path
    static let peers = repository.appendingPathComponent("interop/peers")

    /// The venv's Python, or a recorded issue naming the setup step.
    static func requirePython(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the interop tests need Bumble: run `bash scripts/setup-interop.sh` (creates .venv)",
                         sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return python
    }
}

/// A peer program (Python on Bumble) run for one test: its output goes to a log file that is
/// kept (and printed) when the test fails, and it is killed when the test ends.
final class PeerProcess: @unchecked Sendable {
    let process = Process()
    let logPath: String
    private let input = Pipe()
    private let output = ChildOutput()

    init(script: String, arguments: [String]) throws {
        let python = try Interop.requirePython()
        logPath = temporaryPath("\(script)-\(UUID().uuidString.prefix(8)).log")
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-u", Interop.peers.appendingPathComponent(script).path] + arguments
        process.standardOutput = output.pipe
        process.standardError = output.pipe
        process.standardInput = input
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = FileHandle(forWritingAtPath: logPath)
        try process.run()
        output.start { data in log?.write(data) }
    }

    var text: String { output.text }

    /// Writes a line to the peer's standard input (peers driven step by step).
    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Sends `line` and waits for the peer to print a line starting with `answer`.
    @discardableResult
    func command(_ line: String, expect answer: String, timeout: Duration = .seconds(20)) -> Bool {
        let before = text.count
        send(line)
        return waitUntil(timeout: timeout) {
            String(self.text.dropFirst(before)).split(separator: "\n").contains { $0.hasPrefix(answer) } || !self.process.isRunning
        } && String(text.dropFirst(before)).split(separator: "\n").contains { $0.hasPrefix(answer) }
    }

    /// Waits (real time: this is another process) until the peer printed `line`, or it died.
    @discardableResult
    func waitFor(_ line: String, timeout: Duration = .seconds(20)) -> Bool {
        waitUntil(timeout: timeout) { self.text.contains(line) || !self.process.isRunning } && text.contains(line)
    }

    /// Stops the peer; records its log as a test issue when `failed`.
    func stop(failed: Bool = false) {
        if process.isRunning {
            // Bumble's asyncio loop can outlive SIGTERM; the peer holds nothing worth a clean exit.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if failed { Issue.record("peer log \(logPath):\n\(text)") }
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}
