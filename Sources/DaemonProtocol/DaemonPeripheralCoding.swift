import ATT
import AssignedNumbers
import ByteCoding
import GATT

// The peripheral role's values on the wire (docs/daemon.md, "Peripheral role"): the service a
// client publishes, where the database placed it, and why a call failed. The role service's own
// error types live above this module, so the wire has its own, mapped one to one by the daemon
// and the client.

/// Why publishing a service failed, as the wire carries it.
public enum DaemonPublishError: Error, Sendable, Hashable {
    case alreadyPublished
    case includedServiceNotPublished(key: UInt32)
    case database(GATTDatabaseError)
}

/// Why unpublishing a service failed, as the wire carries it.
public enum DaemonUnpublishError: Error, Sendable, Hashable {
    case notPublished
    case included(byKey: UInt32)
    case database(GATTDatabaseError)
}

/// Why advertising did not start, as the wire carries it (a controller's refusal as its text).
public enum DaemonAdvertisingError: Error, Sendable, Hashable {
    case alreadyAdvertising
    case manufacturerDataDoesNotFit(byteCount: UInt32)
    case refused(String)
}

/// One write of a peer's request (or of its Execute Write's batch) to a client's value.
public struct DaemonWrite: Sendable, Hashable {
    public let central: UInt32
    public let handle: ATTHandle
    public let offset: UInt16
    public let value: [UInt8]

    public init(central: UInt32, handle: ATTHandle, offset: UInt16, value: [UInt8]) {
        self.central = central
        self.handle = handle
        self.offset = offset
        self.value = value
    }
}

/// What a client asks to advertise (the role's `startAdvertising` arguments).
public struct DaemonAdvertisement: Sendable, Hashable {
    public let name: String?
    public let serviceUUIDs: [BluetoothUUID]
    public let manufacturerData: [UInt8]?
    /// Advertisement and scan response bytes advertised as they are.
    public let raw: Raw?

    public struct Raw: Sendable, Hashable {
        public let advertisement: [UInt8]
        public let scanResponse: [UInt8]
        public init(advertisement: [UInt8], scanResponse: [UInt8]) {
            self.advertisement = advertisement
            self.scanResponse = scanResponse
        }
    }

    public init(name: String?, serviceUUIDs: [BluetoothUUID], manufacturerData: [UInt8]?, raw: Raw?) {
        self.name = name
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.raw = raw
    }
}

extension ByteWriter {
    mutating func gattValue(_ value: GATTValue) {
        if let bytes = value.storedBytes {
            u8(1)
            blob(bytes)
        } else {
            u8(0)
        }
    }

    /// A service definition without its included services (the message names those by key).
    mutating func gattService(_ value: GATTService) {
        uuid(value.uuid)
        bool(value.isPrimary)
        array(value.characteristics) { w, characteristic in
            w.uuid(characteristic.uuid)
            w.u8(characteristic.properties.rawValue)
            w.u16(characteristic.extendedProperties.rawValue)
            w.u8(characteristic.permissions.rawValue)
            w.gattValue(characteristic.value)
            w.array(characteristic.descriptors) { w, descriptor in
                w.uuid(descriptor.uuid)
                w.u8(descriptor.permissions.rawValue)
                w.gattValue(descriptor.value)
            }
            w.u8(characteristic.clientConfigurationPermissions.rawValue)
        }
    }

    mutating func serviceHandles(_ value: GATTServiceHandles) {
        u32(UInt32(truncatingIfNeeded: value.id.rawValue))
        handles(value.range)
        array(value.includes) { $0.handle($1) }
        array(value.characteristics) { w, characteristic in
            w.handle(characteristic.declaration)
            w.handle(characteristic.value)
            w.optional(characteristic.clientConfiguration) { $0.handle($1) }
            w.array(characteristic.descriptors) { $0.handle($1) }
        }
    }

    mutating func databaseError(_ value: GATTDatabaseError) {
        switch value {
        case .outOfHandles: u8(0)
        case .unknownIncludedService(let id): u8(1); u32(UInt32(truncatingIfNeeded: id.rawValue))
        case .unknownService(let id): u8(2); u32(UInt32(truncatingIfNeeded: id.rawValue))
        case .serviceIsIncluded(let id): u8(3); u32(UInt32(truncatingIfNeeded: id.rawValue))
        case .builtInService: u8(4)
        case .valueTooLong: u8(5)
        case .notStored(let handle): u8(6); self.handle(handle)
        }
    }

    mutating func publishError(_ value: DaemonPublishError) {
        switch value {
        case .alreadyPublished: u8(0)
        case .includedServiceNotPublished(let key): u8(1); u32(key)
        case .database(let error): u8(2); databaseError(error)
        }
    }

    mutating func unpublishError(_ value: DaemonUnpublishError) {
        switch value {
        case .notPublished: u8(0)
        case .included(let key): u8(1); u32(key)
        case .database(let error): u8(2); databaseError(error)
        }
    }

    mutating func advertisingError(_ value: DaemonAdvertisingError) {
        switch value {
        case .alreadyAdvertising: u8(0)
        case .manufacturerDataDoesNotFit(let count): u8(1); u32(count)
        case .refused(let text): u8(2); string(text)
        }
    }

    mutating func advertisement(_ value: DaemonAdvertisement) {
        optional(value.name) { $0.string($1) }
        array(value.serviceUUIDs) { $0.uuid($1) }
        optional(value.manufacturerData) { $0.blob($1) }
        optional(value.raw) { w, raw in
            w.blob(raw.advertisement)
            w.blob(raw.scanResponse)
        }
    }

    mutating func write(_ value: DaemonWrite) {
        u32(value.central)
        handle(value.handle)
        u16(value.offset)
        blob(value.value)
    }
}

extension ByteReader {
    mutating func gattValue() throws -> GATTValue {
        switch try u8() {
        case 0: return .dynamic
        case 1: return .stored(try blob())
        case let other: throw DecodeError("\(context): value source \(other)")
        }
    }

    mutating func gattService() throws -> GATTService {
        let uuid = try uuid(), isPrimary = try bool()
        let characteristics = try array { r -> GATTCharacteristic in
            let uuid = try r.uuid(), properties = try r.u8(), extended = try r.u16(), permissions = try r.u8()
            let value = try r.gattValue()
            let descriptors = try r.array { r -> GATTDescriptor in
                let uuid = try r.uuid(), permissions = try r.u8(), value = try r.gattValue()
                return GATTDescriptor(uuid: uuid, permissions: GATTPermissions(rawValue: permissions), value: value)
            }
            let cccd = try r.u8()
            return GATTCharacteristic(uuid: uuid, properties: GATTCharacteristicProperties(rawValue: properties),
                                      extendedProperties: GATTCharacteristicExtendedProperties(rawValue: extended),
                                      permissions: GATTPermissions(rawValue: permissions), value: value, descriptors: descriptors,
                                      clientConfigurationPermissions: GATTPermissions(rawValue: cccd))
        }
        return GATTService(uuid: uuid, isPrimary: isPrimary, characteristics: characteristics)
    }

    mutating func serviceHandles() throws -> GATTServiceHandles {
        let id = try u32(), range = try handles(), includes = try array { try $0.handle() }
        let characteristics = try array { r -> GATTCharacteristicHandles in
            let declaration = try r.handle(), value = try r.handle(), cccd = try r.optional { try $0.handle() }
            let descriptors = try r.array { try $0.handle() }
            return GATTCharacteristicHandles(declaration: declaration, value: value, clientConfiguration: cccd, descriptors: descriptors)
        }
        return GATTServiceHandles(id: GATTServiceID(rawValue: Int(id)), range: range, includes: includes, characteristics: characteristics)
    }

    mutating func databaseError() throws -> GATTDatabaseError {
        switch try u8() {
        case 0: return .outOfHandles
        case 1: return .unknownIncludedService(GATTServiceID(rawValue: Int(try u32())))
        case 2: return .unknownService(GATTServiceID(rawValue: Int(try u32())))
        case 3: return .serviceIsIncluded(GATTServiceID(rawValue: Int(try u32())))
        case 4: return .builtInService
        case 5: return .valueTooLong
        case 6: return .notStored(try handle())
        case let other: throw DecodeError("\(context): database error \(other)")
        }
    }

    mutating func publishError() throws -> DaemonPublishError {
        switch try u8() {
        case 0: return .alreadyPublished
        case 1: return .includedServiceNotPublished(key: try u32())
        case 2: return .database(try databaseError())
        case let other: throw DecodeError("\(context): publish error \(other)")
        }
    }

    mutating func unpublishError() throws -> DaemonUnpublishError {
        switch try u8() {
        case 0: return .notPublished
        case 1: return .included(byKey: try u32())
        case 2: return .database(try databaseError())
        case let other: throw DecodeError("\(context): unpublish error \(other)")
        }
    }

    mutating func advertisingError() throws -> DaemonAdvertisingError {
        switch try u8() {
        case 0: return .alreadyAdvertising
        case 1: return .manufacturerDataDoesNotFit(byteCount: try u32())
        case 2: return .refused(try string())
        case let other: throw DecodeError("\(context): advertising error \(other)")
        }
    }

    mutating func advertisement() throws -> DaemonAdvertisement {
        let name = try optional { try $0.string() }
        let uuids = try array { try $0.uuid() }
        let manufacturer = try optional { try $0.blob() }
        let raw = try optional { r -> DaemonAdvertisement.Raw in
            let advertisement = try r.blob(), scanResponse = try r.blob()
            return DaemonAdvertisement.Raw(advertisement: advertisement, scanResponse: scanResponse)
        }
        return DaemonAdvertisement(name: name, serviceUUIDs: uuids, manufacturerData: manufacturer, raw: raw)
    }

    mutating func write() throws -> DaemonWrite {
        let central = try u32(), handle = try handle(), offset = try u16(), value = try blob()
        return DaemonWrite(central: central, handle: handle, offset: offset, value: value)
    }
}
