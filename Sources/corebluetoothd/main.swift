import CoreBluetoothDaemon
import Foundation
import StackLogging

// Logs on standard error: the daemon's clients and connections (info) unless CB_LOG says.
if StackLogging.environmentLevel == nil { StackLogging.fallbackLevel = .info }
StackLogging.bootstrapStandardError()
// The daemon's logic lives in the CoreBluetoothDaemon library, so tests run it in-process.
exit(DaemonCommand.run(Array(CommandLine.arguments.dropFirst())))
