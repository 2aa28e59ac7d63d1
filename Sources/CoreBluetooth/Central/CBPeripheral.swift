import Foundation

/// A remote peripheral, as a central sees it: made when it is discovered (or retrieved), and
/// the object through which its GATT database is explored and used.
open class CBPeripheral: CBPeer, @unchecked Sendable {
    private weak var delegateStorage: CBPeripheralDelegate?
    var nameStorage: String?
    var stateStorage: CBPeripheralState = .disconnected
    var servicesStorage: [CBService]?
    var rssiStorage: NSNumber?
    /// The central manager the peripheral belongs to.
    weak var manager: CBCentralManager?

    init(identifier: UUID, name: String?, manager: CBCentralManager) {
        nameStorage = name
        self.manager = manager
        super.init(identifier: identifier)
    }

    /// Who hears about discovery, values and writes (held weakly).
    public weak var delegate: CBPeripheralDelegate? {
        get { synchronized { delegateStorage } }
        set { synchronized { delegateStorage = newValue } }
    }

    /// The peripheral's name: its GAP Device Name once known, else the advertised local name.
    public var name: String? { synchronized { nameStorage } }

    /// The last RSSI read.
    @available(*, deprecated, message: "Use peripheral(_:didReadRSSI:error:)")
    public var rssi: NSNumber? { synchronized { rssiStorage } }

    /// Whether the app's connection is up.
    public var state: CBPeripheralState { synchronized { stateStorage } }

    /// The services discovered so far (nil until discovered).
    public var services: [CBService]? { synchronized { servicesStorage } }

    /// Whether a `.withoutResponse` write would be sent now; when false, wait for
    /// `peripheralIsReady(toSendWriteWithoutResponse:)`.
    public var canSendWriteWithoutResponse: Bool { false }

    /// Whether the peripheral authorised ANCS (never on Linux).
    public var ancsAuthorized: Bool { false }

    /// Reads the RSSI of the connection: `peripheral(_:didReadRSSI:error:)`.
    open func readRSSI() {}

    /// Discovers the services with these UUIDs (all when nil): `peripheral(_:didDiscoverServices:)`.
    open func discoverServices(_ serviceUUIDs: [CBUUID]?) {}

    /// Discovers services included by `service`.
    open func discoverIncludedServices(_ includedServiceUUIDs: [CBUUID]?, for service: CBService) {}

    /// Discovers characteristics of `service` (all when nil).
    open func discoverCharacteristics(_ characteristicUUIDs: [CBUUID]?, for service: CBService) {}

    /// Reads the value (long values entirely): `peripheral(_:didUpdateValueFor:error:)`.
    open func readValue(for characteristic: CBCharacteristic) {}

    /// The longest value one write of `type` can carry (from the negotiated ATT MTU; long
    /// writes make `.withResponse` longer).
    open func maximumWriteValueLength(for type: CBCharacteristicWriteType) -> Int { 20 }

    /// Writes the value: `.withResponse` answers with `peripheral(_:didWriteValueFor:error:)`.
    open func writeValue(_ data: Data, for characteristic: CBCharacteristic, type: CBCharacteristicWriteType) {}

    /// Turns notifications (or indications, when the characteristic only indicates) on or off.
    open func setNotifyValue(_ enabled: Bool, for characteristic: CBCharacteristic) {}

    /// Discovers the descriptors of `characteristic`.
    open func discoverDescriptors(for characteristic: CBCharacteristic) {}

    /// Reads a descriptor.
    open func readValue(for descriptor: CBDescriptor) {}

    /// Writes a descriptor (never the Client Characteristic Configuration: use
    /// `setNotifyValue(_:for:)`).
    open func writeValue(_ data: Data, for descriptor: CBDescriptor) {}

    /// Opens an L2CAP channel (later work on Linux: reports operationNotSupported).
    open func openL2CAPChannel(_ PSM: CBL2CAPPSM) {}
}
