import ByteCoding

/// The LE features a link layer supports (Vol 6 Part B §4.6), as LE Read Local Supported
/// Features and LE Read Remote Features Complete carry them: bit n of a 64-bit bitmap.
public struct LEFeatures: OptionSet, Hashable, Sendable {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    private init(bit: UInt64) { rawValue = 1 << bit }

    public static let leEncryption = LEFeatures(bit: 0)
    public static let connectionParametersRequest = LEFeatures(bit: 1)
    public static let extendedRejectIndication = LEFeatures(bit: 2)
    public static let peripheralInitiatedFeaturesExchange = LEFeatures(bit: 3)
    public static let lePing = LEFeatures(bit: 4)
    public static let leDataPacketLengthExtension = LEFeatures(bit: 5)
    public static let llPrivacy = LEFeatures(bit: 6)
    public static let extendedScannerFilterPolicies = LEFeatures(bit: 7)
    public static let le2MPHY = LEFeatures(bit: 8)
    public static let stableModulationIndexTransmitter = LEFeatures(bit: 9)
    public static let stableModulationIndexReceiver = LEFeatures(bit: 10)
    public static let leCodedPHY = LEFeatures(bit: 11)
    public static let leExtendedAdvertising = LEFeatures(bit: 12)
    public static let lePeriodicAdvertising = LEFeatures(bit: 13)
    public static let channelSelectionAlgorithm2 = LEFeatures(bit: 14)
    public static let lePowerClass1 = LEFeatures(bit: 15)
    public static let minimumNumberOfUsedChannels = LEFeatures(bit: 16)
    public static let connectionCTERequest = LEFeatures(bit: 17)
    public static let connectionCTEResponse = LEFeatures(bit: 18)
    public static let connectionlessCTETransmitter = LEFeatures(bit: 19)
    public static let connectionlessCTEReceiver = LEFeatures(bit: 20)
    public static let antennaSwitchingDuringCTETransmission = LEFeatures(bit: 21)
    public static let antennaSwitchingDuringCTEReception = LEFeatures(bit: 22)
    public static let receivingConstantToneExtensions = LEFeatures(bit: 23)
    public static let periodicAdvertisingSyncTransferSender = LEFeatures(bit: 24)
    public static let periodicAdvertisingSyncTransferRecipient = LEFeatures(bit: 25)
    public static let sleepClockAccuracyUpdates = LEFeatures(bit: 26)
    public static let remotePublicKeyValidation = LEFeatures(bit: 27)
    public static let connectedIsochronousStreamCentral = LEFeatures(bit: 28)
    public static let connectedIsochronousStreamPeripheral = LEFeatures(bit: 29)
    public static let isochronousBroadcaster = LEFeatures(bit: 30)
    public static let synchronizedReceiver = LEFeatures(bit: 31)
    public static let connectedIsochronousStreamHostSupport = LEFeatures(bit: 32)
    /// The LE Power Control Request feature occupies bits 33 and 34 (both set when supported).
    public static let lePowerControlRequest = LEFeatures(rawValue: 1 << 33 | 1 << 34)
    public static let lePathLossMonitoring = LEFeatures(bit: 35)
    public static let periodicAdvertisingADISupport = LEFeatures(bit: 36)
    public static let connectionSubrating = LEFeatures(bit: 37)
    public static let connectionSubratingHostSupport = LEFeatures(bit: 38)
    public static let channelClassification = LEFeatures(bit: 39)
    public static let advertisingCodingSelection = LEFeatures(bit: 40)
    public static let advertisingCodingSelectionHostSupport = LEFeatures(bit: 41)
}

/// An LE PHY as HCI names one (LE Read PHY, PHY Update Complete, extended advertising):
/// 1 = LE 1M, 2 = LE 2M, 3 = LE Coded.
public enum LEPHY: UInt8, Sendable, Hashable, CaseIterable {
    case le1M = 0x01
    case le2M = 0x02
    case leCoded = 0x03

    /// The bit standing for this PHY in PHY masks (All_PHYs/TX_PHYs/RX_PHYs, Scanning_PHYs,
    /// Initiating_PHYs): bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded.
    public var maskBit: UInt8 { 1 << (rawValue - 1) }
}

/// Advertising_Filter_Policy (LE Set [Extended] Advertising Parameters): which scan and
/// connection requests are processed only from devices in the Filter Accept List.
public enum LEAdvertisingFilterPolicy: UInt8, Sendable, Hashable {
    /// Scan and connection requests from all devices.
    case acceptAll = 0x00
    /// Scan requests only from the Filter Accept List, connection requests from all.
    case filterScanRequests = 0x01
    /// Scan requests from all, connection requests only from the Filter Accept List.
    case filterConnectionRequests = 0x02
    /// Both only from the Filter Accept List.
    case filterBoth = 0x03
}

/// Scanning_Filter_Policy (LE Set [Extended] Scan Parameters).
public enum LEScanningFilterPolicy: UInt8, Sendable, Hashable {
    /// Every advertisement, except directed ones not addressed to us.
    case basicUnfiltered = 0x00
    /// Only advertisers in the Filter Accept List (and directed ones addressed to us).
    case basicFiltered = 0x01
    /// Like basic unfiltered, but also directed advertisements whose target is an
    /// unresolvable resolvable private address.
    case extendedUnfiltered = 0x02
    /// Like basic filtered, with the same extension for directed advertisements.
    case extendedFiltered = 0x03
}

/// Initiator_Filter_Policy (LE [Extended] Create Connection).
public enum LEInitiatorFilterPolicy: UInt8, Sendable, Hashable {
    /// Connect to the device given by Peer_Address_Type and Peer_Address.
    case peerAddress = 0x00
    /// Connect to any device in the Filter Accept List (the peer address is ignored).
    case filterAcceptList = 0x01
}
