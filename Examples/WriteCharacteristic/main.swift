// The book's ch. 8 Write: write text to a characteristic (ExampleApps/Centrals/WriteCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run WriteCharacteristic [TEXT…] [--name NAME] [--no-peripheral]",
                                     options: ["--name": .text], flags: ["--no-peripheral"])
let messages = commandLine.positional.isEmpty ? ["Hello"] : commandLine.positional

// The book's ch. 8 peripheral in this process: it logs each value in hex ("Hello" is 48656c6c6f).
let peripheral = commandLine.flag("--no-peripheral") ? nil : WriteLoggerPeripheral(position: [2, 0], log: ExampleMain.peerLog())

let central = WriteCentral(targetName: commandLine.string("--name", default: WriteLoggerPeripheral.advertisingName),
                           messages: messages, log: ExampleLog(printing: true)) { ExampleMain.finish($0) }
ExampleMain.run(timeout: 20)
