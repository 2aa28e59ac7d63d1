import CBTool
import Foundation

// cbtool reports an unusable controller in its own one-line error (CB_LOG=1 still logs more).
if ProcessInfo.processInfo.environment["CB_LOG", default: ""].isEmpty { setenv("CB_LOG", "0", 1) }
// The command logic lives in the CBTool library, so tests run it in-process.
exit(CBToolRunner.run(Array(CommandLine.arguments.dropFirst())))
