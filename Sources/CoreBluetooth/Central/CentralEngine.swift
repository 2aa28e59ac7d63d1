import AssignedNumbers
import Foundation
import GAP
import GATT
import HCI
import HCITransport
import HostStack
import Scheduling

/// What a scan asks for: `scanForPeripherals(withServices:options:)` in host-stack terms.
struct ScanRequest: Sendable {
    /// Devices advertising (or, with `solicited`, soliciting) one of these; nil for all.
    var services: Set<BluetoothUUID>?
    var solicited: Set<BluetoothUUID>
    var allowDuplicates: Bool
}

/// The central role of one manager's device, on the device's loop: the scan with Core
/// Bluetooth's filtering and coalescing, connection attempts that never time out, and one
/// ``PeripheralLink`` per connection. Everything the app sees goes through the manager's
/// delegate queue.
///
/// Loop-confined.
final class CentralEngine: LEHostDelegate, @unchecked Sendable {
    let host: LEHost
    let device: LocalDevice
    weak var manager: CBCentralManager?
    /// The GATT server every device has (GAP and GATT services), served to each peripheral.
    let localServer: GATTServer

    // MARK: Scanning

    private var scan: ScanRequest?
    private var controllerScanning = false
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

    /// Connections the app asked for and that are not up yet, oldest first. The controller
    /// initiates one at a time; with several waiting they take turns.
    private var pending: [LEAddress] = []
    /// The one the controller is initiating.
    private var initiating: LEAddress?
    private var cancellingInitiation = false
    private var turnTimer: TimerHandle?
    /// How long one waiting connection has the initiator before the next one's turn.
    static let initiatorTurn: Duration = .seconds(2)
    private(set) var links: [LEAddress: PeripheralLink] = [:]

    init(host: LEHost, device: LocalDevice, manager: CBCentralManager) {
        self.host = host
        self.device = device
        self.manager = manager
        localServer = GATTServer(deviceName: LocalDeviceName.current)
    }

    // MARK: - Scanning

    func startScan(_ request: ScanRequest) {
        scan = request
        // A new scan reports every device again.
        advertisers = [:]
        guard !controllerScanning else { return }
        controllerScanning = true
        // Duplicates are filtered here, not by the controller: its filter would also hide a
        // device whose advertisement changes.
        host.startScanning(active: true, filterDuplicates: false) { [weak self] result in
            guard let self, case .failure(let error) = result else { return }
            controllerScanning = false
            StackLog.log("scan could not start: \(error)")
            manager?.scanFailed()
        }
    }

    func stopScan() {
        scan = nil
        advertisers = [:]
        guard controllerScanning else { return }
        controllerScanning = false
        host.stopScanning { result in
            if case .failure(let error) = result { StackLog.log("scan could not stop: \(error)") }
        }
    }

    func host(_ host: LEHost, didDiscover report: AdvertisingReport) {
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
            if link.isReady { link.peripheral.map { manager?.didConnect($0) } }
            return
        }
        guard !pending.contains(address) else { return }
        pending.append(address)
        initiateNext()
    }

    /// The app cancelled (or released the peripheral): a connection goes down, a pending one
    /// stops being attempted. `notify` says whether the app hears `didDisconnectPeripheral`.
    func cancel(_ address: LEAddress, notify: Bool) {
        if let link = links[address] {
            link.closedByApp = true
            link.notifyOnClose = notify
            host.disconnect(link.connection)
            return
        }
        guard let index = pending.firstIndex(of: address) else { return }
        pending.remove(at: index)
        if initiating == address, !cancellingInitiation {
            cancellingInitiation = true
            host.cancelConnecting { _ in }
        }
        if notify, let peripheral = manager?.existingPeripheral(for: address) {
            manager?.didDisconnect(peripheral, error: nil)
        }
    }

    private func initiateNext() {
        guard initiating == nil, !cancellingInitiation, let next = pending.first else { return }
        initiating = next
        // From the device's static random address (LocalDevice sets it), as phones connect.
        host.connect(to: next, ownRandomAddress: host.randomAddress != nil) { [weak self] result in
            guard let self, case .failure(let error) = result else { return }
            // The controller refused the attempt: it cannot connect to this device now.
            initiating = nil
            StackLog.log("connecting to \(next) failed: \(error)")
            failPending(next, error: CBError(.connectionFailed, description: "The connection failed: \(error)."))
            initiateNext()
        }
        turnTimer?.cancel()
        turnTimer = nil
        if pending.count > 1 {
            turnTimer = host.loop.schedule(after: Self.initiatorTurn) { [weak self] in self?.endTurn(of: next) }
        }
    }

    /// Another connection is waiting: stop initiating this one and put it at the back.
    private func endTurn(of address: LEAddress) {
        guard initiating == address, pending.count > 1, !cancellingInitiation else { return }
        cancellingInitiation = true
        host.cancelConnecting { _ in }
    }

    private func failPending(_ address: LEAddress, error: CBError) {
        pending.removeAll { $0 == address }
        if let peripheral = manager?.existingPeripheral(for: address) {
            manager?.didFailToConnect(peripheral, error: error)
        }
    }

    func host(_ host: LEHost, didFailToConnectTo peer: LEAddress, status: HCIStatus) {
        let address = initiating ?? peer
        initiating = nil
        turnTimer?.cancel()
        turnTimer = nil
        if cancellingInitiation {
            cancellingInitiation = false
            // Its turn ended: to the back of the line (if the app still wants it).
            if let index = pending.firstIndex(of: address) {
                pending.remove(at: index)
                pending.append(address)
            }
        } else if pending.contains(address) {
            failPending(address, error: CBError(.connectionFailed, description: "The connection failed (\(status))."))
        }
        initiateNext()
    }

    func host(_ host: LEHost, didConnect connection: LEConnection) {
        // Only connections this device made as a central are the app's.
        guard connection.role == .central else {
            host.disconnect(connection)
            return
        }
        if initiating == connection.peer {
            initiating = nil
            cancellingInitiation = false
            turnTimer?.cancel()
            turnTimer = nil
        }
        let wanted = pending.contains(connection.peer)
        pending.removeAll { $0 == connection.peer }
        guard wanted, let peripheral = manager?.existingPeripheral(for: connection.peer) else {
            // Cancelled while the controller was connecting, or the peripheral was released.
            host.disconnect(connection)
            initiateNext()
            return
        }
        let link = PeripheralLink(connection: connection, engine: self, peripheral: peripheral)
        links[connection.peer] = link
        link.start()
        initiateNext()
    }

    /// The link finished its setup (ATT MTU): the app hears of the connection.
    func linkIsReady(_ link: PeripheralLink) {
        guard links[link.connection.peer] === link, let peripheral = link.peripheral else { return }
        manager?.didConnect(peripheral)
    }

    func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) {
        guard let link = links[connection.peer], link.connection === connection else { return }
        links[connection.peer] = nil
        link.close()
        guard let peripheral = link.peripheral else { return }
        if !link.isReady {
            manager?.didFailToConnect(peripheral, error: CBError(.connectionFailed,
                                                                  description: "The connection failed (\(reason))."))
        } else if link.closedByApp {
            if link.notifyOnClose { manager?.didDisconnect(peripheral, error: nil) }
        } else {
            manager?.didDisconnect(peripheral, error: link.closeError ?? Self.disconnectionError(reason))
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

    func disconnect(_ link: PeripheralLink) {
        guard links[link.connection.peer] === link else { return }
        host.disconnect(link.connection)
    }

    func host(_ host: LEHost, didClose error: HCITransportError?) {
        manager?.hostDidClose(error)
    }

    func host(_ host: LEHost, didUpdateParametersOf connection: LEConnection) {}

    /// The controller went away or was powered off: scans and connections are gone (the app
    /// hears the state change, not each disconnection, as on iOS).
    func shutdown() {
        scan = nil
        advertisers = [:]
        controllerScanning = false
        pending = []
        initiating = nil
        cancellingInitiation = false
        turnTimer?.cancel()
        turnTimer = nil
        let all = links.values
        links = [:]
        for link in all { link.close() }
        host.delegate = nil
    }

    /// The link for a peripheral object, if it is connected.
    func link(for address: LEAddress) -> PeripheralLink? { links[address] }

    // MARK: - Reading RSSI

    func readRSSI(_ link: PeripheralLink, completion: @escaping (Result<Int8, CBError>) -> Void) {
        host.driver.send(ReadRSSI(connectionHandle: link.connection.handle)) { result in
            switch result {
            case .success(let parameters) where parameters.rssi != 127:
                completion(.success(parameters.rssi))
            case .success:
                completion(.failure(CBError(.unknown, description: "The controller could not measure the RSSI.")))
            case .failure(let error):
                completion(.failure(CBError(.unknown, description: "Reading the RSSI failed: \(error).")))
            }
        }
    }
}
