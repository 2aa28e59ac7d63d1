import ArgumentParser
import CoreBluetooth
import Foundation

/// `cbtool record`: a real device, once, as a spec `cbtool simulate` replays.
struct RecordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a device as a spec for `cbtool simulate`: advertising, GATT tree, values, notifications.",
        discussion: """
            Connects, discovers every service, characteristic and descriptor in the device's order, reads \
            every readable value, keeps the advertising and scan response bytes, then subscribes to every \
            notifying or indicating characteristic for --seconds and keeps the values with their timing \
            (replayed from each subscription, looped every --seconds unless --once). The device's Generic \
            Access and Generic Attribute services are the simulating stack's own and are not recorded; \
            whatever cannot be replayed is listed on stderr. Reads and subscriptions go first without \
            pairing; what the device refuses for want of encryption is done again after pairing (Just Works) \
            and keeps readEncryptionRequired (notifyEncryptionRequired).
            Example: cbtool record HeartRate --seconds 10 -o heart-rate.json
            """)

    @OptionGroup var target: TargetOptions
    @Option(name: .long, help: "Seconds to record notifications and indications (0: none).")
    var seconds: Double = 5
    @Flag(name: .long, help: "Replay the notification sequences once per subscription instead of looping them.")
    var once = false
    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("Where to write the spec.", valueName: "spec.json"))
    var output: String
    @OptionGroup var central: CentralOptions

    func validate() throws {
        guard seconds >= 0 else { throw ValidationError("--seconds must not be negative") }
    }

    func run() throws {
        let context = ToolContext.current
        // Every read and subscription first as the link is, so that the ones the device refuses
        // for want of encryption show (the stack would pair and hide them); then those again,
        // paired.
        let session = try central.makeSession(options: [CBManagerOptionLinuxPairOnRefusalKey: false])
        var sighting = try session.find(target.device, seconds: target.timeout)
        sighting = scanResponse(for: sighting, session: session)
        let peripheral = sighting.peripheral
        try session.connect(peripheral)
        defer { session.disconnect(peripheral) }
        try session.discoverAll(peripheral)

        var notes: [String] = []
        var spec = PeripheralSpec(name: sighting.name.flatMap { $0.isEmpty ? nil : $0 } ?? "Recorded", services: [])
        if let advertising = sighting.advertisementData[CBAdvertisementDataLinuxAdvertisingDataKey] as? Data {
            spec.advertisingData = SpecText.hex(advertising)
            if let response = sighting.advertisementData[CBAdvertisementDataLinuxScanResponseDataKey] as? Data {
                spec.scanResponseData = SpecText.hex(response)
            }
        }
        var notifying: [(CBCharacteristic, service: Int, characteristic: Int)] = []
        var encryptedReads: [(CBCharacteristic, service: Int, characteristic: Int)] = []
        for service in peripheral.services ?? [] {
            if SpecText.stackOwnedServices.contains(service.uuid.uuidString) {
                notes.append("service \(service.uuid.uuidString) is the simulating stack's own: not recorded")
                continue
            }
            var serviceSpec = PeripheralSpec.Service(uuid: service.uuid.uuidString, primary: service.isPrimary ? nil : false,
                                                     characteristics: [])
            for characteristic in service.characteristics ?? [] {
                let uuid = characteristic.uuid.uuidString
                var (properties, dropped) = SpecText.properties(characteristic.properties)
                if !dropped.isEmpty { notes.append("characteristic \(uuid): properties \(dropped.joined(separator: ", ")) cannot be simulated") }
                if properties.isEmpty { properties = ["read"] }
                var c = PeripheralSpec.Characteristic(uuid: uuid, properties: properties)
                if characteristic.properties.contains(.read) {
                    do {
                        c.value = SpecText.hex(try session.read(characteristic))
                    } catch where Self.refusedForEncryption(error) {
                        encryptedReads.append((characteristic, spec.services.count, serviceSpec.characteristics!.count))
                    } catch {
                        notes.append("characteristic \(uuid): not read (\(error)); left without a value")
                    }
                }
                for descriptor in characteristic.descriptors ?? [] {
                    do {
                        if let recorded = try SpecText.descriptor(descriptor.uuid, value: session.read(descriptor), of: uuid, notes: &notes) {
                            c.descriptors = (c.descriptors ?? []) + [recorded]
                        }
                    } catch {
                        notes.append("characteristic \(uuid): descriptor \(descriptor.uuid.uuidString) not read (\(error))")
                    }
                }
                if !characteristic.properties.isDisjoint(with: [.notify, .indicate]) {
                    notifying.append((characteristic, spec.services.count, serviceSpec.characteristics!.count))
                }
                serviceSpec.characteristics!.append(c)
            }
            spec.services.append(serviceSpec)
        }

        if seconds > 0, !notifying.isEmpty {
            let recorder = SequenceRecorder(clock: { context.now() })
            session.onValue = { characteristic, value, error in
                guard let value, error == nil else { return }
                recorder.add(value, for: ObjectIdentifier(characteristic))
            }
            progress("recording notifications and indications of \(notifying.map { $0.0.uuid.uuidString }.joined(separator: ", ")) for \(SpecText.seconds(seconds)) s…")
            var encryptedSubscriptions: [(CBCharacteristic, service: Int, characteristic: Int)] = []
            for entry in notifying {
                recorder.start(ObjectIdentifier(entry.0))
                do {
                    try session.setNotify(true, for: entry.0)
                } catch where Self.refusedForEncryption(error) {
                    encryptedSubscriptions.append(entry)
                } catch {
                    notes.append("characteristic \(entry.0.uuid.uuidString): not subscribed (\(error))")
                }
            }
            try readEncrypted(encryptedReads, session: session, into: &spec, notes: &notes)
            encryptedReads = []
            try pair(for: encryptedSubscriptions.map(\.0), session: session)
            for (characteristic, s, c) in encryptedSubscriptions {
                recorder.start(ObjectIdentifier(characteristic))
                do {
                    try session.setNotify(true, for: characteristic)
                    spec.services[s].characteristics![c].properties = spec.services[s].characteristics![c].properties.map {
                        ["notify": "notifyEncryptionRequired", "indicate": "indicateEncryptionRequired"][$0] ?? $0
                    }
                } catch {
                    notes.append("characteristic \(characteristic.uuid.uuidString): not subscribed, even paired (\(error))")
                }
            }
            context.wait(seconds: seconds) { !session.isConnected(peripheral) }
            if !session.isConnected(peripheral) { notes.append("the device disconnected while recording notifications") }
            // Values go on counting until the device confirms each unsubscription, as a capture
            // of the session shows them.
            for (characteristic, _, _) in notifying where session.isConnected(peripheral) {
                try? session.setNotify(false, for: characteristic)
            }
            session.onValue = nil
            for (characteristic, s, c) in notifying {
                let values = recorder.values(of: ObjectIdentifier(characteristic))
                if values.isEmpty {
                    notes.append("characteristic \(characteristic.uuid.uuidString): nothing notified in \(SpecText.seconds(seconds)) s")
                    continue
                }
                spec.services[s].characteristics![c].notify = PeripheralSpec.Notify(
                    sequence: values, loop: once ? nil : true, period: once ? nil : max(seconds, values.last!.at))
            }
        }
        try readEncrypted(encryptedReads, session: session, into: &spec, notes: &notes)
        if spec.services.isEmpty { throw ToolError("\(spec.name) has no service to record besides the stack's own") }
        try SpecText.write(spec, to: output)
        notes.forEach { progress("note: \($0)") }
        let count = spec.services.reduce(0) { $0 + ($1.characteristics?.count ?? 0) }
        let sequences = spec.services.flatMap { $0.characteristics ?? [] }.compactMap(\.notify?.sequence)
        emit("recorded \(spec.name): \(spec.services.count) services, \(count) characteristics, "
             + "\(sequences.reduce(0) { $0 + $1.count }) notified values in \(sequences.count) sequences → \(output)")
    }

    /// Whether the device refused a request for want of encryption (or of the authentication
    /// pairing gives).
    static func refusedForEncryption(_ error: any Error) -> Bool {
        guard let attError = (error as? ToolError)?.underlying as? CBATTError else { return false }
        return [.insufficientEncryption, .insufficientAuthentication, .insufficientEncryptionKeySize].contains(attError.code)
    }

    /// Pairs, once, for characteristics the device protects (a bonded device encrypts).
    private func pair(for characteristics: [CBCharacteristic], session: CentralSession) throws {
        guard !characteristics.isEmpty, let peripheral = characteristics.first?.service?.peripheral,
              !session.isPaired(peripheral) else { return }
        progress("pairing: \(characteristics.map(\.uuid.uuidString).joined(separator: ", ")) need encryption…")
        do {
            try session.pair(peripheral)
        } catch {
            throw ToolError("pairing for \(characteristics.map(\.uuid.uuidString).joined(separator: ", ")) failed: \(error)")
        }
        session.markPaired(peripheral)
    }

    /// Reads again, pairing now, the characteristics the device refused to read unencrypted;
    /// they keep the readEncryptionRequired permission.
    private func readEncrypted(_ refused: [(CBCharacteristic, service: Int, characteristic: Int)], session: CentralSession,
                               into spec: inout PeripheralSpec, notes: inout [String]) throws {
        guard !refused.isEmpty else { return }
        try pair(for: refused.map(\.0), session: session)
        for (characteristic, s, c) in refused {
            var recorded = spec.services[s].characteristics![c]
            do {
                recorded.value = SpecText.hex(try session.read(characteristic))
            } catch {
                notes.append("characteristic \(characteristic.uuid.uuidString): not read, even paired (\(error)); left without a value")
            }
            let writes = recorded.properties.contains("write") || recorded.properties.contains("writeWithoutResponse")
            recorded.permissions = ["readEncryptionRequired"] + (writes ? ["writeable"] : [])
            spec.services[s].characteristics![c] = recorded
        }
    }

    /// The sighting once its scan response came, or as it is after 3 s. A scan started again
    /// hears the scan response with the device's next advertisement (the stack does not report
    /// a scan response whose advertisement this scan has not heard), so the wait covers two
    /// advertising intervals of a common 1 s (Bumble's default) and their jitter.
    private func scanResponse(for sighting: Sighting, session: CentralSession) -> Sighting {
        guard sighting.advertisementData[CBAdvertisementDataLinuxScanResponseDataKey] == nil else { return sighting }
        let id = sighting.peripheral.identifier
        let latest: @Sendable () -> Sighting? = { session.sightings.first { $0.peripheral.identifier == id } }
        session.scan(services: nil, duplicates: true)
        ToolContext.current.wait(seconds: 3) { latest()?.hasScanResponse == true }
        session.stopScan()
        return latest() ?? sighting
    }
}

extension Sighting {
    fileprivate var hasScanResponse: Bool { advertisementData[CBAdvertisementDataLinuxScanResponseDataKey] != nil }
}

/// Values notified per characteristic, timed from each one's subscription. `@unchecked
/// Sendable`: every mutable field is behind `lock` (the delegate queue adds, the command reads).
final class SequenceRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private let clock: @Sendable () -> Double
    // Under `lock`.
    private var started: [ObjectIdentifier: Double] = [:]
    private var recorded: [ObjectIdentifier: [PeripheralSpec.Timed]] = [:]

    init(clock: @escaping @Sendable () -> Double) { self.clock = clock }

    func start(_ id: ObjectIdentifier) {
        let now = clock()
        lock.withLock { started[id] = now }
    }

    func add(_ value: Data, for id: ObjectIdentifier) {
        let now = clock()
        lock.withLock {
            guard let start = started[id] else { return }
            recorded[id, default: []].append(.init(at: SpecText.rounded(now - start), value: SpecText.hex(value)))
        }
    }

    func values(of id: ObjectIdentifier) -> [PeripheralSpec.Timed] { lock.withLock { recorded[id] ?? [] } }
}

/// How recorded things are written in a spec, for `record` and `spec-from-capture`.
enum SpecText {
    /// Services the simulating stack publishes itself (GAP's and GATT's).
    static let stackOwnedServices: Set<String> = ["1800", "1801"]

    static func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    /// Seconds to the microsecond: what a capture's timestamps resolve.
    static func rounded(_ seconds: Double) -> Double { (max(0, seconds) * 1e6).rounded() / 1e6 }

    static func seconds(_ value: Double) -> String { String(format: "%g", value) }

    /// The properties a spec can give, and the names of the ones it cannot.
    static func properties(_ p: CBCharacteristicProperties) -> (kept: [String], dropped: [String]) {
        let names = GATTDescription.properties(p)
        let allowed: Set<String> = ["read", "write", "writeWithoutResponse", "notify", "indicate",
                                    "notifyEncryptionRequired", "indicateEncryptionRequired"]
        // Extended properties only says a descriptor follows; the stack adds it when needed.
        return (names.filter(allowed.contains), names.filter { !allowed.contains($0) && $0 != "extendedProperties" })
    }

    /// A recorded descriptor as the spec takes it: the user description's text and the
    /// presentation format's bytes; the configuration descriptors the stack makes are skipped
    /// silently, the others are noted.
    static func descriptor(_ uuid: CBUUID, value: Any?, of characteristic: String,
                           notes: inout [String]) -> PeripheralSpec.Descriptor? {
        switch uuid.uuidString {
        case "2900", "2902", "2903": return nil
        case "2901":
            switch value {
            case let text as String: return .init(uuid: "2901", text: text)
            case let data as Data: return .init(uuid: "2901", text: String(decoding: data, as: UTF8.self))
            default: return nil
            }
        case "2904":
            if let data = value as? Data, data.count == 7 { return .init(uuid: "2904", value: hex(data)) }
            notes.append("characteristic \(characteristic): presentation format descriptor is not 7 bytes: not recorded")
            return nil
        default:
            notes.append("characteristic \(characteristic): descriptor \(uuid.uuidString) cannot be simulated (only 2901 and 2904 can)")
            return nil
        }
    }

    /// Checks the spec as `simulate` will, then writes it as pretty JSON.
    static func write(_ spec: PeripheralSpec, to path: String) throws {
        do {
            try spec.validate()
        } catch let error as ToolError {
            throw ToolError("the recorded spec would not load (\(error.description)): not written")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .withoutEscapingSlashes]
        do {
            try (encoder.encode(spec) + Data("\n".utf8)).write(to: URL(fileURLWithPath: path))
        } catch {
            throw ToolError("cannot write \(path): \((error as NSError).localizedDescription)")
        }
    }
}
