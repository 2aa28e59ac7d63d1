import Foundation
import Scheduling

/// What tshark made of a capture.
public struct TsharkResult: Sendable {
    /// Frames tshark decoded.
    public var frameCount: Int
    /// Lines of the verbose dissection that mention a malformed packet.
    public var malformed: [String]
    /// Expert-info lines of severity Error (including malformed ones).
    public var expertErrors: [String]
    /// Each frame's protocol stack as tshark's `frame.protocols` (e.g. "bluetooth:hci_h4:bthci_acl:btl2cap:btatt").
    public var frameProtocols: [String]
    /// The full `tshark -V` output, for failure messages.
    public var verboseOutput: String
    /// Malformed frames our side wrote (sent to the controller): "N: summary".
    public var malformedSent: [String] = []
    /// Malformed frames the controller sent us (a peer's bytes, not ours): "N: summary".
    public var malformedReceived: [String] = []

    /// True when tshark decoded every frame without malformed packets or expert errors.
    public var isClean: Bool { malformed.isEmpty && expertErrors.isEmpty }
}

/// Why tshark couldn't check a capture.
public struct TsharkError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// Runs Wireshark's command-line dissector on captures our code writes, so that our bytes are
/// checked by an independent implementation of the specification.
public enum Tshark {
    /// The tshark executable: /usr/bin/tshark, or the first on PATH.
    public static func locate() -> String? {
        var candidates = ["/usr/bin/tshark"]
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        candidates += path.split(separator: ":").map { "\($0)/tshark" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Decodes the capture at `path` with `tshark -r PATH -V` and `-T fields -e frame.protocols`.
    /// Throws when tshark isn't installed or fails to read the file.
    public static func check(capture path: String) throws -> TsharkResult {
        guard let tshark = locate() else {
            throw TsharkError(description:
                "tshark is not installed: run `apt-get install -y tshark` (CI installs it)")
        }
        let verbose = try run(tshark, ["-r", path, "-V"])
        let protocols = try run(tshark, ["-r", path, "-T", "fields", "-e", "frame.protocols"])
        // btsnoop's direction flag: p2p_dir 0 = sent by the host, 1 = received.
        let malformedFrames = try run(tshark, ["-r", path, "-Y", "_ws.malformed", "-T", "fields",
                                               "-e", "frame.number", "-e", "frame.p2p_dir", "-e", "_ws.col.Info"])
            .split(separator: "\n").map { $0.split(separator: "\t", maxSplits: 2).map(String.init) }
            .filter { $0.count == 3 }

        let lines = verbose.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        // Each frame's dissection starts with an unindented "Frame N: …" line.
        let frameCount = lines.filter { $0.hasPrefix("Frame ") }.count
        let malformed = lines.filter { $0.localizedCaseInsensitiveContains("malformed") }
        let expertErrors = lines.filter { $0.contains("[Expert Info (Error") || $0.contains("Severity level: Error") }
        return TsharkResult(
            frameCount: frameCount,
            malformed: malformed.map { $0.trimmingCharacters(in: .whitespaces) },
            expertErrors: expertErrors.map { $0.trimmingCharacters(in: .whitespaces) },
            frameProtocols: protocols.split(separator: "\n").map(String.init),
            verboseOutput: verbose,
            malformedSent: malformedFrames.filter { $0[1] != "1" }.map { "\($0[0]): \($0[2])" },
            malformedReceived: malformedFrames.filter { $0[1] == "1" }.map { "\($0[0]): \($0[2])" })
    }

    /// `check(capture:)` for each ACL connection of the capture on its own (its ACL frames and
    /// every frame that is not ACL), results merged (frame numbers are the split files'). Use it
    /// for a capture with several GATT connections at once: tshark's ATT dissector keeps one
    /// handle-to-attribute map for the whole capture, so two databases at the same handles
    /// confuse it (a Write Request read as a characteristic declaration, "malformed"), while
    /// each connection's own traffic decodes clean.
    public static func checkEachConnection(capture path: String) throws -> TsharkResult {
        guard let tshark = locate() else {
            throw TsharkError(description: "tshark is not installed: run `apt-get install -y tshark` (CI installs it)")
        }
        let handles = Set(try run(tshark, ["-r", path, "-Y", "bthci_acl", "-T", "fields", "-e", "bthci_acl.chandle"])
            .split(separator: "\n").map(String.init)).sorted()
        guard handles.count > 1 else { return try check(capture: path) }
        var merged: TsharkResult?
        for handle in handles {
            let part = path + ".connection-\(handle).pcapng"
            defer { try? FileManager.default.removeItem(atPath: part) }
            _ = try run(tshark, ["-r", path, "-Y", "!bthci_acl || bthci_acl.chandle == \(handle)", "-w", part])
            let result = try check(capture: part)
            guard var total = merged else {
                merged = result
                continue
            }
            total.frameCount = max(total.frameCount, result.frameCount)
            total.malformed += result.malformed
            total.expertErrors += result.expertErrors
            total.malformedSent += result.malformedSent.map { "connection \(handle) \($0)" }
            total.malformedReceived += result.malformedReceived.map { "connection \(handle) \($0)" }
            merged = total
        }
        var result = merged!
        // Whole-capture figures for the rest.
        let whole = try check(capture: path)
        result.frameCount = whole.frameCount
        result.frameProtocols = whole.frameProtocols
        result.verboseOutput = whole.verboseOutput
        return result
    }

    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read both pipes to the end before waiting, so a large dissection can't fill a pipe
        // and stall tshark.
        let errorText = ErrorText()
        let errorsRead = DispatchSemaphore(value: 0)
        let errorReader = Thread {
            errorText.set(errors.fileHandleForReading.readDataToEndOfFile())
            errorsRead.signal()
        }
        errorReader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        errorsRead.wait()
        process.waitUntilExit()
        let stderrText = errorText.text
        guard process.terminationStatus == 0 else {
            throw TsharkError(description:
                "tshark \(arguments.joined(separator: " ")) exited with \(process.terminationStatus): \(stderrText)")
        }
        return String(decoding: outputData, as: UTF8.self)
    }
}

private final class ErrorText: Sendable {
    private let data = Locked(Data())
    func set(_ value: Data) { data.withLock { $0 = value } }
    var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }
}
