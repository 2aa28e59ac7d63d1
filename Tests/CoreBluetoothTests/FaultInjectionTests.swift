@testable import CoreBluetooth
import Dispatch
import Foundation
@testable import HCIDriver
import HCITransport
@testable import HostDevice
@testable import HostStack
@testable import GATT
import Scheduling
import TestSupport
import Testing
@testable import VirtualController

// Issue 17, fault injection: a procedure runs through Apple's API on both sides (a
// CBCentralManager and a CBPeripheralManager on one virtual radio, virtual clock), its steps
// counted first (the link-layer data PDUs carrying something, either way, seen on the radio);
// then, for every k, it runs again with a fault fired right after its k-th PDU (k = 0: the call
// is made and nothing went on the air yet). Each run checks that every call the app made got
// its delegate callback exactly once, failed ones with Apple's error for the fault; that nothing
// reaches the peripheral's delegate after didDisconnectPeripheral (or after the manager's state
// left .poweredOn); that nothing of the link is left at any layer of either side (host device
// connections, LE connections, the HCI driver's ACL queues and credits, the controller's
// connections and ACL buffers, the GATT server's per-connection state, and the objects
// themselves, by weak references); that the peripheral manager heard every subscription end;
// and that the app connects again and the procedure succeeds. A call the app makes once the
// peripheral is no longer connected is refused as misuse (no callback), as on iOS: the run
// counts only the calls the peripheral accepted.

private let serviceUUID = CBUUID(string: "FA170001-0000-1000-8000-00805F9B34FB")
private let longUUID = CBUUID(string: "FA170002-0000-1000-8000-00805F9B34FB")
private let writableUUID = CBUUID(string: "FA170003-0000-1000-8000-00805F9B34FB")
private let notifyingUUID = CBUUID(string: "FA170004-0000-1000-8000-00805F9B34FB")
private let secretUUID = CBUUID(string: "FA170005-0000-1000-8000-00805F9B34FB")
private let longValue = Data((0..<500).map { UInt8(truncatingIfNeeded: $0 &* 7) })
private let longWrite = Data((0..<300).map { UInt8(truncatingIfNeeded: $0) })

/// What goes wrong.
enum InjectedFault: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// The peripheral goes out of range: both link layers time out (supervision timeout).
    case linkLoss = "link loss"
    /// The peripheral's host terminates the link (LL_TERMINATE_IND).
    case peerTerminates = "peer terminates"
    /// The central's controller is powered off (reset: its state and links are gone).
    case powerOff = "controller off"
    /// The transport between the central's host and its controller closes.
    case transportClosed = "transport closed"
    /// The peripheral's controller is powered off: the central's link times out; the peripheral
    /// manager loses its services and links.
    case peripheralOff = "peripheral off"
    /// The central's controller resets itself (a Hardware Error event: its state and links are
    /// gone): the host resets it, the links end as disconnections (Hardware Failure), and the
    /// manager goes `.resetting`, then `.poweredOn` again.
    case controllerReset = "controller resets itself"
    var testDescription: String { rawValue }

    /// Whether the manager hears of it as a state change rather than a disconnection.
    var isControllerLoss: Bool { self == .powerOff || self == .transportClosed }

    /// Apple's error for the disconnection and for what it ended: a supervision timeout is
    /// `connectionTimeout`; otherwise the peripheral disconnected.
    var expectedError: CBError.Code { self == .linkLoss || self == .peripheralOff ? .connectionTimeout : .peripheralDisconnected }
}

/// What the app does.
enum FaultedProcedure: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// Services (by UUID), then the service's characteristics, then a characteristic's descriptors.
    case discovery
    /// A 500-byte value at an ATT_MTU of 100 (Read, then Read Blobs).
    case longRead = "long read"
    /// A 300-byte write with response at an ATT_MTU of 100: the prepared-write queue, each echo checked, then execute
    /// (what Core Bluetooth's API offers of reliable writes).
    case longWrite = "long write"
    /// setNotifyValue(true): the CCCD write; the peripheral notifies once subscribed.
    case subscribe
    /// A read refused for want of encryption: the central pairs (Just Works, bonding), then reads.
    case pairing
    /// openL2CAPChannel on the peripheral's published PSM.
    case channelOpen = "channel open"
    var testDescription: String { rawValue }
}

/// The peripheral side: Apple's API only.
private final class FaultServer: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: every mutable field is behind `lock` or a Locked.
    let log = EventLog()
    let psm = Locked<CBL2CAPPSM?>(nil)
    /// The channels centrals opened, kept (releasing one closes it) until the test drops them.
    let channels = Locked<[CBL2CAPChannel]>([])
    /// The notifying characteristic as last added (a powered-off manager's services are gone).
    let notifying = Locked(CBMutableCharacteristic(type: notifyingUUID, properties: [.notify], value: nil, permissions: []))

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("state \(peripheral.state.rawValue)") }
    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        log.append("added \(error == nil ? "ok" : "error")")
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append("advertising \(error == nil ? "ok" : "error")")
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        if error == nil { psm.withLock { $0 = PSM } }
        log.append("published")
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        if let channel { channels.withLock { $0.append(channel) } }
        log.append("opened")
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        let value = Data("secret".utf8)
        request.value = value.subdata(in: min(request.offset, value.count)..<value.count)
        peripheral.respond(to: request, withResult: .success)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        peripheral.respond(to: requests[0], withResult: .success)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        log.append("subscribed")
        _ = peripheral.updateValue(Data([1, 2, 3]), for: notifying.current, onSubscribedCentrals: nil)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic) {
        log.append("unsubscribed")
    }
}

/// One run of a procedure: the calls it made and the callbacks they got, written on the
/// central's delegate queue.
private final class ProcedureRun: @unchecked Sendable {
    // @unchecked: every field is behind `lock`.
    let procedure: FaultedProcedure
    private let lock = NSLock()
    private var issuedStorage: [String: Int] = [:]
    private var answeredStorage: [String: Int] = [:]
    private var errorsStorage: [String] = []
    private var refusedStorage: [String] = []
    private var doneStorage = false
    private var notifiedStorage = false
    private var channelStorage: CBL2CAPChannel?

    init(_ procedure: FaultedProcedure) { self.procedure = procedure }

    var issued: [String: Int] { lock.withLock { issuedStorage } }
    var answered: [String: Int] { lock.withLock { answeredStorage } }
    /// "kind domain code" for every failed callback.
    var errors: [String] { lock.withLock { errorsStorage } }
    var isDone: Bool { lock.withLock { doneStorage } }
    func dropChannel() { lock.withLock { channelStorage = nil } }

    /// Makes a call and counts it if the peripheral accepted it (it waits for its callback):
    /// one made as the link goes, once the peripheral is no longer connected, is refused as
    /// misuse and answered by nothing, as on iOS. Called on the central's delegate queue
    /// (``FaultRig/run(_:fault:)`` makes the first call there too), so no callback of the run
    /// comes between the call and its counting.
    func issue(_ kind: String, on peripheral: CBPeripheral, _ call: () -> Void) {
        let before = peripheral.acceptedCallCount
        call()
        let accepted = peripheral.acceptedCallCount > before
        lock.withLock {
            if accepted { issuedStorage[kind, default: 0] += 1 } else { refusedStorage.append(kind) }
        }
    }

    /// Calls refused because the peripheral was not connected any more.
    var refused: [String] { lock.withLock { refusedStorage } }

    /// A callback: counted, its error kept; returns whether it succeeded.
    func answer(_ kind: String, _ error: Error?) -> Bool {
        lock.withLock {
            answeredStorage[kind, default: 0] += 1
            if let error {
                let error = error as NSError
                errorsStorage.append("\(kind) \(error.domain == CBErrorDomain ? "cb" : error.domain == CBATTErrorDomain ? "att" : error.domain) \(error.code)")
            }
        }
        return error == nil
    }

    func finish() { lock.withLock { doneStorage = true } }
    func notified() -> Bool { lock.withLock { notifiedStorage = true; return true } }
    var wasNotified: Bool { lock.withLock { notifiedStorage } }
    func keep(_ channel: CBL2CAPChannel?) { lock.withLock { channelStorage = channel } }

    static func characteristic(_ uuid: CBUUID, of peripheral: CBPeripheral) -> CBCharacteristic? {
        peripheral.services?.first { $0.uuid == serviceUUID }?.characteristics?.first { $0.uuid == uuid }
    }

    /// The procedure's first call (on the delegate queue).
    func start(_ peripheral: CBPeripheral, psm: CBL2CAPPSM) {
        switch procedure {
        case .discovery: issue("services", on: peripheral) { peripheral.discoverServices([serviceUUID]) }
        case .longRead:
            guard let c = Self.characteristic(longUUID, of: peripheral) else { return }
            issue("value", on: peripheral) { peripheral.readValue(for: c) }
        case .longWrite:
            guard let c = Self.characteristic(writableUUID, of: peripheral) else { return }
            issue("wrote", on: peripheral) { peripheral.writeValue(longWrite, for: c, type: .withResponse) }
        case .subscribe:
            guard let c = Self.characteristic(notifyingUUID, of: peripheral) else { return }
            issue("notifying", on: peripheral) { peripheral.setNotifyValue(true, for: c) }
        case .pairing:
            guard let c = Self.characteristic(secretUUID, of: peripheral) else { return }
            issue("value", on: peripheral) { peripheral.readValue(for: c) }
        case .channelOpen: issue("l2cap", on: peripheral) { peripheral.openL2CAPChannel(psm) }
        }
    }

    // The callbacks, each leading to the next call or the end.

    func didDiscoverServices(_ peripheral: CBPeripheral, _ error: Error?) {
        guard answer("services", error), let service = peripheral.services?.first(where: { $0.uuid == serviceUUID }) else { return }
        issue("characteristics", on: peripheral) { peripheral.discoverCharacteristics(nil, for: service) }
    }

    func didDiscoverCharacteristics(_ peripheral: CBPeripheral, _ error: Error?) {
        guard answer("characteristics", error), let c = Self.characteristic(notifyingUUID, of: peripheral) else { return }
        issue("descriptors", on: peripheral) { peripheral.discoverDescriptors(for: c) }
    }

    func didDiscoverDescriptors(_ error: Error?) {
        if answer("descriptors", error) { finish() }
    }

    func didUpdateValue(_ characteristic: CBCharacteristic, _ error: Error?) {
        if procedure == .subscribe, characteristic.uuid == notifyingUUID {
            // A notification, not an answer to a call.
            if error == nil, notified(), issued["notifying"] == answered["notifying"] { finish() }
            return
        }
        guard answer("value", error) else { return }
        let expected = procedure == .pairing ? Data("secret".utf8) : longValue
        if characteristic.value == expected { finish() }
    }

    func didWrite(_ error: Error?) {
        if answer("wrote", error) { finish() }
    }

    func didUpdateNotificationState(_ error: Error?) {
        if answer("notifying", error), wasNotified { finish() }
    }

    func didOpen(_ channel: CBL2CAPChannel?, _ error: Error?) {
        keep(channel)
        if answer("l2cap", error) { finish() }
    }
}

/// The central side's delegate: forwards the peripheral's callbacks to the current run and
/// notes any that come after the app heard the link (or the controller) was gone.
private final class FaultCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    // @unchecked: every mutable field is behind `lock`; `log` is thread-safe.
    let log = EventLog()
    let queue = DispatchQueue(label: "fault central")
    private let lock = NSLock()
    private var runStorage: ProcedureRun?
    private var goneStorage = false
    private var lateStorage: [String] = []
    private var discoveredStorage: CBPeripheral?

    var run: ProcedureRun? {
        get { lock.withLock { runStorage } }
        set { lock.withLock { runStorage = newValue } }
    }
    var discovered: CBPeripheral? { lock.withLock { discoveredStorage } }
    /// Peripheral callbacks that came after didDisconnect or a state change away from .poweredOn.
    var late: [String] { lock.withLock { lateStorage } }

    /// A peripheral callback: none may follow the link's end.
    private func peripheralEvent(_ what: String) {
        lock.withLock { if goneStorage { lateStorage.append(what) } }
        log.append(what)
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state != .poweredOn { lock.withLock { goneStorage = true } }
        log.append("state \(central.state.rawValue)")
    }
    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        lock.withLock { discoveredStorage = peripheral }
        log.append("discover")
    }
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        lock.withLock { goneStorage = false }
        log.append("connect")
    }
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        log.append("fail")
    }
    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        lock.withLock { goneStorage = true }
        log.append("disconnect \((error as NSError?).map { "\($0.code)" } ?? "nil")")
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        peripheralEvent("services")
        run?.didDiscoverServices(peripheral, error)
    }
    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        peripheralEvent("characteristics")
        run?.didDiscoverCharacteristics(peripheral, error)
    }
    func peripheral(_ peripheral: CBPeripheral, didDiscoverDescriptorsFor characteristic: CBCharacteristic, error: Error?) {
        peripheralEvent("descriptors")
        run?.didDiscoverDescriptors(error)
    }
    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        peripheralEvent("value")
        run?.didUpdateValue(characteristic, error)
    }
    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        peripheralEvent("wrote")
        run?.didWrite(error)
    }
    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        peripheralEvent("notifying")
        run?.didUpdateNotificationState(error)
    }
    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        peripheralEvent("l2cap")
        run?.didOpen(channel, error)
    }
    func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService]) { peripheralEvent("modified") }
    func peripheral(_ peripheral: CBPeripheral, didDiscoverIncludedServicesFor service: CBService, error: Error?) {
        peripheralEvent("included")
    }
    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor descriptor: CBDescriptor, error: Error?) { peripheralEvent("descriptor") }
    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor descriptor: CBDescriptor, error: Error?) {
        peripheralEvent("wrote descriptor")
    }
    func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?) { peripheralEvent("rssi") }
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) { peripheralEvent("ready") }
}

/// Weak references to what one link made, on both sides: none may outlive it.
private struct LinkObjects: @unchecked Sendable {
    // @unchecked: the references are only read on the radio's loop or after it settled.
    weak var centralConnection: DeviceConnection?
    weak var centralLE: LEConnection?
    weak var peripheralConnection: DeviceConnection?
    weak var peripheralLE: LEConnection?
    weak var securityManager: AnyObject?

    var alive: [String] {
        var names: [String] = []
        if centralConnection != nil { names.append("central DeviceConnection") }
        if centralLE != nil { names.append("central LEConnection") }
        if peripheralConnection != nil { names.append("peripheral DeviceConnection") }
        if peripheralLE != nil { names.append("peripheral LEConnection") }
        if securityManager != nil { names.append("SecurityManager") }
        return names
    }
}

/// Both managers on one virtual radio, the peripheral's service published and advertised.
private final class FaultRig: @unchecked Sendable {
    // @unchecked: set up on the test's thread; the loop state it reads is read on the loop.
    let radio = CBVirtualRadio(clock: .virtual)
    let server = FaultServer()
    let client = FaultCentral()
    let peripheralManager: CBPeripheralManager
    let central: CBCentralManager
    var peripheral: CBPeripheral!
    var psm: CBL2CAPPSM = 0
    /// Data PDUs carrying something, counted while `counting`.
    let pdus = Locked(0)
    /// Fires the fault after this many PDUs (checked as each one goes on the air).
    let trigger = Locked<(after: Int, fire: @Sendable () -> Void)?>(nil)

    init() throws {
        let (radio, server, client) = (radio, server, client)
        peripheralManager = CBVirtualRadio.withCurrent(radio) {
            CBPeripheralManager(delegate: server, queue: DispatchQueue(label: "fault peripheral"))
        }
        central = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: client, queue: client.queue) }
        guard wait({ server.log.contains("state 5") && client.log.contains("state 5") }) else {
            throw RawDeviceError("managers did not power on")
        }
        try publish()
        central.scanForPeripherals(withServices: [serviceUUID])
        guard wait({ client.discovered != nil }) else { throw RawDeviceError("no discovery") }
        central.stopScan()
        peripheral = client.discovered
        let (pdus, trigger) = (pdus, trigger)
        let loop = radio.loop
        onLoop { rig in
            (rig.radio.radio as! VirtualRadio).dataPDUObserver = { pdu, _, _ in
                guard !pdu.payload.isEmpty else { return }
                let n = pdus.withLock { count -> Int in
                    count += 1
                    return count
                }
                guard let armed = trigger.current, armed.after == n else { return }
                trigger.withLock { $0 = nil }
                // After this PDU's delivery, already queued on the loop.
                loop.execute { armed.fire() }
            }
        }
    }

    /// Adds the service, publishes the L2CAP channel and advertises (again, after the
    /// peripheral's controller was off: its services went with it).
    func publish() throws {
        let service = CBMutableService(type: serviceUUID, primary: true)
        let notifying = CBMutableCharacteristic(type: notifyingUUID, properties: [.notify], value: nil, permissions: [])
        server.notifying.withLock { $0 = notifying }
        service.characteristics = [
            CBMutableCharacteristic(type: longUUID, properties: [.read], value: longValue, permissions: [.readable]),
            CBMutableCharacteristic(type: writableUUID, properties: [.write], value: nil, permissions: [.writeable]),
            notifying,
            CBMutableCharacteristic(type: secretUUID, properties: [.read], value: nil, permissions: [.readEncryptionRequired]),
        ]
        let log = server.log
        let (added, advertising, published) = (log.count(of: "added ok"), log.count(of: "advertising ok"), log.count(of: "published"))
        server.psm.withLock { $0 = nil }
        peripheralManager.add(service)
        peripheralManager.publishL2CAPChannel(withEncryption: false)
        peripheralManager.startAdvertising([CBAdvertisementDataLocalNameKey: "Faulty", CBAdvertisementDataServiceUUIDsKey: [serviceUUID]])
        guard wait({ [server] in
            log.count(of: "added ok") > added && log.count(of: "advertising ok") > advertising && log.count(of: "published") > published
                && server.psm.current != nil
        }) else {
            throw RawDeviceError("no advertising")
        }
        psm = server.psm.current!
        // Values longer than one PDU carries: long reads and writes.
        onLoop { rig in rig.peripheralDevice?.preferredMTU = 100 }
    }

    @discardableResult
    func wait(_ condition: @escaping () -> Bool, timeout: Duration = .seconds(60)) -> Bool {
        let condition = Unchecked(condition)
        return radio.run(until: { condition.value() }, timeout: timeout)
    }

    func onLoop<T: Sendable>(_ body: @escaping @Sendable (FaultRig) -> T) -> T {
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        radio.loop.execute { [self] in
            result.withLock { $0 = body(self) }
            done.signal()
        }
        done.wait()
        return result.current!
    }

    /// On the loop.
    var centralDevice: HostDevice? { central.device?.hostDevice }
    var peripheralDevice: HostDevice? { peripheralManager.device?.hostDevice }

    /// Connects, and discovers what the procedure needs before it starts.
    func connect(for procedure: FaultedProcedure) throws {
        let connects = client.log.count(prefix: "connect")
        central.connect(peripheral)
        guard wait({ [client] in client.log.count(prefix: "connect") > connects }) else { throw RawDeviceError("no connection") }
        // What every connection starts with (the GAP name, Service Changed) is over.
        radio.run(for: .seconds(1))
        guard procedure != .discovery else { return }
        let run = ProcedureRun(.discovery)
        client.run = run
        // From the delegate queue, as in run(_:fault:); this thread holds the radio's clock: the
        // call is on its way before time may move.
        client.queue.sync { [peripheral] in run.start(peripheral!, psm: 0) }
        guard wait({ run.isDone }) else { throw RawDeviceError("no discovery: \(client.log.all.suffix(8)), \(run.issued) \(run.answered) \(run.errors)") }
        client.run = nil
        radio.run(for: .milliseconds(100))
    }

    /// Runs the procedure; with `fault`, fires it after `k` PDUs of the procedure. Returns the run.
    func run(_ procedure: FaultedProcedure, fault: (InjectedFault, Int)? = nil) -> ProcedureRun {
        let run = ProcedureRun(procedure)
        client.run = run
        pdus.withLock { $0 = 0 }
        // The first call goes from the delegate queue, as the run's later calls do (from its
        // callbacks): an answer the loop sends at once (the radio is instant) waits until the
        // call is counted, and a notification never finds the call not yet counted. This
        // thread holds the radio's clock meanwhile: the call is on its way to the loop before
        // time may move.
        let start: () -> Void = { [client, peripheral, psm] in client.queue.sync { run.start(peripheral!, psm: psm) } }
        guard let (fault, k) = fault else {
            start()
            return run
        }
        let fire: @Sendable () -> Void = { [self] in inject(fault) }
        if k == 0 {
            // The call is made (queued for the loop) and nothing is on the air yet.
            trigger.withLock { $0 = nil }
            start()
            radio.loop.execute(fire)
        } else {
            trigger.withLock { $0 = (k, fire) }
            start()
        }
        return run
    }

    /// On the loop: the fault.
    func inject(_ fault: InjectedFault) {
        switch fault {
        case .linkLoss:
            peripheralManager.device?.controller?.position = RadioPosition(x: 100_000)
        case .peerTerminates:
            guard let device = peripheralDevice, let le = device.host.connections.values.first else { return }
            device.host.disconnect(le)
        case .powerOff:
            central.linuxSetVirtualPower(false)
        case .transportClosed:
            (central.device?.controller?.host as? InProcessHCILink.End)?.close(peerError: HCITransportError("the adapter was unplugged"))
        case .peripheralOff:
            peripheralManager.linuxSetVirtualPower(false)
        case .controllerReset:
            central.device?.controller?.failHardware(code: 0x42)
        }
    }

    /// Undoes the fault and waits until both sides are back to no connection at all.
    func recover(from fault: InjectedFault) throws {
        switch fault {
        case .linkLoss: onLoop { $0.peripheralManager.device?.controller?.position = RadioPosition() }
        case .peerTerminates: break
        case .powerOff, .transportClosed:
            let ons = client.log.count(of: "state 5")
            central.linuxSetVirtualPower(true)
            guard wait({ [client] in client.log.count(of: "state 5") > ons }) else { throw RawDeviceError("not powered on again") }
        case .controllerReset:
            // The host resets the controller by itself: .resetting, then .poweredOn.
            guard wait({ [client] in client.log.all.last(where: { $0.hasPrefix("state") }) == "state 5" }) else {
                throw RawDeviceError("not powered on again after the reset: \(client.log.all.suffix(6))")
            }
            // The host gives a controller up after more than 3 resets within a minute: the
            // next step's reset comes after that minute (virtual time, an idle radio).
            radio.run(for: .seconds(60))
        case .peripheralOff:
            let ons = server.log.count(of: "state 5")
            peripheralManager.linuxSetVirtualPower(true)
            guard wait({ [server] in server.log.count(of: "state 5") > ons }) else { throw RawDeviceError("peripheral not on again") }
            try publish()
        }
        // The peer's side of a link the central's controller dropped ends by supervision timeout.
        radio.run(for: .seconds(10))
    }

    /// What is left of links on both sides, at every layer; empty when nothing is.
    func leftovers() -> [String] {
        onLoop { rig in
            var left: [String] = []
            for (side, device, controller) in [("central", rig.centralDevice, rig.central.device?.controller),
                                               ("peripheral", rig.peripheralDevice, rig.peripheralManager.device?.controller)] {
                guard let device else { continue }
                if !device.connections.values.isEmpty { left.append("\(side): \(device.connections.values.count) device connections") }
                if !device.host.connections.isEmpty { left.append("\(side): \(device.host.connections.count) LE connections") }
                let driver = device.host.driver
                if !driver.connections.isEmpty { left.append("\(side): \(driver.connections.count) driver ACL queues") }
                if let total = driver.controllerInfo?.totalACLDataPackets, driver.aclCredits != Int(total) {
                    left.append("\(side): \(driver.aclCredits) of \(total) ACL credits")
                }
                if !device.gattServer.connections.isEmpty { left.append("\(side): \(device.gattServer.connections.count) GATT server connections") }
                if let controller {
                    if !controller.connections.isEmpty { left.append("\(side): \(controller.connections.count) controller connections") }
                    if controller.freeACLBuffers != Int(controller.configuration.totalACLDataPackets) {
                        left.append("\(side): \(controller.freeACLBuffers) controller ACL buffers free")
                    }
                }
            }
            return left
        }
    }

    /// Weak references to the link's objects on both sides (on a connected rig).
    func linkObjects() -> LinkObjects {
        onLoop { rig in
            var objects = LinkObjects()
            objects.centralConnection = rig.centralDevice?.connections.values.first
            objects.centralLE = rig.centralDevice?.host.connections.values.first
            objects.peripheralConnection = rig.peripheralDevice?.connections.values.first
            objects.peripheralLE = rig.peripheralDevice?.host.connections.values.first
            return objects
        }
    }

    /// The link's SMP session, once there is one.
    func noteSecurityManager(in objects: inout LinkObjects) {
        let manager = onLoop { rig in Unchecked(rig.centralDevice?.connections.values.first?.securityManagerStorage as AnyObject?) }
        if let value = manager.value { objects.securityManager = value }
    }

    /// Forgets bonds on both sides (a pairing procedure pairs every time).
    func forgetBonds() {
        onLoop { rig in
            for device in [rig.centralDevice, rig.peripheralDevice].compactMap({ $0 }) {
                for bond in device.bonds.bonds { _ = device.removeBond(for: bond.peerIdentity) }
            }
        }
    }

    /// Disconnects the app's way and waits for it.
    func disconnect() throws {
        let disconnects = client.log.count(prefix: "disconnect")
        central.cancelPeripheralConnection(peripheral)
        guard wait({ [client] in client.log.count(prefix: "disconnect") > disconnects }) else { throw RawDeviceError("no disconnection") }
        radio.run(for: .milliseconds(500))
        server.channels.withLock { $0 = [] }
    }
}

@Suite("Fault injection (issue 17)", .serialized,
       .disabled(if: DaemonMode.isOn, "injects faults inside the process's stack (the radio's PDUs, the peripheral's controller off and its hardware error)"))
struct FaultInjectionTests {
    /// Every procedure under every fault, at every step.
    @Test(arguments: FaultedProcedure.allCases, InjectedFault.allCases)
    func everyStepOfAProcedureSurvivesAFault(_ procedure: FaultedProcedure, _ fault: InjectedFault) throws {
        let rig = try FaultRig()
        // The steps: the procedure once, counted.
        try rig.connect(for: procedure)
        let counted = rig.run(procedure)
        #expect(rig.wait({ counted.isDone }), "the procedure succeeds without a fault")
        rig.radio.run(for: .milliseconds(200))
        let steps = rig.pdus.current
        #expect(steps > 0)
        #expect(counted.refused.isEmpty && counted.errors.isEmpty)
        counted.dropChannel()
        try rig.disconnect()
        rig.forgetBonds()
        var checked = 0
        var (failedCalls, refusedCalls) = (0, 0)
        for k in 0..<steps {
            try rig.connect(for: procedure)
            var objects = rig.linkObjects()
            let (offs, disconnects) = (rig.client.log.count(of: "state 4"), rig.client.log.count(prefix: "disconnect"))
            let resets = rig.client.log.count(of: "state 1")
            let run = rig.run(procedure, fault: (fault, k))
            // The fault reaches the app: a disconnection, or the controller's loss.
            let heard = rig.wait({ [client = rig.client] in
                fault.isControllerLoss ? client.log.count(of: "state 4") > offs : client.log.count(prefix: "disconnect") > disconnects
            }, timeout: .seconds(40))
            #expect(heard, "step \(k): the app hears of the \(fault) (\(rig.pdus.current) PDUs, \(run.issued) \(run.answered) \(run.errors), \(rig.client.log.all.suffix(10)), server \(rig.server.log.all.suffix(4)))")
            if procedure == .pairing { rig.noteSecurityManager(in: &objects) }
            // Whatever was still under way has been answered by now; anything later is a bug.
            rig.radio.run(for: .seconds(2))
            let context = "\(procedure) × \(fault) after PDU \(k) of \(steps)"
            #expect(run.issued == run.answered, "\(context): every call answered once (\(run.issued) vs \(run.answered))")
            let expected = fault.expectedError.rawValue
            for error in run.errors {
                #expect(error.hasSuffix("cb \(expected)"), "\(context): \(error), not CBError \(expected)")
            }
            #expect(rig.client.late.isEmpty, "\(context): callbacks after the link's end: \(rig.client.late)")
            if fault.isControllerLoss {
                #expect(rig.client.log.count(prefix: "disconnect") == disconnects, "\(context): no didDisconnect when the controller goes")
            } else {
                #expect(rig.client.log.all.last { $0.hasPrefix("disconnect") } == "disconnect \(expected)", "\(context)")
            }
            if fault == .controllerReset {
                // didDisconnect, then .resetting (then .poweredOn, which `recover` waits for).
                let log = rig.client.log.all
                let disconnect = log.lastIndex { $0.hasPrefix("disconnect") }
                let resetting = log.lastIndex(of: "state 1")
                #expect(rig.client.log.count(of: "state 1") == resets + 1, "\(context): .resetting once (\(log.suffix(8)))")
                #expect(disconnect != nil && resetting != nil && disconnect! < resetting!, "\(context): \(log.suffix(8))")
            }
            failedCalls += run.errors.count
            refusedCalls += run.refused.count
            run.dropChannel()
            rig.server.channels.withLock { $0 = [] }
            try rig.recover(from: fault)
            #expect(rig.leftovers().isEmpty, "\(context): \(rig.leftovers())")
            // The peripheral manager heard every subscription end with the link.
            #expect(rig.server.log.count(of: "subscribed") == rig.server.log.count(of: "unsubscribed"), "\(context): \(rig.server.log.all.suffix(6))")
            // The loop and the delegate queues let go of what they captured.
            for _ in 0..<10 where !objects.alive.isEmpty {
                rig.client.queue.sync {}
                rig.radio.run(for: .milliseconds(100))
            }
            #expect(objects.alive.isEmpty, "\(context): \(objects.alive) outlived the link")
            // The app connects again and the procedure succeeds.
            rig.forgetBonds()
            rig.client.run = nil
            try rig.connect(for: procedure)
            let again = rig.run(procedure)
            #expect(rig.wait({ again.isDone }) && again.refused.isEmpty && again.errors.isEmpty, "\(context): the procedure succeeds afterwards (\(again.issued) \(again.answered) \(again.errors), \(rig.client.log.all.suffix(10)))")
            again.dropChannel()
            try rig.disconnect()
            rig.forgetBonds()
            checked += 1
        }
        #expect(checked == steps)
        print("fault injection: \(procedure) × \(fault): \(steps) steps, \(failedCalls) calls failed by the fault, \(refusedCalls) refused as it came")
    }

    /// The peripheral manager's controller resets itself while a central is subscribed: the
    /// manager hears the subscription end, goes `.resetting` and `.poweredOn` again with its
    /// services and advertising gone (Apple's rule below `.poweredOff`), adds and advertises
    /// them again, and the central connects and subscribes again.
    @Test func aPeripheralManagerWhoseControllerResetsPublishesAgain() throws {
        let rig = try FaultRig()
        try rig.connect(for: .subscribe)
        let run = rig.run(.subscribe)
        #expect(rig.wait({ run.isDone }))
        let log = rig.server.log
        let (resets, ons, disconnects) = (log.count(of: "state 1"), log.count(of: "state 5"), rig.client.log.count(prefix: "disconnect"))
        rig.onLoop { $0.peripheralManager.device?.controller?.failHardware(code: 0x07) }
        #expect(rig.wait({ log.count(of: "state 5") > ons }), "\(log.all.suffix(6))")
        #expect(log.count(of: "state 1") == resets + 1)
        #expect(log.count(of: "subscribed") == log.count(of: "unsubscribed"))
        let order = log.all
        #expect(order.lastIndex(of: "unsubscribed")! < order.lastIndex(of: "state 1")!, "\(order.suffix(6))")
        #expect(!rig.peripheralManager.isAdvertising)
        #expect(rig.onLoop { $0.peripheralDevice.map { $0.services.isEmpty } ?? false }, "the services are gone")
        // The central loses the link by supervision timeout.
        #expect(rig.wait({ rig.client.log.count(prefix: "disconnect") > disconnects }))
        #expect(rig.client.log.all.last { $0.hasPrefix("disconnect") } == "disconnect \(CBError.Code.connectionTimeout.rawValue)")
        rig.radio.run(for: .seconds(2))
        #expect(rig.leftovers().isEmpty, "\(rig.leftovers())")
        try rig.publish()
        try rig.connect(for: .subscribe)
        let again = rig.run(.subscribe)
        #expect(rig.wait({ again.isDone }) && again.errors.isEmpty)
    }

    /// The central's controller forgets the link (no Disconnection Complete, no more completed
    /// packets, Unknown Connection Identifier for its handle) while a read is in flight: the
    /// read fails and the app hears `didDisconnect` at the ATT transaction timeout (30 s of
    /// virtual time), both with `CBError.connectionTimeout`, once; nothing follows it, and
    /// nothing of the link is left.
    @Test func aReadOnALinkTheControllerForgotFailsAtTheATTTimeout() throws {
        let rig = try FaultRig()
        try rig.connect(for: .longRead)
        let disconnects = rig.client.log.count(prefix: "disconnect")
        let start = rig.onLoop { rig -> LoopInstant in
            if let le = rig.centralDevice?.host.connections.values.first { rig.central.device?.controller?.forgetConnection(le.handle) }
            return rig.radio.loop.now
        }
        let run = rig.run(.longRead)
        #expect(rig.wait({ rig.client.log.count(prefix: "disconnect") > disconnects }))
        let elapsed = rig.onLoop { $0.radio.loop.now } - start
        #expect(elapsed >= .seconds(30) && elapsed < .seconds(31), "\(elapsed)")
        let timeout = CBError.Code.connectionTimeout.rawValue
        #expect(run.errors == ["value cb \(timeout)"])
        #expect(run.answered == run.issued)
        #expect(rig.client.log.all.last { $0.hasPrefix("disconnect") } == "disconnect \(timeout)")
        rig.radio.run(for: .seconds(10))
        #expect(rig.client.log.count(prefix: "disconnect") == disconnects + 1)
        #expect(rig.client.late.isEmpty, "\(rig.client.late)")
        #expect(rig.leftovers().isEmpty, "\(rig.leftovers())")
        try rig.connect(for: .longRead)
        let again = rig.run(.longRead)
        #expect(rig.wait({ again.isDone }) && again.errors.isEmpty)
    }

    /// The app cancels a connection its controller forgot: Disconnect is answered Unknown
    /// Connection Identifier, and `didDisconnect` (no error: the app asked) comes at once.
    @Test func cancellingALinkTheControllerForgotEndsItPromptly() throws {
        let rig = try FaultRig()
        try rig.connect(for: .discovery)
        let start = rig.onLoop { rig -> LoopInstant in
            if let le = rig.centralDevice?.host.connections.values.first { rig.central.device?.controller?.forgetConnection(le.handle) }
            return rig.radio.loop.now
        }
        let disconnects = rig.client.log.count(prefix: "disconnect")
        rig.central.cancelPeripheralConnection(rig.peripheral)
        #expect(rig.wait({ rig.client.log.count(prefix: "disconnect") > disconnects }))
        #expect(rig.onLoop { $0.radio.loop.now } - start < .seconds(1))
        #expect(rig.client.log.all.last { $0.hasPrefix("disconnect") } == "disconnect nil")
        rig.radio.run(for: .seconds(10))
        #expect(rig.client.log.count(prefix: "disconnect") == disconnects + 1)
        #expect(rig.leftovers().isEmpty, "\(rig.leftovers())")
    }
}
