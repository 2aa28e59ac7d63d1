// The book's ch. 12 EchoServer peripheral (ExampleApps/Peripherals/EchoServerPeripheral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run EchoServer [--seconds N]   (0: until interrupted)",
                                     options: ["--seconds": .int(0...86_400)])
let seconds = commandLine.int("--seconds", default: 0)

let server = EchoServerPeripheral(position: [1, 0], log: ExampleLog(printing: true))
if seconds > 0 {
    DispatchQueue.main.asyncAfter(deadline: .now() + .seconds(seconds)) { ExampleMain.finish() }
}
ExampleMain.run(timeout: nil)
