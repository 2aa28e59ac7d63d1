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

@Suite struct CBKeyTests {
    @Test func advertisementDataKeys() {
        #expect(CBAdvertisementDataLocalNameKey == "kCBAdvDataLocalName")
        #expect(CBAdvertisementDataManufacturerDataKey == "kCBAdvDataManufacturerData")
        #expect(CBAdvertisementDataServiceDataKey == "kCBAdvDataServiceData")
        #expect(CBAdvertisementDataServiceUUIDsKey == "kCBAdvDataServiceUUIDs")
        #expect(CBAdvertisementDataOverflowServiceUUIDsKey == "kCBAdvDataHashedServiceUUIDs")
        #expect(CBAdvertisementDataTxPowerLevelKey == "kCBAdvDataTxPowerLevel")
        #expect(CBAdvertisementDataIsConnectable == "kCBAdvDataIsConnectable")
        #expect(CBAdvertisementDataSolicitedServiceUUIDsKey == "kCBAdvDataSolicitedServiceUUIDs")
    }

    @Test func managerOptionKeys() {
        #expect(CBCentralManagerOptionShowPowerAlertKey == "kCBInitOptionShowPowerAlert")
        #expect(CBCentralManagerOptionRestoreIdentifierKey == "kCBRestoreIdentifier")
        #expect(CBCentralManagerOptionDeviceAccessForMedia == "kCBInitOptionDeviceAccessForMedia")
        #expect(CBPeripheralManagerOptionShowPowerAlertKey == "kCBInitOptionShowPowerAlert")
        #expect(CBPeripheralManagerOptionRestoreIdentifierKey == "kCBRestoreIdentifier")
        #expect(CBCentralManagerScanOptionAllowDuplicatesKey == "kCBScanOptionAllowDuplicates")
        #expect(CBCentralManagerScanOptionSolicitedServiceUUIDsKey == "kCBScanOptionSolicitedServiceUUIDs")
    }

    @Test func connectOptionKeys() {
        #expect(CBConnectPeripheralOptionNotifyOnConnectionKey == "kCBConnectOptionNotifyOnConnection")
        #expect(CBConnectPeripheralOptionNotifyOnDisconnectionKey == "kCBConnectOptionNotifyOnDisconnection")
        #expect(CBConnectPeripheralOptionNotifyOnNotificationKey == "kCBConnectOptionNotifyOnNotification")
        #expect(CBConnectPeripheralOptionStartDelayKey == "kCBConnectOptionStartDelay")
        #expect(CBConnectPeripheralOptionEnableTransportBridgingKey == "kCBConnectOptionEnableTransportBridging")
        #expect(CBConnectPeripheralOptionRequiresANCS == "kCBConnectOptionRequiresANCS")
        #expect(CBConnectPeripheralOptionEnableAutoReconnect == "kCBConnectOptionEnableAutoReconnect")
    }

    @Test func restoredStateAndConnectionEventKeys() {
        #expect(CBCentralManagerRestoredStatePeripheralsKey == "kCBRestoredPeripherals")
        #expect(CBCentralManagerRestoredStateScanServicesKey == "kCBRestoredScanServices")
        #expect(CBCentralManagerRestoredStateScanOptionsKey == "kCBRestoredScanOptions")
        #expect(CBPeripheralManagerRestoredStateServicesKey == "kCBRestoredServices")
        #expect(CBPeripheralManagerRestoredStateAdvertisementDataKey == "kCBRestoredAdvertisement")
        #expect(CBConnectionEventMatchingOptionServiceUUIDs == "kCBConnectionEventMatchingOptionServiceUUIDs")
        #expect(CBConnectionEventMatchingOptionPeripheralUUIDs == "kCBConnectionEventMatchingOptionPeripheralUUIDs")
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
