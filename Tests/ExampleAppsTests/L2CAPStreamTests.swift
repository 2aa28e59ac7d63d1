import ExampleApps
import Foundation
import TestTools
import Testing

/// `swift run L2CAPStream` as a user runs it: an iOS-style program on the default radio with
/// its delegates on the main queue and its streams on the main run loop — which only a process
/// of its own has (under `swift test` nothing runs the main run loop).
@Suite struct L2CAPStreamTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func sixtyFourKiBComeBackThroughTheEchoThenTheUnpublishedPSMIsRefused() throws {
        let capture = temporaryPath("l2cap-stream.btsnoop")
        // The second device of the process (the central) writes NAME-2.EXT.
        let centralCapture = capture.replacingOccurrences(of: ".btsnoop", with: "-2.btsnoop")
        defer {
            try? FileManager.default.removeItem(atPath: capture)
            try? FileManager.default.removeItem(atPath: centralCapture)
        }
        let process = Process()
        process.executableURL = URL(
            fileURLWithPath: BuiltProducts.path("L2CAPStream", fallback: Self.root.appendingPathComponent(".build/debug/L2CAPStream")))
        process.arguments = ["--bytes", "65536"]
        var environment = ProcessInfo.processInfo.environment
        environment["CB_SNOOP"] = capture
        environment["CB_TRANSPORT"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // The program ends itself: done, or failed after its own 30 s bound.
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains("65536 bytes echoed, intact"), "\(text)")
        #expect(lines.contains("[in-process peripheral] the channel closed after 65536 bytes echoed"), "\(text)")
        #expect(lines.last == "the channel could not be opened: The peer has no L2CAP channel published on this PSM.", "\(text)")

        for path in [capture, centralCapture] {
            let result = try Tshark.check(capture: path)
            #expect(result.isClean, "\(path): \(result.malformed) \(result.expertErrors)")
            // The channel opens in the enhanced mode (Credit Based Connection Request, 0x17),
            // which Debian 12's tshark 4.0 names only by its code.
            let request = result.verboseOutput.contains("Command Code: Credit Based Connection Request")
                || result.verboseOutput.contains("Command Code: Unknown (0x17)")
            #expect(request, "\(path)")
        }
    }
}
