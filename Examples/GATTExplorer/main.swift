// The book's ch. 6 Services: the GATT profile of a peripheral (ExampleApps/Centrals/GattExplorerCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run GATTExplorer [--name NAME] [--no-peripheral]",
                                     options: ["--name": .text], flags: ["--no-peripheral"])

// The book's ch. 6 "GattProfile" peripheral (service 180C, characteristic 2A56) in this process.
let peripheral = commandLine.flag("--no-peripheral") ? nil
    : MyDevicePeripheral(gattProfile: true, position: [2, 0], log: ExampleMain.peerLog())

let explorer = GattExplorerCentral(targetName: commandLine.string("--name", default: MyDevicePeripheral.advertisingName),
                                   log: ExampleLog(printing: true)) { ExampleMain.finish($0) }
ExampleMain.run(timeout: 20)
