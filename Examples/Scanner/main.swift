// The book's ch. 4 Scanner: a 5-second scan listing each peripheral once (ExampleApps/Centrals/ScannerCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run Scanner [--seconds N] [--no-peripheral]",
                                     options: ["--seconds": .int(1...60)], flags: ["--no-peripheral"])
let seconds = commandLine.int("--seconds", default: 5)

// Something to find on the in-process radio: the book's ch. 4 "MyDevice", and a peripheral
// advertising no name (listed by its identifier). Not with --no-peripheral (another process).
let peripherals = commandLine.flag("--no-peripheral") ? [] : [
    MyDevicePeripheral(position: [2, 0], log: ExampleMain.peerLog()),
    MyDevicePeripheral(advertisingName: nil, gattProfile: true, position: [0, 6], log: ExampleMain.peerLog()),
]

let scanner = ScannerCentral(scanSeconds: seconds, log: ExampleLog(printing: true)) { _ in ExampleMain.finish() }
ExampleMain.run(timeout: Double(seconds) + 10)
