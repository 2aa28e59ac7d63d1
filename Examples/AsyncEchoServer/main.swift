// The book's EchoServer in the async style (AsyncExampleApps/AsyncEchoServer.swift); the
// book's `swift run EchoClient --no-peripheral` talks to it.
import AsyncExampleApps
import CoreBluetooth
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run AsyncEchoServer [--seconds N]   (0: until interrupted)",
                                     options: ["--seconds": .int(0...86_400)])
let seconds = commandLine.int("--seconds", default: 0)

let server = AsyncEchoServer(manager: CBPeripheralManager(delegate: nil, queue: DispatchQueue(label: "echo")),
                             log: ExampleLog(printing: true))
Task {
    do {
        try await server.run()
    } catch {
        ExampleMain.finish("\(error)")
    }
}
if seconds > 0 {
    DispatchQueue.main.asyncAfter(deadline: .now() + .seconds(seconds)) { ExampleMain.finish() }
}
ExampleMain.run(timeout: nil)
