import HCI
import HCIDriver
import HCITransport
import L2CAP
import Logging
import Scheduling
import StackLogging

/// One LE connection as the host keeps it.
public final class LEConnection: @unchecked Sendable {
    public let handle: ConnectionHandle
    public let role: LERole
    public let peer: LEAddress
    /// Units of 1.25 ms, connection events, 10 ms.
    public internal(set) var interval: UInt16
    public internal(set) var latency: UInt16
    public internal(set) var supervisionTimeout: UInt16
    public internal(set) var isEncrypted = false
    /// Longest link-layer payload each way (27 until the data length update).
    public internal(set) var maxTxOctets: UInt16 = 27
    public internal(set) var maxRxOctets: UInt16 = 27
    /// The PHYs in use each way (LE 1M until a PHY update).
    public internal(set) var txPHY: LEPHY = .le1M
    public internal(set) var rxPHY: LEPHY = .le1M
    /// L2CAP on this link: its ATT and SMP channels.
    public let l2cap: L2CAPLink
    /// The resolvable private addresses the link was made with, when the controller resolved
    /// them (`peer` is then the peer's identity): what SMP's confirm and check values use.
    public internal(set) var peerResolvablePrivateAddress: BluetoothAddress?
    public internal(set) var localResolvablePrivateAddress: BluetoothAddress?

    /// The address the peer used on the air for this link.
    public var peerOnAir: LEAddress {
        peerResolvablePrivateAddress.map { LEAddress(.randomDevice, $0) } ?? peer
    }

    init(handle: ConnectionHandle, role: LERole, peer: LEAddress, interval: UInt16, latency: UInt16,
         supervisionTimeout: UInt16, l2cap: L2CAPLink) {
        self.handle = handle
        self.role = role
        self.peer = peer
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
        self.l2cap = l2cap
    }
}

/// What an `LEHost` tells the layer above. Called on the host's loop. All optional.
public protocol LEHostDelegate: AnyObject {
    func host(_ host: LEHost, didDiscover report: AdvertisingReport)
    func host(_ host: LEHost, didConnect connection: LEConnection)
    /// A connection attempt ended without a connection (cancelled: Unknown Connection Identifier).
    func host(_ host: LEHost, didFailToConnectTo peer: LEAddress, status: HCIStatus)
    func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus)
    func host(_ host: LEHost, didUpdateParametersOf connection: LEConnection)
    /// A PHY update finished (asked by either side): `connection.txPHY`/`rxPHY`, or a failure.
    func host(_ host: LEHost, didUpdatePHYOf connection: LEConnection, status: HCIStatus)
    /// Encryption started (status success) or failed.
    func host(_ host: LEHost, encryptionChangedOn connection: LEConnection, status: HCIStatus)
    /// As peripheral: the central starts encryption; return the long-term key (16 bytes, as HCI
    /// carries it) for this EDIV/Rand, or nil to refuse.
    func host(_ host: LEHost, longTermKeyFor connection: LEConnection, rand: UInt64, ediv: UInt16) -> [UInt8]?
    /// Advertising set `set` stopped by itself (a connection was made, or directed advertising
    /// timed out). With legacy commands the one set is 0.
    func host(_ host: LEHost, didStopAdvertisingSet set: UInt8)
    /// The controller is gone (transport closed or broken).
    func host(_ host: LEHost, didClose error: HCITransportError?)
    /// The controller reset itself (``HCIDriverDelegate/driverWillReset(_:)``): every
    /// connection was reported gone (`didDisconnect`, Hardware Failure) before this, and
    /// advertising, scanning and the controller's addresses and lists are gone with it.
    /// `didReset` follows once it is initialised again, or `didClose`.
    func host(_ host: LEHost, willReset error: HCIError)
    /// The controller is initialised again after `willReset`.
    func host(_ host: LEHost, didReset info: ControllerInfo)
}

extension LEHostDelegate {
    public func host(_ host: LEHost, didDiscover report: AdvertisingReport) {}
    public func host(_ host: LEHost, didConnect connection: LEConnection) {}
    public func host(_ host: LEHost, didFailToConnectTo peer: LEAddress, status: HCIStatus) {}
    public func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) {}
    public func host(_ host: LEHost, didUpdateParametersOf connection: LEConnection) {}
    public func host(_ host: LEHost, didUpdatePHYOf connection: LEConnection, status: HCIStatus) {}
    public func host(_ host: LEHost, encryptionChangedOn connection: LEConnection, status: HCIStatus) {}
    public func host(_ host: LEHost, longTermKeyFor connection: LEConnection, rand: UInt64, ediv: UInt16) -> [UInt8]? { nil }
    public func host(_ host: LEHost, didStopAdvertisingSet set: UInt8) {}
    public func host(_ host: LEHost, didClose error: HCITransportError?) {}
    public func host(_ host: LEHost, willReset error: HCIError) {}
    public func host(_ host: LEHost, didReset info: ControllerInfo) {}
}

/// The LE host on one controller: the HCI driver, L2CAP per connection, and the GAP procedures
/// (scanning, advertising, connecting, encryption) with the controller's extended commands when
/// it has them and legacy ones otherwise.
///
/// Loop-confined: call it on its loop; the delegate is called there.
public final class LEHost: HCIDriverDelegate, L2CAPLinkDelegate, @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        loop.assertConfined("LEHost", file: file, line: line)
    }

    public let driver: HCIDriver
    public var loop: EventLoop { driver.loop }
    @exclusivity(unchecked) private var delegateHeld = WeakHeldExistential<any LEHostDelegate>(wrappedValue: nil)  // exclusivity checks: 0.28 % of notify
    public var delegate: (any LEHostDelegate)? {
        get { delegateHeld.wrappedValue }
        set { delegateHeld.wrappedValue = newValue }
    }
    public private(set) var info: ControllerInfo?
    @exclusivity(unchecked) public private(set) var connections = IntegerKeyMap<ConnectionHandle, LEConnection>()  // exclusivity checks: 0.28 % of notify
    /// Where the host's loggers come from (the driver's, each link's): the process's unless a
    /// test gives its own.
    public let logging: StackLogging
    /// `corebluetooth.hci`: connections and disconnections (with the link's metadata), and
    /// what the host does not expect.
    public var logger: Logger

    /// Whether the extended advertising/scanning/connection commands are used: only when the
    /// controller has all of them (mixing legacy and extended commands is Command Disallowed).
    @exclusivity(unchecked) public private(set) var usesExtendedCommands = false  // exclusivity checks: 0.08 % of adv
    @exclusivity(unchecked) var reportAssembler = ExtendedReportAssembler()  // exclusivity checks: 0.08 % of adv
    /// The advertising sets enabled (only set 0 with legacy commands).
    public internal(set) var advertisingSets: Set<UInt8> = []
    /// How many advertising sets the controller has (1 with legacy commands).
    public internal(set) var supportedAdvertisingSets = 1
    /// The connection attempt in progress, for reporting its failure.
    var connecting: LEAddress?
    /// Armed by a successful LE Create Connection Cancel until its LE Connection Complete.
    var cancelWatchdog: TimerHandle?
    /// How long the controller has, after accepting LE Create Connection Cancel, to send the LE
    /// Connection Complete that ends the attempt. A controller sends it right after the Command
    /// Complete (milliseconds even over a loaded USB or TCP transport); 2 s is far beyond that,
    /// yet short against the app's wait (HostDevice gives each waiting connection a 2 s turn).
    public static let cancelCompletionGrace: Duration = .seconds(2)
    /// A cancelled attempt was ended by `cancelCompletionGrace`, not by the controller: its
    /// late LE Connection Complete, if one comes, is stale (a failure is dropped; a success is
    /// a link nobody is initiating, which the delegate keeps or ends), and the controller may
    /// still be initiating (it refuses another LE Create Connection meanwhile).
    public internal(set) var awaitsLateCancelOutcome = false
    /// The random address set in the controller, if any.
    public internal(set) var randomAddress: BluetoothAddress?
    /// Identity addresses in the controller's resolving list (LEHost+Privacy), and whether the
    /// controller resolves addresses.
    public internal(set) var resolvingListPeers: [LEAddress] = []
    public internal(set) var isResolvingAddresses = false
    /// Advertise and connect from resolvable private addresses the controller makes (LE
    /// privacy, Vol 6 Part B §6): needs address resolution on and a resolving list entry with
    /// this device's IRK (HostDevice sets both up).
    public var usesPrivateAddresses = false
    /// How many peers the resolving list holds, once read (`readResolvingListSize`).
    public internal(set) var resolvingListSize: UInt8?

    public init(transport: HCITransport, loop: EventLoop, configuration: HCIDriverConfiguration = HCIDriverConfiguration(),
                logging: StackLogging = .standard) {
        self.logging = logging
        logger = logging.logger(.hci)
        driver = HCIDriver(transport: transport, loop: loop, configuration: configuration, logger: logger)
        driver.delegate = self
    }

    /// Opens the transport and initialises the controller.
    public func start(completion: @escaping (Result<ControllerInfo, HCIError>) -> Void) {
        assertOnLoop()
        driver.start { [self] result in
            guard case .success(let info) = result else { return completion(result) }
            learn(info) { completion(result) }
        }
    }

    /// What the host takes from the controller's answers when it starts (and after a reset).
    private func learn(_ info: ControllerInfo, then done: @escaping () -> Void) {
        self.info = info
        usesExtendedCommands = info.supportsExtendedAdvertising && info.supportsExtendedScanning
        supportedAdvertisingSets = 1
        guard usesExtendedCommands else { return done() }
        driver.send(LEReadNumberOfSupportedAdvertisingSets()) { [self] sets in
            if case .success(let parameters) = sets {
                supportedAdvertisingSets = max(1, Int(parameters.numSupportedAdvertisingSets))
            }
            done()
        }
    }

    /// Closes the transport.
    public func stop() { driver.stop() }

    // MARK: HCIDriverDelegate

    public func didReceiveEvent(_ event: HCIEvent) {
        assertOnLoop()
        switch event {
        case .le(let le): handleLEEvent(le)
        case .disconnectionComplete(let e): handleDisconnection(e)
        case .encryptionChange(let e):
            handleEncryptionChange(handle: e.connectionHandle, status: e.status, enabled: e.encryptionEnabled != 0)
        case .encryptionChangeV2(let e):
            handleEncryptionChange(handle: e.connectionHandle, status: e.status, enabled: e.encryptionEnabled != 0)
        case .encryptionKeyRefreshComplete(let e):
            if let connection = connections[e.connectionHandle] {
                delegate?.host(self, encryptionChangedOn: connection, status: e.status)
            }
        case .hardwareError(let e):
            logger.error("controller hardware error 0x\(String(e.hardwareCode, radix: 16))")
        default:
            break
        }
    }

    public func didReceiveACL(handle: ConnectionHandle, pdu: consuming [UInt8]) {
        assertOnLoop()
        guard let connection = connections[handle] else {
            logger.debug("ACL for unknown connection \(Logger.hex(handle)) dropped")
            return
        }
        connection.l2cap.receive(consume pdu)
    }

    public func driverCanSendMore(handle: ConnectionHandle) {
        assertOnLoop()
        connections[handle]?.l2cap.lowerLayerCanSendMore()
    }

    /// The controller reset itself: each link ends as a disconnection (Hardware Failure) would
    /// end it, and what the controller held (advertising, the random address, the resolving
    /// list and privacy, a connection attempt) is forgotten.
    public func driverWillReset(_ error: HCIError) {
        assertOnLoop()
        logger.warning("controller reset: \(error)")
        let lost = connections.values.sorted { $0.handle < $1.handle }
        connections = [:]
        connecting = nil
        cancelWatchdog?.cancel()
        cancelWatchdog = nil
        awaitsLateCancelOutcome = false
        advertisingSets = []
        randomAddress = nil
        resolvingListPeers = []
        isResolvingAddresses = false
        usesPrivateAddresses = false
        reportAssembler = ExtendedReportAssembler()
        for connection in lost {
            connection.l2cap.close()
            delegate?.host(self, didDisconnect: connection, reason: .hardwareFailure)
        }
        delegate?.host(self, willReset: error)
    }

    public func driverDidReset(_ info: ControllerInfo) {
        assertOnLoop()
        learn(info) { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            guard let self else { return }
            self.delegate?.host(self, didReset: info)
        }
    }

    public func driverDidClose(error: HCITransportError?) {
        assertOnLoop()
        for connection in connections.values { connection.l2cap.close() }
        connections = [:]
        cancelWatchdog?.cancel()
        cancelWatchdog = nil
        delegate?.host(self, didClose: error)
    }

    private func handleLEEvent(_ event: LEMetaEvent) {
        switch event {
        case .advertisingReport(let e):
            for report in e.reports { delegate?.host(self, didDiscover: Self.identified(AdvertisingReport(legacy: report))) }
        case .extendedAdvertisingReport(let e):
            // Some controllers answer even a legacy scan with extended reports.
            for report in e.reports {
                if let whole = reportAssembler.add(report) { delegate?.host(self, didDiscover: Self.identified(whole)) }
            }
        case .connectionComplete, .enhancedConnectionComplete, .enhancedConnectionCompleteV2:
            guard let e = event.connectionComplete else { return }
            var rpas: (local: BluetoothAddress, peer: BluetoothAddress) = (.zero, .zero)
            switch event {
            case .enhancedConnectionComplete(let e): rpas = (e.localResolvablePrivateAddress, e.peerResolvablePrivateAddress)
            case .enhancedConnectionCompleteV2(let e): rpas = (e.localResolvablePrivateAddress, e.peerResolvablePrivateAddress)
            default: break
            }
            connectionCompleted(status: e.status, handle: e.connectionHandle, role: e.role,
                                peer: LEAddress(e.peerAddressType, e.peerAddress).normalized, interval: e.connectionInterval,
                                latency: e.peripheralLatency, timeout: e.supervisionTimeout, resolvable: rpas)
        case .connectionUpdateComplete(let e):
            guard let connection = connections[e.connectionHandle], e.status.isSuccess else { return }
            connection.interval = e.connectionInterval
            connection.latency = e.peripheralLatency
            connection.supervisionTimeout = e.supervisionTimeout
            delegate?.host(self, didUpdateParametersOf: connection)
        case .remoteConnectionParameterRequest(let e):
            // The peer's link layer asks (we are central): accept what it asks for if valid.
            let parameters = ConnectionParameters(intervalMin: e.intervalMin, intervalMax: e.intervalMax,
                                                  latency: e.maxLatency, timeout: e.timeout)
            if parameters.isValid {
                driver.send(LERemoteConnectionParameterRequestReply(
                    connectionHandle: e.connectionHandle, intervalMin: e.intervalMin, intervalMax: e.intervalMax,
                    maxLatency: e.maxLatency, timeout: e.timeout, minCELength: 0, maxCELength: 0)) { _ in }
            } else {
                driver.send(LERemoteConnectionParameterRequestNegativeReply(
                    connectionHandle: e.connectionHandle, reason: .unacceptableConnectionParameters)) { _ in }
            }
        case .phyUpdateComplete(let e):
            guard let connection = connections[e.connectionHandle] else { return }
            if e.status.isSuccess {
                connection.txPHY = LEPHY(rawValue: e.txPhy) ?? connection.txPHY
                connection.rxPHY = LEPHY(rawValue: e.rxPhy) ?? connection.rxPHY
            }
            delegate?.host(self, didUpdatePHYOf: connection, status: e.status)
        case .dataLengthChange(let e):
            guard let connection = connections[e.connectionHandle] else { return }
            connection.maxTxOctets = e.maxTxOctets
            connection.maxRxOctets = e.maxRxOctets
        case .longTermKeyRequest(let e):
            guard let connection = connections[e.connectionHandle],
                  let key = delegate?.host(self, longTermKeyFor: connection, rand: e.randomNumber, ediv: e.encryptedDiversifier),
                  key.count == 16 else {
                driver.send(LELongTermKeyRequestNegativeReply(connectionHandle: e.connectionHandle)) { _ in }
                return
            }
            driver.send(LELongTermKeyRequestReply(connectionHandle: e.connectionHandle, longTermKey: key)) { _ in }
        case .advertisingSetTerminated(let e):
            advertisingSets.remove(e.advertisingHandle)
            delegate?.host(self, didStopAdvertisingSet: e.advertisingHandle)
        default:
            break
        }
    }

    /// A report whose address the controller resolved carries the identity with the plain type.
    private static func identified(_ report: AdvertisingReport) -> AdvertisingReport {
        guard report.address.type.rawValue >= 2 else { return report }
        var report = report
        report.address = report.address.normalized
        return report
    }

    func connectionCompleted(status: HCIStatus, handle: ConnectionHandle, role: LERole, peer: LEAddress,
                             interval: UInt16, latency: UInt16, timeout: UInt16,
                             resolvable: (local: BluetoothAddress, peer: BluetoothAddress) = (.zero, .zero)) {
        var late = false
        if role == .central {
            if let watchdog = cancelWatchdog {
                watchdog.cancel()
                cancelWatchdog = nil
            } else if awaitsLateCancelOutcome {
                // The controller's word on the attempt the watchdog ended: its cancellation
                // (stale now), or a link it made anyway, unless the peer is the one being
                // initiated again since.
                awaitsLateCancelOutcome = false
                if status == .unknownConnectionIdentifier {
                    logger.notice("late LE Connection Complete (\(status)) for an attempt already counted as cancelled; ignored",
                                  metadata: ["peer": "\(peer)"])
                    return
                }
                late = status.isSuccess && connecting != peer
            }
        }
        guard status.isSuccess else {
            logger.info("connection failed: \(status)", metadata: ["peer": "\(peer)"])
            if role == .central {
                let target = connecting ?? peer
                connecting = nil
                delegate?.host(self, didFailToConnectTo: target, status: status)
            } else {
                // Directed advertising timed out.
                advertisingSets.remove(0)
                delegate?.host(self, didStopAdvertisingSet: 0)
            }
            return
        }
        if role == .central && !late { connecting = nil }
        let link = L2CAPLink(handle: handle, role: role, lower: driver, loop: loop, peer: peer, logging: logging)
        link.delegate = self
        logger.info("connected to \(peer) as \(role == .central ? "central" : "peripheral")",
                    metadata: ["connection": "\(Logger.hex(handle))", "peer": "\(peer)",
                               "role": "\(role == .central ? "central" : "peripheral")", "interval": "\(interval)"])
        let connection = LEConnection(handle: handle, role: role, peer: peer, interval: interval, latency: latency,
                                      supervisionTimeout: timeout, l2cap: link)
        if resolvable.local != .zero { connection.localResolvablePrivateAddress = resolvable.local }
        if resolvable.peer != .zero { connection.peerResolvablePrivateAddress = resolvable.peer }
        connections[handle] = connection
        if role == .peripheral && advertisingSets.contains(0) && !usesExtendedCommands {
            // Legacy connectable advertising stops when a connection is made.
            advertisingSets.remove(0)
            delegate?.host(self, didStopAdvertisingSet: 0)
        }
        // Longer link-layer packets when the controller can (LE Data Packet Length Extension,
        // and a maximum above the 27 octets every link starts with: some controllers set the
        // feature bit but support 27 only, and answer the request with a broken event).
        if info?.leFeatures.contains(.leDataPacketLengthExtension) == true,
           (info?.maxDataLength?.supportedMaxTXOctets ?? 251) > 27 {
            driver.send(LESetDataLength(connectionHandle: handle, txOctets: 251, txTime: 2120)) { _ in }
        }
        delegate?.host(self, didConnect: connection)
    }

    private func handleDisconnection(_ e: DisconnectionComplete) {
        guard e.status.isSuccess, let connection = connections.removeValue(forKey: e.connectionHandle) else { return }
        connection.l2cap.close()
        logger.info("disconnected from \(connection.peer): \(e.reason)",
                    metadata: ["connection": "\(Logger.hex(connection.handle))", "peer": "\(connection.peer)"])
        delegate?.host(self, didDisconnect: connection, reason: e.reason)
    }

    private func handleEncryptionChange(handle: ConnectionHandle, status: HCIStatus, enabled: Bool) {
        guard let connection = connections[handle] else { return }
        connection.isEncrypted = status.isSuccess && enabled
        // Until SMP knows how the key was made, an encrypted link counts as unauthenticated.
        connection.l2cap.securityLevel = connection.isEncrypted ? max(connection.l2cap.securityLevel, .unauthenticatedEncryption) : .noSecurity
        delegate?.host(self, encryptionChangedOn: connection, status: status)
    }

    // MARK: L2CAPLinkDelegate

    public func link(_ link: L2CAPLink, acceptsConnectionParameterUpdate parameters: ConnectionParameters) -> Bool {
        assertOnLoop()
        // The link answers the request first; the update follows (after this job).
        loop.execute { [weakSelf = WeakHandle(self)] in weakSelf.object?.issueConnectionUpdate(link, parameters) }
        return true
    }

    private func issueConnectionUpdate(_ link: L2CAPLink, _ parameters: ConnectionParameters) {
        driver.send(LEConnectionUpdate(connectionHandle: link.handle, connectionIntervalMin: parameters.intervalMin,
                                       connectionIntervalMax: parameters.intervalMax, maxLatency: parameters.latency,
                                       supervisionTimeout: parameters.timeout, minCELength: 0, maxCELength: 0)) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            if case .failure(let error) = result { self?.logger.warning("LE Connection Update failed: \(error)", metadata: ["connection": "\(Logger.hex(link.handle))"]) }
        }
    }
}
