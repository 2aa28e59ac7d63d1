import CoreBluetooth
import Foundation
import Scheduling
import TestTools
import Testing
import VirtualController

/// The peripheral of the test, in this process on the shared radio: one notifying
/// characteristic; counts its subscribers coming and going.
private final class NotifyingPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var counts = (subscribed: 0, unsubscribed: 0)
    let characteristic = CBMutableCharacteristic(type: CBUUID(string: "FEE1"), properties: [.notify], value: nil, permissions: [.readable])
    var manager: CBPeripheralManager!

    var subscribed: Int { lock.withLock { counts.subscribed } }
    var unsubscribed: Int { lock.withLock { counts.unsubscribed } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: CBUUID(string: "FEED"), primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Feed", CBAdvertisementDataServiceUUIDsKey: [CBUUID(string: "FEED")]])
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        lock.withLock { counts.subscribed += 1 }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        lock.withLock { counts.unsubscribed += 1 }
    }
}

/// The central of the peripheral test, in this process on the shared radio: finds FEED,
/// connects, subscribes to FEE1, and writes down values, and unsubscriptions or disconnections.
private final class SubscribingCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    // Safe: the log and peripheral are behind the lock; `manager` is set once before use.
    private let lock = NSLock()
    private var logStorage: [String] = []
    private var peripheralStorage: CBPeripheral?
    var manager: CBCentralManager!

    var log: [String] { lock.withLock { logStorage } }
    var peripheral: CBPeripheral? { lock.withLock { peripheralStorage } }
    private func note(_ entry: String) { lock.withLock { logStorage.append(entry) } }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [CBUUID(string: "FEED")]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard lock.withLock({ peripheralStorage == nil }) else { return }
        lock.withLock { peripheralStorage = peripheral }
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices([CBUUID(string: "FEED")])
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        note("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first else { return note("no service") }
        peripheral.discoverCharacteristics([CBUUID(string: "FEE1")], for: service)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristic = service.characteristics?.first else { return note("no characteristic") }
        peripheral.setNotifyValue(true, for: characteristic)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        note(characteristic.isNotifying ? "notifying" : "not notifying")
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value else { return }
        note("value " + value.map { String(format: "%02x", $0) }.joined())
    }
}

/// Issue 16's acceptance: three processes on one shared virtual radio — this one (the
/// peripheral), `corebluetoothd`, and a central app (RestoreProbe) with a restore identifier
/// that is killed with SIGKILL and started again.
@Suite("corebluetoothd: restoration across processes")
struct DaemonRestoreProcessTests {
    /// Beside the test binary (so a sanitized run starts sanitized children), else `.build/debug`.
    static let products = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug")
    static let daemonBinary = BuiltProducts.path("corebluetoothd", fallback: products.appendingPathComponent("corebluetoothd"))
    static let probeBinary = BuiltProducts.path("RestoreProbe", fallback: products.appendingPathComponent("RestoreProbe"))

    private func launch(_ binary: String, _ arguments: [String], output: ChildOutput, errors: ChildOutput? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardOutput = output.pipe
        process.standardError = errors?.pipe ?? FileHandle.nullDevice
        try process.run()
        output.start()
        errors?.start()
        return process
    }

    @Test func aCentralKilledWithSIGKILLGetsItsPeripheralBackConnectedAndNotifyingInItsNextProcess() async throws {
        for binary in [Self.daemonBinary, Self.probeBinary] {
            try #require(FileManager.default.isExecutableFile(atPath: binary), "run `swift build` first: \(binary)")
        }
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("restore-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 18))
        defer { radioServer.close() }

        // corebluetoothd, on a controller of its own on the radio.
        let socketPath = temporaryPath("corebluetoothd.sock")
        let daemonLog = ChildOutput()
        let daemon = try launch(Self.daemonBinary, ["--transport", "virtual:\(radioPath)", "--listen", socketPath],
                                output: ChildOutput(), errors: daemonLog)
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(10)) { daemonAccepts(socketPath) })

        let peripheral = NotifyingPeripheral()
        peripheral.manager = CBPeripheralManager(delegate: peripheral, queue: DispatchQueue(label: "peripheral"),
                                                 options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        func notify(_ byte: UInt8) -> Bool {
            peripheral.manager.updateValue(Data([byte]), for: peripheral.characteristic, onSubscribedCentrals: nil)
        }

        // The app connects, subscribes, hears a value, and is killed.
        let firstOutput = ChildOutput()
        let first = try launch(Self.probeBinary, [socketPath, "com.example.restore", "connect"], output: firstOutput)
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(20)) { firstOutput.lines.contains("notifying") && peripheral.subscribed == 1 },
                "\(firstOutput.lines)")
        #expect(notify(0x01))
        #expect(await eventually(timeout: .seconds(5)) { firstOutput.lines.contains("value 01") }, "\(firstOutput.lines)")
        kill(first.processIdentifier, SIGKILL)
        let pid = first.processIdentifier
        #expect(await eventually(timeout: .seconds(5)) { daemonLog.lines.contains { $0.contains("client pid \(pid) left") } },
                "\(daemonLog.lines)")

        // Values the peripheral sends while no process holds the identifier are kept.
        #expect(notify(0x02))
        #expect(notify(0x03))

        // The app's next process: the peripheral back, connected, discovered and notifying,
        // then the kept values in order, with no connect or subscribe.
        let secondOutput = ChildOutput()
        let second = try launch(Self.probeBinary, [socketPath, "com.example.restore", "restore"], output: secondOutput)
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(10)) { secondOutput.lines.contains("value 03") }, "\(secondOutput.lines)")
        #expect(secondOutput.lines == [
            "restored state=2 services=[\"FEED\"] characteristics=[\"FEE1\"] notifying=[true]", "state 5", "value 02", "value 03",
        ])
        #expect(notify(0x04))
        #expect(await eventually(timeout: .seconds(5)) { secondOutput.lines.last == "value 04" }, "\(secondOutput.lines)")

        // The peripheral never saw its subscriber go (an unsubscription, or the link dropping).
        #expect(peripheral.subscribed == 1 && peripheral.unsubscribed == 0)
        kill(second.processIdentifier, SIGKILL)
        daemon.terminate()
        #expect(await eventually(timeout: .seconds(10)) { !daemon.isRunning })
    }

    /// The peripheral side: a peripheral app (RestoreProbe serve) with a restore identifier
    /// publishes and advertises on the daemon, this process's central subscribes, the app is
    /// killed with SIGKILL, and its next process gets its services, subscribers and advertising
    /// back and reaches the central, which never saw anything change.
    @Test func aPeripheralKilledWithSIGKILLGetsItsServicesSubscribersAndAdvertisingBackInItsNextProcess() async throws {
        for binary in [Self.daemonBinary, Self.probeBinary] {
            try #require(FileManager.default.isExecutableFile(atPath: binary), "run `swift build` first: \(binary)")
        }
        let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
        defer { radioLoop.shutdown() }
        let radioPath = temporaryPath("restore-radio.sock")
        let radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: 19))
        defer { radioServer.close() }
        let socketPath = temporaryPath("corebluetoothd.sock")
        let daemonLog = ChildOutput()
        let daemon = try launch(Self.daemonBinary, ["--transport", "virtual:\(radioPath)", "--listen", socketPath],
                                output: ChildOutput(), errors: daemonLog)
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(10)) { daemonAccepts(socketPath) })

        let firstOutput = ChildOutput()
        let first = try launch(Self.probeBinary, [socketPath, "com.example.serve", "serve"], output: firstOutput)
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(10)) { firstOutput.lines.contains("advertising ") }, "\(firstOutput.lines)")

        let central = SubscribingCentral()
        central.manager = CBCentralManager(delegate: central, queue: DispatchQueue(label: "central"),
                                           options: [CBManagerOptionLinuxTransportKey: "virtual:\(radioPath)"])
        #expect(await eventually(timeout: .seconds(20)) { central.log.contains("notifying") && firstOutput.lines.contains("subscribed") },
                "\(central.log) \(firstOutput.lines)")
        kill(first.processIdentifier, SIGKILL)
        let pid = first.processIdentifier
        #expect(await eventually(timeout: .seconds(5)) { daemonLog.lines.contains { $0.contains("client pid \(pid) left") } },
                "\(daemonLog.lines)")

        let secondOutput = ChildOutput()
        let second = try launch(Self.probeBinary, [socketPath, "com.example.serve", "serve-restore"], output: secondOutput)
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        #expect(await eventually(timeout: .seconds(10)) { central.log.contains("value 42") }, "\(central.log) \(secondOutput.lines)")
        #expect(secondOutput.lines == [
            "restored services=[\"FEED\"] characteristics=[\"FEE1\"] subscribed=[1] name=Feed uuids=[\"FEED\"]",
            "state 5 advertising=true", "updated true",
        ])
        #expect(central.log == ["notifying", "value 42"])
        #expect(central.peripheral?.state == .connected)
        kill(second.processIdentifier, SIGKILL)
        daemon.terminate()
        #expect(await eventually(timeout: .seconds(10)) { !daemon.isRunning })
    }
}
