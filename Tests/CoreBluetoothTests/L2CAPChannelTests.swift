@testable import CoreBluetooth
import Dispatch
import Foundation
import Scheduling
import TestSupport
import Testing

private let serviceUUID = CBUUID(string: "5E5E1001-0000-1000-8000-00805F9B34FB")

/// Wakes a waiting test whenever something it watches may have changed.
final class Changes: @unchecked Sendable {
    private let condition = NSCondition()

    func changed() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `done` holds, checking it after every change and every delegate callback
    /// (at most `timeout` of wall time).
    func wait(timeout: TimeInterval = 30, until done: @escaping () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !done() {
            // Delegate callbacks do not signal here: wake at least every 50 ms to look again.
            if !condition.wait(until: min(deadline, Date(timeIntervalSinceNow: 0.05))), Date() >= deadline { return done() }
        }
        return true
    }
}

private let changes = Changes()

/// The book-style peripheral: publishes a channel, puts its PSM in Apple's PSM
/// characteristic, advertises, echoes every channel a central opens.
private final class ChannelServer: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let psm = Locked<CBL2CAPPSM?>(nil)
    let echoes = Locked<[ChannelEcho]>([])
    let streams = StreamRunLoopThread()

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        peripheral.publishL2CAPChannel(withEncryption: false)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        guard error == nil else { return log.append("publish failed") }
        psm.withLock { $0 = PSM }
        log.append("published \(PSM)")
        let service = CBMutableService(type: serviceUUID, primary: true)
        service.characteristics = [
            CBMutableCharacteristic(type: CBUUID(string: CBUUIDL2CAPPSMCharacteristicString), properties: [.read],
                                    value: Data([UInt8(PSM & 0xFF), UInt8(PSM >> 8)]), permissions: [.readable])
        ]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Channel", CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append(error == nil ? "advertising" : "advertising failed")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        log.append(error == nil ? "unpublished \(PSM)" : "unpublish failed")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return log.append("open failed") }
        log.append("opened \(channel.psm)")
        echoes.withLock { $0.append(ChannelEcho(channel, on: streams.runLoop) { changes.changed() }) }
    }
}

/// The central: finds the peripheral, reads the PSM characteristic, opens channels.
private final class ChannelClient: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    let log = EventLog()
    let peripheral = Locked<CBPeripheral?>(nil)
    let psm = Locked<CBL2CAPPSM?>(nil)
    let channels = Locked<[CBL2CAPChannel]>([])
    let errors = Locked<[Error]>([])

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [serviceUUID]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard self.peripheral.current == nil else { return }
        self.peripheral.withLock { $0 = peripheral }
        central.stopScan()
        central.connect(peripheral)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices([serviceUUID])
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first else { return }
        peripheral.discoverCharacteristics([CBUUID(string: CBUUIDL2CAPPSMCharacteristicString)], for: service)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristic = service.characteristics?.first else { return }
        peripheral.readValue(for: characteristic)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value, value.count == 2 else { return }
        let psm = CBL2CAPPSM(value[0]) | CBL2CAPPSM(value[1]) << 8
        self.psm.withLock { $0 = psm }
        peripheral.openL2CAPChannel(psm)
    }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        if let channel {
            channels.withLock { $0.append(channel) }
            log.append("opened \(channel.psm)")
        } else {
            errors.withLock { $0.append(error ?? CBError(.unknown)) }
            log.append("open failed")
        }
    }
}

@Suite(.serialized) struct L2CAPChannelTests {
    @Test(.disabled(if: DaemonMode.isOn, "reads the process's own btsnoop capture, which on a daemon is the daemon's (its channel traffic is covered by DaemonChannelTests)"))
    func aCentralStreams64KiBThroughThePeripheralsEchoThenTheUnpublishedPSMIsRefused() throws {
        let capture = temporaryPath("l2cap-central.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: capture) }
        let radio = CBVirtualRadio(clock: .realTime)
        let server = ChannelServer()
        let client = ChannelClient()
        var peripheralManager: CBPeripheralManager? = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: server, queue: DispatchQueue(label: "channel peripheral"))
        }
        #expect(changes.wait(until: { server.log.contains("advertising") }))
        var central: CBCentralManager? = CBVirtualRadio.withCurrent(radio) {
            CBCentralManager(delegate: client, queue: DispatchQueue(label: "channel central"),
                             options: [CBManagerOptionLinuxSnoopPathKey: capture])
        }
        #expect(changes.wait(until: { client.channels.current.count == 1 }))
        let psm = try #require(server.psm.current)
        #expect((0x0080...0x00FF).contains(psm))
        #expect(client.psm.current == psm)
        let channel = try #require(client.channels.current.first)
        #expect(channel.psm == psm)
        #expect(channel.peer is CBPeripheral)
        #expect(changes.wait(until: { server.log.contains("opened \(psm)") }))

        // 64 KiB out, through the echo, and back.
        let payload = (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        let sender = ChannelSender(channel, payload: payload, on: server.streams.runLoop) { changes.changed() }
        #expect(changes.wait(until: { sender.received.count >= payload.count }))
        #expect(sender.received.count == payload.count)
        #expect(sender.received == payload, "the echo differs")
        #expect(changes.wait(until: { server.echoes.current.first?.channel.peer is CBCentral }))

        // Unpublished: a new channel to the PSM is refused, with an error.
        peripheralManager?.unpublishL2CAPChannel(psm)
        #expect(changes.wait(until: { server.log.contains("unpublished \(psm)") }))
        let peripheral = try #require(client.peripheral.current)
        peripheral.openL2CAPChannel(psm)
        #expect(changes.wait(until: { client.log.contains("open failed") }))
        #expect(client.errors.current.count == 1)

        // Closing both streams closes the channel: the peripheral's echo sees the end.
        sender.close()
        #expect(changes.wait(until: { server.echoes.current.first?.ended == true }))

        central = nil
        peripheralManager = nil
        _ = (central, peripheralManager)
        server.streams.stop()
        let result = try Tshark.check(capture: capture)
        #expect(result.isClean, "\(result.malformed) \(result.expertErrors)")
        #expect(result.frameProtocols.contains { $0.contains("btl2cap") })
    }
}

/// A peripheral manager publishing an encryption-required channel, and a central opening it.
private final class SecureChannelServer: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let psm = Locked<CBL2CAPPSM?>(nil)
    let opened = Locked<[CBL2CAPChannel]>([])

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        if peripheral.state == .poweredOn { peripheral.publishL2CAPChannel(withEncryption: true) }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        psm.withLock { $0 = PSM }
        peripheral.add(CBMutableService(type: serviceUUID, primary: true))
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "Secure", CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) { log.append("advertising") }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        if let channel { opened.withLock { $0.append(channel) } }
        log.append("opened")
    }
}

@Suite struct SecureL2CAPChannelTests {
    /// As iOS: the peripheral refuses the unencrypted link (Insufficient Authentication), the
    /// central pairs on its own — asking its agent — and opens again, with no call of the app's.
    @Test(.disabled(if: DaemonMode.isOn, "counts the process's bonds (linuxBonds), which on a daemon are the daemon's"))
    func anEncryptionRequiredChannelMakesTheCentralPairThenOpens() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let server = SecureChannelServer()
        let recorder = CentralRecorder()
        let peripheralManager = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: server, queue: DispatchQueue(label: "secure channel peripheral"))
        }
        let central = CBVirtualRadio.withCurrent(radio) {
            CBCentralManager(delegate: recorder, queue: recorder.queue)
        }
        let agent = ScriptedPairingAgent(.noInputNoOutput)
        central.linuxPairingAgent = agent
        #expect(radio.run(until: { server.log.contains("advertising") && central.state == .poweredOn }, timeout: .seconds(10)))
        central.scanForPeripherals(withServices: [serviceUUID])
        #expect(radio.run(until: { recorder.discovered(named: "Secure") != nil }, timeout: .seconds(10)))
        let peripheral = try #require(recorder.discovered(named: "Secure"))
        central.stopScan()
        central.connect(peripheral)
        #expect(radio.run(until: { peripheral.state == .connected }, timeout: .seconds(10)))
        let opens = ChannelOpens()
        peripheral.delegate = opens
        let psm = try #require(server.psm.current)
        peripheral.openL2CAPChannel(psm)
        #expect(radio.run(until: { opens.results.current.count == 1 }, timeout: .seconds(60)))
        let result = try #require(opens.results.current.first)
        #expect(result.psm == psm, "\(result.error ?? "")")
        #expect(agent.requests == [.confirmPairing])
        #expect(radio.run(until: { server.opened.current.count == 1 }, timeout: .seconds(10)))
        #expect(central.linuxBonds.count == 1)
        _ = peripheralManager
    }
}

/// A peripheral delegate recording each channel open's outcome.
private final class ChannelOpens: NSObject, CBPeripheralDelegate, @unchecked Sendable {
    let results = Locked<[(psm: CBL2CAPPSM?, error: String?)]>([])
    let channels = Locked<[CBL2CAPChannel]>([])

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        if let channel { channels.withLock { $0.append(channel) } }
        results.withLock { $0.append((channel?.psm, error.map { "\($0)" })) }
    }
}
