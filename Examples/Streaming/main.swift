// The book's ch. 10 flow control: a message in 20-byte chunks, each after "ready" (ExampleApps/Centrals/StreamingCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run Streaming [MESSAGE] [--name NAME] [--no-peripheral]",
                                     options: ["--name": .text], flags: ["--no-peripheral"])
let message = commandLine.positional.isEmpty
    ? "This message is forty-five characters long..." : commandLine.positional.joined(separator: " ")

// The book's ch. 10 peripheral in this process: it answers every write with a "ready" notification.
let peripheral = commandLine.flag("--no-peripheral") ? nil : FlowControlPeripheral(position: [2, 0], log: ExampleMain.peerLog())

let central = StreamingCentral(targetName: commandLine.string("--name", default: FlowControlPeripheral.advertisingName),
                               message: message, log: ExampleLog(printing: true)) { ExampleMain.finish($0) }
ExampleMain.run(timeout: 30)
