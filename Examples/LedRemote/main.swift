// The book's ch. 13 LedRemote central: switch the LED, moving only on confirmation (ExampleApps/Centrals/LedRemoteCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run LedRemote [--toggles N] [--no-peripheral]",
                                     options: ["--toggles": .int(0...100)], flags: ["--no-peripheral"])
let toggles = commandLine.int("--toggles", default: 3)

// The book's RemoteLed in this process (`swift run RemoteLed` is the same peripheral on its own).
let led = commandLine.flag("--no-peripheral") ? nil : RemoteLedPeripheral(position: [3, 1], log: ExampleMain.peerLog())

let remote = LedRemoteCentral(toggles: toggles, log: ExampleLog(printing: true)) { _ in ExampleMain.finish() }
ExampleMain.run(timeout: 30)
