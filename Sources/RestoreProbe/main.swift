// A central app for the restoration test (CoreBluetoothDaemonTests, DaemonRestoreProcessTests),
// run as a child process so that it can be killed with SIGKILL. Not part of any product.
//
//     RestoreProbe SOCKET IDENTIFIER connect   scans for FEED, connects, discovers FEE1, subscribes
//     RestoreProbe SOCKET IDENTIFIER restore   only takes what willRestoreState gives back
//
// Its managers are on the daemon at SOCKET with the restore identifier IDENTIFIER. It writes
// one line per event on stdout ("state 5", "notifying", "value 0102", "restored ...") and runs
// until killed.
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

func run() -> Never {
    let arguments = CommandLine.arguments
    guard arguments.count == 4, ["connect", "restore"].contains(arguments[3]) else {
        FileHandle.standardError.write(Data("usage: RestoreProbe SOCKET IDENTIFIER connect|restore\n".utf8))
        exit(2)
    }
    let probe = Probe(connects: arguments[3] == "connect")
    let queue = DispatchQueue(label: "probe")
    queue.sync {
        probe.manager = CBCentralManager(delegate: probe, queue: queue, options: [
            CBManagerOptionLinuxTransportKey: "daemon:\(arguments[1])",
            CBCentralManagerOptionRestoreIdentifierKey: arguments[2],
        ])
    }
    dispatchMain()
}

run()
