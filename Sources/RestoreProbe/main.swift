// A central app, and a peripheral app, for the restoration tests (CoreBluetoothDaemonTests,
// DaemonRestoreProcessTests), run as a child process so that it can be killed with SIGKILL. Not
// part of any product.
//
//     RestoreProbe SOCKET IDENTIFIER connect   scans for FEED, connects, discovers FEE1, subscribes
//     RestoreProbe SOCKET IDENTIFIER restore   only takes what willRestoreState gives back
//     RestoreProbe SOCKET IDENTIFIER serve     publishes FEED (FEE1 notifies), advertises it as "Feed"
//     RestoreProbe SOCKET IDENTIFIER serve-restore
//                                              only takes what willRestoreState gives back, then
//                                              sends 0x42 to FEE1's subscribers once powered on
//
//     RestoreProbe SOCKET kill PROCEDURE SERVICE
//                                              a central with no restore identifier, for the
//                                              kill -9 tests (DaemonKillProcessTests): scans for
//                                              peripherals advertising SERVICE, connects,
//                                              discovers FEED's characteristics, subscribes to
//                                              FEE3, then starts PROCEDURE and says so:
//         discover   reads FEE6 (the test's peripheral holds it), then discovers every service
//                    ("discovering"): the discovery waits behind the read
//         long-write writes 200 bytes to FEE2 with response ("writing")
//         long-read  reads FEE2's 200 bytes ("reading")
//         subscribe  reads FEE6, then subscribes to FEE1 ("subscribing")
//         pair       reads FEE4, which needs encryption ("pairing")
//         channel    opens an L2CAP channel to PSM 0x0080 ("channel open", or "channel " and the error)
//         idle       nothing ("idle")
//
// Its managers are on the daemon at SOCKET with the restore identifier IDENTIFIER (none in
// kill mode). It writes one line per event on stdout ("state 5", "notifying", "value 0102",
// "restored ...") and runs until killed.
import CoreBluetooth
import Foundation

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

final class Probe: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    // Touched on the delegate queue only.
    let connects: Bool
    var peripheral: CBPeripheral?
    var manager: CBCentralManager!

    let serviceUUID = CBUUID(string: "FEED")
    let characteristicUUID = CBUUID(string: "FEE1")

    init(connects: Bool) { self.connects = connects }

    func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any]) {
        let peripherals = dict[CBCentralManagerRestoredStatePeripheralsKey] as? [CBPeripheral] ?? []
        for peripheral in peripherals {
            self.peripheral = peripheral
            peripheral.delegate = self
            let services = peripheral.services ?? []
            let characteristics = services.flatMap { $0.characteristics ?? [] }
            say("restored state=\(peripheral.state.rawValue) services=\(services.map(\.uuid.uuidString))"
                + " characteristics=\(characteristics.map(\.uuid.uuidString)) notifying=\(characteristics.map(\.isNotifying))")
        }
        if peripherals.isEmpty { say("restored nothing") }
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        say("state \(central.state.rawValue)")
        if connects, central.state == .poweredOn { central.scanForPeripherals(withServices: [serviceUUID]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard self.peripheral == nil else { return }
        self.peripheral = peripheral
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        say("connected")
        peripheral.delegate = self
        peripheral.discoverServices([serviceUUID])
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        say("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first(where: { $0.uuid == serviceUUID }) else { return say("no service") }
        peripheral.discoverCharacteristics([characteristicUUID], for: service)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristic = service.characteristics?.first else { return say("no characteristic") }
        peripheral.setNotifyValue(true, for: characteristic)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        say(characteristic.isNotifying ? "notifying" : "not notifying")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value else { return }
        say("value " + value.map { String(format: "%02x", $0) }.joined())
    }
}

/// The peripheral app: publishes and advertises (`serves`), or takes back what it had.
final class PeripheralProbe: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    // Touched on the delegate queue only.
    let serves: Bool
    var characteristic: CBMutableCharacteristic?
    var manager: CBPeripheralManager!

    init(serves: Bool) { self.serves = serves }

    func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any]) {
        let services = dict[CBPeripheralManagerRestoredStateServicesKey] as? [CBMutableService] ?? []
        let advertisement = dict[CBPeripheralManagerRestoredStateAdvertisementDataKey] as? [String: Any]
        let characteristics = services.flatMap { $0.characteristics ?? [] }.compactMap { $0 as? CBMutableCharacteristic }
        characteristic = characteristics.first
        say("restored services=\(services.map(\.uuid.uuidString)) characteristics=\(characteristics.map(\.uuid.uuidString))"
            + " subscribed=\(characteristics.map { $0.subscribedCentrals?.count ?? 0 })"
            + " name=\(advertisement?[CBAdvertisementDataLocalNameKey] as? String ?? "-")"
            + " uuids=\((advertisement?[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] ?? []).map(\.uuidString))")
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        say("state \(peripheral.state.rawValue) advertising=\(peripheral.isAdvertising)")
        guard peripheral.state == .poweredOn else { return }
        if serves {
            let characteristic = CBMutableCharacteristic(type: CBUUID(string: "FEE1"), properties: [.notify], value: nil,
                                                         permissions: [.readable])
            let service = CBMutableService(type: CBUUID(string: "FEED"), primary: true)
            service.characteristics = [characteristic]
            self.characteristic = characteristic
            peripheral.add(service)
        } else if let characteristic {
            say("updated \(peripheral.updateValue(Data([0x42]), for: characteristic, onSubscribedCentrals: nil))")
        }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        say("added \(error.map { "\($0)" } ?? "")")
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Feed", CBAdvertisementDataServiceUUIDsKey: [CBUUID(string: "FEED")]])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        say("advertising \(error.map { "\($0)" } ?? "")")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        say("subscribed")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        say("unsubscribed")
    }
}

/// The central of the kill -9 tests: gets to the middle of one procedure, says so, and waits
/// to be killed.
final class KillProbe: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    // Touched on the delegate queue only.
    let procedure: String
    let advertised: CBUUID
    var peripheral: CBPeripheral?
    var manager: CBCentralManager!
    var characteristics: [CBUUID: CBCharacteristic] = [:]
    /// The channel opened (on the delegate queue only).
    var channels: [CBL2CAPChannel] = []

    init(procedure: String, advertised: CBUUID) {
        self.procedure = procedure
        self.advertised = advertised
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        say("state \(central.state.rawValue)")
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [advertised]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard self.peripheral == nil else { return }
        self.peripheral = peripheral
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        say("connected")
        peripheral.delegate = self
        peripheral.discoverServices([CBUUID(string: "FEED")])
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        say("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first(where: { $0.uuid == CBUUID(string: "FEED") }) else {
            return say(procedure == "discover" ? "discovered \(peripheral.services?.count ?? 0)" : "no service")
        }
        if characteristics.isEmpty { peripheral.discoverCharacteristics(nil, for: service) }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        for characteristic in service.characteristics ?? [] { characteristics[characteristic.uuid] = characteristic }
        guard let feedback = characteristics[CBUUID(string: "FEE3")] else { return say("no characteristic") }
        peripheral.setNotifyValue(true, for: feedback)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        say("notifying \(characteristic.uuid.uuidString) \(characteristic.isNotifying)")
        guard characteristic.uuid == CBUUID(string: "FEE3") else { return }
        start()
    }

    private func characteristic(_ uuid: String) -> CBCharacteristic { characteristics[CBUUID(string: uuid)]! }

    /// The procedure, under way when this returns (its requests are on their way to the daemon).
    private func start() {
        guard let peripheral else { return }
        switch procedure {
        case "discover":
            peripheral.readValue(for: characteristic("FEE6"))
            peripheral.discoverServices(nil)
            say("discovering")
        case "long-write":
            peripheral.writeValue(Data((0..<200).map { UInt8(truncatingIfNeeded: $0) }), for: characteristic("FEE2"), type: .withResponse)
            say("writing")
        case "long-read":
            peripheral.readValue(for: characteristic("FEE2"))
            say("reading")
        case "subscribe":
            peripheral.readValue(for: characteristic("FEE6"))
            peripheral.setNotifyValue(true, for: characteristic("FEE1"))
            say("subscribing")
        case "pair":
            peripheral.readValue(for: characteristic("FEE4"))
            say("pairing")
        case "channel":
            peripheral.openL2CAPChannel(0x0080)
        default:
            say("idle")
        }
    }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        // Kept, as an app keeps it (a channel let go of closes), until the process is killed.
        if let channel { channels.append(channel) }
        say("channel \(error.map { "\($0)" } ?? "open")")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        say("value \(characteristic.uuid.uuidString) \(characteristic.value?.count ?? -1) \(error.map { "\($0)" } ?? "")")
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        say("wrote \(characteristic.uuid.uuidString) \(error.map { "\($0)" } ?? "")")
    }
}

func run() -> Never {
    let arguments = CommandLine.arguments
    if arguments.count == 5, arguments[2] == "kill" {
        let queue = DispatchQueue(label: "probe")
        let probe = KillProbe(procedure: arguments[3], advertised: CBUUID(string: arguments[4]))
        queue.sync {
            probe.manager = CBCentralManager(delegate: probe, queue: queue,
                                             options: [CBManagerOptionLinuxTransportKey: "daemon:\(arguments[1])"])
        }
        withExtendedLifetime(probe) { dispatchMain() }
    }
    guard arguments.count == 4, ["connect", "restore", "serve", "serve-restore"].contains(arguments[3]) else {
        FileHandle.standardError.write(Data(("usage: RestoreProbe SOCKET IDENTIFIER connect|restore|serve|serve-restore\n"
            + "       RestoreProbe SOCKET kill discover|long-write|long-read|subscribe|pair|channel|idle SERVICE\n").utf8))
        exit(2)
    }
    let queue = DispatchQueue(label: "probe")
    if arguments[3].hasPrefix("serve") {
        let probe = PeripheralProbe(serves: arguments[3] == "serve")
        queue.sync {
            probe.manager = CBPeripheralManager(delegate: probe, queue: queue, options: [
                CBManagerOptionLinuxTransportKey: "daemon:\(arguments[1])",
                CBPeripheralManagerOptionRestoreIdentifierKey: arguments[2],
            ])
        }
        withExtendedLifetime(probe) { dispatchMain() }
    }
    let probe = Probe(connects: arguments[3] == "connect")
    queue.sync {
        probe.manager = CBCentralManager(delegate: probe, queue: queue, options: [
            CBManagerOptionLinuxTransportKey: "daemon:\(arguments[1])",
            CBCentralManagerOptionRestoreIdentifierKey: arguments[2],
        ])
    }
    dispatchMain()
}

run()
