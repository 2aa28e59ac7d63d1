import CoreBluetooth
import ExampleApps
import Foundation
import Testing

/// `swift run IBeacon` and `BeaconLocator` (book-apps.md §1.15–1.16, §2.33–2.34): the ranging
/// math, the iBeacon bytes, and locating a central among three beacons on a virtual radio whose
/// RSSI follows from the distances.
@Suite struct BeaconTests {
    @Test func distanceFromRSSI() throws {
        // The book's worked example (positive RSSIs): 10^(40/35) = 13.89 m.
        let book = try #require(Ranging.distance(rssi: 35, measuredPower: 75, propagationConstant: 3.5))
        #expect(abs(book - 13.89) < 0.01)
        // Real values: A = −57, R = −75, n = 2: 10^(18/20) = 7.94 m.
        let real = try #require(Ranging.distance(rssi: -75, measuredPower: -57, propagationConstant: 2))
        #expect(abs(real - 7.94) < 0.01)
        #expect(Ranging.distance(rssi: -59, measuredPower: -59, propagationConstant: 2) == 1)
        #expect(Ranging.distance(rssi: -70, measuredPower: -59, propagationConstant: 0) == nil)
        #expect(Ranging.distance(rssi: .nan, measuredPower: -59, propagationConstant: 2) == nil)
    }

    @Test func trilaterationOfTheBooksWorkedExample() throws {
        // P1 (10,10), P2 (50,30), P3 (35,50); r = 13.2, 10.8, 7.7. The book's code, with its j
        // term wrong, gives (21.69, 38.06); the corrected math (26.14, 29.16).
        let p = try #require(Ranging.trilaterate(Point(x: 10, y: 10), 13.2, Point(x: 50, y: 30), 10.8,
                                                 Point(x: 35, y: 50), 7.7))
        #expect(abs(p.x - 26.14) < 0.01)
        #expect(abs(p.y - 29.16) < 0.01)
        #expect(p.description == "(26.14, 29.16)")
    }

    @Test func trilaterationFindsAnExactPointAndRefusesBadInput() throws {
        let truth = Point(x: 3, y: 4)
        let beacons = [Point(x: 0, y: 0), Point(x: 10, y: 0), Point(x: 2, y: 9)]
        let r = beacons.map { $0.distance(to: truth) }
        let p = try #require(Ranging.trilaterate(beacons[0], r[0], beacons[1], r[1], beacons[2], r[2]))
        #expect(p.distance(to: truth) < 1e-9)
        // Coincident or collinear beacons, negative or non-finite distances: no answer, no crash.
        #expect(Ranging.trilaterate(beacons[0], 1, beacons[0], 1, beacons[2], 1) == nil)
        #expect(Ranging.trilaterate(Point(x: 0, y: 0), 1, Point(x: 1, y: 1), 1, Point(x: 2, y: 2), 1) == nil)
        #expect(Ranging.trilaterate(beacons[0], -1, beacons[1], 1, beacons[2], 1) == nil)
        #expect(Ranging.trilaterate(beacons[0], .infinity, beacons[1], 1, beacons[2], 1) == nil)
    }

    @Test func iBeaconBytesRoundTripAndMatchTheLinuxExtension() throws {
        let beacon = IBeaconAdvertisement(proximityUUID: IBeaconPeripheral.beaconUuid, major: 1122, minor: 3344, measuredPower: -56)
        let data = beacon.manufacturerData
        #expect(data.count == 25)
        #expect(Array(data.prefix(6)) == [0x4C, 0x00, 0x02, 0x15, 0xE2, 0x0A])
        #expect(Array(data.suffix(5)) == [0x04, 0x62, 0x0D, 0x10, 0xC8])
        #expect(IBeaconAdvertisement(manufacturerData: data) == beacon)
        let linux = CBPeripheralManager.linuxIBeaconAdvertisementData(proximityUUID: beacon.proximityUUID, major: 1122,
                                                                       minor: 3344, measuredPower: -56)
        #expect(linux[CBAdvertisementDataLinuxManufacturerDataKey] as? Data == data)
        // Not an iBeacon: another company, a short or long payload, another type.
        #expect(IBeaconAdvertisement(manufacturerData: Data([0xFF, 0xFF] + data.dropFirst(2))) == nil)
        #expect(IBeaconAdvertisement(manufacturerData: data.dropLast()) == nil)
        #expect(IBeaconAdvertisement(manufacturerData: data + [0]) == nil)
        #expect(IBeaconAdvertisement(manufacturerData: Data()) == nil)
        var otherType = [UInt8](data)
        otherType[2] = 0x03
        #expect(IBeaconAdvertisement(manufacturerData: Data(otherType)) == nil)
    }

    @Test func locatorFindsTheCentralAmongThreeBeaconsByRSSI() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let room: [BeaconID: Point] = [
            BeaconID(major: 1122, minor: 1): Point(x: 10, y: 10),
            BeaconID(major: 1122, minor: 2): Point(x: 50, y: 30),
            BeaconID(major: 1122, minor: 3): Point(x: 35, y: 50),
        ]
        let truth = Point(x: 26, y: 29)
        let (beacons, stranger, locator) = CBVirtualRadio.withCurrent(radio) {
            (room.keys.sorted().map { id in
                IBeaconPeripheral(major: id.major, minor: id.minor, queue: DispatchQueue(label: "beacon \(id.minor)"),
                                  position: [room[id]!.x, room[id]!.y])
            },
            // Another organisation's beacon nearby: ignored.
            IBeaconPeripheral(proximityUUID: UUID(), major: 1, minor: 1, queue: DispatchQueue(label: "stranger"), position: [27, 29]),
            BeaconLocatorCentral(beaconPositions: room, queue: DispatchQueue(label: "locator"), position: [truth.x, truth.y]))
        }
        #expect(radio.run(until: { locator.isDone }, timeout: .seconds(10)))
        #expect(beacons.allSatisfy(\.isAdvertising) && stranger.isAdvertising)
        let ranged = locator.beacons
        #expect(ranged.map(\.id) == room.keys.sorted())
        for beacon in ranged {
            // RSSI is whole dBm: within 6 % of the true distance.
            let trueDistance = room[beacon.id]!.distance(to: truth)
            #expect(abs(beacon.distance - trueDistance) / trueDistance < 0.06, "\(beacon)")
            #expect(beacon.measuredPower == -59 && beacon.samples == 3)
        }
        let estimate = try #require(locator.estimatedPosition)
        #expect(estimate.distance(to: truth) < 2, "estimated \(estimate), truth \(truth)")
        #expect(locator.log.contains("central position: \(estimate)"))
    }
}
