// The book's ch. 5 Connecting: connect, read the RSSI, disconnect (ExampleApps/Centrals/ConnectCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run ConnectRSSI [--name NAME] [--no-peripheral]",
                                     options: ["--name": .text], flags: ["--no-peripheral"])

// The book's ch. 4 "MyDevice" in this process, 5 m away (3, 4): RSSI −59 − 20·log10(5) ≈ −73 dBm.
let peripheral = commandLine.flag("--no-peripheral") ? nil : MyDevicePeripheral(position: [3, 4], log: ExampleMain.peerLog())

let central = ConnectCentral(targetName: commandLine.string("--name", default: MyDevicePeripheral.advertisingName),
                             position: [0, 0], log: ExampleLog(printing: true)) { ExampleMain.finish($0) }
ExampleMain.run(timeout: 20)
