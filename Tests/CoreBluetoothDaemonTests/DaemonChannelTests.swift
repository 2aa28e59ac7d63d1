import CoreBluetooth
import CoreBluetoothDaemon
import DaemonProtocol
import Foundation
import HCI
import HostDevice
import RemoteRoles
import Scheduling
import TestSupport
import Testing
import VirtualController

// Issue 16: L2CAP channels and pairing prompts through corebluetoothd (docs/daemon.md,
// "Channels and pairing"), with Apple's API on both sides of a shared virtual radio.

/// A shared virtual radio and `corebluetoothd` on a virtual controller of its own on it,
/// served on a socket, all in this process.
private final class Bench: @unchecked Sendable {
    let radioLoop = EventLoop(name: "shared radio", pacing: .realTime)
    let radioPath = temporaryPath("channel-radio.sock")
    let socketPath = temporaryPath("corebluetoothd-channels.sock")
    private let radioServer: RadioServer
    private let proxy: RadioProxy
    private let controller: VirtualController
    let device: HostDevice
    private var daemon: DaemonServer!

    init(seed: UInt64) async throws {
        radioServer = try RadioServer(path: radioPath, radio: VirtualRadio(loop: radioLoop, airTime: .instant, seed: seed))
        proxy = try RadioProxy(path: radioPath)
        try proxy.waitUntilJoined()
        controller = VirtualController(radio: proxy, address: BluetoothAddress("CB:D1:00:00:16:\(String(format: "%02X", seed))")!)
        device = HostDevice(transport: controller.makeHostTransport(), loop: proxy.loop, deviceName: "corebluetoothd")
        let started = Locked<Bool?>(nil)
        let device = self.device
        proxy.loop.execute { device.start { result in started.withLock { $0 = (try? result.get()) != nil } } }
        _ = await eventually { started.current != nil }
        try #require(started.current == true)
        daemon = try DaemonServer(path: socketPath, device: device)
    }

    /// Another path to the daemon's socket: a manager on it has a connection of its own, as a
    /// second process has.
    func secondPath() throws -> String {
        let link = temporaryPath("corebluetoothd-channels-link.sock")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: socketPath)
        return link
    }

    /// The daemon's status line as fields (`channels`, `paused`, `buffered`, …).
    func status() async -> [String: String] {
        let line = Locked<String?>(nil)
        daemon.status { text in line.withLock { $0 = text } }
        _ = await eventually { line.current != nil }
        var fields: [String: String] = [:]
        for pair in (line.current ?? "").split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    func close() {
        daemon.close()
        let device = self.device
        withExtendedLifetime(controller) { proxy.loop.execute { device.stop() } }
        radioServer.close()
        radioLoop.shutdown()
    }
}

/// A peripheral app: publishes a channel (the PSM named, else a dynamic one), adds `service`
/// (with an encryption-required characteristic, `…02`, and one its app answers, `…01`) and
/// advertises it; keeps the channels centrals open.
private final class ChannelApp: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let psm = Locked<CBL2CAPPSM?>(nil)
    let opened = Locked<[CBL2CAPChannel]>([])
    let service: CBUUID
    let prefix: String
    let namedPSM: CBL2CAPPSM?
    let advertise: Bool
    var manager: CBPeripheralManager!

    init(prefix: String, psm: CBL2CAPPSM? = nil, advertise: Bool = true) {
        self.prefix = prefix
        service = CBUUID(string: prefix + "00")
        namedPSM = psm
        self.advertise = advertise
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        log.append("state \(peripheral.state.rawValue)")
        guard peripheral.state == .poweredOn else { return }
        if let namedPSM { peripheral.linuxPublishL2CAPChannel(namedPSM, withEncryption: false) } else {
            peripheral.publishL2CAPChannel(withEncryption: false)
        }
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        if let error {
            log.append("publish failed \((error as? CBError)?.code.rawValue ?? -1)")
            return
        }
        psm.withLock { $0 = PSM }
        log.append("published")
        let definition = CBMutableService(type: service, primary: true)
        definition.characteristics = [
            CBMutableCharacteristic(type: CBUUID(string: prefix + "01"), properties: [.read], value: nil, permissions: [.readable]),
            CBMutableCharacteristic(type: CBUUID(string: prefix + "02"), properties: [.read], value: nil,
                                    permissions: [.readEncryptionRequired]),
        ]
        peripheral.add(definition)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        log.append("added")
        if advertise { peripheral.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [self.service]]) }
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) { log.append("advertising") }

    func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        log.append("unpublished \(error == nil ? "ok" : "error")")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        request.value = Data("secret".utf8)
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return log.append("open failed") }
        opened.withLock { $0.append(channel) }
        log.append("opened \(channel.psm)")
    }
}

/// A central app: finds `target`, connects, discovers every characteristic; reads and opens
/// channels as the test asks.
private final class CentralApp: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    let log = EventLog()
    let peripheral = Locked<CBPeripheral?>(nil)
    let characteristics = Locked<[CBUUID: CBCharacteristic]>([:])
    let values = Locked<[CBUUID: Data]>([:])
    let channels = Locked<[CBL2CAPChannel]>([])
    let target: CBUUID
    let connectAtOnce: Bool
    var manager: CBCentralManager!

    init(target: CBUUID, connectAtOnce: Bool = true) {
        self.target = target
        self.connectAtOnce = connectAtOnce
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [target]) }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
                        rssi RSSI: NSNumber) {
        guard self.peripheral.current == nil else { return }
        self.peripheral.withLock { $0 = peripheral }
        central.stopScan()
        log.append("discovered")
        if connectAtOnce { central.connect(peripheral) }
    }

    func connect() { if let peripheral = peripheral.current { manager.connect(peripheral) } }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices(nil)
        log.append("connected")
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        log.append("disconnected")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        for service in peripheral.services ?? [] { peripheral.discoverCharacteristics(nil, for: service) }
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        characteristics.withLock { for characteristic in service.characteristics ?? [] { $0[characteristic.uuid] = characteristic } }
        log.append("characteristics")
    }

    func read(_ uuid: CBUUID) {
        guard let peripheral = peripheral.current, let characteristic = characteristics.current[uuid] else { return log.append("no \(uuid)") }
        peripheral.readValue(for: characteristic)
    }

    func open(_ psm: CBL2CAPPSM) { peripheral.current?.openL2CAPChannel(psm) }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        if let error { return log.append("read failed \(error)") }
        values.withLock { $0[characteristic.uuid] = characteristic.value }
        log.append("value \(characteristic.uuid)")
    }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return log.append("open failed \(error.map { "\($0)" } ?? "")") }
        channels.withLock { $0.append(channel) }
        log.append("opened \(channel.psm)")
    }
}

/// Reads a channel's input stream to the end, keeping every byte (its output stream stays shut).
private final class ChannelReader: NSObject, StreamDelegate, @unchecked Sendable {
    let channel: CBL2CAPChannel
    private let state = Locked((bytes: [UInt8](), ended: false))
    var received: [UInt8] { state.current.bytes }
    var ended: Bool { state.current.ended }

    init(_ channel: CBL2CAPChannel, on runLoop: RunLoop) {
        self.channel = channel
        super.init()
        channel.inputStream.delegate = self
        channel.inputStream.schedule(in: runLoop, forMode: .default)
        channel.inputStream.open()
    }

    func stream(_ stream: Stream, handle event: Stream.Event) {
        if event.contains(.hasBytesAvailable) {
            var buffer = [UInt8](repeating: 0, count: 16384)
            while channel.inputStream.hasBytesAvailable {
                let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
                guard count > 0 else { break }
                state.withLock { $0.bytes += buffer[0..<count] }
            }
        }
        if event.contains(.endEncountered) || event.contains(.errorOccurred) { state.withLock { $0.ended = true } }
    }
}

/// A pairing agent written down by the test: answers what it is asked (numbers accepted, a
/// passkey shown and typed from `peer`'s display), or holds every request with `hold`.
private final class TestAgent: CBPairingAgent, @unchecked Sendable {
    let ioCapability: CBPairingIOCapability
    private let hold: Bool
    let asked = Locked<[CBPairingRequest.Kind]>([])
    let held = Locked<[CBPairingRequest]>([])
    let shown = Locked<UInt32?>(nil)
    private let didShow = DispatchSemaphore(value: 0)
    /// Whose display a passkey to type is read from.
    weak var peer: TestAgent?

    init(_ ioCapability: CBPairingIOCapability, hold: Bool = false) {
        self.ioCapability = ioCapability
        self.hold = hold
    }

    func handle(_ request: CBPairingRequest) {
        asked.withLock { $0.append(request.kind) }
        if hold { return held.withLock { $0.append(request) } }
        switch request.kind {
        case .confirmPairing, .confirmNumber: request.accept()
        case .displayPasskey(let value):
            shown.withLock { $0 = value }
            didShow.signal()
            request.accept()
        case .enterPasskey:
            let peer = peer
            // The user reads the peer's display: it may show after this question comes.
            DispatchQueue.global().async {
                guard let peer, peer.didShow.wait(timeout: .now() + 10) == .success, let value = peer.shown.current else {
                    return request.reject()
                }
                request.enterPasskey(value)
            }
        case .outOfBandData: request.reject()
        }
    }
}

@Suite("corebluetoothd: L2CAP channels and pairing prompts through the daemon")
struct DaemonChannelTests {
    @Test func channelsOpenBothWaysThroughTheDaemonCarryDataBothWaysAndCloseFromEitherEnd() async throws {
        let bench = try await Bench(seed: 0x41)
        defer { bench.close() }
        let streams = StreamRunLoopThread()
        defer { streams.stop() }
        let payload = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }

        // 1. A peripheral manager on the daemon publishes; a central on the radio opens.
        let served = ChannelApp(prefix: "FB")
        served.manager = CBPeripheralManager(delegate: served, queue: DispatchQueue(label: "served"),
                                             options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { served.log.contains("advertising") }, "\(served.log.all)")
        let psm = try #require(served.psm.current)
        #expect((0x0080...0x00FF).contains(psm))
        let phone = CentralApp(target: served.service)
        phone.manager = CBCentralManager(delegate: phone, queue: DispatchQueue(label: "phone"),
                                         options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { phone.log.contains("characteristics") }, "\(phone.log.all)")
        phone.open(psm)
        #expect(await eventually { phone.channels.current.count == 1 && served.opened.current.count == 1 },
                "\(phone.log.all) \(served.log.all)")
        let incoming = try #require(served.opened.current.first)
        #expect(incoming.psm == psm && incoming.peer is CBCentral)
        let echo = ChannelEcho(incoming, on: streams.runLoop)
        let sender = ChannelSender(try #require(phone.channels.current.first), payload: payload, on: streams.runLoop)
        #expect(await eventually(timeout: .seconds(60)) { sender.received.count >= payload.count }, "\(sender.received.count)")
        #expect(sender.received == payload, "the echo through the daemon differs")
        #expect(await bench.status()["channels"] == "1")
        // Closed by the central on the radio: the app on the daemon sees the end.
        sender.close()
        #expect(await eventually { echo.ended }, "the daemon's app did not see the channel close")
        #expect(await eventually(every: .milliseconds(5)) { await bench.status()["channels"] == "0" })

        // 2. A peripheral on the radio publishes; a central on the daemon opens.
        let radioPeripheral = ChannelApp(prefix: "FC", psm: 0x00C4)
        radioPeripheral.manager = CBPeripheralManager(delegate: radioPeripheral, queue: DispatchQueue(label: "radio peripheral"),
                                                      options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { radioPeripheral.log.contains("advertising") }, "\(radioPeripheral.log.all)")
        let client = CentralApp(target: radioPeripheral.service)
        client.manager = CBCentralManager(delegate: client, queue: DispatchQueue(label: "client"),
                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { client.log.contains("characteristics") }, "\(client.log.all)")
        // A PSM nobody published is refused with an error, through the daemon.
        client.open(0x00C5)
        #expect(await eventually { client.log.all.contains { $0.hasPrefix("open failed") } }, "\(client.log.all)")
        client.open(0x00C4)
        #expect(await eventually { client.channels.current.count == 1 && radioPeripheral.opened.current.count == 1 },
                "\(client.log.all) \(radioPeripheral.log.all)")
        let outgoing = try #require(client.channels.current.first)
        #expect(outgoing.psm == 0x00C4 && outgoing.peer is CBPeripheral)
        let radioEcho = ChannelEcho(try #require(radioPeripheral.opened.current.first), on: streams.runLoop)
        let clientSender = ChannelSender(outgoing, payload: payload, on: streams.runLoop)
        #expect(await eventually(timeout: .seconds(60)) { clientSender.received.count >= payload.count }, "\(clientSender.received.count)")
        #expect(clientSender.received == payload, "the echo to the daemon's client differs")
        // Closed by the daemon's client: the peripheral on the radio sees the end.
        clientSender.close()
        #expect(await eventually { radioEcho.ended }, "the radio's peripheral did not see the channel close")
        #expect(await eventually(every: .milliseconds(5)) { await bench.status()["channels"] == "0" })
        withExtendedLifetime((echo, radioEcho)) {}
    }

    @Test func aPSMBelongsToTheProcessThatPublishedItAndGoesWithItsChannels() async throws {
        let bench = try await Bench(seed: 0x42)
        defer { bench.close() }
        let streams = StreamRunLoopThread()
        defer { streams.stop() }
        let firstPath = bench.socketPath, secondPath = try bench.secondPath()

        let owner = ChannelApp(prefix: "FD", psm: 0x00D0)
        owner.manager = CBPeripheralManager(delegate: owner, queue: DispatchQueue(label: "owner"),
                                            options: [CBManagerOptionLinuxTransportKey: "daemon:\(firstPath)"])
        #expect(await eventually { owner.log.contains("advertising") }, "\(owner.log.all)")
        // Another process cannot publish the PSM, nor unpublish it.
        let other = ChannelApp(prefix: "FE", psm: 0x00D0, advertise: false)
        other.manager = CBPeripheralManager(delegate: other, queue: DispatchQueue(label: "other"),
                                            options: [CBManagerOptionLinuxTransportKey: "daemon:\(secondPath)"])
        #expect(await eventually { other.log.all.contains { $0.hasPrefix("publish failed") } }, "\(other.log.all)")
        other.manager.unpublishL2CAPChannel(0x00D0)
        #expect(await eventually { other.log.contains("unpublished error") }, "\(other.log.all)")

        // A central opens a channel to the owner's PSM; the owner's process dies (its connection
        // to the daemon ends as a crash leaves it): the channel closes at the central.
        let phone = CentralApp(target: owner.service)
        phone.manager = CBCentralManager(delegate: phone, queue: DispatchQueue(label: "phone"),
                                         options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { phone.log.contains("characteristics") }, "\(phone.log.all)")
        phone.open(0x00D0)
        #expect(await eventually { phone.channels.current.count == 1 && owner.opened.current.count == 1 }, "\(phone.log.all)")
        let reader = ChannelReader(try #require(phone.channels.current.first), on: streams.runLoop)
        try DaemonSessionHost.connecting(to: firstPath, name: "test").abandon()
        #expect(await eventually { reader.ended }, "the channel of the gone process stayed open at the central")
        #expect(await eventually(every: .milliseconds(5)) { await bench.status()["channels"] == "0" })

        // Its PSM went with it: the other process publishes it now.
        other.manager.linuxPublishL2CAPChannel(0x00D0, withEncryption: false)
        #expect(await eventually { other.log.contains("published") }, "\(other.log.all)")
    }

    @Test func aClientThatDoesNotReadHoldsThePeerBackNotTheDaemonAndOthersAreServed() async throws {
        let bench = try await Bench(seed: 0x43)
        defer { bench.close() }
        let streams = StreamRunLoopThread()
        defer { streams.stop() }
        let slow = ChannelApp(prefix: "F1")
        slow.manager = CBPeripheralManager(delegate: slow, queue: DispatchQueue(label: "slow"),
                                           options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        #expect(await eventually { slow.log.contains("advertising") }, "\(slow.log.all)")
        let other = ChannelApp(prefix: "F2", advertise: false)
        other.manager = CBPeripheralManager(delegate: other, queue: DispatchQueue(label: "other"),
                                            options: [CBManagerOptionLinuxTransportKey: "daemon:\(try bench.secondPath())"])
        #expect(await eventually { other.log.contains("added") }, "\(other.log.all)")
        let psm = try #require(slow.psm.current)

        let phone = CentralApp(target: slow.service)
        phone.manager = CBCentralManager(delegate: phone, queue: DispatchQueue(label: "phone"),
                                         options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        #expect(await eventually { phone.characteristics.current[CBUUID(string: "F201")] != nil }, "\(phone.log.all)")
        phone.open(psm)
        #expect(await eventually { phone.channels.current.count == 1 && slow.opened.current.count == 1 }, "\(phone.log.all)")
        // The phone sends far more than every buffer on the way holds; the app never reads.
        let payload = (0..<(768 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 11) }
        let sender = ChannelSender(try #require(phone.channels.current.first), payload: payload, on: streams.runLoop)
        // The app's stream fills, its client says so, and the daemon withholds the phone's
        // credits (paused with less than a window out: the client's pause, not the window's).
        // The daemon holds at most the window, and what credits already given let the phone
        // send meanwhile (64 credits of 247 bytes, and one SDU being reassembled).
        let bound = DaemonFrame.channelWindow + 64 * 247 + 4096
        var status: [String: String] = [:]
        func held() -> Int { Int(status["buffered"] ?? "") ?? .max }
        #expect(await eventually(timeout: .seconds(60)) {
            status = await bench.status()
            return status["paused"] == "1" && held() < DaemonFrame.channelWindow
        }, "\(status)")
        // The other client is served meanwhile: a read its app answers.
        phone.read(CBUUID(string: "F201"))
        #expect(await eventually { phone.values.current[CBUUID(string: "F201")] == Data("secret".utf8) }, "\(phone.log.all)")
        status = await bench.status()
        #expect(status["paused"] == "1" && held() <= bound, "\(status)")

        // The app reads at last: everything arrives, in order.
        let reader = ChannelReader(try #require(slow.opened.current.first), on: streams.runLoop)
        #expect(await eventually(timeout: .seconds(120)) { reader.received.count >= payload.count }, "\(reader.received.count)")
        #expect(reader.received == payload, "what the slow reader got differs")
        #expect(await eventually(every: .milliseconds(5)) { await bench.status()["paused"] == "0" })
        withExtendedLifetime(sender) {}
    }

    @Test(arguments: [("numeric comparison", CBPairingIOCapability.displayYesNo, CBPairingIOCapability.displayYesNo),
                      ("passkey entry", CBPairingIOCapability.keyboardOnly, CBPairingIOCapability.displayOnly)])
    func aPairingPromptGoesToTheClientThatOwnsTheLinkAndItsAnswerComesBack(
        method: String, clientCapability: CBPairingIOCapability, peerCapability: CBPairingIOCapability
    ) async throws {
        let bench = try await Bench(seed: method == "passkey entry" ? 0x45 : 0x44)
        defer { bench.close() }
        let vault = ChannelApp(prefix: "F3")
        vault.manager = CBPeripheralManager(delegate: vault, queue: DispatchQueue(label: "vault"),
                                            options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        let peerAgent = TestAgent(peerCapability)
        vault.manager.linuxPairingAgent = peerAgent
        #expect(await eventually { vault.log.contains("advertising") }, "\(vault.log.all)")

        let client = CentralApp(target: vault.service)
        let agent = TestAgent(clientCapability)
        agent.peer = peerAgent
        client.manager = CBCentralManager(delegate: client, queue: DispatchQueue(label: "client"),
                                          options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        client.manager.linuxPairingAgent = agent
        #expect(await eventually { client.characteristics.current[CBUUID(string: "F302")] != nil }, "\(client.log.all)")
        // The read needs encryption: the daemon pairs, asking this client's agent.
        client.read(CBUUID(string: "F302"))
        #expect(await eventually(timeout: .seconds(20)) { client.values.current[CBUUID(string: "F302")] == Data("secret".utf8) },
                "\(client.log.all) asked \(agent.asked.current)")
        switch method {
        case "numeric comparison":
            let numbers = peerAgent.asked.current.compactMap { kind -> UInt32? in
                if case .confirmNumber(let number) = kind { return number }
                return nil
            }
            let number = try #require(numbers.first)
            #expect(agent.asked.current == [.confirmNumber(number)])
        default:
            let passkey = try #require(peerAgent.shown.current)
            #expect(peerAgent.asked.current == [.displayPasskey(passkey)])
            #expect(agent.asked.current == [.enterPasskey])
        }
    }

    @Test func aClientThatLeavesMidPromptFailsThePairingAtOnceAndTheSharedLinkServesTheOther() async throws {
        let bench = try await Bench(seed: 0x46)
        defer { bench.close() }
        let vault = ChannelApp(prefix: "F4")
        vault.manager = CBPeripheralManager(delegate: vault, queue: DispatchQueue(label: "vault"),
                                            options: [CBManagerOptionLinuxTransportKey: "virtual:\(bench.radioPath)"])
        vault.manager.linuxPairingAgent = TestAgent(.displayYesNo)
        #expect(await eventually { vault.log.contains("advertising") }, "\(vault.log.all)")

        // Two processes on the daemon find the peripheral; one connects, then the other shares its link.
        let leaving = CentralApp(target: vault.service, connectAtOnce: false)
        let holding = TestAgent(.displayYesNo, hold: true)
        leaving.manager = CBCentralManager(delegate: leaving, queue: DispatchQueue(label: "leaving"),
                                           options: [CBManagerOptionLinuxTransportKey: "daemon:\(bench.socketPath)"])
        leaving.manager.linuxPairingAgent = holding
        let staying = CentralApp(target: vault.service, connectAtOnce: false)
        staying.manager = CBCentralManager(delegate: staying, queue: DispatchQueue(label: "staying"),
                                           options: [CBManagerOptionLinuxTransportKey: "daemon:\(try bench.secondPath())"])
        #expect(await eventually { leaving.log.contains("discovered") && staying.log.contains("discovered") })
        staying.connect()
        #expect(await eventually { staying.characteristics.current[CBUUID(string: "F402")] != nil }, "\(staying.log.all)")
        leaving.connect()
        #expect(await eventually { leaving.characteristics.current[CBUUID(string: "F402")] != nil }, "\(leaving.log.all)")

        // The read needs encryption: the prompt reaches the leaving process's agent, which holds it.
        leaving.read(CBUUID(string: "F402"))
        #expect(await eventually(timeout: .seconds(20)) { holding.held.current.count == 1 }, "\(holding.asked.current)")
        try DaemonSessionHost.connecting(to: bench.socketPath, name: "test").abandon()
        #expect(await eventually(every: .milliseconds(5)) { await bench.status()["clients"] == "1" })

        // The pairing failed at once, not at SMP's 30 s timeout: the other process's read of
        // the protected value on the shared link is answered now (were the prompt still open,
        // its read would wait for that pairing). It is refused: the peripheral will not pair
        // again for a second after a failed pairing (Repeated Attempts, Vol 3 Part H §2.3.6).
        let start = ContinuousClock.now
        staying.read(CBUUID(string: "F402"))
        #expect(await eventually(timeout: .seconds(20)) {
            staying.values.current[CBUUID(string: "F402")] != nil || staying.log.count(prefix: "read failed") == 1
        }, "\(staying.log.all)")
        // The link serves it on.
        staying.read(CBUUID(string: "F401"))
        #expect(await eventually { staying.values.current[CBUUID(string: "F401")] == Data("secret".utf8) }, "\(staying.log.all)")
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(!staying.log.contains("disconnected"))
        withExtendedLifetime(holding) {}
    }
}
