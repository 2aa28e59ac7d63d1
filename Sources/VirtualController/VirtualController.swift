import ByteCoding
import HCI
import HCITransport
import Logging
import Scheduling
import StackLogging

/// A software LE controller: a link layer behind a real HCI interface, on a `VirtualRadio` (or
/// any `RadioMedium`, such as a `RadioProxy` to a radio another process hosts).
///
/// A host drives it only with HCI packets, exactly as it drives hardware: through the
/// in-process link (`makeHostTransport()`), or any `HCITransport` served elsewhere (an H4 TCP
/// server). Every command gets an answer (Command Complete or Command Status), with the spec's
/// error statuses for bad parameters, the wrong state and unknown handles.
public final class VirtualController: RadioDevice, HCIPacketSink, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// LE ACL buffers the host may fill (LE Read Buffer Size).
        public var aclDataPacketLength: UInt16 = 251
        public var totalACLDataPackets: UInt8 = 12
        /// What LE Read Maximum Data Length reports, and the most this link layer accepts.
        public var supportedMaxTxOctets: UInt16 = 251
        public var supportedMaxRxOctets: UInt16 = 251
        public var maxConnections = 16
        public var filterAcceptListSize: UInt8 = 16
        public var resolvingListSize: UInt8 = 16
        /// Num_HCI_Command_Packets in every Command Complete / Status.
        public var commandCredits: UInt8 = 1
        /// Whether the controller has the extended advertising, scanning and connection commands
        /// (LE feature bit 12). Without them it behaves like a 4.x controller: legacy only.
        public var supportsExtendedAdvertising = true
        /// How LE Create Connection Cancel ends an attempt (tests of controllers that get it wrong).
        public var createConnectionCancel = CreateConnectionCancelBehaviour.standard
        public init() {}
    }

    /// How a controller answers LE Create Connection Cancel.
    public enum CreateConnectionCancelBehaviour: Sendable, Equatable {
        /// As the spec says (Vol 4 Part E §7.8.13): Command Complete, then an LE Connection
        /// Complete with Unknown Connection Identifier.
        case standard
        /// As Bumble's controller (0.0.236) does: Command Complete (success) and nothing else;
        /// it goes on initiating, so the attempt may still connect, and LE Create Connection is
        /// Command Disallowed until it does.
        case keepsInitiating
        /// The attempt stops, but its LE Connection Complete comes this much later.
        case late(Duration)
    }

    public let radio: any RadioMedium
    public let configuration: Configuration
    public let publicAddress: BluetoothAddress
    @exclusivity(unchecked) public private(set) var radioID: RadioDeviceID = 0  // exclusivity checks: 0.08 % of adv
    /// The radio's (constant): read through the existential at each use, it cost a witness
    /// call, a retain and a release, several times a packet.
    let loop: EventLoop

    // Host side.
    @exclusivity(unchecked) var host: HCITransport?  // exclusivity checks: 0.3 % of notify
    /// `corebluetooth.controller`: what the controller refuses or drops (malformed commands,
    /// host transport trouble, MIC failures).
    public var logger = StackLogging.standard.logger(.controller)

    // Controller state; reset by HCI_Reset.
    @exclusivity(unchecked) var eventMask: UInt64 = 0  // exclusivity checks: 0.08 % of adv
    var eventMaskPage2: UInt64 = 0
    @exclusivity(unchecked) var leEventMask: UInt64 = 0  // exclusivity checks: 0.08 % of adv
    var randomAddress: BluetoothAddress?
    var advertising = AdvertisingState()
    @exclusivity(unchecked) var scanning = ScanningState() { didSet { noteListening() } }  // exclusivity checks: 0.16 % of adv
    var initiating: LECreateConnection? { didSet { noteListening() } }
    /// `listensForAdvertising` and `advertiserOfInterest` as the radio last heard them (the
    /// radio keeps lists of listeners).
    private var announcedListening = Listening(listens: false, advertiser: nil)

    struct Listening: Equatable {
        let listens: Bool
        let advertiser: BluetoothAddress?
    }

    private var listening: Listening { Listening(listens: listensForAdvertising, advertiser: advertiserOfInterest) }
    var filterAcceptList: [LEAddress] = []
    var resolvingList: [ResolvingListEntry] = []
    var addressResolutionEnabled = false
    var rpaTimeoutSeconds: UInt16 = 900
    /// Renews the resolvable private addresses every RPA timeout while resolution is enabled.
    var rpaTimer: TimerHandle?
    var suggestedMaxTxOctets: UInt16 = 27
    var suggestedMaxTxTime: UInt16 = 328
    var defaultAllPhys: UInt8 = 0
    var defaultTxPhys: UInt8 = 0b111
    var defaultRxPhys: UInt8 = 0b111
    @exclusivity(unchecked) var connections = IntegerKeyMap<ConnectionHandle, Connection>()  // exclusivity checks: 0.8 % of notify
    @exclusivity(unchecked) var handlesByAccessAddress = IntegerKeyMap<UInt32, ConnectionHandle>()  // exclusivity checks: 0.28 % of notify
    var nextHandle: ConnectionHandle = 0x0040
    @exclusivity(unchecked) var freeACLBuffers: Int  // exclusivity checks: 0.3 % of notify
    @exclusivity(unchecked) var completedPackets = IntegerKeyMap<ConnectionHandle, UInt16>()  // exclusivity checks: 0.3 % of notify
    @exclusivity(unchecked) var completedFlushScheduled = false  // exclusivity checks: 0.3 % of notify
    /// Extended advertising sets, scanning and initiating (VirtualController+Extended*.swift).
    @exclusivity(unchecked) var extended = ExtendedAdvertisingState()  // exclusivity checks: 0.5 % of adv

    /// Creates a controller on `radio` with the given public address. Call `powerOn` (or let
    /// `makeHostTransport` do it) to attach it to the radio.
    public init(radio: any RadioMedium, address: BluetoothAddress, configuration: Configuration = Configuration(),
                position: RadioPosition = RadioPosition()) {
        self.radio = radio
        self.loop = radio.loop
        self.publicAddress = address
        self.configuration = configuration
        self.freeACLBuffers = Int(configuration.totalACLDataPackets)
        resetState()
        if radio.loop.inLoop {
            radioID = radio.attach(self, at: position)
            announcedListening = listening
        } else {
            // Attach synchronously for manually paced loops driven by this thread later.
            radioIDPending = position
        }
    }

    var radioIDPending: RadioPosition?

    /// Attaches to the radio if `init` could not (it was not on the loop). Idempotent.
    func ensureAttached() {
        if let position = radioIDPending {
            radioIDPending = nil
            radioID = radio.attach(self, at: position)
            announcedListening = listening
        }
    }

    /// Tells the radio when `listensForAdvertising` changes (once attached: attaching asks it).
    private func noteListening() {
        let now = listening
        guard now != announcedListening, radioID != 0 else { return }
        announcedListening = now
        radio.listeningChanged(radioID)
    }

    /// A transport for a host in this process. The controller listens on the other end.
    public func makeHostTransport() -> HCITransport {
        let link = InProcessHCILink()
        attachHost(link.controllerEnd)
        return link.hostEnd
    }

    /// Serves this controller to a host over `transport` (e.g. an accepted H4 TCP connection).
    public func attachHost(_ transport: HCITransport) {
        let work: @Sendable () -> Void = { [self] in
            ensureAttached()
            host?.close()
            host = transport
            do { try transport.open(on: loop, sink: self) } catch {
                logger.error("host transport failed to open: \(error)")
                host = nil
            }
        }
        if loop.inLoop { work() } else { loop.execute(work) }
    }

    // MARK: HCIPacketSink (from the host)

    public func receive(_ packet: HCIPacket) {
        ensureAttached()
        switch packet {
        case .command(let command): handleCommand(command)
        case .acl(let acl): handleACLFromHost(acl)
        case .event: logger.debug("ignoring an event sent to the controller")
        case .other(let type, _): logger.debug("ignoring H4 packet type \(type)")
        }
    }

    public func transportClosed(_ error: HCITransportError?) {
        logger.debug("host transport closed: \(error.map { "\($0)" } ?? "locally")")
        host = nil
    }

    // MARK: Events to the host

    func send(_ packet: consuming HCIPacket) { host?.send(packet) }

    func sendEvent<E: HCIEventParameters>(_ event: E) {
        if let bit = Self.eventMaskBit[E.eventCode], eventMask & (1 << bit) == 0 { return }
        if let bit = Self.eventMaskPage2Bit[E.eventCode], eventMaskPage2 & (1 << bit) == 0 { return }
        send(.event(event.packet))
    }

    func sendLEEvent<E: LEMetaEventParameters>(_ event: E) {
        guard isLEEventEnabled(E.subeventCode) else { return }
        send(.event(event.packet))
    }

    func isLEEventEnabled(_ subevent: UInt8) -> Bool {
        eventMask & (1 << 61) != 0 && subevent >= 1 && subevent <= 64 && leEventMask & (1 << UInt64(subevent - 1)) != 0
    }

    /// Set_Event_Mask bit for each maskable event code (Vol 4 Part E §7.3.1).
    static let eventMaskBit: [UInt8: UInt64] = [
        0x05: 4,   // Disconnection Complete
        0x08: 7,   // Encryption Change v1
        0x0C: 11,  // Read Remote Version Information Complete
        0x10: 15,  // Hardware Error
        0x1A: 25,  // Data Buffer Overflow
        0x30: 47,  // Encryption Key Refresh Complete
    ]
    /// Set_Event_Mask_Page_2 bits (§7.3.69).
    static let eventMaskPage2Bit: [UInt8: UInt64] = [0x59: 25]  // Encryption Change v2

    func commandComplete<R: HCIReturnParameters>(_ opcode: HCIOpcode, _ returnParameters: R) {
        send(.event(CommandComplete(numHCICommandPackets: configuration.commandCredits, opcode: opcode,
                                    returning: returnParameters).packet))
    }

    func commandComplete(_ opcode: HCIOpcode, status: HCIStatus) {
        commandComplete(opcode, StatusReturn(status: status))
    }

    func commandStatus(_ opcode: HCIOpcode, _ status: HCIStatus) {
        send(.event(CommandStatus(status: status, numHCICommandPackets: configuration.commandCredits, opcode: opcode).packet))
    }

    // MARK: Reset and power

    func resetState() {
        eventMask = 0x0000_1FFF_FFFF_FFFF
        eventMaskPage2 = 0
        leEventMask = 0x1F
        randomAddress = nil
        advertising.timer?.cancel()
        advertising = AdvertisingState()
        scanning.timer?.cancel()
        scanning = ScanningState()
        initiating = nil
        extended.cancelTimers()
        extended = ExtendedAdvertisingState()
        filterAcceptList = []
        resolvingList = []
        addressResolutionEnabled = false
        rpaTimer?.cancel()
        rpaTimer = nil
        rpaTimeoutSeconds = 900
        suggestedMaxTxOctets = 27
        suggestedMaxTxTime = 328
        defaultAllPhys = 0
        defaultTxPhys = 0b111
        defaultRxPhys = 0b111
        for handle in connections.keys.sorted() { if let connection = connections[handle] { abandon(connection) } }
        connections = [:]
        handlesByAccessAddress = [:]
        freeACLBuffers = Int(configuration.totalACLDataPackets)
        completedPackets = [:]
    }

    /// Powers the device off (it vanishes from the air: peers time out; the host link closes
    /// with an error) or back on (a host can then attach again). Call on the loop.
    public func setPowered(_ on: Bool) {
        ensureAttached()
        if !on {
            resetState()
            let host = self.host
            self.host = nil
            if let end = host as? InProcessHCILink.End {
                end.close(peerError: HCITransportError("controller powered off"))
            } else {
                host?.close()
            }
        }
        radio.setPowered(radioID, on)
    }

    /// A fault for tests: the controller crashes and comes back, as real ones do. Its state
    /// goes as a Reset would take it (advertising, scanning, the random address and lists, and
    /// its links, which its peers lose by supervision timeout), and it tells the host with a
    /// Hardware Error event (Vol 4 Part E §7.7.16, `code`); with `announced` false it instead
    /// sends a Command Complete for a Reset the host never sent, as some controllers do after
    /// resetting themselves. The host transport stays open. Call on the loop.
    public func failHardware(code: UInt8 = 0x01, announced: Bool = true) {
        ensureAttached()
        resetState()
        if announced {
            sendEvent(HardwareError(hardwareCode: code))
        } else {
            commandComplete(Reset.opcode, status: .success)
        }
    }

    /// A fault for tests: the controller forgets a connection without telling the host, as
    /// buggy firmware does (an internal reset it does not report). Its state for the link goes
    /// (the ACL buffers it held are free again) with no Disconnection Complete and no Number Of
    /// Completed Packets for what the host had sent on it; commands naming its handle are
    /// answered Unknown Connection Identifier. The peer loses the link by supervision timeout.
    /// Call on the loop.
    public func forgetConnection(_ handle: ConnectionHandle) {
        ensureAttached()
        guard let connection = connections[handle] else { return }
        abandon(connection)
    }

    /// The controller's position on the radio.
    public var position: RadioPosition {
        get { radio.position(of: radioID) ?? RadioPosition() }
        set { ensureAttached(); radio.move(radioID, to: newValue) }
    }

    // MARK: Helpers

    /// The address this controller uses on the air for an Own_Address_Type.
    func ownAddress(_ type: LEAddressType) -> LEAddress? {
        switch type {
        case .publicDevice, .publicIdentity: return LEAddress(.publicDevice, publicAddress)
        case .randomDevice, .randomIdentity:
            guard let randomAddress else { return nil }
            return LEAddress(.randomDevice, randomAddress)
        }
    }

    func isInFilterAcceptList(_ address: LEAddress) -> Bool {
        filterAcceptList.contains { $0.address == address.address && $0.isRandom == address.isRandom }
    }

    func connection(to peer: LEAddress) -> Connection? {
        connections.values.first { $0.peer.address == peer.address && $0.peer.isRandom == peer.isRandom }
    }
}
