import Foundation

/// What a peripheral manager tells the app, on the manager's queue. Only the state callback is
/// required; the others have empty default implementations, as Apple's optional methods.
public protocol CBPeripheralManagerDelegate: NSObjectProtocol {
    /// The manager's `state` changed (also once soon after the manager is made).
    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager)
    /// State restoration: on `corebluetoothd` (`CB_TRANSPORT=daemon`), a manager created with
    /// `CBPeripheralManagerOptionRestoreIdentifierKey` gets what the daemon kept for that
    /// identifier when an earlier process went, before its first state update. Without a
    /// daemon it is never called.
    func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any])
    /// The result of `startAdvertising(_:)`.
    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?)
    /// The result of `add(_:)`.
    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?)
    /// A central subscribed to a characteristic's notifications or indications.
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                           didSubscribeTo characteristic: CBCharacteristic)
    /// A central unsubscribed (or disconnected).
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                           didUnsubscribeFrom characteristic: CBCharacteristic)
    /// A central reads a dynamic value: answer once with `respond(to:withResult:)`.
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest)
    /// A central writes (one request, or a whole prepared write): answer once, with
    /// `requests[0]`, all or nothing.
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest])
    /// After `updateValue(_:for:onSubscribedCentrals:)` returned false: there is room again.
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager)
    /// The result of `publishL2CAPChannel(withEncryption:)`.
    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?)
    /// The result of `unpublishL2CAPChannel(_:)`.
    func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?)
    /// A central opened a channel on a published PSM.
    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?)
}

extension CBPeripheralManagerDelegate {
    public func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any]) {}
    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                                  didSubscribeTo characteristic: CBCharacteristic) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                                  didUnsubscribeFrom characteristic: CBCharacteristic) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {}
    public func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {}
    public func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {}
}
