import AssignedNumbers
import GAP
import HCI
import HCIDriver
import HCITransport
import HostDevice
import L2CAP
import HostStack
import Logging
import SMP
import Scheduling
import StackLogging

/// What a scan asks for: `scanForPeripherals(withServices:options:)` in host-stack terms.
public struct ScanRequest: Sendable, Hashable {
    /// Devices advertising (or, with `solicited`, soliciting) one of these; nil for all.
    public var services: Set<BluetoothUUID>?
    public var solicited: Set<BluetoothUUID>
    public var allowDuplicates: Bool

    public init(services: Set<BluetoothUUID>?, solicited: Set<BluetoothUUID> = [], allowDuplicates: Bool = false) {
        self.services = services
        self.solicited = solicited
        self.allowDuplicates = allowDuplicates
    }
}

/// Why a connection of the central role ended.
public enum CentralDisconnection: Sendable, Hashable {
    /// The API side asked (`cancel`); `notify` is what it asked with.
    case requested(notify: Bool)
    /// The peer left an ATT request unanswered for 30 s, and the link was ended.
    case attTimeout
    /// The link went down for this reason (the peer, a supervision timeout…).
    case link(HCIStatus)
}

/// What the central role service tells the API side (a `CBCentralManager`, or a daemon's client
/// later): plain values — addresses, advertising data, errors. Called on the device's loop.
public protocol CentralServiceEvents: AnyObject {
    /// A device the scan matched: what it advertises now (its advertisement and scan response
    /// merged), reported once per change unless the scan allows duplicates. `raw` is the
    /// advertisement's and the scan response's bytes as received.
    func central(_ service: any CentralRole, didDiscover peer: LEAddress, advertisement: AdvertisingData,
                 raw: (advertisement: [UInt8], scanResponse: [UInt8]?), isConnectable: Bool, rssi: Int8?)
    /// The controller refused to scan: the scan is off.
    func centralScanFailed(_ service: any CentralRole)
    /// A connection asked for is ready (ATT MTU exchanged), or was asked for again while up.
    /// The API side sets `link.events` to hear of the link.
    func central(_ service: any CentralRole, didConnect link: any CentralRoleLink)
    func central(_ service: any CentralRole, didFailToConnect peer: LEAddress, error: DeviceConnectError)
    /// A connection ended. `isReconnecting`: the peer went away and, as the API side asked
    /// (auto-reconnect), the service is connecting to it again; `didConnect` follows when it is
    /// back, and `cancel` stops trying.
    func central(_ service: any CentralRole, didDisconnect peer: LEAddress, cause: CentralDisconnection, isReconnecting: Bool)
    /// The controller is gone: every scan and connection ended with it.
    func central(_ service: any CentralRole, deviceDidClose error: HCITransportError?)
    /// The controller reset itself: every connection was reported gone (`didDisconnect`)
    /// just before, and the scan and pending connections ended; the role is off until
    /// `centralDeviceDidReset`.
    func centralDeviceWillReset(_ service: any CentralRole)
    /// The controller is back after its reset: the role is on again.
    func centralDeviceDidReset(_ service: any CentralRole)
}

extension CentralServiceEvents {
    public func centralDeviceWillReset(_ service: any CentralRole) {}
    public func centralDeviceDidReset(_ service: any CentralRole) {}
}

/// The central role of one API client, a client of the host device, on the device's loop: the
/// scan with Core Bluetooth's filtering and coalescing (the device merges the controller's scan
/// with other clients'), the connections the client asked for (the device initiates them,
/// never timing out, and they are this client's), and one ``CentralLink`` per connection. It
/// exchanges only values with the API side (``CentralServiceEvents``), the boundary a daemon
/// carries between processes.
///
/// Loop-confined, once the device started (so its per-report state skips the runtime's
/// exclusivity checks: one thread, no overlapping access).
public final class CentralService: HostDeviceClient, CentralRole, @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        device?.loop.assertConfined("CentralService", file: file, line: line)
    }

    @exclusivity(unchecked) private var eventsHeld = WeakHeldExistential<any CentralServiceEvents>(wrappedValue: nil)  // exclusivity checks: 0.08 % of adv
    public var events: (any CentralServiceEvents)? {
        get { eventsHeld.wrappedValue }
        set { eventsHeld.wrappedValue = newValue }
    }
    /// `corebluetooth.api`: what the service drops or refuses.
    public var logger = StackLogging.standard.logger(.api)
    /// Answers pairing prompts on this client's connections; nil leaves them to the device's
    /// agent. Settable from any thread (the API sets it; the device reads it on its loop).
    public var pairingAgent: (any PairingAgent)? {
        get { pairingAgentStorage.withLock { $0 } }
        set { pairingAgentStorage.withLock { $0 = newValue } }
    }
    private let pairingAgentStorage = Locked<(any PairingAgent)?>(nil)
    /// The device while it is on.
    public private(set) var device: HostDevice?

    // MARK: Scanning

    @exclusivity(unchecked) private var scan: ScanRequest?  // exclusivity checks: 0.08 % of adv
    /// What each advertiser sent last (advertising PDU and scan response), for merging the two
    /// and reporting a device again only when what it advertises changes.
    @exclusivity(unchecked) private var advertisers = IntegerKeyMap<AddressKey, Advertiser>()  // exclusivity checks: 0.08 % of adv

    /// A class, changed where it is: a struct of arrays copied out of the table and back
    /// cost retains and releases on every report.
    private final class Advertiser {
        var advertisement: [UInt8]?
        var scanResponse: [UInt8]?
        var isConnectable = false
        /// What was reported last: the advertising data and scan response, concatenated.
        var reported: [UInt8]?
        /// The last concatenation parsed, and its parse: an advertiser sends the same bytes
        /// event after event, and with duplicates allowed each is reported (parsed once).
        var parsed: (bytes: [UInt8], data: AdvertisingData)?
    }

    // MARK: Connections

    public private(set) var links: [LEAddress: CentralLink] = [:]
    /// Peers to connect to again by themselves when the link drops (iOS 17's auto-reconnect).
    private var autoReconnecting: Set<LEAddress> = []

    public init() {}

    /// Whether the device is on (the service is its client).
    public var isOn: Bool { device != nil }

    /// The device is on: join it as a central.
    public func deviceDidStart(_ device: HostDevice) {
        assertOnLoop()
        self.device = device
        device.addClient(self, roles: .central)
    }

    /// The controller went away or was powered off: scans and connections are gone (the API
    /// side reports the state change, not each disconnection, as iOS does).
    public func deviceDidStop() {
        assertOnLoop()
        scan = nil
        advertisers = [:]
        let all = links.values
        links = [:]
        autoReconnecting = []
        for link in all { link.close() }
        device = nil
    }

    // MARK: - Scanning

    public func startScan(_ request: ScanRequest) {
        assertOnLoop()
        scan = request
        // A new scan reports every device again.
        advertisers = [:]
        // Duplicates are filtered here, not by the controller: its filter would also hide a
        // device whose advertisement changes (and other clients of the device see every report).
        device?.startScanning(for: self)
    }

    public func stopScan() {
        assertOnLoop()
        scan = nil
        advertisers = [:]
        device?.stopScanning(for: self)
    }

    public func device(_ device: HostDevice, scanFailed error: HCIError) {
        assertOnLoop()
        scan = nil
        events?.centralScanFailed(self)
    }

    public func device(_ device: HostDevice, didDiscover report: AdvertisingReport) {
        assertOnLoop()
        guard let scan else { return }
        let key = AddressKey(report.address)
        let entry: Advertiser
        if let known = advertisers[key] {
            entry = known
        } else {
            entry = Advertiser()
            advertisers[key] = entry
        }
        if report.isScanResponse {
            entry.scanResponse = report.data
            // A scan response answers an advertisement. One whose advertisement this scan has
            // not heard (the request was made before the scan started again: the controller
            // scans on, or reports it just after a restart) is kept for the advertiser's next
            // advertisement, not reported alone as a device advertising nothing, without its
            // name, services and connectability. Only an extended scannable advertisement's
            // scan response stands alone: it is that advertisement's whole data. (Bumble's
            // controller marks the scan response it makes up for legacy advertising neither
            // legacy nor scannable.)
            if entry.advertisement == nil, report.isLegacy || !report.isScannable { return }
        } else {
            entry.advertisement = report.data
            entry.isConnectable = report.isConnectable
        }
        let advertisement = entry.advertisement ?? [], scanResponse = entry.scanResponse
        // The concatenation is made only when it is parsed: compared in place otherwise.
        if !scan.allowDuplicates, let reported = entry.reported, Self.isConcatenation(reported, of: advertisement, scanResponse) {
            return
        }
        let parsed: (bytes: [UInt8], data: AdvertisingData)
        if let last = entry.parsed, Self.isConcatenation(last.bytes, of: advertisement, scanResponse) {
            parsed = last
        } else {
            let bytes = advertisement + (scanResponse ?? [])
            parsed = (bytes, AdvertisingData(bytes: bytes))
            entry.parsed = parsed
        }
        guard Self.matches(parsed.data, scan) else { return }
        entry.reported = parsed.bytes
        events?.central(self, didDiscover: report.address, advertisement: parsed.data,
                        raw: (advertisement, scanResponse), isConnectable: entry.isConnectable, rssi: report.rssi)
    }

    /// Whether `bytes` is `first` followed by `second`.
    static func isConcatenation(_ bytes: [UInt8], of first: [UInt8], _ second: [UInt8]?) -> Bool {
        let secondCount = second?.count ?? 0
        guard bytes.count == first.count + secondCount else { return false }
        // Compared through buffers: `elementsEqual` on array slices went through the generic
        // collection path, ~700 instructions a report for ~30 bytes.
        return bytes.withUnsafeBufferPointer { whole in
            guard Self.equal(whole, from: 0, first) else { return false }
            guard let second else { return true }
            return Self.equal(whole, from: first.count, second)
        }
    }

    /// Whether `whole` holds `part` from `offset` (the caller checked the lengths).
    private static func equal(_ whole: UnsafeBufferPointer<UInt8>, from offset: Int, _ part: [UInt8]) -> Bool {
        part.withUnsafeBufferPointer { part in
            var index = 0
            while index < part.count {
                if whole[offset + index] != part[index] { return false }
                index += 1
            }
            return true
        }
    }

    static func matches(_ data: AdvertisingData, _ scan: ScanRequest) -> Bool {
        guard let services = scan.services else { return true }
        if data.serviceUUIDs.contains(where: services.contains) { return true }
        return !scan.solicited.isEmpty && data.solicitedServiceUUIDs.contains(where: scan.solicited.contains)
    }

    // MARK: - Connecting

    /// Connects to `peer` (never timing out). With `autoReconnect`, a link that drops for any
    /// reason but `cancel` is reported with `isReconnecting` and made again.
    public func connect(_ peer: LEAddress, autoReconnect: Bool = false) {
        assertOnLoop()
        if autoReconnect { autoReconnecting.insert(peer) } else { autoReconnecting.remove(peer) }
        if let link = links[peer] {
            // Already connected: the API side hears it again (as on iOS).
            events?.central(self, didConnect: link)
            return
        }
        device?.connect(to: peer, for: self)
    }

    /// The API side cancelled (or released the peripheral): its connection goes down (or, when
    /// another client of the device shares it, stops being this one's), a pending one stops
    /// being attempted. `notify`: whether the API side wants `didDisconnect` for it.
    public func cancel(_ peer: LEAddress, notify: Bool) {
        assertOnLoop()
        guard let device else { return }
        autoReconnecting.remove(peer)
        if let link = links[peer] {
            link.cancellation = .requested(notify: notify)
            device.disconnect(link.connection, for: self)
            return
        }
        guard device.cancelConnecting(to: peer, for: self) else { return }
        if notify { events?.central(self, didDisconnect: peer, cause: .requested(notify: true), isReconnecting: false) }
    }

    public func device(_ device: HostDevice, didFailToConnectTo peer: LEAddress, error: DeviceConnectError) {
        assertOnLoop()
        events?.central(self, didFailToConnect: peer, error: error)
    }

    /// A connection this client asked for is ready (its ATT MTU exchanged).
    public func device(_ device: HostDevice, didConnect connection: DeviceConnection) {
        assertOnLoop()
        if let link = links[connection.peer], link.connection === connection {
            events?.central(self, didConnect: link)
            return
        }
        let link = CentralLink(connection: connection)
        links[connection.peer] = link
        events?.central(self, didConnect: link)
        guard links[connection.peer] === link else { return }
        if link.events == nil {
            // Nobody on the API side wants it any more (the peripheral was released).
            cancel(connection.peer, notify: false)
            return
        }
        link.start()
    }

    public func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {
        assertOnLoop()
        guard let link = links[connection.peer], link.connection === connection else { return }
        links[connection.peer] = nil
        link.close()
        let cause: CentralDisconnection = if let requested = link.cancellation {
            requested
        } else if connection.attTimedOut {
            .attTimeout
        } else {
            .link(reason)
        }
        let reconnect: Bool = if case .requested = cause { false } else { autoReconnecting.contains(connection.peer) }
        events?.central(self, didDisconnect: connection.peer, cause: cause, isReconnecting: reconnect)
        if reconnect { device.connect(to: connection.peer, for: self) }
    }

    public func device(_ device: HostDevice, didClose error: HCITransportError?) {
        assertOnLoop()
        events?.central(self, deviceDidClose: error)
    }

    /// The controller reset itself (the links were reported gone): off until it is back.
    public func deviceWillReset(_ device: HostDevice) {
        assertOnLoop()
        deviceDidStop()
        events?.centralDeviceWillReset(self)
    }

    public func deviceDidReset(_ device: HostDevice) {
        assertOnLoop()
        deviceDidStart(device)
        events?.centralDeviceDidReset(self)
    }

    /// The link to `peer`, if it is connected.
    public func link(for peer: LEAddress) -> (any CentralRoleLink)? { links[peer] }

    // MARK: - The connection's radio

    /// Reads the RSSI of a link (dBm).
    public func readRSSI(of peer: LEAddress, completion: @escaping (Result<Int8, HCIError>) -> Void) {
        assertOnLoop()
        guard let device else { return completion(.failure(.notSupported("the device is off"))) }
        guard let link = links[peer] else { return completion(.failure(.notSupported("the peer is not connected"))) }
        device.readRSSI(link.connection, completion: completion)
    }

    /// Opens a credit-based channel to `psm` on a link's peer (pairing first if the peer
    /// asks for security, as iOS does).
    public func openChannel(to peer: LEAddress, psm: UInt16,
                            completion: @escaping (Result<RoleChannel, ChannelOpenError>) -> Void) {
        assertOnLoop()
        guard let device, let link = links[peer] else { return completion(.failure(.disconnected)) }
        device.openChannel(on: link.connection, psm: psm) { result in
            completion(result.map { RoleChannel(channel: $0, peer: link.peer) })
        }
    }

    /// Asks for a PHY both ways on a link (fire and forget: the peer may refuse).
    public func setPHY(of peer: LEAddress, _ phy: LEPHY) {
        assertOnLoop()
        guard let link = links[peer] else { return }
        device?.setPHY(link.connection, tx: [phy], rx: [phy]) { [logger] result in
            if case .failure(let error) = result { logger.warning("LE Set PHY failed: \(error)") }
        }
    }

    /// Asks for new connection parameters on a link (fire and forget: the peer may refuse).
    public func updateParameters(of peer: LEAddress, _ parameters: ConnectionParameters) {
        guard let link = links[peer] else { return }
        device?.updateParameters(link.connection, parameters) { [logger] result in
            if case .failure(let error) = result { logger.warning("connection parameter update failed: \(error)") }
        }
    }
}
