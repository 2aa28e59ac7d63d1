import CoreBluetooth
import Foundation
import Testing

@Suite struct CBEnumTests {
    @Test func managerState() {
        let all: [CBManagerState] = [.unknown, .resetting, .unsupported, .unauthorized, .poweredOff, .poweredOn]
        #expect(all.map(\.rawValue) == [0, 1, 2, 3, 4, 5])
    }

    @Test func authorization() {
        let all: [CBManagerAuthorization] = [.notDetermined, .restricted, .denied, .allowedAlways]
        #expect(all.map(\.rawValue) == [0, 1, 2, 3])
        let status: [CBPeripheralManagerAuthorizationStatus] = [.notDetermined, .restricted, .denied, .authorized]
        #expect(status.map(\.rawValue) == [0, 1, 2, 3])
    }

    @Test func peripheralStateWriteTypeLatencyEvent() {
        let states: [CBPeripheralState] = [.disconnected, .connecting, .connected, .disconnecting]
        #expect(states.map(\.rawValue) == [0, 1, 2, 3])
        #expect(CBCharacteristicWriteType.withResponse.rawValue == 0)
        #expect(CBCharacteristicWriteType.withoutResponse.rawValue == 1)
        let latencies: [CBPeripheralManagerConnectionLatency] = [.low, .medium, .high]
        #expect(latencies.map(\.rawValue) == [0, 1, 2])
        #expect(CBConnectionEvent.peerDisconnected.rawValue == 0)
        #expect(CBConnectionEvent.peerConnected.rawValue == 1)
        let psm: CBL2CAPPSM = 0x0080
        #expect(psm == UInt16(0x80))
    }

    @Test func characteristicProperties() {
        let all: [CBCharacteristicProperties] = [
            .broadcast, .read, .writeWithoutResponse, .write, .notify, .indicate,
            .authenticatedSignedWrites, .extendedProperties, .notifyEncryptionRequired, .indicateEncryptionRequired,
        ]
        #expect(all.map(\.rawValue) == [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x100, 0x200])
        let combined: CBCharacteristicProperties = [.read, .notify]
        #expect(combined.rawValue == 0x12)
        #expect(combined.contains(.notify) && !combined.contains(.write))
    }

    @Test func attributePermissions() {
        let all: [CBAttributePermissions] = [.readable, .writeable, .readEncryptionRequired, .writeEncryptionRequired]
        #expect(all.map(\.rawValue) == [0x01, 0x02, 0x04, 0x08])
    }
}

// Pins the raw string of every key and string constant to the value Apple's CoreBluetooth uses at
// run time (issue 18). Apple's headers declare these as opaque `NSString * const`, so each group
// names the public source its values were confirmed against:
//   [darling]   darlinghq/darling-testsuite, testsuite/System/Library/Frameworks/CoreBluetooth.framework/
//               test/test_CoreBluetooth_variable.m (asserts the exported constants' values).
//   [cm]        decompiled CoreBluetooth from an iOS 26.1 restore image: EthanArbuckle/
//               iPhone18-3_26.1_23B85_Restore, System/Library/Frameworks/CoreBluetooth.framework/
//               CoreBluetooth/CBCentralManager.mm (initWithDelegate:queue:, handleRestoringState:).
//   [pm]        the same for iOS 18.2: EthanArbuckle/iPhone17-1_18.2_22C152_Restore,
//               System/Library/Frameworks/CoreBluetooth.framework/CBPeripheralManager.m.
//   [md]        the same image's CoreBluetooth/CBMutableDescriptor.mm (initWithType:value: compares
//               against the user description, format and valid range descriptor strings).
//   [btd]       decompiled bluetoothd in the iOS restore dumps, which reads the connect and
//               connection-event option keys out of the XPC message.
//   [chromium]  chromium base/mac/sdk_forward_declarations.mm (CBAdvertisementDataIsConnectable).
//   [fbp]       flutter_blue_plus, ios/Classes/FlutterBluePlusPlugin.m (raw auto-reconnect key).
//   [docs]      developer.apple.com/documentation/corebluetooth/cbuuidl2cappsmcharacteristicstring.
//   [apps]      published iOS apps switch on a descriptor's `uuid.uuidString` (the 16-bit form,
//               "2902") with `case CBUUIDExtendedProperties…, CBUUIDClientCharacteristic…,
//               CBUUIDServerCharacteristicConfigurationString:`, which holds only if each
//               constant is that form: 2900, 2902 and 2903 (found with the code search, 2026-11).
// Unconfirmed (no public source found for Apple's runtime value; left as they were):
//   CBCentralManagerOptionDeviceAccessForMedia = "kCBInitOptionDeviceAccessForMedia",
//   CBUUIDCharacteristicAggregateFormatString = "2905",
//   CBUUIDCharacteristicObservationScheduleString = "2910".
// The CBManagerOptionLinux... and CBAdvertisementDataLinux... keys are this package's own and
// have no Apple counterpart.
@Suite struct CBKeyTests {
    @Test func advertisementDataKeys() {
        // [darling]
        #expect(CBAdvertisementDataLocalNameKey == "kCBAdvDataLocalName")
        #expect(CBAdvertisementDataManufacturerDataKey == "kCBAdvDataManufacturerData")
        #expect(CBAdvertisementDataServiceDataKey == "kCBAdvDataServiceData")
        #expect(CBAdvertisementDataServiceUUIDsKey == "kCBAdvDataServiceUUIDs")
        #expect(CBAdvertisementDataOverflowServiceUUIDsKey == "kCBAdvDataHashedServiceUUIDs")
        #expect(CBAdvertisementDataTxPowerLevelKey == "kCBAdvDataTxPowerLevel")
        // [chromium]
        #expect(CBAdvertisementDataIsConnectable == "kCBAdvDataIsConnectable")
        // [cm] (didDiscover rewrites the key's data array into CBUUIDs)
        #expect(CBAdvertisementDataSolicitedServiceUUIDsKey == "kCBAdvDataSolicitedServiceUUIDs")
    }

    @Test func managerOptionKeys() {
        // [cm] [pm]: both managers read "kCBInitOptionRestoreIdentifier", not "kCBRestoreIdentifier".
        #expect(CBCentralManagerOptionShowPowerAlertKey == "kCBInitOptionShowPowerAlert")
        #expect(CBCentralManagerOptionRestoreIdentifierKey == "kCBInitOptionRestoreIdentifier")
        #expect(CBPeripheralManagerOptionShowPowerAlertKey == "kCBInitOptionShowPowerAlert")
        #expect(CBPeripheralManagerOptionRestoreIdentifierKey == "kCBInitOptionRestoreIdentifier")
        // Unconfirmed.
        #expect(CBCentralManagerOptionDeviceAccessForMedia == "kCBInitOptionDeviceAccessForMedia")
        // [darling] (allow duplicates), [cm] (both, restored scan options)
        #expect(CBCentralManagerScanOptionAllowDuplicatesKey == "kCBScanOptionAllowDuplicates")
        #expect(CBCentralManagerScanOptionSolicitedServiceUUIDsKey == "kCBScanOptionSolicitedServiceUUIDs")
    }

    @Test func connectOptionKeys() {
        // [btd]
        #expect(CBConnectPeripheralOptionNotifyOnConnectionKey == "kCBConnectOptionNotifyOnConnection")
        #expect(CBConnectPeripheralOptionNotifyOnDisconnectionKey == "kCBConnectOptionNotifyOnDisconnection")
        #expect(CBConnectPeripheralOptionNotifyOnNotificationKey == "kCBConnectOptionNotifyOnNotification")
        #expect(CBConnectPeripheralOptionStartDelayKey == "kCBConnectOptionStartDelay")
        #expect(CBConnectPeripheralOptionEnableTransportBridgingKey == "kCBConnectOptionEnableTransportBridging")
        #expect(CBConnectPeripheralOptionRequiresANCS == "kCBConnectOptionRequiresANCS")
        // [fbp]
        #expect(CBConnectPeripheralOptionEnableAutoReconnect == "kCBConnectOptionEnableAutoReconnect")
    }

    @Test func restoredStateAndConnectionEventKeys() {
        // [cm]
        #expect(CBCentralManagerRestoredStatePeripheralsKey == "kCBRestoredPeripherals")
        #expect(CBCentralManagerRestoredStateScanServicesKey == "kCBRestoredScanServices")
        #expect(CBCentralManagerRestoredStateScanOptionsKey == "kCBRestoredScanOptions")
        // [pm]
        #expect(CBPeripheralManagerRestoredStateServicesKey == "kCBRestoredServices")
        #expect(CBPeripheralManagerRestoredStateAdvertisementDataKey == "kCBRestoredAdvertisement")
        // [btd]
        #expect(CBConnectionEventMatchingOptionServiceUUIDs == "kCBConnectionEventMatchingOptionServiceUUIDs")
        #expect(CBConnectionEventMatchingOptionPeripheralUUIDs == "kCBConnectionEventMatchingOptionPeripheralUUIDs")
    }

    @Test func uuidStringConstants() {
        // [md]
        #expect(CBUUIDCharacteristicUserDescriptionString == "2901")
        #expect(CBUUIDCharacteristicFormatString == "2904")
        #expect(CBUUIDCharacteristicValidRangeString == "2906")
        // [docs]
        #expect(CBUUIDL2CAPPSMCharacteristicString == "ABDD3056-28FA-441D-A470-55A75A52553A")
        // [apps]
        #expect(CBUUIDCharacteristicExtendedPropertiesString == "2900")
        #expect(CBUUIDClientCharacteristicConfigurationString == "2902")
        #expect(CBUUIDServerCharacteristicConfigurationString == "2903")
        // Unconfirmed (the Bluetooth SIG's 16-bit descriptor UUIDs, spelled as the confirmed ones).
        #expect(CBUUIDCharacteristicAggregateFormatString == "2905")
        #expect(CBUUIDCharacteristicObservationScheduleString == "2910")
    }

    @Test func errorDomains() {
        // [darling]
        #expect(CBErrorDomain == "CBErrorDomain")
        #expect(CBATTErrorDomain == "CBATTErrorDomain")
    }
}

@Suite struct CBDeprecatedStateTests {
    @available(*, deprecated)
    @Test func preIOS10StatesShareTheValues() {
        #expect(CBCentralManagerState.poweredOn.rawValue == CBManagerState.poweredOn.rawValue)
        #expect(CBPeripheralManagerState.unauthorized.rawValue == CBManagerState.unauthorized.rawValue)
        #expect(CBCentralManagerState(rawValue: 4) == .poweredOff)
    }

    @available(*, deprecated)
    @Test func misspelledUnknownDevice() {
        #expect(CBError.Code.unkownDevice == .unknownDevice)
        #expect(CBError.unkownDevice.rawValue == 12)
    }
}

@Suite("Central features (supports)")
struct CentralFeaturesTests {
    @Test func supportsAsksTheControllerTheTransportNames() {
        // Our virtual controller has extended scanning and connections.
        #expect(CBCentralManager.linuxSupports(.extendedScanAndConnect, transport: "virtual"))
        #expect(CBCentralManager.linuxSupports([], transport: "virtual"))
        // An external controller no manager of this process has powered on is not known yet.
        #expect(!CBCentralManager.linuxSupports(.extendedScanAndConnect, transport: "tcp:127.0.0.1:9"))
        #expect(!CBCentralManager.linuxSupports(.extendedScanAndConnect, transport: "not a transport"))
        if ProcessInfo.processInfo.environment["CB_TRANSPORT"] == nil {
            #expect(CBCentralManager.supports(.extendedScanAndConnect))
        }
    }
}
