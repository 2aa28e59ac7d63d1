import AssignedNumbers
import Foundation
import GAP
import GATT
import HCI
import HCIDriver
import HCITransport
import HostDevice
import HostStack
import Scheduling

/// What a scan asks for: `scanForPeripherals(withServices:options:)` in host-stack terms.
struct ScanRequest: Sendable {
    /// Devices advertising (or, with `solicited`, soliciting) one of these; nil for all.
    var services: Set<BluetoothUUID>?
    var solicited: Set<BluetoothUUID>
    var allowDuplicates: Bool
}

/// The central role of one manager, a client of the manager's host device, on the device's
/// loop: the scan with Core Bluetooth's filtering and coalescing (the device merges the
/// controller's scan with other clients'), the connections the app asked for (the device
/// initiates them, never timing out, and they are this client's), and one ``PeripheralLink``
/// per connection. Everything the app sees goes through the manager's delegate queue.
///
/// Loop-confined, once the device started.
final class CentralEngine: HostDeviceClient, @unchecked Sendable {
    weak var manager: CBCentralManager?
    /// The device while it is on.
    private(set) var device: HostDevice?

    // MARK: Scanning

    private var scan: ScanRequest?
    /// What each advertiser sent last (advertising PDU and scan response), for merging the two
    /// into one dictionary and reporting a device again only when what it advertises changes.
    private var advertisers: [LEAddress: Advertiser] = [:]

    private struct Advertiser {
        var advertisement: [UInt8]?
        var scanResponse: [UInt8]?
        var isConnectable = false
        /// What was reported last: the advertising data and scan response, concatenated.
        var reported: [UInt8]?
    }

    // MARK: Connections

    private(set) var links: [LEAddress: PeripheralLink] = [:]

    init() {}

    /// The device is on: join it as a central.
    func deviceDidStart(_ device: HostDevice) {
        self.device = device
        device.addClient(self, roles: .central)
    }

    // MARK: - Scanning

    func startScan(_ request: ScanRequest) {
        scan = request
        // A new scan reports every device again.
        advertisers = [:]
        // Duplicates are filtered here, not by the controller: its filter would also hide a
        // device whose advertisement changes (and other clients of the device see every report).
        device?.startScanning(for: self)
    }

    func stopScan() {
        scan = nil
        advertisers = [:]
        device?.stopScanning(for: self)
    }

    func device(_ device: HostDevice, scanFailed error: HCIError) {
        scan = nil
        manager?.scanFailed()
    }

    func device(_ device: HostDevice, didDiscover report: AdvertisingReport) {
        guard let scan, let manager else { return }
        var entry = advertisers[report.address] ?? Advertiser()
        if report.isScanResponse {
            entry.scanResponse = report.data
        } else {
            entry.advertisement = report.data
            entry.isConnectable = report.isConnectable
        }
        defer { advertisers[report.address] = entry }
        let bytes = (entry.advertisement ?? []) + (entry.scanResponse ?? [])
        if !scan.allowDuplicates, entry.reported == bytes { return }
        let data = AdvertisingData(bytes: bytes)
        guard Self.matches(data, scan) else { return }
        entry.reported = bytes
        let peripheral = manager.peripheral(for: report.address, advertisedName: data.localName,
                                             advertisedServices: data.serviceUUIDs)
        let dictionary = Unchecked(AdvertisementDictionary.make(from: data, isConnectable: entry.isConnectable))
        // 127: the controller could not measure it.
        let rssi = NSNumber(value: Int(report.rssi ?? 127))
        manager.deliver { manager, delegate in
            delegate.centralManager(manager, didDiscover: peripheral, advertisementData: dictionary.value, rssi: rssi)
        }
    }

    static func matches(_ data: AdvertisingData, _ scan: ScanRequest) -> Bool {
        guard let services = scan.services else { return true }
        if data.serviceUUIDs.contains(where: services.contains) { return true }
        return !scan.solicited.isEmpty && data.solicitedServiceUUIDs.contains(where: scan.solicited.contains)
    }

    // MARK: - Connecting

    func connect(_ address: LEAddress) {
        if let link = links[address] {
            // Already connected: the app hears it again (as on iOS).
            link.peripheral.map { manager?.didConnect($0) }
            return
        }
        device?.connect(to: address, for: self)
    }

    /// The app cancelled (or released the peripheral): its connection goes down (or, when
    /// another manager of the device shares it, stops being this one's), a pending one stops
    /// being attempted. `notify` says whether the app hears `didDisconnectPeripheral`.
    func cancel(_ address: LEAddress, notify: Bool) {
        guard let device else { return }
        if let link = links[address] {
            link.closedByApp = true
            link.notifyOnClose = notify
            device.disconnect(link.connection, for: self)
            return
        }
        guard device.cancelConnecting(to: address, for: self) else { return }
        if notify, let peripheral = manager?.existingPeripheral(for: address) {
            manager?.didDisconnect(peripheral, error: nil)
        }
    }

    func device(_ device: HostDevice, didFailToConnectTo peer: LEAddress, error: DeviceConnectError) {
        guard let peripheral = manager?.existingPeripheral(for: peer) else { return }
        manager?.didFailToConnect(peripheral, error: CBError(.connectionFailed, description: "The connection failed: \(error)."))
    }

    /// A connection this client asked for is ready (its ATT MTU exchanged): the app hears of it.
    func device(_ device: HostDevice, didConnect connection: DeviceConnection) {
        if let link = links[connection.peer], link.connection === connection {
            link.peripheral.map { manager?.didConnect($0) }
            return
        }
        guard let peripheral = manager?.existingPeripheral(for: connection.peer) else {
            // The peripheral was released while the controller was connecting.
            device.disconnect(connection, for: self)
            return
        }
        let link = PeripheralLink(connection: connection, peripheral: peripheral)
        links[connection.peer] = link
        link.start()
        manager?.didConnect(peripheral)
    }

    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {
        guard let link = links[connection.peer], link.connection === connection else { return }
        links[connection.peer] = nil
        link.close()
        guard let peripheral = link.peripheral else { return }
        if link.closedByApp {
            if link.notifyOnClose { manager?.didDisconnect(peripheral, error: nil) }
        } else if connection.attTimedOut {
            manager?.didDisconnect(peripheral, error: CBError(.connectionTimeout,
                                                              description: "The peripheral did not answer within 30 seconds."))
        } else {
            manager?.didDisconnect(peripheral, error: Self.disconnectionError(reason))
        }
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

    func device(_ device: HostDevice, didClose error: HCITransportError?) {
        manager?.hostDidClose(error)
    }

    /// The controller went away or was powered off: scans and connections are gone (the app
    /// hears the state change, not each disconnection, as on iOS).
    func shutdown() {
        scan = nil
        advertisers = [:]
        let all = links.values
        links = [:]
        for link in all { link.close() }
        device = nil
    }

    /// The link for a peripheral object, if it is connected.
    func link(for address: LEAddress) -> PeripheralLink? { links[address] }

    // MARK: - Reading RSSI

    func readRSSI(_ link: PeripheralLink, completion: @escaping (Result<Int8, CBError>) -> Void) {
        guard let device else { return }
        device.readRSSI(link.connection) { result in
            switch result {
            case .success(let rssi): completion(.success(rssi))
            case .failure(.notSupported):
                completion(.failure(CBError(.unknown, description: "The controller could not measure the RSSI.")))
            case .failure(let error):
                completion(.failure(CBError(.unknown, description: "Reading the RSSI failed: \(error).")))
            }
        }
    }
}
