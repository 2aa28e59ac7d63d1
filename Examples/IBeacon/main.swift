// The book's ch. 11 iBeacon peripheral, advertised through the Linux extension (ExampleApps/Beacons/IBeaconPeripheral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(
    usage: "swift run IBeacon [--major N] [--minor N] [--power DBM] [--at X,Y] [--seconds N]   (0: until interrupted)",
    options: ["--major": .int(0...65_535), "--minor": .int(0...65_535), "--power": .int(-127...20), "--at": .point, "--seconds": .int(0...86_400)])
let major = commandLine.int("--major", default: Int(IBeaconPeripheral.majorNumber))
let minor = commandLine.int("--minor", default: Int(IBeaconPeripheral.minorNumber))
let power = commandLine.int("--power", default: Int(IBeaconPeripheral.measuredPower))
let at = commandLine.point("--at", default: Point(x: 0, y: 0))
let seconds = commandLine.int("--seconds", default: 0)

let beacon = IBeaconPeripheral(major: UInt16(major), minor: UInt16(minor), measuredPower: Int8(power),
                               position: [at.x, at.y], log: ExampleLog(printing: true))
if seconds > 0 {
    DispatchQueue.main.asyncAfter(deadline: .now() + .seconds(seconds)) { ExampleMain.finish() }
}
ExampleMain.run(timeout: nil)
