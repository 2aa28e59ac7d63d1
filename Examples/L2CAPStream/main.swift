// An iOS-style L2CAP channel, both sides in one program on the default radio, as an app would
// write it: delegates on the main queue, streams on the main run loop (Examples/ExampleApps:
// L2CAPEchoPeripheral, L2CAPStreamCentral). The central streams the bytes through the
// peripheral's echo; then the peripheral unpublishes and a second open must fail.
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(usage: "swift run L2CAPStream [--bytes N] [--no-peripheral]",
                                     options: ["--bytes": .int(1...16_777_216)], flags: ["--no-peripheral"])
let bytes = commandLine.int("--bytes", default: 65_536)

let server = commandLine.flag("--no-peripheral") ? nil : L2CAPEchoPeripheral(runLoop: .main, log: ExampleMain.peerLog())
let client = L2CAPStreamCentral(byteCount: bytes, runLoop: .main, log: ExampleLog(printing: true))

/// Runs the main run loop (the main queue's blocks run there too) until `condition`, or fails.
func runMain(until condition: () -> Bool, _ what: String) {
    let deadline = Date(timeIntervalSinceNow: 30)
    while !condition() {
        if Date() > deadline { ExampleMain.finish("timed out waiting for \(what)") }
        _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.1))
    }
}

runMain(until: { client.isDone }, "the echo")
guard client.echoMatches else { ExampleMain.finish("the echo differs from what was sent") }
if let server {
    server.unpublish()
    runMain(until: { server.log.all.contains { $0.hasPrefix("unpublished") } }, "the unpublication")
    client.openAgain()
    runMain(until: { client.secondOpenRefused }, "the refused open")
}
ExampleMain.finish()
