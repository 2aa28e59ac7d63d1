import AssignedNumbers

/// The attribute types GATT defines (Core spec Vol 3 Part G §3, Assigned Numbers §3.5–3.8),
/// and the UUIDs of the two services every server carries.
extension BluetoothUUID {
    public static let primaryService = BluetoothUUID(uuid16: 0x2800)
    public static let secondaryService = BluetoothUUID(uuid16: 0x2801)
    public static let include = BluetoothUUID(uuid16: 0x2802)
    public static let characteristic = BluetoothUUID(uuid16: 0x2803)

    public static let characteristicExtendedProperties = BluetoothUUID(uuid16: 0x2900)
    public static let characteristicUserDescription = BluetoothUUID(uuid16: 0x2901)
    public static let clientCharacteristicConfiguration = BluetoothUUID(uuid16: 0x2902)
    public static let serverCharacteristicConfiguration = BluetoothUUID(uuid16: 0x2903)
    public static let characteristicPresentationFormat = BluetoothUUID(uuid16: 0x2904)
    public static let characteristicAggregateFormat = BluetoothUUID(uuid16: 0x2905)

    public static let genericAccessService = BluetoothUUID(uuid16: 0x1800)
    public static let genericAttributeService = BluetoothUUID(uuid16: 0x1801)
    public static let deviceName = BluetoothUUID(uuid16: 0x2A00)
    public static let appearance = BluetoothUUID(uuid16: 0x2A01)
    public static let serviceChanged = BluetoothUUID(uuid16: 0x2A05)
    public static let clientSupportedFeatures = BluetoothUUID(uuid16: 0x2B29)
    public static let databaseHash = BluetoothUUID(uuid16: 0x2B2A)
}
