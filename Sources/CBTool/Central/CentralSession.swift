import CoreBluetooth
import Foundation

/// What a scan reported about one peripheral (the latest advertisement).
struct Sighting: @unchecked Sendable {
    let peripheral: CBPeripheral
    var advertisementData: [String: Any]
    var rssi: Int
    var count: Int

    var localName: String? { advertisementData[CBAdvertisementDataLocalNameKey] as? String }
    var name: String? { localName ?? peripheral.name }
    var services: [CBUUID] {
        (advertisementData[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID]) ?? []
    }
    var manufacturerData: Data? { advertisementData[CBAdvertisementDataManufacturerDataKey] as? Data }
    var isConnectable: Bool { (advertisementData[CBAdvertisementDataIsConnectable] as? NSNumber)?.boolValue ?? false }
}

/// A central manager driven like a script: each step starts a Core Bluetooth call and waits
/// (on the context's clock) for the delegate's answer. The delegate runs on a private serial
/// queue; everything it records is behind `lock`.
final class CentralSession: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    let context: ToolContext
    private let queue = DispatchQueue(label: "cbtool.central")
    private(set) var manager: CBCentralManager!
    private let lock = NSLock()
    /// Seconds any one GATT step may take.
    var stepTimeout: Double = 10

    // Recorded by the delegate (under `lock`).
    private var sightingsStorage: [UUID: Sighting] = [:]
    private var sightingOrder: [UUID] = []
    private var connected: Set<UUID> = []
    private var failures: [UUID: String] = [:]
    /// Completed steps by key ("services:ID", "read:OBJ"…): nil error is success.
    private var completions: [String: Error?] = [:]
    private var updateCounts: [ObjectIdentifier: Int] = [:]
    private var openedChannels: [UUID: CBL2CAPChannel] = [:]
    private var paired: Set<UUID> = []
    /// Called on the delegate queue for every advertisement the scan reports.
    var onSighting: (@Sendable (Sighting) -> Void)?
    /// Called on the delegate queue for every value update (read answers and notifications).
    var onValue: (@Sendable (CBCharacteristic, Data?, Error?) -> Void)?

    init(context: ToolContext, transport: String? = nil, bondDirectory: String? = nil, snoopPath: String? = nil,
         options extra: [String: Any] = [:]) {
        self.context = context
        super.init()
        var options: [String: Any] = extra
        options[CBCentralManagerOptionShowPowerAlertKey] = false
        if let transport { options[CBManagerOptionLinuxTransportKey] = transport }
        if let snoopPath { options[CBManagerOptionLinuxSnoopPathKey] = snoopPath }
        if let bondDirectory { options[CBManagerOptionLinuxBondDirectoryKey] = bondDirectory }
        manager = CBCentralManager(delegate: self, queue: queue, options: context.managerOptions(options))
    }

    // MARK: Steps

    /// Waits for the manager to power on; a manager that cannot (no controller) is an error.
    func waitPoweredOn(seconds: Double = 10) throws {
        context.wait(seconds: seconds) { [manager] in manager!.state != .unknown && manager!.state != .resetting }
        switch manager.state {
        case .poweredOn: return
        case .unknown, .resetting: throw ToolError("the Bluetooth controller did not power on in \(Int(seconds)) s")
        default: throw ToolError("no usable Bluetooth controller: \(manager.linuxUnavailableReason ?? "state \(manager.state)"); check CB_TRANSPORT")
        }
    }

    func scan(services: [CBUUID]?, duplicates: Bool) {
        manager.scanForPeripherals(withServices: services,
                                   options: [CBCentralManagerScanOptionAllowDuplicatesKey: duplicates])
    }

    func stopScan() {
        if manager.state == .poweredOn { manager.stopScan() }
    }

    var sightings: [Sighting] {
        lock.withLock { sightingOrder.compactMap { sightingsStorage[$0] } }
    }

    /// Scans until a peripheral whose identifier or advertised/GAP name is `target` shows up,
    /// at most `seconds`.
    func find(_ target: String, seconds: Double) throws -> Sighting {
        let identifier = UUID(uuidString: target)
        let matches: @Sendable (Sighting) -> Bool = { sighting in
            if let identifier { return sighting.peripheral.identifier == identifier }
            return sighting.localName == target || sighting.peripheral.name == target
        }
        progress("scanning for \(target) (up to \(Self.format(seconds)) s)…")
        scan(services: nil, duplicates: false)
        var found: Sighting?
        context.wait(seconds: seconds) { [self] in
            found = sightings.first(where: matches)
            return found != nil
        }
        stopScan()
        guard let found else { throw ToolError("no device \"\(target)\" found in \(Self.format(seconds)) s of scanning") }
        return found
    }

    func connect(_ peripheral: CBPeripheral, seconds: Double = 10) throws {
        progress("connecting to \(peripheral.name ?? peripheral.identifier.uuidString)…")
        peripheral.delegate = self
        manager.connect(peripheral, options: nil)
        let id = peripheral.identifier
        context.wait(seconds: seconds) { [self] in lock.withLock { connected.contains(id) || failures[id] != nil } }
        if let failure = lock.withLock({ failures[id] }) { throw ToolError("cannot connect: \(failure)") }
        guard lock.withLock({ connected.contains(id) }) else {
            manager.cancelPeripheralConnection(peripheral)
            throw ToolError("could not connect in \(Self.format(seconds)) s")
        }
    }

    func disconnect(_ peripheral: CBPeripheral) {
        guard manager.state == .poweredOn else { return }
        manager.cancelPeripheralConnection(peripheral)
        let id = peripheral.identifier
        context.wait(seconds: 5) { [self] in lock.withLock { !connected.contains(id) } }
    }

    /// Discovers every service, characteristic and descriptor.
    func discoverAll(_ peripheral: CBPeripheral) throws {
        progress("discovering services…")
        try step("services:\(peripheral.identifier)", "discovering services") { peripheral.discoverServices(nil) }
        for service in peripheral.services ?? [] {
            try step("characteristics:\(key(service))", "discovering the characteristics of \(service.uuid)") {
                peripheral.discoverCharacteristics(nil, for: service)
            }
            for characteristic in service.characteristics ?? [] {
                try step("descriptors:\(key(characteristic))", "discovering the descriptors of \(characteristic.uuid)") {
                    peripheral.discoverDescriptors(for: characteristic)
                }
            }
        }
    }

    /// The characteristic `uuid` of a discovered peripheral (the first, in any service).
    func characteristic(_ uuid: CBUUID, of peripheral: CBPeripheral) throws -> CBCharacteristic {
        for service in peripheral.services ?? [] {
            if let found = service.characteristics?.first(where: { $0.uuid == uuid }) { return found }
        }
        throw ToolError("\(peripheral.name ?? "the device") has no characteristic \(uuid.uuidString)")
    }

    func read(_ characteristic: CBCharacteristic) throws -> Data {
        let id = ObjectIdentifier(characteristic)
        let before = lock.withLock { updateCounts[id, default: 0] }
        lock.withLock { completions["read:\(key(characteristic))"] = nil }
        characteristic.service?.peripheral?.readValue(for: characteristic)
        try wait("reading \(characteristic.uuid.uuidString)", characteristic) { [self] in
            completions["read:\(key(characteristic))"] != nil || updateCounts[id, default: 0] > before
        }
        if case .some(.some(let error)) = lock.withLock({ completions["read:\(key(characteristic))"] }) {
            throw ToolError("reading \(characteristic.uuid.uuidString) failed: \(Self.describe(error))", underlying: error)
        }
        return characteristic.value ?? Data()
    }

    func read(_ descriptor: CBDescriptor) throws -> Any? {
        try step("descriptor:\(key(descriptor))", "reading descriptor \(descriptor.uuid.uuidString)") {
            descriptor.characteristic?.service?.peripheral?.readValue(for: descriptor)
        }
        return descriptor.value
    }

    func write(_ data: Data, to characteristic: CBCharacteristic, type: CBCharacteristicWriteType) throws {
        guard let peripheral = characteristic.service?.peripheral else { throw ToolError("not connected") }
        if type == .withoutResponse {
            let ready = context.wait(seconds: stepTimeout) { peripheral.canSendWriteWithoutResponse }
            guard ready else { throw ToolError("the link never had room for a write without response") }
            peripheral.writeValue(data, for: characteristic, type: .withoutResponse)
            return
        }
        try step("write:\(key(characteristic))", "writing \(characteristic.uuid.uuidString)") {
            peripheral.writeValue(data, for: characteristic, type: .withResponse)
        }
    }

    func setNotify(_ on: Bool, for characteristic: CBCharacteristic) throws {
        guard characteristic.properties.contains(.notify) || characteristic.properties.contains(.indicate) else {
            throw ToolError("\(characteristic.uuid.uuidString) neither notifies nor indicates")
        }
        try step("notify:\(key(characteristic))", "\(on ? "subscribing to" : "unsubscribing from") \(characteristic.uuid.uuidString)") {
            characteristic.service?.peripheral?.setNotifyValue(on, for: characteristic)
        }
    }

    /// Opens an L2CAP channel to `psm` on a connected peripheral.
    func openChannel(_ psm: CBL2CAPPSM, on peripheral: CBPeripheral) throws -> CBL2CAPChannel {
        lock.withLock { openedChannels[peripheral.identifier] = nil }
        try step("channel:\(key(peripheral))", "opening an L2CAP channel to PSM \(psm)") {
            peripheral.openL2CAPChannel(psm)
        }
        guard let channel = lock.withLock({ openedChannels.removeValue(forKey: peripheral.identifier) }) else {
            throw ToolError("opening an L2CAP channel to PSM \(psm) failed")
        }
        return channel
    }

    /// How many value updates (read answers and notifications) `characteristic` has had.
    func updateCount(_ characteristic: CBCharacteristic) -> Int {
        lock.withLock { updateCounts[ObjectIdentifier(characteristic), default: 0] }
    }

    /// Whether this session paired with `peripheral` (``markPaired(_:)``).
    func isPaired(_ peripheral: CBPeripheral) -> Bool {
        lock.withLock { paired.contains(peripheral.identifier) }
    }

    func markPaired(_ peripheral: CBPeripheral) {
        lock.withLock { _ = paired.insert(peripheral.identifier) }
    }

    func isConnected(_ peripheral: CBPeripheral) -> Bool {
        lock.withLock { connected.contains(peripheral.identifier) }
    }

    // MARK: Waiting

    private func key(_ object: AnyObject) -> String { "\(ObjectIdentifier(object).hashValue)" }

    /// Starts a step whose delegate answer completes `completionKey`, and waits for it.
    private func step(_ completionKey: String, _ what: String, _ start: () -> Void) throws {
        lock.withLock { completions[completionKey] = nil }
        start()
        try wait(what, nil) { [self] in completions[completionKey] != nil }
        if case .some(.some(let error)) = lock.withLock({ completions[completionKey] }) {
            throw ToolError("\(what) failed: \(Self.describe(error))", underlying: error)
        }
    }

    /// Waits until `done` (read under the lock) or the peripheral disconnects or time runs out.
    private func wait(_ what: String, _ characteristic: CBCharacteristic?, _ done: @escaping () -> Bool) throws {
        let connectedBefore = lock.withLock { connected }
        let finished = context.wait(seconds: stepTimeout) { [self] in
            lock.withLock { done() || connected.count < connectedBefore.count }
        }
        if lock.withLock({ done() }) { return }
        if lock.withLock({ connected.count < connectedBefore.count }) { throw ToolError("\(what): the device disconnected") }
        if !finished { throw ToolError("\(what): no answer in \(Self.format(stepTimeout)) s") }
    }

    private func complete(_ key: String, _ error: Error?) {
        lock.withLock { completions[key] = .some(error) }
    }

    static func describe(_ error: Error) -> String {
        let ns = error as NSError
        if let text = ns.userInfo[NSLocalizedDescriptionKey] as? String { return "\(text) (\(ns.domain) \(ns.code))" }
        return "\(ns.domain) error \(ns.code)"
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(format: "%.1f", seconds)
    }

    // MARK: CBCentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CBCentralManager) {}

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        let sighting = lock.withLock { () -> Sighting in
            var sighting = sightingsStorage[peripheral.identifier]
                ?? Sighting(peripheral: peripheral, advertisementData: [:], rssi: 0, count: 0)
            if sighting.count == 0 { sightingOrder.append(peripheral.identifier) }
            // Advertisement and scan response arrive apart: keep what each said.
            sighting.advertisementData.merge(advertisementData) { _, new in new }
            sighting.rssi = RSSI.intValue
            sighting.count += 1
            sightingsStorage[peripheral.identifier] = sighting
            return sighting
        }
        onSighting?(sighting)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        lock.withLock {
            _ = connected.insert(peripheral.identifier)
            failures[peripheral.identifier] = nil
        }
    }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        lock.withLock { failures[peripheral.identifier] = error.map(Self.describe) ?? "unknown error" }
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        lock.withLock { _ = connected.remove(peripheral.identifier) }
    }

    // MARK: CBPeripheralDelegate

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        complete("services:\(peripheral.identifier)", error)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        complete("characteristics:\(key(service))", error)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverDescriptorsFor characteristic: CBCharacteristic, error: Error?) {
        complete("descriptors:\(key(characteristic))", error)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        lock.withLock {
            updateCounts[ObjectIdentifier(characteristic), default: 0] += 1
            if error != nil { completions["read:\(key(characteristic))"] = .some(error) }
        }
        onValue?(characteristic, characteristic.value, error)
    }

    func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?) {
        complete("write:\(key(characteristic))", error)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        complete("notify:\(key(characteristic))", error)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor descriptor: CBDescriptor, error: Error?) {
        complete("descriptor:\(key(descriptor))", error)
    }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        if let channel { lock.withLock { openedChannels[peripheral.identifier] = channel } }
        complete("channel:\(key(peripheral))", error ?? (channel == nil ? CBError(.unknown) : nil))
    }
}
