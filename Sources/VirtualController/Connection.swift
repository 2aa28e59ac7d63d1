import HCI
import Scheduling

/// One link-layer connection, as one of the two controllers sees it.
/// Loop-confined: touched only on the radio's loop.
final class Connection: @unchecked Sendable {
    let handle: ConnectionHandle
    let role: LERole
    let peer: LEAddress
    let peerDevice: RadioDeviceID
    let accessAddress: UInt32
    /// Units of 1.25 ms, connection events, 10 ms.
    var interval: UInt16
    var latency: UInt16
    var timeout: UInt16
    @exclusivity(unchecked) var txPHY: LEPHY = .le1M  // exclusivity checks: 0.28 % of notify
    var rxPHY: LEPHY = .le1M
    /// Effective data lengths (Vol 6 Part B §4.5.10); 27 until the data length update.
    @exclusivity(unchecked) var maxTxOctets: UInt16 = 27  // exclusivity checks: 0.28 % of notify
    var maxRxOctets: UInt16 = 27
    var maxTxTime: UInt16 = 328
    var maxRxTime: UInt16 = 328
    /// What this side would like to send, for LL_LENGTH_REQ/RSP.
    var preferredMaxTxOctets: UInt16 = 27

    struct Queued {
        var pdu: DataPDU
        /// The last LL PDU of a host ACL packet: sending it frees that controller buffer.
        var releasesBuffer: Bool

        consuming func takePDU() -> DataPDU { pdu }
    }
    /// LL control PDUs go before data.
    @exclusivity(unchecked) var controlQueue = RingBuffer<DataPDU>(capacity: 2)  // exclusivity checks: 0.6 % of notify
    @exclusivity(unchecked) var dataQueue = RingBuffer<Queued>(capacity: 4)  // exclusivity checks: 0.6 % of notify

    @exclusivity(unchecked) var peerHeard = false  // exclusivity checks: 0.28 % of notify
    @exclusivity(unchecked) var lastRSSI: Int8 = 127  // exclusivity checks: 0.28 % of notify
    var supervisionTimer: TimerHandle?
    var establishmentTimer: TimerHandle?
    var eventTimer: TimerHandle?
    var eventCounter: UInt16 = 0
    /// Timed mode: when the current connection event must end.
    var eventEnd: LoopInstant?
    /// Set once LL_TERMINATE_IND is queued: the reason reported locally when it is sent.
    @exclusivity(unchecked) var terminating = false  // exclusivity checks: 0.28 % of notify

    // Procedures the host asked for and the answers we wait for.
    var remoteFeatures: UInt64?
    var hostWantsRemoteFeatures = false
    var remoteVersion: (version: UInt8, company: UInt16, subversion: UInt16)?
    var versionSent = false
    var hostWantsRemoteVersion = false
    var hostRequestedPHY = false
    var localParameterRequestPending = false
    var remoteParameterRequest: LLControlPDU.ConnectionParameters?
    var txPHYPreference: UInt8 = 0b111
    var rxPHYPreference: UInt8 = 0b111

    // Encryption (Vol 6 Part B §5.1.3).
    @exclusivity(unchecked) var txEncrypted = false  // exclusivity checks: 0.3 % of notify
    @exclusivity(unchecked) var rxEncrypted = false  // exclusivity checks: 0.28 % of notify
    /// Stands in for the CCM MIC: derived from the session key, so two ends with different
    /// keys disagree exactly where real controllers would fail the MIC check.
    @exclusivity(unchecked) var micValue: UInt32 = 0  // exclusivity checks: 0.28 % of notify
    @exclusivity(unchecked) var encryptionInProgress = false  // exclusivity checks: 0.3 % of notify
    var refreshingKey = false
    var encryptionEnabledOnce = false
    var skdm: UInt64 = 0
    var ivm: UInt32 = 0
    var pendingRand: UInt64 = 0
    var pendingEDIV: UInt16 = 0
    var centralLTK: [UInt8] = []

    init(handle: ConnectionHandle, role: LERole, peer: LEAddress, peerDevice: RadioDeviceID, llData: ConnectLLData) {
        self.handle = handle
        self.role = role
        self.peer = peer
        self.peerDevice = peerDevice
        self.accessAddress = llData.accessAddress
        self.interval = llData.interval
        self.latency = llData.latency
        self.timeout = llData.timeout
    }

    var intervalDuration: Duration { .nanoseconds(intervalNanoseconds) }
    /// The interval in the loop's unit, for the timer of every connection event.
    var intervalNanoseconds: Int64 { Int64(interval) * 1_250_000 }
    var isEncrypted: Bool { txEncrypted && rxEncrypted }
    /// Data waits while encryption is being started or paused (Vol 6 Part B §5.1.3.1).
    var dataPaused: Bool { encryptionInProgress }
}
