// A heart-rate monitor central in the async style (AsyncExampleApps/HeartRateMonitor.swift),
// with a heart-rate sensor in this process unless --no-peripheral.
import AsyncExampleApps
import CoreBluetooth
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run HeartRateMonitor [--count N] [--no-peripheral]",
                                     options: ["--count": .int(1...100_000)], flags: ["--no-peripheral"])
let count = commandLine.int("--count", default: 5)

if !commandLine.flag("--no-peripheral") {
    let sensor = HeartRateSensor(manager: CBPeripheralManager(delegate: nil, queue: DispatchQueue(label: "sensor")),
                                 log: ExampleMain.peerLog())
    Task { try await sensor.run(interval: .milliseconds(200)) }
}
let monitor = HeartRateMonitor(central: CBCentralManager(delegate: nil, queue: DispatchQueue(label: "monitor")),
                               log: ExampleLog(printing: true))
Task {
    do {
        _ = try await monitor.run(measurements: count)
        ExampleMain.finish()
    } catch {
        ExampleMain.finish("\(error)")
    }
}
ExampleMain.run(timeout: 30)
