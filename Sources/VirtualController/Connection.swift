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
    @exclusivity(unchecked) var interval: UInt16
    @exclusivity(unchecked) var latency: UInt16
    @exclusivity(unchecked) var timeout: UInt16
    @exclusivity(unchecked) var txPHY: LEPHY = .le1M
    @exclusivity(unchecked) var rxPHY: LEPHY = .le1M
    /// Effective data lengths (Vol 6 Part B §4.5.10); 27 until the data length update.
    @exclusivity(unchecked) var maxTxOctets: UInt16 = 27
    @exclusivity(unchecked) var maxRxOctets: UInt16 = 27
    @exclusivity(unchecked) var maxTxTime: UInt16 = 328
    @exclusivity(unchecked) var maxRxTime: UInt16 = 328
    /// What this side would like to send, for LL_LENGTH_REQ/RSP.
    @exclusivity(unchecked) var preferredMaxTxOctets: UInt16 = 27

    struct Queued {
        var pdu: DataPDU
        /// The last LL PDU of a host ACL packet: sending it frees that controller buffer.
        var releasesBuffer: Bool
    }
    /// LL control PDUs go before data.
    @exclusivity(unchecked) var controlQueue = RingBuffer<DataPDU>(capacity: 2)
    @exclusivity(unchecked) var dataQueue = RingBuffer<Queued>(capacity: 4)

    @exclusivity(unchecked) var peerHeard = false
    @exclusivity(unchecked) var lastRSSI: Int8 = 127
    @exclusivity(unchecked) var supervisionTimer: TimerHandle?
    @exclusivity(unchecked) var establishmentTimer: TimerHandle?
    @exclusivity(unchecked) var eventTimer: TimerHandle?
    @exclusivity(unchecked) var eventCounter: UInt16 = 0
    /// Timed mode: when the current connection event must end.
    @exclusivity(unchecked) var eventEnd: LoopInstant?
    /// Set once LL_TERMINATE_IND is queued: the reason reported locally when it is sent.
    @exclusivity(unchecked) var terminating = false

    // Procedures the host asked for and the answers we wait for.
    @exclusivity(unchecked) var remoteFeatures: UInt64?
    @exclusivity(unchecked) var hostWantsRemoteFeatures = false
    @exclusivity(unchecked) var remoteVersion: (version: UInt8, company: UInt16, subversion: UInt16)?
    @exclusivity(unchecked) var versionSent = false
    @exclusivity(unchecked) var hostWantsRemoteVersion = false
    @exclusivity(unchecked) var hostRequestedPHY = false
    @exclusivity(unchecked) var localParameterRequestPending = false
    @exclusivity(unchecked) var remoteParameterRequest: LLControlPDU.ConnectionParameters?
    @exclusivity(unchecked) var txPHYPreference: UInt8 = 0b111
    @exclusivity(unchecked) var rxPHYPreference: UInt8 = 0b111

    // Encryption (Vol 6 Part B §5.1.3).
    @exclusivity(unchecked) var txEncrypted = false
    @exclusivity(unchecked) var rxEncrypted = false
    /// Stands in for the CCM MIC: derived from the session key, so two ends with different
    /// keys disagree exactly where real controllers would fail the MIC check.
    @exclusivity(unchecked) var micValue: UInt32 = 0
    @exclusivity(unchecked) var encryptionInProgress = false
    @exclusivity(unchecked) var refreshingKey = false
    @exclusivity(unchecked) var encryptionEnabledOnce = false
    @exclusivity(unchecked) var skdm: UInt64 = 0
    @exclusivity(unchecked) var ivm: UInt32 = 0
    @exclusivity(unchecked) var pendingRand: UInt64 = 0
    @exclusivity(unchecked) var pendingEDIV: UInt16 = 0
    @exclusivity(unchecked) var centralLTK: [UInt8] = []

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
