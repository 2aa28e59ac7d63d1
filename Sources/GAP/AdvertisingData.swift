import AssignedNumbers
import ByteCoding
import HCI

/// Advertising or scan response data as a list of typed AD structures, in their order on the
/// air, with accessors for the common fields.
///
/// Lossless: `AdvertisingData(bytes:).encoded` gives back every well-formed structure octet for
/// octet (see `AdvertisingElement.init(_:)`), including unknown or malformed-for-their-type ones.
public struct AdvertisingData: Hashable, Sendable, ExpressibleByArrayLiteral, CustomStringConvertible {
    public var elements: [AdvertisingElement]

    /// The legacy advertising PDU's budget for advertising data, and for scan response data.
    public static let legacyMaximumLength = 31
    /// The most advertising data an extended advertising set can hold (Vol 4 Part E §7.8.57
    /// lets a controller report up to 1650).
    public static let extendedMaximumLength = 1650

    public init(elements: [AdvertisingElement] = []) { self.elements = elements }
    public init(arrayLiteral elements: AdvertisingElement...) { self.elements = elements }

    public init(structures: [AdvertisingStructure]) { elements = structures.map(AdvertisingElement.init) }

    /// Decodes leniently, as a scanner must: every well-formed structure before the end, a zero
    /// length octet, or a structure that runs past the end. Never throws, never traps.
    public init(bytes: some Collection<UInt8>) {
        self.init(structures: AdvertisingStructure.decodeList(bytes).structures)
    }

    /// Decodes strictly: throws `DecodeError` if a structure runs past the end, or if non-zero
    /// octets follow the zero length octet that ends the significant part.
    public static func decode(_ bytes: some Collection<UInt8>) throws -> AdvertisingData {
        let list = AdvertisingStructure.decodeList(bytes)
        if let malformation = list.malformation { throw malformation }
        return AdvertisingData(structures: list.structures)
    }

    public var structures: [AdvertisingStructure] { elements.map(\.structure) }

    /// The significant part on the air (no zero padding).
    public var encoded: [UInt8] { AdvertisingStructure.encode(structures) }

    public var encodedLength: Int { structures.reduce(0) { $0 + $1.encodedLength } }

    public var isEmpty: Bool { elements.isEmpty }

    public var description: String {
        "AdvertisingData(" + structures.map(\.description).joined(separator: "; ") + ")"
    }

    // MARK: - Accessors (first occurrence wins where the field is single-valued)

    public var flags: AdvertisingFlags? {
        elements.lazy.compactMap { if case let .flags(f) = $0 { f } else { nil } }.first
    }

    /// The complete local name if present, else the shortened one.
    public var localName: String? {
        let names = elements.compactMap { if case let .localName(n, complete) = $0 { (n, complete) } else { nil } }
        return (names.first { $0.1 } ?? names.first)?.0
    }

    /// Whether `localName` is the complete name (false for a shortened name or none).
    public var hasCompleteLocalName: Bool {
        elements.contains { if case .localName(_, true) = $0 { true } else { false } }
    }

    /// Every advertised service UUID, from complete and incomplete lists of all widths, without
    /// repeats, in order. Whole UUIDs of a list whose length is not a multiple of its width are
    /// included too (a lenient scanner keeps what is well formed).
    public var serviceUUIDs: [BluetoothUUID] {
        unique(elements.flatMap { element -> [BluetoothUUID] in
            switch element {
            case let .serviceUUIDs(uuids, _, _): uuids
            case let .other(s): AdvertisingElement.serviceListWidth(s.type).flatMap { AdvertisingElement.uuidList(s.data, width: $0, exact: false) } ?? []
            default: []
            }
        })
    }

    /// Whether some service UUID list says it is incomplete (the device has more services).
    public var hasIncompleteServiceUUIDList: Bool {
        elements.contains { if case .serviceUUIDs(_, _, false) = $0 { true } else { false } }
    }

    /// Every service solicitation UUID (all widths), without repeats, leniently like `serviceUUIDs`.
    public var solicitedServiceUUIDs: [BluetoothUUID] {
        unique(elements.flatMap { element -> [BluetoothUUID] in
            switch element {
            case let .solicitationUUIDs(uuids, _): uuids
            case let .other(s): AdvertisingElement.solicitationWidth(s.type).flatMap { AdvertisingElement.uuidList(s.data, width: $0, exact: false) } ?? []
            default: []
            }
        })
    }

    public var txPowerLevel: Int8? {
        elements.lazy.compactMap { if case let .txPowerLevel(p) = $0 { p } else { nil } }.first
    }

    /// Every Service Data structure, in order.
    public var serviceData: [ServiceData] {
        elements.compactMap { if case let .serviceData(d) = $0 { d } else { nil } }
    }

    /// Service data keyed by UUID (the first structure for a UUID wins), as Core Bluetooth's
    /// `CBAdvertisementDataServiceDataKey` presents it.
    public var serviceDataByUUID: [BluetoothUUID: [UInt8]] {
        var result: [BluetoothUUID: [UInt8]] = [:]
        for item in serviceData where result[item.uuid] == nil { result[item.uuid] = item.data }
        return result
    }

    /// Every Manufacturer Specific Data structure, in order.
    public var manufacturerData: [ManufacturerData] {
        elements.compactMap { if case let .manufacturerData(d) = $0 { d } else { nil } }
    }

    public var appearance: UInt16? {
        elements.lazy.compactMap { if case let .appearance(a) = $0 { a } else { nil } }.first
    }

    /// The advertising interval in 0.625 ms units, from either interval type.
    public var advertisingInterval: UInt32? {
        elements.lazy.compactMap { element -> UInt32? in
            switch element {
            case let .advertisingInterval(v): UInt32(v)
            case let .advertisingIntervalLong(v): v
            default: nil
            }
        }.first
    }

    public var leRole: AdvertisedLERole? {
        elements.lazy.compactMap { if case let .leRole(r) = $0 { r } else { nil } }.first
    }

    public var uris: [AdvertisedURI] {
        elements.compactMap { if case let .uri(u) = $0 { u } else { nil } }
    }

    public var leDeviceAddress: LEAddress? {
        elements.lazy.compactMap { if case let .leDeviceAddress(a) = $0 { a } else { nil } }.first
    }

    public var publicTargetAddresses: [BluetoothAddress] {
        elements.flatMap { element -> [BluetoothAddress] in if case let .publicTargetAddresses(a) = element { a } else { [] } }
    }

    public var randomTargetAddresses: [BluetoothAddress] {
        elements.flatMap { element -> [BluetoothAddress] in if case let .randomTargetAddresses(a) = element { a } else { [] } }
    }

    public var peripheralConnectionIntervalRange: (minimum: UInt16, maximum: UInt16)? {
        elements.lazy.compactMap { element -> (minimum: UInt16, maximum: UInt16)? in
            if case let .peripheralConnectionIntervalRange(lo, hi) = element { (lo, hi) } else { nil }
        }.first
    }

    public var classOfDevice: UInt32? {
        elements.lazy.compactMap { if case let .classOfDevice(c) = $0 { c } else { nil } }.first
    }

    public var leSupportedFeatures: [UInt8]? {
        elements.lazy.compactMap { if case let .leSupportedFeatures(f) = $0 { f } else { nil } }.first
    }

    /// Structures kept raw: unknown types, and known types not well formed for their type.
    public var otherStructures: [AdvertisingStructure] {
        elements.compactMap { if case let .other(s) = $0 { s } else { nil } }
    }

    private func unique(_ uuids: [BluetoothUUID]) -> [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        return uuids.filter { seen.insert($0).inserted }
    }
}
