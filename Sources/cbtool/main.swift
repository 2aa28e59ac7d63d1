import CBTool
import Foundation
import StackLogging

// cbtool reports an unusable controller in its own one-line error, so the stack is quiet
// unless CB_LOG asks (CB_LOG=1: the stack's diagnostics on standard error).
if StackLogging.environmentLevel == nil { StackLogging.fallbackLevel = .critical }
StackLogging.bootstrapStandardError()
// The command logic lives in the CBTool library, so tests run it in-process.
exit(CBToolRunner.run(Array(CommandLine.arguments.dropFirst())))
