import CoreBluetoothDaemon
import Foundation

// The daemon's logic lives in the CoreBluetoothDaemon library, so tests run it in-process.
exit(DaemonCommand.run(Array(CommandLine.arguments.dropFirst())))
