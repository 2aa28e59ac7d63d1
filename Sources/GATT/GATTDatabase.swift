import ATT
import AssignedNumbers
import ByteCoding
import LECrypto

/// What an attribute's value is made of, as the server reads and writes it.
enum AttributeContent: Hashable, Sendable {
    /// Declarations and fixed descriptors: never written.
    case constant([UInt8])
    case stored([UInt8])
    /// Asked of the server's owner on every access.
    case dynamic
    /// A Client Characteristic Configuration descriptor, one value per connection.
    case clientConfiguration(characteristicValue: ATTHandle, allowed: GATTClientConfiguration)
    /// Client Supported Features (Vol 3 Part G §7.2), one value per connection.
    case clientSupportedFeatures
    /// Database Hash (§7.3), computed from the database.
    case databaseHash
}

/// One attribute of the database (Vol 3 Part F §3.2).
struct Attribute: Hashable, Sendable {
    let handle: ATTHandle
    let type: BluetoothUUID
    var permissions: GATTPermissions
    var content: AttributeContent
    /// For service declarations: the service's last handle.
    var groupEnd: ATTHandle?
}

/// The attribute table: services laid out in handle order, each a contiguous run of handles.
/// New services go in the first gap large enough, so services already present never move and
/// a client's cache of them stays valid.
struct GATTDatabase: Sendable {
    private(set) var attributes: [Attribute] = []
    private(set) var services: [GATTServiceID: ServiceRecord] = [:]
    private var nextServiceID = 1

    struct ServiceRecord: Hashable, Sendable {
        let handles: GATTServiceHandles
        let uuid: BluetoothUUID
        let includedServices: [GATTServiceID]
        let isBuiltIn: Bool
    }

    /// The index of the attribute with `handle`.
    func index(of handle: ATTHandle) -> Int? {
        var low = 0, high = attributes.count
        while low < high {
            let mid = (low + high) / 2
            if attributes[mid].handle < handle { low = mid + 1 } else { high = mid }
        }
        return low < attributes.count && attributes[low].handle == handle ? low : nil
    }

    subscript(handle: ATTHandle) -> Attribute? {
        index(of: handle).map { attributes[$0] }
    }

    /// The attributes with handles in `range`, in order.
    func attributes(in range: ClosedRange<ATTHandle>) -> ArraySlice<Attribute> {
        var low = 0, high = attributes.count
        while low < high {
            let mid = (low + high) / 2
            if attributes[mid].handle < range.lowerBound { low = mid + 1 } else { high = mid }
        }
        var end = low
        while end < attributes.count, attributes[end].handle <= range.upperBound { end += 1 }
        return attributes[low..<end]
    }

    mutating func setContent(_ content: AttributeContent, at handle: ATTHandle) {
        if let i = index(of: handle) { attributes[i].content = content }
    }

    /// Lays out `service` in the first gap that holds it.
    mutating func add(_ service: GATTService, builtIn: Bool = false) throws(GATTDatabaseError) -> GATTServiceHandles {
        for included in service.includedServices where services[included] == nil {
            throw .unknownIncludedService(included)
        }
        for characteristic in service.characteristics {
            if case .stored(let value) = characteristic.value.source, value.count > ATTMTU.maximumAttributeValueLength {
                throw .valueTooLong
            }
        }
        let count = service.attributeCount
        guard let start = firstGap(of: count) else { throw .outOfHandles }

        let id = GATTServiceID(rawValue: nextServiceID)
        var built: [Attribute] = []
        var next = start.rawValue
        func append(_ type: BluetoothUUID, _ permissions: GATTPermissions, _ content: AttributeContent) -> ATTHandle {
            let handle = ATTHandle(next)
            built.append(Attribute(handle: handle, type: type, permissions: permissions, content: content))
            next &+= 1
            return handle
        }

        // §3.1: the service declaration's value is the service UUID, 16-bit when it has one.
        _ = append(service.isPrimary ? .primaryService : .secondaryService, .readable,
                   .constant(service.uuid.littleEndianBytes))
        // §3.2: included handle, end group handle, and the UUID only when it is 16-bit.
        var includes: [ATTHandle] = []
        for included in service.includedServices {
            let record = services[included]!
            var writer = ByteWriter(capacity: 6)
            writer.u16(record.handles.range.lowerBound.rawValue)
            writer.u16(record.handles.range.upperBound.rawValue)
            if let short = record.uuid.uuid16 { writer.u16(short) }
            includes.append(append(.include, .readable, .constant(writer.bytes)))
        }
        var characteristics: [GATTCharacteristicHandles] = []
        for characteristic in service.characteristics {
            // §3.3.1: properties, value handle (the next one), UUID.
            let valueHandle = ATTHandle(next &+ 1)
            var writer = ByteWriter(capacity: 19)
            writer.u8(characteristic.declaredProperties.rawValue)
            writer.u16(valueHandle.rawValue)
            writer.bytes(characteristic.uuid.littleEndianBytes)
            let declaration = append(.characteristic, .readable, .constant(writer.bytes))
            let content: AttributeContent = switch characteristic.value.source {
            case .stored(let value): .stored(value)
            case .dynamic: .dynamic
            }
            _ = append(characteristic.uuid, characteristic.permissions, content)
            if !characteristic.extendedProperties.isEmpty {
                let raw = characteristic.extendedProperties.rawValue
                _ = append(.characteristicExtendedProperties, .readable,
                           .constant([UInt8(truncatingIfNeeded: raw), UInt8(raw >> 8)]))
            }
            var clientConfiguration: ATTHandle?
            if characteristic.hasClientConfiguration {
                var allowed: GATTClientConfiguration = []
                if characteristic.properties.contains(.notify) { allowed.insert(.notification) }
                if characteristic.properties.contains(.indicate) { allowed.insert(.indication) }
                clientConfiguration = append(.clientCharacteristicConfiguration, characteristic.clientConfigurationPermissions,
                                             .clientConfiguration(characteristicValue: valueHandle, allowed: allowed))
            }
            let descriptors = characteristic.descriptors.map { descriptor in
                let content: AttributeContent = switch descriptor.value.source {
                case .stored(let value): .stored(value)
                case .dynamic: .dynamic
                }
                return append(descriptor.uuid, descriptor.permissions, content)
            }
            characteristics.append(GATTCharacteristicHandles(declaration: declaration, value: valueHandle,
                                                             clientConfiguration: clientConfiguration, descriptors: descriptors))
        }
        let range = start...ATTHandle(next &- 1)
        built[0].groupEnd = range.upperBound

        nextServiceID += 1
        let handles = GATTServiceHandles(id: id, range: range, includes: includes, characteristics: characteristics)
        services[id] = ServiceRecord(handles: handles, uuid: service.uuid, includedServices: service.includedServices,
                                     isBuiltIn: builtIn)
        attributes.append(contentsOf: built)
        attributes.sort { $0.handle < $1.handle }
        return handles
    }

    /// Takes the service out, leaving its handles free for a later one.
    mutating func remove(_ id: GATTServiceID) throws(GATTDatabaseError) -> ClosedRange<ATTHandle> {
        guard let record = services[id] else { throw .unknownService(id) }
        guard !record.isBuiltIn else { throw .builtInService }
        if let includer = services.values.first(where: { $0.includedServices.contains(id) }) {
            throw .serviceIsIncluded(includer.handles.id)
        }
        services[id] = nil
        let range = record.handles.range
        attributes.removeAll { range.contains($0.handle) }
        return range
    }

    /// The lowest handle that starts `count` free handles.
    private func firstGap(of count: Int) -> ATTHandle? {
        var candidate = 1
        for range in services.values.map(\.handles.range).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if Int(range.lowerBound.rawValue) - candidate >= count { break }
            candidate = Int(range.upperBound.rawValue) + 1
        }
        return candidate + count - 1 <= Int(UInt16.max) ? ATTHandle(UInt16(candidate)) : nil
    }

    /// The Database Hash (Vol 3 Part G §7.3.1): AES-CMAC with a zero key over, in handle
    /// order, handle ‖ type ‖ value of every service, include, characteristic and
    /// extended-properties declaration, and handle ‖ type of every User Description, Client and
    /// Server Characteristic Configuration, Presentation Format and Aggregate Format
    /// descriptor. Fields are little-endian as on the wire; the MAC, a 128-bit number, is
    /// returned little-endian too (LECrypto gives it most significant octet first).
    var hash: [UInt8] {
        Array(LECrypto.aesCMAC(key: [UInt8](repeating: 0, count: 16), message: hashMessage).reversed())
    }

    /// The concatenation the hash is taken over.
    var hashMessage: [UInt8] {
        var writer = ByteWriter(capacity: 512)
        for attribute in attributes {
            guard let type = attribute.type.uuid16 else { continue }
            switch type {
            case 0x2800, 0x2801, 0x2802, 0x2803, 0x2900:
                writer.u16(attribute.handle.rawValue)
                writer.u16(type)
                if case .constant(let value) = attribute.content { writer.bytes(value) }
            case 0x2901, 0x2902, 0x2903, 0x2904, 0x2905:
                writer.u16(attribute.handle.rawValue)
                writer.u16(type)
            default:
                continue
            }
        }
        return writer.bytes
    }
}
