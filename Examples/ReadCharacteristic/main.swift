// The book's ch. 7 Read: read a characteristic a few times (ExampleApps/Centrals/ReadCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run ReadCharacteristic [--reads N] [--interval SECONDS] [--name NAME] [--no-peripheral]",
                                     options: ["--reads": .int(1...100), "--interval": .number(0.1...60), "--name": .text], flags: ["--no-peripheral"])
let reads = commandLine.int("--reads", default: 3)
let interval = commandLine.double("--interval", default: 5)

// The book's ch. 7 peripheral in this process: random text in 2A56, new every 5 seconds.
let peripheral = commandLine.flag("--no-peripheral") ? nil : RandomTextPeripheral(position: [2, 0], log: ExampleMain.peerLog())

let central = ReadCentral(targetName: commandLine.string("--name", default: RandomTextPeripheral.advertisingName),
                          reads: reads, interval: interval, log: ExampleLog(printing: true)) { ExampleMain.finish($0) }
ExampleMain.run(timeout: Double(reads) * interval + 20)
