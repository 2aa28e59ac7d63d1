// The book's ch. 11 BeaconLocator: range three iBeacons and trilaterate (ExampleApps/Beacons/BeaconLocatorCentral.swift).
import ExampleApps
import Foundation

let commandLine = ExampleCommandLine(
    usage: "swift run BeaconLocator [--at X,Y] [--propagation N] [--no-peripheral]",
    options: ["--at": .point, "--propagation": .number(1...6)], flags: ["--no-peripheral"])
let at = commandLine.point("--at", default: Point(x: 26, y: 29))
let propagation = commandLine.double("--propagation", default: 2)

// The room: beacons of the book's UUID and major 1122, minors 1–3, at the book's worked-example
// places (§2.34). Without --no-peripheral they advertise in this process, on the same radio
// as the locator, standing at --at: RSSI follows from the distances. With --no-peripheral, run
// three `swift run IBeacon --minor N --at X,Y` on a shared radio (CB_TRANSPORT=virtual:PATH).
let room: [BeaconID: Point] = [
    BeaconID(major: 1122, minor: 1): Point(x: 10, y: 10),
    BeaconID(major: 1122, minor: 2): Point(x: 50, y: 30),
    BeaconID(major: 1122, minor: 3): Point(x: 35, y: 50),
]
let beacons = commandLine.flag("--no-peripheral") ? [] : room.keys.sorted().map { id in
    IBeaconPeripheral(major: id.major, minor: id.minor, position: [room[id]!.x, room[id]!.y], log: ExampleMain.peerLog())
}

let locator = BeaconLocatorCentral(beaconPositions: room, propagationConstant: propagation, position: [at.x, at.y],
                                   log: ExampleLog(printing: true)) { _ in
    print("true position: \(at)")
    ExampleMain.finish()
}
ExampleMain.run(timeout: 30)
