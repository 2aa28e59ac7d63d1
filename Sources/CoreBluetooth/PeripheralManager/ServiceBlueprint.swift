import AssignedNumbers
import Foundation
import GATT

/// A `CBMutableService` as it was when the app called `add(_:)`: the GATT service to publish,
/// and the app's objects its characteristics stand for. Made on the app's thread, so edits of
/// the mutable objects after `add(_:)` never reach the published database.
struct ServiceBlueprint: @unchecked Sendable {
    // @unchecked: immutable; the app's objects it holds guard their own state (``ObjectLock``).
    let service: CBMutableService
    /// Everything but the included services, which are resolved when the service is published.
    let gattService: GATTService
    /// The services to include, in order (each must be published already).
    let includedServices: [CBService]
    /// In the order of `gattService.characteristics`.
    let characteristics: [CBMutableCharacteristic]

    /// Checks the service tree against what Core Bluetooth accepts and converts it; the error
    /// is what `peripheralManager(_:didAdd:error:)` reports.
    static func make(_ service: CBMutableService) -> Result<ServiceBlueprint, CBError> {
        // Each of the app's objects is read under its own lock, one at a time (``ObjectLock``);
        // `open` accessors outside it (an app's subclass may lock in them).
        let (uuid, isPrimary) = (service.uuid, service.isPrimary)
        let (included, characteristics) = service.synchronized {
            (service.includedServicesStorage ?? [], service.characteristicsStorage ?? [])
        }
        var gattCharacteristics: [GATTCharacteristic] = []
        var mutables: [CBMutableCharacteristic] = []
        for characteristic in characteristics {
            guard let mutable = characteristic as? CBMutableCharacteristic else {
                return .failure(invalid("characteristic \(characteristic.uuid) of service \(uuid) is not a CBMutableCharacteristic"))
            }
            guard !mutables.contains(where: { $0 === mutable }) else {
                return .failure(invalid("characteristic \(mutable.uuid) appears twice in service \(uuid)"))
            }
            switch convert(mutable) {
            case .failure(let error): return .failure(error)
            case .success(let converted):
                gattCharacteristics.append(converted)
                mutables.append(mutable)
            }
        }
        let gatt = GATTService(uuid: uuid.bluetoothUUID, isPrimary: isPrimary, characteristics: gattCharacteristics)
        return .success(ServiceBlueprint(service: service, gattService: gatt, includedServices: included,
                                         characteristics: mutables))
    }

    /// One characteristic: properties and permissions mapped onto GATT, its value cached
    /// (stored, read-only) or dynamic (asked of the delegate), its descriptors checked.
    static func convert(_ characteristic: CBMutableCharacteristic) -> Result<GATTCharacteristic, CBError> {
        let uuid = characteristic.uuid
        let (properties, permissions, value, descriptors) = characteristic.synchronized {
            (characteristic.propertiesStorage, characteristic.permissionsStorage,
             characteristic.valueStorage, characteristic.descriptorsStorage ?? [])
        }
        let known: CBCharacteristicProperties = [.read, .writeWithoutResponse, .write, .notify, .indicate,
                                                 .notifyEncryptionRequired, .indicateEncryptionRequired]
        guard known.isSuperset(of: properties) else {
            let extra = CBCharacteristicProperties(rawValue: properties.rawValue & ~known.rawValue)
            return .failure(invalid("characteristic \(uuid): properties 0x\(String(extra.rawValue, radix: 16)) are not allowed on a local characteristic (broadcast, authenticated signed writes and extended properties are not)"))
        }
        let knownPermissions: CBAttributePermissions = [.readable, .writeable, .readEncryptionRequired, .writeEncryptionRequired]
        guard knownPermissions.isSuperset(of: permissions) else {
            return .failure(invalid("characteristic \(uuid): unknown permissions 0x\(String(permissions.rawValue, radix: 16))"))
        }
        var gattProperties = GATTCharacteristicProperties(rawValue: UInt8(properties.rawValue & 0x3E))
        if properties.contains(.notifyEncryptionRequired) { gattProperties.insert(.notify) }
        if properties.contains(.indicateEncryptionRequired) { gattProperties.insert(.indicate) }
        let gattPermissions = GATTPermissions(rawValue: UInt8(permissions.rawValue & 0x0F))
        // Subscribing to an "encryption required" notification or indication needs an
        // encrypted link: the CCCD's write permission says so.
        let cccdPermissions: GATTPermissions =
            properties.isDisjoint(with: [.notifyEncryptionRequired, .indicateEncryptionRequired])
            ? [.readable, .writeable] : [.readable, .writeEncryptionRequired]

        let gattValue: GATTValue
        if let value {
            // A cached value is answered by the stack and never changes: read-only.
            guard properties.isSubset(of: [.read]), permissions.isSubset(of: [.readable, .readEncryptionRequired]) else {
                return .failure(invalid("characteristic \(uuid) has a cached value, so it must be read-only (properties .read, permissions .readable); give it a nil value to make it dynamic"))
            }
            guard value.count <= 512 else {
                return .failure(invalid("characteristic \(uuid): a cached value of \(value.count) bytes is longer than 512"))
            }
            gattValue = .stored(value.byteArray)
        } else {
            gattValue = .dynamic
        }

        var gattDescriptors: [GATTDescriptor] = []
        for descriptor in descriptors {
            let (type, value) = (descriptor.uuid, descriptor.synchronized { descriptor.valueStorage })
            switch type.bluetoothUUID {
            case .characteristicUserDescription:
                guard let text = value as? String else {
                    return .failure(invalid("characteristic \(uuid): the User Description descriptor's value must be a String"))
                }
                let bytes = Array(text.utf8)
                guard bytes.count <= 512 else {
                    return .failure(invalid("characteristic \(uuid): the User Description is longer than 512 bytes"))
                }
                gattDescriptors.append(GATTDescriptor(uuid: .characteristicUserDescription, permissions: .readable,
                                                      value: .stored(bytes)))
            case .characteristicPresentationFormat:
                guard let data = value as? Data else {
                    return .failure(invalid("characteristic \(uuid): the Presentation Format descriptor's value must be Data"))
                }
                guard data.count == 7 else {
                    return .failure(invalid("characteristic \(uuid): a Presentation Format value is 7 bytes, not \(data.count)"))
                }
                gattDescriptors.append(GATTDescriptor(uuid: .characteristicPresentationFormat, permissions: .readable,
                                                      value: .stored(data.byteArray)))
            default:
                return .failure(invalid("characteristic \(uuid): descriptor \(type) cannot be added; only the User Description (\(CBUUIDCharacteristicUserDescriptionString)) and Presentation Format (\(CBUUIDCharacteristicFormatString)) descriptors can (the Client Characteristic Configuration and Extended Properties descriptors are made for you)"))
            }
        }
        return .success(GATTCharacteristic(uuid: uuid.bluetoothUUID, properties: gattProperties, permissions: gattPermissions,
                                           value: gattValue, descriptors: gattDescriptors,
                                           clientConfigurationPermissions: cccdPermissions))
    }

    static func invalid(_ message: String) -> CBError {
        CBError(.invalidParameters, userInfo: [NSLocalizedDescriptionKey: message])
    }
}
