import CoreBluetooth
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where a command's output goes and which radio its managers join: the process's stdout and
/// stderr and the default radio (`CB_TRANSPORT`, else the in-process shared one) for the tool;
/// a test's sinks and its virtual-clock `CBVirtualRadio` in tests. Commands read it as
/// `ToolContext.current`; objects that call back on other threads keep the one they were
/// made with.
public struct ToolContext: Sendable {
    /// Writes one line of results.
    public var print: @Sendable (String) -> Void
    /// Writes one line of progress or error.
    public var error: @Sendable (String) -> Void
    /// The radio managers join instead of the default (tests); time on it moves only while
    /// a command waits.
    public var radio: CBVirtualRadio?
    /// Whether the output is a terminal (live redraws, ANSI).
    public var isTerminal: Bool
    /// Reads one line of the user's input (a passkey, a yes or no), nil at the end of input.
    /// It may block: commands call it off the delegate queues, never on the stack's loop.
    public var readLine: @Sendable () -> String?

    public init(print: @escaping @Sendable (String) -> Void = ToolContext.standardOutput,
                error: @escaping @Sendable (String) -> Void = ToolContext.standardError,
                radio: CBVirtualRadio? = nil,
                isTerminal: Bool = isatty(STDOUT_FILENO) == 1,
                readLine: @escaping @Sendable () -> String? = ToolContext.standardInput) {
        self.print = print
        self.error = error
        self.radio = radio
        self.isTerminal = isTerminal
        self.readLine = readLine
    }

    @TaskLocal public static var current = ToolContext()

    @Sendable public static func standardOutput(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    @Sendable public static func standardError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    @Sendable public static func standardInput() -> String? {
        Swift.readLine(strippingNewline: true)
    }

    /// Writes text as it is (no newline): terminal redraws.
    func write(raw text: String) {
        if isTerminal { FileHandle.standardOutput.write(Data(text.utf8)) } else { print(text) }
    }

    /// Manager options that put a manager on this context's radio (and `extra`).
    func managerOptions(_ extra: [String: Any] = [:]) -> [String: Any] {
        var options = extra
        if let radio { options[CBManagerOptionLinuxRadioKey] = radio }
        return options
    }

    /// Seconds on the clock `wait` uses (the test radio's, else the wall clock's): for timing
    /// what arrives.
    func now() -> Double {
        if let radio {
            let now = radio.now.components
            return Double(now.seconds) + Double(now.attoseconds) / 1e18
        }
        return ProcessInfo.processInfo.systemUptime
    }

    /// Lets time pass until `condition` holds or `seconds` have passed (on the test radio's
    /// clock, else the wall clock), checking after every delegate callback.
    @discardableResult
    func wait(seconds: Double, until condition: @escaping () -> Bool) -> Bool {
        let timeout = Duration.milliseconds(Int64(max(0, seconds) * 1000))
        if let radio { return radio.run(until: condition, timeout: timeout) }
        return CBVirtualRadio.waitForCallbacks(until: condition, timeout: timeout)
    }
}
