import CoreBluetooth
import ExampleApps
import Foundation
import Testing

/// `swift run Scanner`, `ConnectRSSI` and `GATTExplorer` (book-apps.md §1.3–1.7), end to end on
/// a virtual radio: RSSI follows from where the managers stand (−59 dBm at 1 m, free space).
@Suite struct ScanAndConnectTests {
    @Test func scannerListsEachPeripheralOnceAndStopsAfterFiveSeconds() {
        let radio = CBVirtualRadio(clock: .virtual)
        let timers = ManualTimers()
        let (named, nameless, scanner) = CBVirtualRadio.withCurrent(radio) {
            (MyDevicePeripheral(queue: DispatchQueue(label: "named"), position: [2, 0]),
             MyDevicePeripheral(advertisingName: nil, gattProfile: true, queue: DispatchQueue(label: "nameless"), position: [0, 10]),
             ScannerCentral(queue: DispatchQueue(label: "scanner"), position: [0, 0], timers: timers))
        }
        #expect(radio.run(until: { scanner.entries.count == 2 }, timeout: .seconds(5)))
        #expect(named.isAdvertising && nameless.isAdvertising)
        #expect(timers.intervals == [1])
        // Four ticks: still scanning, counting down; each advertising event seen more than once.
        for _ in 1...4 {
            radio.run(for: .seconds(1))
            timers.fire()
        }
        #expect(scanner.isScanning)
        #expect(scanner.log.all.filter { $0.hasSuffix("seconds until BLE Scan ends") }
            == ["4 seconds until BLE Scan ends", "3 seconds until BLE Scan ends", "2 seconds until BLE Scan ends",
                "1 seconds until BLE Scan ends"])
        radio.run(for: .seconds(1))
        timers.fire()
        #expect(!scanner.isScanning)
        #expect(scanner.isDone)
        #expect(!scanner.centralManager.isScanning)
        #expect(timers.active == 0)

        let entries = scanner.entries
        #expect(entries.count == 2)
        #expect(Set(entries.map(\.identifier)).count == 2)
        let first = entries.first { $0.name == "MyDevice" }
        // 2 m: −59 − 20·log10(2) = −65.02.
        #expect(first?.rssi == -65)
        // No name advertised (nor known): listed by its identifier. 10 m: −79 dBm.
        let other = entries.first { $0.name != "MyDevice" }
        #expect(other?.name == other?.identifier.uuidString)
        #expect(other?.rssi == -79)
        #expect(scanner.log.contains("scan stopped: 2 peripherals"))
    }

    @Test func connectReadsTheRSSIAndDisconnects() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (peripheral, central) = CBVirtualRadio.withCurrent(radio) {
            (MyDevicePeripheral(queue: DispatchQueue(label: "peripheral"), position: [3, 4]),
             ConnectCentral(queue: DispatchQueue(label: "central"), position: [0, 0]))
        }
        #expect(radio.run(until: { central.isDone }, timeout: .seconds(10)))
        #expect(central.failure == nil)
        // 5 m away: −59 − 20·log10(5) = −72.98.
        #expect(central.rssi == -73)
        #expect(!central.isConnected)
        let log = central.log.all
        #expect(log.contains("RSSI: -73"))
        #expect(log.contains { $0.hasPrefix("Connected Peripheral: ") })
        #expect(log.suffix(2).first == "leaving view - disconnecting from peripheral")
        #expect(log.last?.hasPrefix("Disconnected Peripheral: ") == true)
        #expect(peripheral.isAdvertising)
    }

    @Test func connectGivesUpCleanlyWhenTheTargetIsNotAround() {
        let radio = CBVirtualRadio(clock: .virtual)
        let central = CBVirtualRadio.withCurrent(radio) {
            ConnectCentral(targetName: "Nobody", queue: DispatchQueue(label: "central"))
        }
        #expect(!radio.run(until: { central.isDone }, timeout: .seconds(3)))
        #expect(central.log.all == ["scanning for Nobody"])
    }

    @Test func gattExplorerShowsTheBooksProfile() {
        let radio = CBVirtualRadio(clock: .virtual)
        let (peripheral, explorer) = CBVirtualRadio.withCurrent(radio) {
            (MyDevicePeripheral(gattProfile: true, queue: DispatchQueue(label: "peripheral"), position: [2, 0]),
             GattExplorerCentral(queue: DispatchQueue(label: "explorer")))
        }
        #expect(radio.run(until: { explorer.isDone }, timeout: .seconds(10)), "\(explorer.log.all)")
        #expect(explorer.failure == nil)
        // Section 180C, row 2A56 (read + notify), as the book's screen shows.
        let service = explorer.gattProfile.first { $0.uuid == "180C" }
        #expect(service?.isPrimary == true)
        #expect(service?.characteristics.map(\.uuid) == ["2A56"])
        #expect(service?.characteristics.first?.properties == ["readable", "notifiable"])
        #expect(explorer.log.contains("-> 2A56"))
        #expect(explorer.log.contains("    2A56  readable, notifiable"))
        #expect(peripheral.isAdvertising)
    }
}
