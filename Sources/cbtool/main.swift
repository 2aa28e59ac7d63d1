import CBTool
import Foundation

// The command logic lives in the CBTool library, so tests run it in-process.
exit(CBToolRunner.run(Array(CommandLine.arguments.dropFirst())))
