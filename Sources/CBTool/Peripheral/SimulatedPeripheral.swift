import CoreBluetooth
import Foundation

/// A peripheral manager playing a `PeripheralSpec`: publishes its services, advertises its name
/// and services (or the recorded advertising bytes), answers reads and writes from its own copy
/// of the values, echoes writes and applies recorded write effects where the spec says so, and
/// sends the periodic notifications, and the recorded sequences from each subscription, to
/// subscribers. Timers run on the manager's clock (`linuxSchedule`): a virtual radio's in tests.
public final class SimulatedPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public let spec: PeripheralSpec
    private let context: ToolContext
    private let log: @Sendable (String) -> Void
    private let queue: DispatchQueue
    private(set) var manager: CBPeripheralManager!
    private let lock = NSLock()
    // Under `lock`.
    private var values: [ObjectIdentifier: Data] = [:]
    private var characteristics: [CBMutableCharacteristic] = []
    private var byUUID: [CBUUID: CBMutableCharacteristic] = [:]
    private var services: [CBMutableService] = []
    private var pendingServices = 0
    private var advertisingStorage = false
    private var problemStorage: String?
    private var timers: [ObjectIdentifier: CBLinuxTimer] = [:]
    private var stopped = false
    private var nextNotification: [ObjectIdentifier: Int] = [:]
    private var echoTargets: [ObjectIdentifier: CBMutableCharacteristic] = [:]
    /// The spec of each characteristic (by object), for subscriptions and writes.
    private var specs: [ObjectIdentifier: PeripheralSpec.Characteristic] = [:]
    /// Sequences being replayed, by characteristic: the timers of the current pass.
    private var replays: [ObjectIdentifier: [CBLinuxTimer]] = [:]

    /// Whether advertising has started.
    public var isAdvertising: Bool { lock.withLock { advertisingStorage } }
    /// Why the peripheral could not start, if it could not.
    public var problem: String? { lock.withLock { problemStorage } }

    /// Starts the peripheral (the manager powers on, then everything follows on its own).
    /// `transport` overrides `CB_TRANSPORT` (a `CB_TRANSPORT` string); `bondDirectory` is
    /// where its controller keeps bonds (``CBManagerOptionLinuxBondDirectoryKey``).
    /// `log` gets what happens (default: the context's error stream), pairing included.
    public init(spec: PeripheralSpec, context: ToolContext = .current, transport: String? = nil,
                bondDirectory: String? = nil, log: (@Sendable (String) -> Void)? = nil) {
        self.spec = spec
        self.context = context
        self.log = log ?? context.error
        queue = DispatchQueue(label: "cbtool.simulate.\(spec.name)")
        super.init()
        var options: [String: Any] = [CBPeripheralManagerOptionShowPowerAlertKey: false]
        if let position = spec.position { options[CBManagerOptionLinuxPositionKey] = position }
        if let transport { options[CBManagerOptionLinuxTransportKey] = transport }
        if let bondDirectory { options[CBManagerOptionLinuxBondDirectoryKey] = bondDirectory }
        manager = CBPeripheralManager(delegate: self, queue: queue, options: context.managerOptions(options))
        if let pairing = spec.pairing {
            let name = spec.name
            let log = self.log
            manager.linuxPairingAgent = SimulatedPairingAgent(pairing) { log("[\(name)] \($0)") }
        }
    }

    /// Stops notifying and advertising.
    public func stop() {
        let timers = lock.withLock { () -> [CBLinuxTimer] in
            stopped = true
            defer {
                self.timers = [:]
                replays = [:]
            }
            return Array(self.timers.values) + replays.values.flatMap { $0 }
        }
        timers.forEach { $0.cancel() }
        if manager.state == .poweredOn { manager.stopAdvertising() }
    }

    private func say(_ line: String) { log("[\(spec.name)] \(line)") }

    private func fail(_ problem: String) {
        lock.withLock { problemStorage = problem }
        say(problem)
    }

    // MARK: Building the database (the spec was validated: the parsing cannot fail)

    private func build() -> [CBMutableService] {
        var built: [CBMutableService] = []
        // Values a recorded write changes are answered by us, never cached.
        let effectTargets = Set(spec.services.flatMap { $0.characteristics ?? [] }.flatMap { $0.writes ?? [] }
            .flatMap(\.effects).map { try! InputParsing.uuid($0.uuid) })
        for serviceSpec in spec.services {
            let service = CBMutableService(type: try! InputParsing.uuid(serviceSpec.uuid), primary: serviceSpec.primary ?? true)
            var list: [CBMutableCharacteristic] = []
            for c in serviceSpec.characteristics ?? [] {
                let properties = try! PeripheralSpec.properties(c.properties, "")
                var permissions = try! PeripheralSpec.permissions(c.permissions ?? [], "")
                if c.permissions == nil {
                    if properties.contains(.read) { permissions.insert(.readable) }
                    if !properties.isDisjoint(with: [.write, .writeWithoutResponse]) { permissions.insert(.writeable) }
                }
                let initial = c.text.map { Data($0.utf8) } ?? c.value.map { try! InputParsing.hex($0) }
                // Read-only values are cached (the stack answers); the others are ours to answer.
                let uuid = try! InputParsing.uuid(c.uuid)
                // (A value longer than an attribute may cache, 512 bytes, as some devices serve, too.)
                let cached = properties == [.read] && (initial?.count ?? 513) <= 512 && !effectTargets.contains(uuid)
                let characteristic = CBMutableCharacteristic(type: uuid, properties: properties,
                                                             value: cached ? initial : nil, permissions: permissions)
                characteristic.descriptors = (c.descriptors ?? []).map { d in
                    let uuid = try! InputParsing.uuid(d.uuid)
                    return CBMutableDescriptor(type: uuid, value: d.text ?? d.value.map { try! InputParsing.hex($0) } as Any?)
                }
                lock.withLock {
                    values[ObjectIdentifier(characteristic)] = initial ?? Data()
                    specs[ObjectIdentifier(characteristic)] = c
                    characteristics.append(characteristic)
                    byUUID[characteristic.uuid] = byUUID[characteristic.uuid] ?? characteristic
                }
                list.append(characteristic)
            }
            service.characteristics = list
            built.append(service)
        }
        // Echoes, now that every characteristic exists.
        for (serviceSpec, service) in zip(spec.services, built) {
            for (c, characteristic) in zip(serviceSpec.characteristics ?? [], service.characteristics ?? []) {
                guard let echo = c.echoTo, let target = lock.withLock({ byUUID[try! InputParsing.uuid(echo)] }) else { continue }
                lock.withLock { echoTargets[ObjectIdentifier(characteristic)] = target }
            }
        }
        return built
    }

    // MARK: CBPeripheralManagerDelegate

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        switch peripheral.state {
        case .poweredOn:
            if let echo = spec.l2capEcho {
                // The services wait for the PSM, which one of them carries.
                return peripheral.publishL2CAPChannel(withEncryption: echo.encryptionRequired ?? false)
            }
            addServices(build(), to: peripheral)
        case .unsupported, .unauthorized:
            fail("no usable Bluetooth controller: \(peripheral.linuxUnavailableReason ?? "state \(peripheral.state)"); check CB_TRANSPORT")
        default:
            break
        }
    }

    private func addServices(_ services: [CBMutableService], to peripheral: CBPeripheralManager) {
        lock.withLock {
            self.services = services
            pendingServices = services.count
        }
        services.forEach { peripheral.add($0) }
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        if let error { return fail("cannot publish the L2CAP echo channel: \(CentralSession.describe(error))") }
        say("L2CAP echo channel on PSM \(PSM) (0x\(String(PSM, radix: 16, uppercase: true)))")
        let services = build()
        if let first = services.first {
            let psm = CBMutableCharacteristic(type: CBUUID(string: CBUUIDL2CAPPSMCharacteristicString), properties: [.read],
                                              value: Data([UInt8(PSM & 0xFF), UInt8(PSM >> 8)]), permissions: [.readable])
            first.characteristics = (first.characteristics ?? []) + [psm]
        }
        addServices(services, to: peripheral)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return }
        say("a central opened an L2CAP channel to PSM \(channel.psm)")
        let (log, name) = (self.log, spec.name)
        StreamEcho.start(channel) { echoed in log("[\(name)] L2CAP channel closed after echoing \(echoed) bytes") }
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error {
            fail("cannot publish service \(service.uuid.uuidString): \(CentralSession.describe(error))")
            return
        }
        let remaining = lock.withLock { () -> Int in
            pendingServices -= 1
            return pendingServices
        }
        guard remaining == 0 else { return }
        var advertisement: [String: Any] = [CBAdvertisementDataLocalNameKey: spec.name,
                                            CBAdvertisementDataServiceUUIDsKey: advertisedServices()]
        // Apple's startAdvertising takes only the name and UUIDs; manufacturer data and recorded
        // bytes go through the Linux extensions (checked by PeripheralSpec.validate()).
        if let hex = spec.manufacturerData, let bytes = try? InputParsing.hex(hex) {
            advertisement[CBAdvertisementDataLinuxManufacturerDataKey] = Data(bytes)
        }
        if let hex = spec.advertisingData, let bytes = try? InputParsing.hex(hex) {
            advertisement = [CBAdvertisementDataLocalNameKey: spec.name, CBAdvertisementDataLinuxAdvertisingDataKey: bytes]
            if let hex = spec.scanResponseData, let response = try? InputParsing.hex(hex) {
                advertisement[CBAdvertisementDataLinuxScanResponseDataKey] = response
            }
        }
        peripheral.startAdvertising(advertisement)
    }

    /// The spec's advertised services, else every primary service's UUID.
    private func advertisedServices() -> [CBUUID] {
        spec.advertisedServices.map { $0.map { try! InputParsing.uuid($0) } }
            ?? lock.withLock { services.filter(\.isPrimary).map(\.uuid) }
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error {
            fail("cannot advertise: \(CentralSession.describe(error))")
            return
        }
        lock.withLock { advertisingStorage = true }
        let manufacturer = spec.manufacturerData.map { " and manufacturer data \($0.lowercased())" } ?? ""
        if spec.advertisingData != nil {
            say("advertising as \"\(spec.name)\" with the recorded advertising data")
            return startNotifications()
        }
        say("advertising as \"\(spec.name)\" with services \(advertisedServices().map(\.uuidString).joined(separator: ", "))\(manufacturer)")
        startNotifications()
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        let value = lock.withLock { values[ObjectIdentifier(request.characteristic)] } ?? Data()
        guard request.offset <= value.count else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = value.subdata(in: request.offset..<value.count)
        peripheral.respond(to: request, withResult: .success)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        guard let first = requests.first else { return }
        for request in requests {
            let id = ObjectIdentifier(request.characteristic)
            let written = request.value ?? Data()
            let echo = lock.withLock { () -> CBMutableCharacteristic? in
                var value = values[id] ?? Data()
                if request.offset == 0 { value = written } else {
                    if value.count < request.offset { value.append(Data(count: request.offset - value.count)) }
                    value.replaceSubrange(request.offset..<min(value.count, request.offset + written.count), with: written)
                }
                values[id] = value
                return echoTargets[id]
            }
            say("\(request.characteristic.uuid.uuidString) written: \(GATTDescription.value(written, of: request.characteristic.uuid))")
            if let echo { update(echo, with: written) }
            applyEffects(of: written, to: id)
        }
        peripheral.respond(to: first, withResult: .success)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                                  didSubscribeTo characteristic: CBCharacteristic) {
        say("a central subscribed to \(characteristic.uuid.uuidString)")
        let id = ObjectIdentifier(characteristic)
        guard let sequence = lock.withLock({ specs[id]?.notify }), sequence.sequence != nil,
              let target = characteristic as? CBMutableCharacteristic else { return }
        // Connection events 7.5–15 ms apart, so that values reach the central close to their
        // recorded times (at the default 30–50 ms a 0.4 s interval could be off by 12 %).
        peripheral.setDesiredConnectionLatency(.low, for: central)
        // One replay at a time per characteristic: every subscriber gets its values.
        guard lock.withLock({ replays[id] == nil && !stopped }) else { return }
        replay(sequence, on: target)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                                  didUnsubscribeFrom characteristic: CBCharacteristic) {
        say("a central unsubscribed from \(characteristic.uuid.uuidString)")
    }

    // MARK: Notifications

    /// Sets the value and sends it to the subscribers (dropped if the queue is full).
    private func update(_ characteristic: CBMutableCharacteristic, with value: Data) {
        lock.withLock { values[ObjectIdentifier(characteristic)] = value }
        let sends: CBCharacteristicProperties = [.notify, .indicate, .notifyEncryptionRequired, .indicateEncryptionRequired]
        guard !characteristic.properties.isDisjoint(with: sends) else { return }
        _ = manager.updateValue(value, for: characteristic, onSubscribedCentrals: nil)
    }

    private func startNotifications() {
        let pairs = spec.services.flatMap { $0.characteristics ?? [] }
        let all = lock.withLock { characteristics }
        for (c, characteristic) in zip(pairs, all) {
            guard let notify = c.notify, let interval = notify.interval, notify.sequence == nil else { continue }
            schedule(characteristic, notify, every: interval)
        }
    }

    /// The next tick of a periodic notification, on the manager's clock.
    private func schedule(_ characteristic: CBMutableCharacteristic, _ notify: PeripheralSpec.Notify, every interval: Double) {
        let id = ObjectIdentifier(characteristic)
        let timer = manager.linuxSchedule(after: interval) { [weak self] in
            guard let self, lock.withLock({ !stopped }) else { return }
            tick(characteristic, notify)
            schedule(characteristic, notify, every: interval)
        }
        lock.withLock { timers[id] = timer }
    }

    private func tick(_ characteristic: CBMutableCharacteristic, _ notify: PeripheralSpec.Notify) {
        let id = ObjectIdentifier(characteristic)
        let n = lock.withLock { () -> Int in
            defer { nextNotification[id, default: 0] += 1 }
            return nextNotification[id, default: 0]
        }
        update(characteristic, with: Self.value(number: n, of: notify))
    }

    /// Plays a recorded sequence from now: each value at its time after the subscription,
    /// and again every period when it loops. Each value is timed from the start of its pass,
    /// so that the intervals stay the recorded ones.
    private func replay(_ notify: PeripheralSpec.Notify, on characteristic: CBMutableCharacteristic) {
        guard let sequence = notify.sequence, let last = sequence.last else { return }
        let id = ObjectIdentifier(characteristic)
        var passTimers = sequence.map { timed in
            let value = (try? InputParsing.hex(timed.value)) ?? Data()
            return manager.linuxSchedule(after: timed.at) { [weak self] in
                guard let self, lock.withLock({ !stopped }) else { return }
                update(characteristic, with: value)
            }
        }
        let period = notify.period ?? Self.defaultPeriod(of: sequence)
        passTimers.append(manager.linuxSchedule(after: max(period, last.at)) { [weak self] in
            guard let self else { return }
            let again = lock.withLock { () -> Bool in
                replays[id] = nil
                return notify.loop == true && !stopped
            }
            // Once played, a new subscription plays it again; a loop goes on by itself.
            if again { replay(notify, on: characteristic) }
        })
        lock.withLock { replays[id] = passTimers }
    }

    /// A loop's length when the spec gives none: the last value's time plus the mean gap.
    static func defaultPeriod(of sequence: [PeripheralSpec.Timed]) -> Double {
        guard let first = sequence.first, let last = sequence.last else { return 1 }
        let gap = sequence.count > 1 ? (last.at - first.at) / Double(sequence.count - 1) : max(first.at, 1)
        return last.at + max(gap, 0.001)
    }

    /// The recorded effects of writing `written` to the characteristic `id`.
    private func applyEffects(of written: Data, to id: ObjectIdentifier) {
        guard let writes = lock.withLock({ specs[id]?.writes }) else { return }
        let match = writes.first { write in write.value.map { (try? InputParsing.hex($0)) == written } ?? true }
        for effect in match?.effects ?? [] {
            guard let uuid = try? InputParsing.uuid(effect.uuid), let value = try? InputParsing.hex(effect.value),
                  let target = lock.withLock({ byUUID[uuid] }) else { continue }
            update(target, with: value)
        }
    }

    /// The `n`th value a notification schedule sends.
    static func value(number n: Int, of notify: PeripheralSpec.Notify) -> Data {
        if let values = notify.values, !values.isEmpty {
            return (try? InputParsing.hex(values[n % values.count])) ?? Data()
        }
        guard let counter = notify.counter else { return Data() }
        let step = counter.step ?? 1
        // In UInt and wrapping: a spec's counter may span all of Int (start Int.min, end Int.max,
        // step Int.min), where `end - start` and `abs` would trap; the values sent are the low
        // `bytes` octets anyway.
        let distance = counter.end >= counter.start ? UInt(bitPattern: counter.end &- counter.start)
            : UInt(bitPattern: counter.start &- counter.end)
        let steps = distance / max(1, step.magnitude)
        let span = steps < UInt(Int.max) ? Int(steps) + 1 : Int.max
        let current = counter.start &+ (n % span) &* step
        var data = counter.prefix.flatMap { try? InputParsing.hex($0) } ?? Data()
        for i in 0..<(counter.bytes ?? 1) { data.append(UInt8(truncatingIfNeeded: current >> (8 * i))) }
        return data
    }
}

/// A simulated device's side of pairing, as its spec says: what it would show goes to the log,
/// a passkey it is asked for is the spec's, and numbers are taken to match.
private final class SimulatedPairingAgent: CBPairingAgent, @unchecked Sendable {
    // Immutable.
    let ioCapability: CBPairingIOCapability
    private let passkey: UInt32?
    private let log: @Sendable (String) -> Void

    init(_ pairing: PeripheralSpec.Pairing, log: @escaping @Sendable (String) -> Void) {
        // The spec was validated: an io string is one of PairingIO's.
        ioCapability = (pairing.io.flatMap(PairingIO.init(rawValue:)) ?? .noInputNoOutput).capability
        passkey = pairing.passkey
        self.log = log
    }

    func handle(_ request: CBPairingRequest) {
        let method = PairingText.method(request.method)
        switch request.kind {
        case .confirmPairing:
            log("pairing: \(method), accepted")
            request.accept()
        case .displayPasskey(let value):
            log("pairing: \(method), passkey \(PairingText.sixDigits(value))")
            request.accept()
        case .enterPasskey:
            guard let passkey else {
                log("pairing: \(method), but the spec gives no passkey to type: rejected")
                return request.reject()
            }
            log("pairing: \(method), typing \(PairingText.sixDigits(passkey))")
            request.enterPasskey(passkey)
        case .confirmNumber(let value):
            log("pairing: \(method), number \(PairingText.sixDigits(value)), accepted")
            request.accept()
        case .outOfBandData:
            log("pairing: \(method), which a simulated device cannot do: rejected")
            request.reject()
        }
    }
}
