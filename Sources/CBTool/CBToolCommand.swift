import ArgumentParser
import Foundation

/// `cbtool`: the root command and its subcommands.
public struct CBToolCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "cbtool",
        abstract: "Bluetooth LE from the command line, on real or virtual controllers.",
        discussion: """
            With no radio configured, everything runs on the embedded virtual radio: start with `cbtool demo`.
            CB_TRANSPORT selects another controller (virtual:PATH for a radio `cbtool radio --listen PATH` \
            shares between processes, tcp:HOST:PORT, unix:PATH, serial:DEV[:BAUD], hci:N); \
            CB_SNOOP=PATH writes a btsnoop capture of the HCI traffic; CB_BOND_DIR=PATH keeps bonds there.
            """,
        subcommands: [
            DemoCommand.self, ScanCommand.self, ExploreCommand.self, ReadCommand.self, WriteCommand.self,
            SubscribeCommand.self, ChannelCommand.self, PairCommand.self, BondsCommand.self, UnpairCommand.self, SimulateCommand.self,
            RecordCommand.self, SpecFromCaptureCommand.self, RadioCommand.self,
            HCIInfoCommand.self, HCIDemoCommand.self, ControllerCommand.self, LintCommand.self,
        ]
    )

    public init() {}
}

/// Runs cbtool's command line, in this process, and returns the exit status. Errors of ours are
/// one line on the error stream ("cbtool: …"); `--help` prints help and returns 0.
public enum CBToolRunner {
    public static func run(_ arguments: [String], context: ToolContext = ToolContext()) -> Int32 {
        ToolContext.$current.withValue(context) {
            do {
                var command = try CBToolCommand.parseAsRoot(arguments)
                try command.run()
                return 0
            } catch let error as ToolError {
                context.error("cbtool: \(error.description)")
                return 1
            } catch {
                let code = CBToolCommand.exitCode(for: error)
                if code == .success {
                    // --help and the like: their full text, as ArgumentParser writes it.
                    context.print(CBToolCommand.fullMessage(for: error))
                    return 0
                }
                let message = CBToolCommand.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
                context.error("cbtool: \(message)")
                return code.rawValue == 0 ? 1 : code.rawValue
            }
        }
    }
}

/// A one-line error for the user, never a stack trace.
public struct ToolError: Error, CustomStringConvertible {
    public var description: String
    /// The stack's error behind it, when there is one (for callers that tell errors apart).
    public var underlying: (any Error)?
    public init(_ description: String, underlying: (any Error)? = nil) {
        self.description = description
        self.underlying = underlying
    }
}

/// Prints a line of results on the context's output at once (tests and scripts read it live).
func emit(_ line: String) {
    ToolContext.current.print(line)
}

/// Prints a progress or diagnostic line on the context's error stream.
func progress(_ line: String) {
    ToolContext.current.error(line)
}
