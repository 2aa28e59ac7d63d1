// The book's ch. 9 Notifications: subscribe and print what arrives (ExampleApps/Centrals/NotifyCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(
    usage: "swift run Notifications [--count N] [--interval SECONDS] [--name NAME] [--no-peripheral]",
    options: ["--count": .int(1...100), "--interval": .number(0.1...60), "--name": .text], flags: ["--no-peripheral"])
let count = commandLine.int("--count", default: 3)
let interval = commandLine.double("--interval", default: 5)

// The book's ch. 9 peripheral in this process: new random text every `interval` seconds, notified.
let peripheral = commandLine.flag("--no-peripheral") ? nil
    : RandomTextPeripheral(position: [2, 0], interval: interval, log: ExampleMain.peerLog())

let central = NotifyCentral(targetName: commandLine.string("--name", default: RandomTextPeripheral.advertisingName),
                            count: count, log: ExampleLog(printing: true)) { ExampleMain.finish($0) }
ExampleMain.run(timeout: Double(count + 1) * interval + 20)
