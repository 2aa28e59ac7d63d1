import AssignedNumbers

/// What a device wants to advertise, before it is packed into advertising and scan response data.
public struct AdvertisingContent: Hashable, Sendable {
    /// Flags go in the advertising data only (CSS Part A §1.3); nil advertises none.
    public var flags: AdvertisingFlags?
    public var localName: String?
    /// Each UUID is advertised in its shortest form.
    public var serviceUUIDs: [BluetoothUUID]
    public var manufacturerData: [ManufacturerData]
    public var serviceData: [ServiceData]
    public var txPowerLevel: Int8?
    public var appearance: UInt16?
    /// Each UUID in its shortest form; one list per width, placed whole.
    public var solicitedServiceUUIDs: [BluetoothUUID]
    public var uri: AdvertisedURI?
    /// Anything else, placed whole after the fields above.
    public var additionalElements: [AdvertisingElement]

    public init(flags: AdvertisingFlags? = nil, localName: String? = nil, serviceUUIDs: [BluetoothUUID] = [],
                manufacturerData: [ManufacturerData] = [], serviceData: [ServiceData] = [],
                txPowerLevel: Int8? = nil, appearance: UInt16? = nil, solicitedServiceUUIDs: [BluetoothUUID] = [],
                uri: AdvertisedURI? = nil, additionalElements: [AdvertisingElement] = []) {
        self.flags = flags
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.txPowerLevel = txPowerLevel
        self.appearance = appearance
        self.solicitedServiceUUIDs = solicitedServiceUUIDs
        self.uri = uri
        self.additionalElements = additionalElements
    }

    /// The fields placed whole, in placement priority order.
    var wholeElements: [AdvertisingElement] {
        var out: [AdvertisingElement] = manufacturerData.map { .manufacturerData($0) } + serviceData.map { .serviceData($0) }
        if let txPowerLevel { out.append(.txPowerLevel(txPowerLevel)) }
        if let appearance { out.append(.appearance(appearance)) }
        for (width, uuids) in groupedByShortestWidth(solicitedServiceUUIDs) { out.append(.solicitationUUIDs(uuids, width: width)) }
        if let uri { out.append(.uri(uri)) }
        return out + additionalElements
    }
}

/// Which of the two payloads something went into.
public enum AdvertisingPayload: Hashable, Sendable {
    case advertisingData
    case scanResponse
}

/// Where the packer put the local name.
public enum LocalNamePlacement: Hashable, Sendable {
    /// There was no name to advertise.
    case noName
    /// The Complete Local Name went into this payload.
    case complete(AdvertisingPayload)
    /// Only the first characters fitted: a Shortened Local Name with this text went into this payload.
    case shortened(String, AdvertisingPayload)
    /// Not even one character fitted anywhere.
    case omitted
}

/// The result of packing: the two payloads and everything that did not fit.
public struct PackedAdvertisement: Hashable, Sendable {
    public var advertisingData: AdvertisingData
    public var scanResponse: AdvertisingData
    /// Service UUIDs that fitted in neither payload (Core Bluetooth's "overflow" area).
    public var overflowServiceUUIDs: [BluetoothUUID]
    public var localName: LocalNamePlacement
    /// Whole fields (flags, manufacturer data, service data, …) that fitted in neither payload.
    public var unplaced: [AdvertisingElement]

    /// Whether everything asked for was advertised in full.
    public var isComplete: Bool {
        overflowServiceUUIDs.isEmpty && unplaced.isEmpty && {
            switch localName { case .noName, .complete: true; case .shortened, .omitted: false }
        }()
    }
}

/// Packs `AdvertisingContent` into advertising data and scan response data of bounded size,
/// returning explicitly what did not fit.
///
/// The policy, in order (each step uses only the space the earlier steps left):
/// 1. **Flags** go in the advertising data (never the scan response), or are unplaced.
/// 2. **Service UUIDs**, narrowest width first (16, 32, then 128-bit), as many as fit in the
///    advertising data.
/// 3. The **complete local name** goes in the advertising data if it fits there.
/// 4. **Whole fields** — manufacturer data, service data, TX power, appearance, solicitation
///    lists, URI, additional elements, in that order — each in the advertising data if it fits.
/// 5. The complete local name, if not placed yet, goes in the scan response if it fits there.
/// 6. Whole fields not placed yet go in the scan response if they fit, else are `unplaced`.
/// 7. Service UUIDs not placed yet go in the scan response, as many as fit (unless
///    `serviceUUIDsMayUseScanResponse` is false); the rest are `overflowServiceUUIDs`.
/// 8. A local name still not placed is shortened, on a character boundary, to fill the payload
///    with more room left (the scan response on a tie), as a Shortened Local Name; if not even
///    one character fits it is `omitted`.
///
/// A UUID list is marked Complete only when every advertised UUID of its width is in that one
/// structure; lists split across payloads or with overflow are marked Incomplete. Lists longer
/// than one structure can hold (254 octets, for extended advertising) are split.
///
/// With the legacy limits this reproduces Core Bluetooth's `startAdvertising` behaviour: the
/// name moves to the scan response when the UUIDs leave it no room, and UUIDs beyond both
/// payloads go to the overflow area (Apple keeps the scan response for the name; set
/// `serviceUUIDsMayUseScanResponse` to false for that).
public struct AdvertisingPacker: Hashable, Sendable {
    /// Octets available for advertising data (31 for legacy advertising).
    public var advertisingDataLimit: Int
    /// Octets available for scan response data (31 for legacy; 0 when not scannable).
    public var scanResponseLimit: Int
    /// Whether service UUIDs left over from the advertising data may use the scan response.
    public var serviceUUIDsMayUseScanResponse: Bool

    public init(advertisingDataLimit: Int = AdvertisingData.legacyMaximumLength,
                scanResponseLimit: Int = AdvertisingData.legacyMaximumLength,
                serviceUUIDsMayUseScanResponse: Bool = true) {
        self.advertisingDataLimit = advertisingDataLimit
        self.scanResponseLimit = scanResponseLimit
        self.serviceUUIDsMayUseScanResponse = serviceUUIDsMayUseScanResponse
    }

    /// Legacy advertising: 31 octets of advertising data and 31 of scan response.
    public static let legacy = AdvertisingPacker()

    /// Extended advertising with the given budgets (up to 1650 octets; 251 fits one HCI command).
    /// Connectable extended advertising is not scannable, hence no scan response by default.
    public static func extended(advertisingDataLimit: Int = AdvertisingData.extendedMaximumLength,
                                scanResponseLimit: Int = 0) -> AdvertisingPacker {
        AdvertisingPacker(advertisingDataLimit: advertisingDataLimit, scanResponseLimit: scanResponseLimit)
    }

    public func pack(_ content: AdvertisingContent) -> PackedAdvertisement {
        var adv = PayloadBuilder(limit: advertisingDataLimit)
        var scan = PayloadBuilder(limit: scanResponseLimit)
        var unplaced: [AdvertisingElement] = []

        // 1. Flags.
        if let flags = content.flags {
            let element = AdvertisingElement.flags(flags)
            if adv.take(element) { adv.flags = element } else { unplaced.append(element) }
        }

        // 2. Service UUIDs in the advertising data.
        let groups = groupedByShortestWidth(content.serviceUUIDs)
        var pending: [(UUIDWidth, [BluetoothUUID])] = []
        for (width, uuids) in groups {
            let placed = adv.takeUUIDs(uuids, width: width)
            pending.append((width, Array(uuids.dropFirst(placed))))
        }

        // 3. The complete name in the advertising data.
        var namePlacement = LocalNamePlacement.noName
        let completeName = content.localName.map { AdvertisingElement.localName($0, complete: true) }
        if let completeName, adv.take(completeName) {
            adv.name = completeName
            namePlacement = .complete(.advertisingData)
        }

        // 4. Whole fields in the advertising data.
        var deferred: [AdvertisingElement] = []
        for element in content.wholeElements {
            if adv.take(element) { adv.others.append(element) } else { deferred.append(element) }
        }

        // 5. The complete name in the scan response.
        if let completeName, namePlacement == .noName, scan.take(completeName) {
            scan.name = completeName
            namePlacement = .complete(.scanResponse)
        }

        // 6. Whole fields in the scan response.
        for element in deferred {
            if scan.take(element) { scan.others.append(element) } else { unplaced.append(element) }
        }

        // 7. Remaining service UUIDs: scan response, then overflow.
        var overflow: [BluetoothUUID] = []
        for (width, uuids) in pending where !uuids.isEmpty {
            let placed = serviceUUIDsMayUseScanResponse ? scan.takeUUIDs(uuids, width: width) : 0
            overflow += uuids.dropFirst(placed)
        }

        // 8. Shorten a name that fitted nowhere.
        if let name = content.localName, namePlacement == .noName {
            let inScanResponse = scan.remaining >= adv.remaining
            let room = min(max(inScanResponse ? scan.remaining : adv.remaining, 2) - 2, AdvertisingStructure.maximumDataLength)
            let shortened = Self.prefix(of: name, utf8Limit: room)
            if shortened.isEmpty {
                namePlacement = .omitted
            } else {
                let element = AdvertisingElement.localName(shortened, complete: false)
                if inScanResponse { _ = scan.take(element); scan.name = element } else { _ = adv.take(element); adv.name = element }
                namePlacement = .shortened(shortened, inScanResponse ? .scanResponse : .advertisingData)
            }
        }

        // A width's list is complete only if all its UUIDs sit in one structure of one payload.
        var completeWidths = Set<UUIDWidth>()
        for (width, uuids) in groups {
            let perStructure = AdvertisingStructure.maximumDataLength / width.byteCount
            for payload in [adv, scan] where payload.uuids[width]?.count == uuids.count && uuids.count <= perStructure {
                completeWidths.insert(width)
            }
        }

        return PackedAdvertisement(
            advertisingData: adv.build(completeWidths: completeWidths),
            scanResponse: scan.build(completeWidths: completeWidths),
            overflowServiceUUIDs: overflow,
            localName: namePlacement,
            unplaced: unplaced)
    }

    /// The longest prefix of whole characters of `name` within `utf8Limit` octets.
    static func prefix(of name: String, utf8Limit: Int) -> String {
        var result = ""
        var length = 0
        for character in name {
            let size = character.utf8.count
            if length + size > utf8Limit { break }
            result.append(character)
            length += size
        }
        return result
    }
}

/// One payload being filled: what has been placed in each slot and how many octets it uses.
private struct PayloadBuilder {
    let limit: Int
    var used = 0
    var flags: AdvertisingElement?
    var uuids: [UUIDWidth: [BluetoothUUID]] = [:]
    var name: AdvertisingElement?
    var others: [AdvertisingElement] = []

    init(limit: Int) { self.limit = max(0, limit) }

    var remaining: Int { limit - used }

    /// Reserves room for `element` if it fits (and can be one structure at all).
    mutating func take(_ element: AdvertisingElement) -> Bool {
        let structure = element.structure
        guard structure.data.count <= AdvertisingStructure.maximumDataLength, structure.encodedLength <= remaining else { return false }
        used += structure.encodedLength
        return true
    }

    /// Reserves room for as many of `uuids` as fit (split into structures of at most 254
    /// octets) and returns how many.
    mutating func takeUUIDs(_ uuids: [BluetoothUUID], width: UUIDWidth) -> Int {
        let already = self.uuids[width]?.count ?? 0
        var count = 0
        while count < uuids.count, Self.listLength(already + count + 1, width) - Self.listLength(already, width) <= remaining {
            count += 1
        }
        used += Self.listLength(already + count, width) - Self.listLength(already, width)
        self.uuids[width, default: []] += uuids.prefix(count)
        return count
    }

    /// Octets for `count` UUIDs of `width`, headers included.
    static func listLength(_ count: Int, _ width: UUIDWidth) -> Int {
        let perStructure = AdvertisingStructure.maximumDataLength / width.byteCount
        return count * width.byteCount + 2 * ((count + perStructure - 1) / perStructure)
    }

    /// Flags, service UUID lists, the name, then the whole fields.
    func build(completeWidths: Set<UUIDWidth>) -> AdvertisingData {
        var elements: [AdvertisingElement] = flags.map { [$0] } ?? []
        let complete = { (width: UUIDWidth) in completeWidths.contains(width) }
        for width in UUIDWidth.allCases {
            guard let list = uuids[width], !list.isEmpty else { continue }
            let perStructure = AdvertisingStructure.maximumDataLength / width.byteCount
            for start in stride(from: 0, to: list.count, by: perStructure) {
                let chunk = Array(list[start..<min(start + perStructure, list.count)])
                elements.append(.serviceUUIDs(chunk, width: width, complete: complete(width)))
            }
        }
        if let name { elements.append(name) }
        return AdvertisingData(elements: elements + others)
    }
}

/// `uuids` without repeats, grouped by their shortest width (narrowest first), order kept.
func groupedByShortestWidth(_ uuids: [BluetoothUUID]) -> [(UUIDWidth, [BluetoothUUID])] {
    var seen = Set<BluetoothUUID>()
    let unique = uuids.filter { seen.insert($0).inserted }
    return UUIDWidth.allCases.compactMap { width in
        let group = unique.filter { UUIDWidth.shortest(for: $0) == width }
        return group.isEmpty ? nil : (width, group)
    }
}
