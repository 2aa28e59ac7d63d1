import ATT
import AssignedNumbers
import Foundation
import GAP
import HCI
import HCITransport
import HostDevice
import RoleServices
import Scheduling

/// The API side of the central role: turns the role service's events (addresses, advertising
/// data, errors — values) into `CBPeripheral` objects, Apple's dictionaries and errors, and
/// delegate calls on the manager's queue. Called on the device's loop.
final class CentralEvents: CentralServiceEvents, @unchecked Sendable {
    @WeakHeld var manager: CBCentralManager?
    /// The process's connection events of the manager's device (nil on a daemon, whose own
    /// are reported to it in messages); set once, before the manager is shared.
    var connectionEvents: ConnectionEvents?
    /// Peers the role is connected to, as told to `connectionEvents` (loop-confined).
    private var connectedPeers: Set<LEAddress> = []
    /// The advertisement dictionary last made for each peer, with the bytes it was made from
    /// (loop-confined): an advertiser repeats itself, and with duplicates allowed every packet
    /// is reported, so the dictionary (a walk of every field, an object per value) is made
    /// again only when what the peer sends changes. Its values are immutable (NSNumber,
    /// String, Data, CBUUID and collections of them), so deliveries can share them.
    @exclusivity(unchecked) private var advertisements = IntegerKeyMap<AddressKey, MadeAdvertisement>()  // exclusivity checks: 0.08 % of adv
    /// Peers whose dictionary is kept, at most; past it the cache starts again.
    static let cachedAdvertisements = 4096

    private final class MadeAdvertisement {
        let advertisement: [UInt8]
        let scanResponse: [UInt8]?
        let isConnectable: Bool
        let services: [BluetoothUUID]
        /// `services` as the set each `CBPeripheral` keeps (made once, shared).
        let serviceSet: Set<BluetoothUUID>
        let name: String?
        let dictionary: [String: Any]
        /// `connectionEvents.forgetCount` when `services` were last told to it (loop-confined).
        @exclusivity(unchecked) var learnedAt: UInt64?  // exclusivity checks: 0.08 % of adv

        init(advertisement: [UInt8], scanResponse: [UInt8]?, isConnectable: Bool, services: [BluetoothUUID], name: String?,
             dictionary: [String: Any], previous: MadeAdvertisement?) {
            self.advertisement = advertisement
            self.scanResponse = scanResponse
            self.isConnectable = isConnectable
            self.services = services
            // The peer's previous set when equal (its advertisement without and with the scan
            // response, say): shared storage, which `CBPeripheral` compares at once.
            let set = Set(services)
            serviceSet = previous.map { $0.serviceSet == set ? $0.serviceSet : set } ?? set
            self.name = name
            self.dictionary = dictionary
        }
    }

    /// One `NSNumber` per RSSI value (-128...127), made once: immutable, shared by every
    /// report instead of one made per report.
    private static let rssiNumbers = Unchecked((-128...127).map { NSNumber(value: $0) })

    /// The role's connections are gone for it (its device stopped, or the manager went).
    func releaseConnections() {
        let peers = connectedPeers
        connectedPeers = []
        for peer in peers { connectionEvents?.disconnected(peer) }
    }

    func central(_ service: any CentralRole, didDiscover peer: LEAddress, advertisement data: AdvertisingData,
                 raw: (advertisement: [UInt8], scanResponse: [UInt8]?), isConnectable: Bool, rssi: Int8?) {
        // `data` is the parse of `raw` (the advertisement, then the scan response): the same
        // bytes make the same dictionary.
        let key = AddressKey(peer)
        let made: MadeAdvertisement
        let last = advertisements[key]
        if let last, last.isConnectable == isConnectable, last.advertisement == raw.advertisement,
           last.scanResponse == raw.scanResponse {
            made = last
        } else {
            made = Self.make(data, raw: raw, isConnectable: isConnectable, previous: last)
            if advertisements.count >= Self.cachedAdvertisements && last == nil { advertisements = [:] }
            advertisements[key] = made
        }
        // Told again only when these services are new to it or it forgot some since.
        if let connectionEvents, made.learnedAt != connectionEvents.forgetCount {
            connectionEvents.learned(made.services, of: peer)
            made.learnedAt = connectionEvents.forgetCount
        }
        guard let manager else { return }
        let peripheral = manager.peripheral(for: peer, advertisedName: made.name, advertisedServices: made.serviceSet,
                                            discovered: true)
        let dictionary = Unchecked(made.dictionary)
        // 127: the controller could not measure it.
        let rssi = Self.rssiNumbers.value[Int(rssi ?? 127) + 128]
        manager.deliverDiscovery(peripheral, advertisementData: dictionary, rssi: rssi)
    }

    private static func make(_ data: AdvertisingData, raw: (advertisement: [UInt8], scanResponse: [UInt8]?),
                             isConnectable: Bool, previous: MadeAdvertisement?) -> MadeAdvertisement {
        // Each accessor walks the elements and builds an array: once each.
        let services = data.serviceUUIDs, name = data.localName
        var dictionary = AdvertisementDictionary.make(from: data, isConnectable: isConnectable, localName: name,
                                                      serviceUUIDs: services)
        dictionary[CBAdvertisementDataLinuxAdvertisingDataKey] = Data(raw.advertisement)
        if let scanResponse = raw.scanResponse { dictionary[CBAdvertisementDataLinuxScanResponseDataKey] = Data(scanResponse) }
        return MadeAdvertisement(advertisement: raw.advertisement, scanResponse: raw.scanResponse, isConnectable: isConnectable,
                                 services: services, name: name, dictionary: dictionary, previous: previous)
    }

    func centralScanFailed(_ service: any CentralRole) {
        manager?.scanFailed()
    }

    func central(_ service: any CentralRole, didConnect link: any CentralRoleLink) {
        if connectedPeers.insert(link.peer).inserted { connectionEvents?.connected(link.peer) }
        // Nobody holds the peripheral any more: the link is left untaken and the service ends it.
        guard let manager, let peripheral = manager.existingPeripheral(for: link.peer) else { return }
        link.events = peripheral.linkEvents
        manager.didConnect(peripheral)
    }

    func central(_ service: any CentralRole, didFailToConnect peer: LEAddress, error: DeviceConnectError) {
        guard let peripheral = manager?.existingPeripheral(for: peer) else { return }
        manager?.didFailToConnect(peripheral, error: CBError(.connectionFailed, description: "The connection failed: \(error)."))
    }

    func central(_ service: any CentralRole, didDisconnect peer: LEAddress, cause: CentralDisconnection, isReconnecting: Bool) {
        if connectedPeers.remove(peer) != nil { connectionEvents?.disconnected(peer) }
        guard let manager, let peripheral = manager.existingPeripheral(for: peer) else { return }
        switch cause {
        case .requested(let notify):
            if notify { manager.didDisconnect(peripheral, error: nil) }
        case .attTimeout:
            manager.didDisconnect(peripheral, error: CBError(.connectionTimeout,
                                                             description: "The peripheral did not answer within 30 seconds."),
                                  isReconnecting: isReconnecting)
        case .link(let reason):
            manager.didDisconnect(peripheral, error: Self.disconnectionError(reason), isReconnecting: isReconnecting)
        }
    }

    func central(_ service: any CentralRole, deviceDidClose error: HCITransportError?) {
        releaseConnections()
        manager?.hostDidClose(error)
    }

    func centralDeviceWillReset(_ service: any CentralRole) {
        releaseConnections()
        manager?.hostWillReset()
    }

    func centralDeviceDidReset(_ service: any CentralRole) {
        manager?.hostDidReset()
    }

    /// Apple's error for a disconnection the app did not ask for.
    static func disconnectionError(_ reason: HCIStatus) -> CBError {
        // Compared with == : HCIStatus is an Error, so `case .connectionTimeout` would pick
        // CBError.Code's pattern operator.
        if reason == .connectionTimeout || reason == .lmpOrLLResponseTimeout {
            CBError(.connectionTimeout, description: "The connection has timed out unexpectedly.")
        } else if reason == .connectionFailedToBeEstablished {
            CBError(.connectionFailed, description: "The connection failed.")
        } else {
            CBError(.peripheralDisconnected, description: "The specified device has disconnected from us.")
        }
    }
}

/// What a central link tells its `CBPeripheral` (held by the peripheral; the link holds it
/// weakly).
final class PeripheralLinkEvents: CentralLinkEvents, @unchecked Sendable {
    @WeakHeld var peripheral: CBPeripheral?

    func linkMTUChanged(_ mtu: Int) { peripheral?.linkMTUChanged(mtu) }
    func linkReadName(_ name: String) { peripheral?.linkReadName(name) }
    func linkServicesChanged(_ range: ClosedRange<ATTHandle>) { peripheral?.linkServicesChanged(range) }
    func linkReturnedWriteBudget(_ count: Int) { peripheral?.linkReturnedWriteBudget(count) }
    func linkClosed() { peripheral?.linkClosed() }
}
