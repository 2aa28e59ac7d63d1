// The book's ch. 13 RemoteLed peripheral: an "LED" switched by 2-byte commands (ExampleApps/Peripherals/RemoteLedPeripheral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run RemoteLed [--seconds N]   (0: until interrupted)",
                                     options: ["--seconds": .int(0...86_400)])
let seconds = commandLine.int("--seconds", default: 0)

let led = RemoteLedPeripheral(position: [3, 1], log: ExampleLog(printing: true))
if seconds > 0 {
    DispatchQueue.main.asyncAfter(deadline: .now() + .seconds(seconds)) { ExampleMain.finish() }
}
ExampleMain.run(timeout: nil)
