import ArgumentParser
import Foundation

@main
struct CBTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cbtool",
        abstract: "Bluetooth LE from the command line, on real or virtual controllers.",
        discussion: """
            With no radio configured, everything runs on the embedded virtual radio.
            CB_TRANSPORT selects another controller (tcp:HOST:PORT, unix:PATH, serial:DEV[:BAUD], hci:N);
            CB_SNOOP=PATH writes a btsnoop capture of the HCI traffic.
            """,
        subcommands: [Demo.self, HCIInfo.self, ControllerServer.self]
    )
}

/// A one-line error for the user, never a stack trace.
struct ToolError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Prints a line at once, even when stdout is a pipe (tests and scripts read it live).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
