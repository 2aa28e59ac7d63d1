import AssignedNumbers
import Foundation
import GAP

/// Core Bluetooth's view of what a peripheral advertises: the `advertisementData` dictionary
/// of `centralManager(_:didDiscover:advertisementData:rssi:)`, built from the AD structures of
/// the advertising PDU and its scan response, with Apple's keys and value types.
enum AdvertisementDictionary {
    /// The dictionary for `data` (advertising data followed by scan response data).
    static func make(from data: AdvertisingData, isConnectable: Bool) -> [String: Any] {
        make(from: data, isConnectable: isConnectable, localName: data.localName, serviceUUIDs: data.serviceUUIDs)
    }

    /// The same, with `data.localName` and `data.serviceUUIDs` the caller already has.
    static func make(from data: AdvertisingData, isConnectable: Bool, localName: String?,
                     serviceUUIDs services: [BluetoothUUID]) -> [String: Any] {
        var dictionary: [String: Any] = [CBAdvertisementDataIsConnectable: NSNumber(value: isConnectable)]
        if let name = localName { dictionary[CBAdvertisementDataLocalNameKey] = name }
        // Apple gives the whole field: the company identifier (little-endian) and its data.
        if let first = data.manufacturerData.first { dictionary[CBAdvertisementDataManufacturerDataKey] = Data(first.bytes) }
        let serviceData = data.serviceDataByUUID
        if !serviceData.isEmpty {
            dictionary[CBAdvertisementDataServiceDataKey] = Dictionary(uniqueKeysWithValues: serviceData.map {
                (CBUUID(bluetoothUUID: $0.key), Data($0.value))
            })
        }
        if !services.isEmpty { dictionary[CBAdvertisementDataServiceUUIDsKey] = services.map { CBUUID(bluetoothUUID: $0) } }
        let solicited = data.solicitedServiceUUIDs
        if !solicited.isEmpty {
            dictionary[CBAdvertisementDataSolicitedServiceUUIDsKey] = solicited.map { CBUUID(bluetoothUUID: $0) }
        }
        if let power = data.txPowerLevel { dictionary[CBAdvertisementDataTxPowerLevelKey] = NSNumber(value: Int(power)) }
        return dictionary
    }
}
