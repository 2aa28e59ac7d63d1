import Foundation

/// What a central manager tells the app, on the manager's queue. Only the state callback is
/// required; the others have empty default implementations, as Apple's optional methods.
public protocol CBCentralManagerDelegate: NSObjectProtocol {
    /// The manager's `state` changed (also once soon after the manager is made).
    func centralManagerDidUpdateState(_ central: CBCentralManager)
    /// State restoration: on `corebluetoothd` (`CB_TRANSPORT=daemon`), a manager created with
    /// `CBCentralManagerOptionRestoreIdentifierKey` gets what the daemon kept for that
    /// identifier when an earlier process went, before its first state update. Without a
    /// daemon it is never called.
    func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any])
    /// A peripheral advertised (coalesced per device unless duplicates are allowed).
    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber)
    /// A connection asked for with `connect(_:options:)` is up.
    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral)
    /// A connection attempt failed.
    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?)
    /// A connection ended; `error` is nil when the app asked for it with
    /// `cancelPeripheralConnection(_:)`.
    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?)
    /// A connection ended (iOS 17 form). The default calls
    /// `centralManager(_:didDisconnectPeripheral:error:)`.
    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
                        timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?)
    /// A connection event matching `registerForConnectionEvents(options:)`.
    func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent,
                        for peripheral: CBPeripheral)
    /// ANCS authorization changed (never on Linux).
    func centralManager(_ central: CBCentralManager, didUpdateANCSAuthorizationFor peripheral: CBPeripheral)
}

extension CBCentralManagerDelegate {
    public func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any]) {}
    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {}
    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {}
    public func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {}
    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {}
    public func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral,
                               timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?) {
        centralManager(central, didDisconnectPeripheral: peripheral, error: error)
    }
    public func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent,
                               for peripheral: CBPeripheral) {}
    public func centralManager(_ central: CBCentralManager, didUpdateANCSAuthorizationFor peripheral: CBPeripheral) {}
}

#if !canImport(Darwin)
/// Seconds since 1 January 2001 (Foundation on Linux lacks CoreFoundation's name for it).
public typealias CFAbsoluteTime = Double
#endif
