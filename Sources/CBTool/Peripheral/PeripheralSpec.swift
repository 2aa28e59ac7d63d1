import CoreBluetooth
import Foundation

/// A simulated peripheral, as `cbtool simulate` reads it from JSON:
///
/// ```json
/// { "name": "HeartRate", "position": [2, 0], "advertisedServices": ["180D"],
///   "manufacturerData": "ffff0102",
///   "services": [ { "uuid": "180D", "characteristics": [
///       { "uuid": "2A37", "properties": ["notify"],
///         "notify": { "interval": 1, "values": ["0048", "004a"] } },
///       { "uuid": "2A38", "properties": ["read"], "value": "01",
///         "descriptors": [ { "uuid": "2901", "text": "Body sensor location" } ] } ] } ] }
/// ```
///
/// A characteristic that needs an encrypted link says so with Apple's names: permissions
/// `readEncryptionRequired` / `writeEncryptionRequired`, properties `notifyEncryptionRequired` /
/// `indicateEncryptionRequired`. A central reading it pairs first (iOS does so on its own);
/// `"pairing"` says what the simulated device can show and type when it does.
///
/// A recorded device (`cbtool record`, `cbtool spec-from-capture`) adds what replay needs:
/// `advertisingData` / `scanResponseData` (the bytes as recorded, advertised as they are),
/// services, characteristics and descriptors in the recorded order, notification `sequence`s
/// with their timing (`{"at": seconds after subscribing, "value": hex}`, once or `loop`ed every
/// `period` seconds) and `writes` (what a write produced in the recording: values set, and
/// notified, on characteristics).
public struct PeripheralSpec: Codable, Sendable, Equatable {
    /// The advertised local name (also the GAP Device Name).
    public var name: String
    /// Service UUIDs to advertise (default: every primary service's).
    public var advertisedServices: [String]?
    /// Manufacturer-specific data (company identifier little-endian first), hex.
    public var manufacturerData: String?
    /// The advertising data as recorded (hex, at most 31 bytes): advertised as it is, instead of
    /// data made from the name, services and manufacturer data.
    public var advertisingData: String?
    /// The scan response as recorded (hex, at most 31 bytes), with `advertisingData`.
    public var scanResponseData: String?
    /// Where the device stands on the virtual radio, metres: [x, y] or [x, y, z].
    public var position: [Double]?
    /// How the device pairs (default: Just Works, accepted).
    public var pairing: Pairing?
    /// An L2CAP channel the device publishes, echoing every byte a central sends on it; its
    /// PSM goes in Apple's L2CAP PSM characteristic (`CBUUIDL2CAPPSMCharacteristicString`),
    /// added to the first service.
    public var l2capEcho: L2CAPEcho?
    public var services: [Service]

    public struct L2CAPEcho: Codable, Sendable, Equatable {
        /// Whether a central must encrypt (pair) before its channel is accepted.
        public var encryptionRequired: Bool?
    }

    /// The simulated device's side of pairing: its IO capability and, for a keyboard, the
    /// passkey its user types. What it shows (a passkey, a number) goes to its log.
    public struct Pairing: Codable, Sendable, Equatable {
        /// display, keyboard, display-keyboard, yes-no or none (`cbtool pair --io`'s names).
        public var io: String?
        /// The passkey (0–999999) typed when asked; without it the device refuses to type one.
        /// Both sides keyboard-only means both users type the same passkey (Core spec Vol 3
        /// Part H §2.3.5.1), so a spec and `cbtool pair --io keyboard --passkey N` can agree.
        public var passkey: UInt32?
    }

    public struct Service: Codable, Sendable, Equatable {
        public var uuid: String
        public var primary: Bool?
        public var characteristics: [Characteristic]?
    }

    public struct Characteristic: Codable, Sendable, Equatable {
        public var uuid: String
        /// read, write, writeWithoutResponse, notify, indicate, notifyEncryptionRequired,
        /// indicateEncryptionRequired.
        public var properties: [String]
        /// readable, writeable, readEncryptionRequired, writeEncryptionRequired (default: what
        /// the properties need).
        public var permissions: [String]?
        /// The initial value, hex…
        public var value: String?
        /// …or UTF-8 text.
        public var text: String?
        public var descriptors: [Descriptor]?
        /// Periodic notifications (or indications).
        public var notify: Notify?
        /// Writes to this characteristic are also set on, and notified from, the characteristic
        /// with this UUID (an echo, like the book's EchoServer and RemoteLed).
        public var echoTo: String?
        /// What writes produced in a recording, tried in order (the first that matches applies).
        public var writes: [WriteEffect]?
    }

    /// A write's effect: when the written bytes are `value` (any write without it), each of
    /// `effects` sets a characteristic's value and notifies it to subscribers.
    public struct WriteEffect: Codable, Sendable, Equatable {
        public var value: String?
        public var effects: [Effect]
    }

    public struct Effect: Codable, Sendable, Equatable {
        /// The characteristic (a UUID of this spec).
        public var uuid: String
        /// Its new value, hex.
        public var value: String
    }

    public struct Descriptor: Codable, Sendable, Equatable {
        /// 2901 (user description, `text`) or 2904 (presentation format, `value` hex).
        public var uuid: String
        public var text: String?
        public var value: String?
    }

    public struct Notify: Codable, Sendable, Equatable {
        /// Seconds between updates.
        public var interval: Double?
        /// Values to send in turn (hex), cycling.
        public var values: [String]?
        /// Or a counter.
        public var counter: Counter?
        /// Or a recorded sequence, replayed from each subscription (no `interval` then).
        public var sequence: [Timed]?
        /// Whether the sequence starts over after `period` seconds (default: played once).
        public var loop: Bool?
        /// The sequence's length in seconds, for `loop` (default: the last value's time plus
        /// the mean gap between values).
        public var period: Double?
    }

    /// One recorded value: `at` seconds after the subscription.
    public struct Timed: Codable, Sendable, Equatable {
        public var at: Double
        public var value: String
    }

    /// Counts from `start` to `end` by `step` and starts over; each value is `bytes` bytes
    /// little-endian after the `prefix` bytes (hex).
    public struct Counter: Codable, Sendable, Equatable {
        public var start: Int
        public var end: Int
        public var step: Int?
        public var bytes: Int?
        public var prefix: String?
    }

    /// Reads and checks a spec file.
    public static func load(path: String) throws -> PeripheralSpec {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ToolError("cannot read spec \(path): \((error as NSError).localizedDescription)")
        }
        let spec: PeripheralSpec
        do {
            spec = try JSONDecoder().decode(PeripheralSpec.self, from: data)
        } catch let error as DecodingError {
            throw ToolError("spec \(path): \(describe(error))")
        } catch {
            throw ToolError("spec \(path): not JSON: \(error)")
        }
        do {
            try spec.validate()
        } catch let error as ToolError {
            throw ToolError("spec \(path): \(error.description)")
        }
        return spec
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? "top level" : String(keys.drop { $0 == "." })
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing \"\(key.stringValue)\" at \(path(context))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(path(context)): \(context.debugDescription)"
        case .dataCorrupted(let context): return "not valid JSON (\(path(context)): \(context.debugDescription))"
        @unknown default: return "\(error)"
        }
    }

    /// Checks every UUID, hex string, property and number before anything reaches Core
    /// Bluetooth (whose CBUUID traps on malformed strings).
    public func validate() throws {
        guard !name.isEmpty else { throw ToolError("\"name\" is empty") }
        for uuid in advertisedServices ?? [] { _ = try InputParsing.uuid(uuid) }
        if let manufacturerData {
            let bytes = try InputParsing.hex(manufacturerData)
            guard bytes.count >= 2 else { throw ToolError("manufacturerData needs at least the 2-byte company identifier") }
        }
        for (key, hex) in [("advertisingData", advertisingData), ("scanResponseData", scanResponseData)] {
            guard let hex else { continue }
            guard try InputParsing.hex(hex).count <= 31 else { throw ToolError("\(key) must be at most 31 bytes") }
        }
        if scanResponseData != nil && advertisingData == nil { throw ToolError("scanResponseData needs advertisingData") }
        if let position, !(2...3).contains(position.count) { throw ToolError("position must be [x, y] or [x, y, z]") }
        if let pairing {
            if let io = pairing.io, PairingIO(rawValue: io) == nil {
                throw ToolError("pairing.io \"\(io)\" is not one of \(PairingIO.allValueStrings.joined(separator: ", "))")
            }
            if let passkey = pairing.passkey, passkey > 999_999 { throw ToolError("pairing.passkey must be 0–999999") }
        }
        guard !services.isEmpty else { throw ToolError("no services") }
        for service in services {
            _ = try InputParsing.uuid(service.uuid)
            for c in service.characteristics ?? [] {
                let where_ = "characteristic \(c.uuid)"
                _ = try InputParsing.uuid(c.uuid)
                _ = try Self.properties(c.properties, where_)
                _ = try Self.permissions(c.permissions ?? [], where_)
                if let value = c.value { _ = try InputParsing.hex(value) }
                if c.value != nil && c.text != nil { throw ToolError("\(where_): give value or text, not both") }
                for d in c.descriptors ?? [] {
                    let uuid = try InputParsing.uuid(d.uuid)
                    switch uuid.uuidString {
                    case "2901": guard d.text != nil else { throw ToolError("\(where_): descriptor 2901 needs \"text\"") }
                    case "2904":
                        guard let value = d.value, try InputParsing.hex(value).count == 7 else {
                            throw ToolError("\(where_): descriptor 2904 needs a 7-byte hex \"value\"")
                        }
                    default: throw ToolError("\(where_): only descriptors 2901 and 2904 can be added (the others are made for you)")
                    }
                }
                if let notify = c.notify {
                    let sends = ["notify", "indicate", "notifyEncryptionRequired", "indicateEncryptionRequired"]
                    guard c.properties.contains(where: sends.contains) else {
                        throw ToolError("\(where_): notify needs the notify or indicate property")
                    }
                    if let sequence = notify.sequence {
                        try Self.validate(sequence: sequence, notify, where_)
                    } else {
                        try Self.validate(periodic: notify, where_)
                    }
                }
                for write in c.writes ?? [] {
                    if let value = write.value { _ = try InputParsing.hex(value) }
                    for effect in write.effects {
                        _ = try InputParsing.hex(effect.value)
                        guard try hasCharacteristic(InputParsing.uuid(effect.uuid)) else {
                            throw ToolError("\(where_): a write's effect names \(effect.uuid), not a characteristic of this spec")
                        }
                    }
                }
                if let echo = c.echoTo {
                    guard try hasCharacteristic(InputParsing.uuid(echo)) else { throw ToolError("\(where_): echoTo \(echo) is not a characteristic of this spec") }
                }
            }
        }
    }

    private func hasCharacteristic(_ uuid: CBUUID) -> Bool {
        services.contains { $0.characteristics?.contains { (try? InputParsing.uuid($0.uuid)) == uuid } == true }
    }

    private static func validate(periodic notify: Notify, _ where_: String) throws {
        guard let interval = notify.interval, interval > 0 else {
            throw ToolError("\(where_): notify needs a positive interval (or a sequence)")
        }
        for value in notify.values ?? [] { _ = try InputParsing.hex(value) }
        if let counter = notify.counter {
            if let prefix = counter.prefix { _ = try InputParsing.hex(prefix) }
            guard (1...8).contains(counter.bytes ?? 1) else { throw ToolError("\(where_): counter.bytes must be 1–8") }
            guard (counter.step ?? 1) != 0 else { throw ToolError("\(where_): counter.step must not be 0") }
        }
        guard !(notify.values ?? []).isEmpty || notify.counter != nil else {
            throw ToolError("\(where_): notify needs values or a counter")
        }
    }

    private static func validate(sequence: [Timed], _ notify: Notify, _ where_: String) throws {
        guard !sequence.isEmpty else { throw ToolError("\(where_): notify.sequence is empty") }
        guard notify.interval == nil, notify.values == nil, notify.counter == nil else {
            throw ToolError("\(where_): notify gives a sequence or an interval with values or a counter, not both")
        }
        var last = 0.0
        for (index, timed) in sequence.enumerated() {
            guard timed.at.isFinite, timed.at >= last else {
                throw ToolError("\(where_): notify.sequence[\(index)].at must be a number of seconds, not before the one above")
            }
            last = timed.at
            _ = try InputParsing.hex(timed.value)
        }
        if let period = notify.period, !(period.isFinite && period > 0 && period >= last) {
            throw ToolError("\(where_): notify.period must be positive and not before the last value")
        }
    }

    static func properties(_ names: [String], _ where_: String) throws -> CBCharacteristicProperties {
        var properties: CBCharacteristicProperties = []
        for name in names {
            switch name {
            case "read": properties.insert(.read)
            case "write": properties.insert(.write)
            case "writeWithoutResponse": properties.insert(.writeWithoutResponse)
            case "notify": properties.insert(.notify)
            case "indicate": properties.insert(.indicate)
            case "notifyEncryptionRequired": properties.insert(.notifyEncryptionRequired)
            case "indicateEncryptionRequired": properties.insert(.indicateEncryptionRequired)
            default:
                throw ToolError("\(where_): unknown property \"\(name)\" (read, write, writeWithoutResponse, notify, indicate, notifyEncryptionRequired, indicateEncryptionRequired)")
            }
        }
        return properties
    }

    static func permissions(_ names: [String], _ where_: String) throws -> CBAttributePermissions {
        var permissions: CBAttributePermissions = []
        for name in names {
            switch name {
            case "readable": permissions.insert(.readable)
            case "writeable": permissions.insert(.writeable)
            case "readEncryptionRequired": permissions.insert(.readEncryptionRequired)
            case "writeEncryptionRequired": permissions.insert(.writeEncryptionRequired)
            default:
                throw ToolError("\(where_): unknown permission \"\(name)\" (readable, writeable, readEncryptionRequired, writeEncryptionRequired)")
            }
        }
        return permissions
    }
}
