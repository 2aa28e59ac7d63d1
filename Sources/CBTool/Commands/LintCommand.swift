import ArgumentParser
import DelegateLint

/// `cbtool lint PATH…`: the delegate methods Core Bluetooth will never call (see
/// ``DelegateLinter``). Exits 1 when it finds any, so that CI can run it.
struct LintCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Find delegate methods that Core Bluetooth on Linux will never call.",
        discussion: """
            Swift on Linux has no @objc optional methods: the optional methods of CBCentralManagerDelegate, \
            CBPeripheralDelegate and CBPeripheralManagerDelegate are requirements with empty defaults. A method \
            whose name, labels or types nearly match one (an `RSSI:` label, `NSError?`, an Objective-C-style \
            name), or one written only in a subclass of the conforming class, compiles without a warning and is \
            never called. This lists each, with the signature to write instead. Give it all of a module's \
            sources: a class may conform in one file and be subclassed in another.
            Example: cbtool lint Sources/MyApp
            """
    )

    @Argument(help: "Swift files, or directories to search for them.")
    var paths: [String]

    func run() throws {
        let result: (findings: [LintFinding], files: Int)
        do { result = try DelegateLinter.lint(paths: paths) } catch { throw ToolError("lint: \(error)") }
        for finding in result.findings { emit(finding.description) }
        let files = result.files == 1 ? "1 file" : "\(result.files) files"
        guard !result.findings.isEmpty else {
            emit("lint: no findings in \(files)")
            return
        }
        let count = result.findings.count
        throw ToolError("lint: \(count) delegate method\(count == 1 ? "" : "s") that will never be called, in \(files)")
    }
}
