// Dictionary keys of Core Bluetooth's options and advertisement data, with Apple's values, so
// code that spells the raw strings (or logs them) behaves the same.

// MARK: Advertisement data (received in didDiscover; only the local name and service UUIDs may be sent)

/// The local name (`String`).
public let CBAdvertisementDataLocalNameKey = "kCBAdvDataLocalName"
/// Manufacturer data (`Data`, starting with the little-endian company identifier).
public let CBAdvertisementDataManufacturerDataKey = "kCBAdvDataManufacturerData"
/// Service data (`[CBUUID: Data]`).
public let CBAdvertisementDataServiceDataKey = "kCBAdvDataServiceData"
/// Advertised service UUIDs (`[CBUUID]`).
public let CBAdvertisementDataServiceUUIDsKey = "kCBAdvDataServiceUUIDs"
/// Service UUIDs from the overflow area (`[CBUUID]`), best effort.
public let CBAdvertisementDataOverflowServiceUUIDsKey = "kCBAdvDataHashedServiceUUIDs"
/// The transmit power level (`NSNumber`).
public let CBAdvertisementDataTxPowerLevelKey = "kCBAdvDataTxPowerLevel"
/// Whether the advertising event was connectable (`NSNumber` Bool). No "Key" suffix, as Apple's.
public let CBAdvertisementDataIsConnectable = "kCBAdvDataIsConnectable"
/// Solicited service UUIDs (`[CBUUID]`).
public let CBAdvertisementDataSolicitedServiceUUIDsKey = "kCBAdvDataSolicitedServiceUUIDs"

// MARK: Central manager init options

/// Show an alert if Bluetooth is off when the manager is created (`NSNumber` Bool).
public let CBCentralManagerOptionShowPowerAlertKey = "kCBInitOptionShowPowerAlert"
/// The identifier for state restoration (`String`).
public let CBCentralManagerOptionRestoreIdentifierKey = "kCBInitOptionRestoreIdentifier"
/// Device access for media (`NSNumber` Bool).
public let CBCentralManagerOptionDeviceAccessForMedia = "kCBInitOptionDeviceAccessForMedia"

// MARK: Scan options

/// Report every advertisement instead of coalescing duplicates (`NSNumber` Bool, default false).
public let CBCentralManagerScanOptionAllowDuplicatesKey = "kCBScanOptionAllowDuplicates"
/// Also report peripherals soliciting these services (`[CBUUID]`).
public let CBCentralManagerScanOptionSolicitedServiceUUIDsKey = "kCBScanOptionSolicitedServiceUUIDs"

// MARK: Connect options

/// Alert on connection while suspended (`NSNumber` Bool).
public let CBConnectPeripheralOptionNotifyOnConnectionKey = "kCBConnectOptionNotifyOnConnection"
/// Alert on disconnection while suspended (`NSNumber` Bool).
public let CBConnectPeripheralOptionNotifyOnDisconnectionKey = "kCBConnectOptionNotifyOnDisconnection"
/// Alert on notifications while suspended (`NSNumber` Bool).
public let CBConnectPeripheralOptionNotifyOnNotificationKey = "kCBConnectOptionNotifyOnNotification"
/// Delay before the connection starts (`NSNumber`, seconds).
public let CBConnectPeripheralOptionStartDelayKey = "kCBConnectOptionStartDelay"
/// Bridge classic transports for a dual-mode device (`NSNumber` Bool).
public let CBConnectPeripheralOptionEnableTransportBridgingKey = "kCBConnectOptionEnableTransportBridging"
/// Require ANCS (`NSNumber` Bool).
public let CBConnectPeripheralOptionRequiresANCS = "kCBConnectOptionRequiresANCS"
/// Reconnect automatically after a disconnection (`NSNumber` Bool).
public let CBConnectPeripheralOptionEnableAutoReconnect = "kCBConnectOptionEnableAutoReconnect"

// MARK: Peripheral manager init options

/// Show an alert if Bluetooth is off when the manager is created (`NSNumber` Bool).
public let CBPeripheralManagerOptionShowPowerAlertKey = "kCBInitOptionShowPowerAlert"
/// The identifier for state restoration (`String`).
public let CBPeripheralManagerOptionRestoreIdentifierKey = "kCBInitOptionRestoreIdentifier"

// MARK: Restored state

/// Peripherals connected or pending at termination (`[CBPeripheral]`).
public let CBCentralManagerRestoredStatePeripheralsKey = "kCBRestoredPeripherals"
/// The services being scanned for at termination (`[CBUUID]`).
public let CBCentralManagerRestoredStateScanServicesKey = "kCBRestoredScanServices"
/// The scan options at termination (`[String: Any]`).
public let CBCentralManagerRestoredStateScanOptionsKey = "kCBRestoredScanOptions"
/// The published services at termination (`[CBMutableService]`).
public let CBPeripheralManagerRestoredStateServicesKey = "kCBRestoredServices"
/// The advertisement data at termination (`[String: Any]`).
public let CBPeripheralManagerRestoredStateAdvertisementDataKey = "kCBRestoredAdvertisement"

// MARK: Connection event matching

/// Match connection events of peripherals with these services (`[CBUUID]`).
public let CBConnectionEventMatchingOptionServiceUUIDs = "kCBConnectionEventMatchingOptionServiceUUIDs"
/// Match connection events of these peripherals (`[UUID]`).
public let CBConnectionEventMatchingOptionPeripheralUUIDs = "kCBConnectionEventMatchingOptionPeripheralUUIDs"
