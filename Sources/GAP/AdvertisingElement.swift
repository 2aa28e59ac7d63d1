import AssignedNumbers
import ByteCoding
import HCI

/// One AD structure, typed. Each case encodes to exactly one `AdvertisingStructure`.
///
/// Decoding is lossless: a structure becomes a typed case only when that case encodes back to
/// the very same octets; anything else (an unknown type, a wrong length, invalid UTF-8, reserved
/// bits set…) is kept as `.other`, so decoding then re-encoding reproduces every structure.
public enum AdvertisingElement: Hashable, Sendable {
    /// Flags (0x01).
    case flags(AdvertisingFlags)
    /// A list of service UUIDs (0x02–0x07). `complete` says whether the list names every
    /// service UUID of that width the device has.
    case serviceUUIDs([BluetoothUUID], width: UUIDWidth, complete: Bool)
    /// Complete (0x09) or shortened (0x08) local name, UTF-8.
    case localName(String, complete: Bool)
    /// Tx Power Level (0x0A), dBm.
    case txPowerLevel(Int8)
    /// Class of Device (0x0D), 24 bits.
    case classOfDevice(UInt32)
    /// Peripheral Connection Interval Range (0x12), in 1.25 ms units; 0xFFFF means "no specific".
    case peripheralConnectionIntervalRange(minimum: UInt16, maximum: UInt16)
    /// Service Solicitation UUIDs (0x14, 0x1F, 0x15).
    case solicitationUUIDs([BluetoothUUID], width: UUIDWidth)
    /// Service Data (0x16, 0x20, 0x21).
    case serviceData(ServiceData)
    /// Public Target Address (0x17): public addresses this advertisement is meant for.
    case publicTargetAddresses([BluetoothAddress])
    /// Random Target Address (0x18).
    case randomTargetAddresses([BluetoothAddress])
    /// Appearance (0x19), from the SIG's appearance values.
    case appearance(UInt16)
    /// Advertising Interval (0x1A), in 0.625 ms units.
    case advertisingInterval(UInt16)
    /// Advertising Interval - long (0x2F), in 0.625 ms units; 3 octets on the air when the value
    /// fits in 24 bits, else 4.
    case advertisingIntervalLong(UInt32)
    /// LE Bluetooth Device Address (0x1B): the device's address and whether it is random.
    case leDeviceAddress(LEAddress)
    /// LE Role (0x1C).
    case leRole(AdvertisedLERole)
    /// URI (0x24).
    case uri(AdvertisedURI)
    /// LE Supported Features (0x27): the Link Layer feature bit mask, least significant octet
    /// first, trailing zero octets may be omitted.
    case leSupportedFeatures([UInt8])
    /// Manufacturer Specific Data (0xFF).
    case manufacturerData(ManufacturerData)
    /// Any structure kept as it came: unknown types and anything not well formed for its type.
    case other(AdvertisingStructure)

    // MARK: - Decoding

    /// Decodes `structure`, keeping it as `.other` unless a typed case reproduces it exactly.
    public init(_ structure: AdvertisingStructure) {
        if let typed = Self.typed(structure), typed.structure == structure {
            self = typed
        } else {
            self = .other(structure)
        }
    }

    private static func typed(_ s: AdvertisingStructure) -> AdvertisingElement? {
        let data = s.data
        var reader = ByteReader(data, context: s.type.description)
        switch s.type {
        case .flags:
            guard data.count == 1 else { return nil }
            return .flags(AdvertisingFlags(rawValue: data[0]))
        case .incompleteList16BitServiceUUIDs, .completeList16BitServiceUUIDs,
             .incompleteList32BitServiceUUIDs, .completeList32BitServiceUUIDs,
             .incompleteList128BitServiceUUIDs, .completeList128BitServiceUUIDs:
            let width = Self.serviceListWidth(s.type)!
            guard let uuids = Self.uuidList(data, width: width, exact: true) else { return nil }
            return .serviceUUIDs(uuids, width: width, complete: s.type.rawValue & 1 == 1)
        case .shortenedLocalName, .completeLocalName:
            guard let name = String(validating: data, as: UTF8.self) else { return nil }
            return .localName(name, complete: s.type == .completeLocalName)
        case .txPowerLevel:
            guard data.count == 1 else { return nil }
            return .txPowerLevel(Int8(bitPattern: data[0]))
        case .classOfDevice:
            guard data.count == 3, let value = try? reader.u24() else { return nil }
            return .classOfDevice(value)
        case .peripheralConnectionIntervalRange:
            guard data.count == 4, let minimum = try? reader.u16(), let maximum = try? reader.u16() else { return nil }
            return .peripheralConnectionIntervalRange(minimum: minimum, maximum: maximum)
        case .list16BitServiceSolicitationUUIDs, .list32BitServiceSolicitationUUIDs, .list128BitServiceSolicitationUUIDs:
            let width = Self.solicitationWidth(s.type)!
            guard let uuids = Self.uuidList(data, width: width, exact: true) else { return nil }
            return .solicitationUUIDs(uuids, width: width)
        case .serviceData16BitUUID, .serviceData32BitUUID, .serviceData128BitUUID:
            let width = Self.serviceDataWidth(s.type)!
            guard let uuid = try? reader.uuid(length: width.byteCount) else { return nil }
            return .serviceData(ServiceData(uuid: uuid, data: reader.rest(), width: width))
        case .publicTargetAddress, .randomTargetAddress:
            guard data.count % 6 == 0 else { return nil }
            let addresses = stride(from: 0, to: data.count, by: 6).compactMap { BluetoothAddress(wire: Array(data[$0..<$0 + 6])) }
            return s.type == .publicTargetAddress ? .publicTargetAddresses(addresses) : .randomTargetAddresses(addresses)
        case .appearance:
            guard data.count == 2, let value = try? reader.u16() else { return nil }
            return .appearance(value)
        case .advertisingInterval:
            guard data.count == 2, let value = try? reader.u16() else { return nil }
            return .advertisingInterval(value)
        case .advertisingIntervalLong:
            guard data.count == 3 || data.count == 4 else { return nil }
            let value = data.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            return .advertisingIntervalLong(value)
        case .leBluetoothDeviceAddress:
            guard data.count == 7, let address = try? reader.address(), let kind = try? reader.u8(), kind <= 1 else { return nil }
            return .leDeviceAddress(LEAddress(kind == 1 ? .randomDevice : .publicDevice, address))
        case .leRole:
            guard data.count == 1, let role = AdvertisedLERole(rawValue: data[0]) else { return nil }
            return .leRole(role)
        case .uri:
            return AdvertisedURI(bytes: data).map { .uri($0) }
        case .leSupportedFeatures:
            return .leSupportedFeatures(data)
        case .manufacturerSpecificData:
            return ManufacturerData(bytes: data).map { .manufacturerData($0) }
        default:
            return nil
        }
    }

    /// The UUIDs in a list's data. `exact` rejects a length that is not a whole number of
    /// UUIDs; otherwise the trailing partial UUID is ignored (what a lenient reader wants).
    static func uuidList(_ data: [UInt8], width: UUIDWidth, exact: Bool) -> [BluetoothUUID]? {
        if exact, data.count % width.byteCount != 0 { return nil }
        var reader = ByteReader(data, context: "UUID list")
        var uuids: [BluetoothUUID] = []
        while reader.remaining >= width.byteCount, let uuid = try? reader.uuid(length: width.byteCount) { uuids.append(uuid) }
        return uuids
    }

    static func serviceListWidth(_ type: AdvertisingDataType) -> UUIDWidth? {
        switch type.rawValue {
        case 0x02, 0x03: .bits16
        case 0x04, 0x05: .bits32
        case 0x06, 0x07: .bits128
        default: nil
        }
    }

    static func solicitationWidth(_ type: AdvertisingDataType) -> UUIDWidth? {
        switch type {
        case .list16BitServiceSolicitationUUIDs: .bits16
        case .list32BitServiceSolicitationUUIDs: .bits32
        case .list128BitServiceSolicitationUUIDs: .bits128
        default: nil
        }
    }

    static func serviceDataWidth(_ type: AdvertisingDataType) -> UUIDWidth? {
        switch type {
        case .serviceData16BitUUID: .bits16
        case .serviceData32BitUUID: .bits32
        case .serviceData128BitUUID: .bits128
        default: nil
        }
    }

    // MARK: - Encoding

    /// The AD type this element encodes to.
    public var type: AdvertisingDataType {
        switch self {
        case .flags: .flags
        case let .serviceUUIDs(_, width, complete):
            switch width {
            case .bits16: complete ? .completeList16BitServiceUUIDs : .incompleteList16BitServiceUUIDs
            case .bits32: complete ? .completeList32BitServiceUUIDs : .incompleteList32BitServiceUUIDs
            case .bits128: complete ? .completeList128BitServiceUUIDs : .incompleteList128BitServiceUUIDs
            }
        case let .localName(_, complete): complete ? .completeLocalName : .shortenedLocalName
        case .txPowerLevel: .txPowerLevel
        case .classOfDevice: .classOfDevice
        case .peripheralConnectionIntervalRange: .peripheralConnectionIntervalRange
        case let .solicitationUUIDs(_, width):
            switch width {
            case .bits16: .list16BitServiceSolicitationUUIDs
            case .bits32: .list32BitServiceSolicitationUUIDs
            case .bits128: .list128BitServiceSolicitationUUIDs
            }
        case let .serviceData(serviceData):
            switch serviceData.width {
            case .bits16: .serviceData16BitUUID
            case .bits32: .serviceData32BitUUID
            case .bits128: .serviceData128BitUUID
            }
        case .publicTargetAddresses: .publicTargetAddress
        case .randomTargetAddresses: .randomTargetAddress
        case .appearance: .appearance
        case .advertisingInterval: .advertisingInterval
        case .advertisingIntervalLong: .advertisingIntervalLong
        case .leDeviceAddress: .leBluetoothDeviceAddress
        case .leRole: .leRole
        case .uri: .uri
        case .leSupportedFeatures: .leSupportedFeatures
        case .manufacturerData: .manufacturerSpecificData
        case let .other(structure): structure.type
        }
    }

    /// The structure this element encodes to. UUIDs that have no form of a list's width are
    /// left out (the packer never produces them).
    public var structure: AdvertisingStructure {
        var writer = ByteWriter()
        switch self {
        case let .flags(flags):
            writer.u8(flags.rawValue)
        case let .serviceUUIDs(uuids, width, _), let .solicitationUUIDs(uuids, width):
            for uuid in uuids { if let bytes = uuid.littleEndianBytes(length: width.byteCount) { writer.bytes(bytes) } }
        case let .localName(name, _):
            writer.bytes(name.utf8)
        case let .txPowerLevel(power):
            writer.i8(power)
        case let .classOfDevice(value):
            writer.u24(value & 0xFF_FFFF)
        case let .peripheralConnectionIntervalRange(minimum, maximum):
            writer.u16(minimum)
            writer.u16(maximum)
        case let .serviceData(serviceData):
            writer.bytes(serviceData.uuid.littleEndianBytes(length: serviceData.width.byteCount) ?? [])
            writer.bytes(serviceData.data)
        case let .publicTargetAddresses(addresses), let .randomTargetAddresses(addresses):
            for address in addresses { writer.address(address) }
        case let .appearance(value):
            writer.u16(value)
        case let .advertisingInterval(value):
            writer.u16(value)
        case let .advertisingIntervalLong(value):
            if value <= 0xFF_FFFF { writer.u24(value) } else { writer.u32(value) }
        case let .leDeviceAddress(address):
            writer.address(address.address)
            writer.u8(address.isRandom ? 0x01 : 0x00)
        case let .leRole(role):
            writer.u8(role.rawValue)
        case let .uri(uri):
            writer.bytes(uri.bytes)
        case let .leSupportedFeatures(features):
            writer.bytes(features)
        case let .manufacturerData(manufacturerData):
            writer.bytes(manufacturerData.bytes)
        case let .other(structure):
            return structure
        }
        return AdvertisingStructure(type: type, data: writer.bytes)
    }

    /// Octets this element takes on the air, header included.
    public var encodedLength: Int { structure.encodedLength }
}
