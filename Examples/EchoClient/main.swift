// The book's ch. 12 EchoClient central (ExampleApps/Centrals/EchoClientCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run EchoClient [MESSAGE] [--no-peripheral]", flags: ["--no-peripheral"])
let message = commandLine.positional.isEmpty ? "hello" : commandLine.positional.joined(separator: " ")

// The book's EchoServer in this process (`swift run EchoServer` is the same peripheral on its own).
let server = commandLine.flag("--no-peripheral") ? nil : EchoServerPeripheral(position: [1, 0], log: ExampleMain.peerLog())

let client = EchoClientCentral(message: message, log: ExampleLog(printing: true)) { _ in ExampleMain.finish() }
ExampleMain.run(timeout: 30)
