import ByteCoding

// LE Controller commands (Vol 4 Part E §7.8) for extended advertising, extended scanning and
// extended connection creation (Core 5.0 and later).

/// HCI_LE_Set_Advertising_Set_Random_Address (§7.8.52).
public struct LESetAdvertisingSetRandomAddress: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0035)
    public static let name = "LE Set Advertising Set Random Address"

    public var advertisingHandle: UInt8
    public var randomAddress: BluetoothAddress

    public init(advertisingHandle: UInt8, randomAddress: BluetoothAddress) {
        self.advertisingHandle = advertisingHandle
        self.randomAddress = randomAddress
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(advertisingHandle)
        writer.address(randomAddress)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingHandle = try reader.u8()
        randomAddress = try reader.address()
    }
}

/// HCI_LE_Set_Extended_Advertising_Parameters [v1] (§7.8.53).
public struct LESetExtendedAdvertisingParameters: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0036)
    public static let name = "LE Set Extended Advertising Parameters"

    /// Advertising_Event_Properties. Legacy sets use the spec's fixed combinations:
    /// ADV_IND = [.legacy, .connectable, .scannable], ADV_SCAN_IND = [.legacy, .scannable],
    /// ADV_NONCONN_IND = [.legacy], ADV_DIRECT_IND = [.legacy, .connectable, .directed]
    /// (+ `.highDutyDirected`). Reserved bits are kept as received.
    public struct EventProperties: OptionSet, Hashable, Sendable {
        public var rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        public static let connectable = EventProperties(rawValue: 1 << 0)
        public static let scannable = EventProperties(rawValue: 1 << 1)
        public static let directed = EventProperties(rawValue: 1 << 2)
        /// High duty cycle directed connectable (legacy PDUs only).
        public static let highDutyDirected = EventProperties(rawValue: 1 << 3)
        /// Use legacy advertising PDUs.
        public static let legacy = EventProperties(rawValue: 1 << 4)
        /// Omit the advertiser's address from all PDUs ("anonymous advertising").
        public static let anonymous = EventProperties(rawValue: 1 << 5)
        /// Include TxPower in the extended header of at least one PDU.
        public static let includeTxPower = EventProperties(rawValue: 1 << 6)
    }

    /// Advertising_TX_Power value meaning "the host has no preference".
    public static let noTXPowerPreference: Int8 = 0x7F

    /// 0x00–0xEF.
    public var advertisingHandle: UInt8
    public var advertisingEventProperties: EventProperties
    /// In units of 0.625 ms, 3 octets on the wire (0x000020–0xFFFFFF; higher bits are dropped).
    public var primaryAdvertisingIntervalMin: UInt32
    /// In units of 0.625 ms, 3 octets on the wire.
    public var primaryAdvertisingIntervalMax: UInt32
    /// Bit 0 channel 37, bit 1 channel 38, bit 2 channel 39.
    public var primaryAdvertisingChannelMap: UInt8
    /// 0 public, 1 random, 2 RPA else public, 3 RPA else random.
    public var ownAddressType: LEAddressType
    /// Public (0) or random (1).
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    public var advertisingFilterPolicy: LEAdvertisingFilterPolicy
    /// dBm (-127…20), or `noTXPowerPreference`.
    public var advertisingTXPower: Int8
    /// LE 1M or LE Coded (LE 2M is not allowed on the primary channels; encoded as given,
    /// rejected when decoding).
    public var primaryAdvertisingPHY: LEPHY
    /// How many advertising events the auxiliary packets may skip.
    public var secondaryAdvertisingMaxSkip: UInt8
    public var secondaryAdvertisingPHY: LEPHY
    /// 0x00–0x0F.
    public var advertisingSID: UInt8
    public var scanRequestNotificationEnable: Bool

    public init(advertisingHandle: UInt8 = 0,
                advertisingEventProperties: EventProperties = [.legacy, .connectable, .scannable],
                primaryAdvertisingIntervalMin: UInt32 = 0x000800, primaryAdvertisingIntervalMax: UInt32 = 0x000800,
                primaryAdvertisingChannelMap: UInt8 = 0x07, ownAddressType: LEAddressType = .publicDevice,
                peerAddressType: LEAddressType = .publicDevice, peerAddress: BluetoothAddress = .zero,
                advertisingFilterPolicy: LEAdvertisingFilterPolicy = .acceptAll,
                advertisingTXPower: Int8 = LESetExtendedAdvertisingParameters.noTXPowerPreference,
                primaryAdvertisingPHY: LEPHY = .le1M, secondaryAdvertisingMaxSkip: UInt8 = 0,
                secondaryAdvertisingPHY: LEPHY = .le1M, advertisingSID: UInt8 = 0,
                scanRequestNotificationEnable: Bool = false) {
        self.advertisingHandle = advertisingHandle
        self.advertisingEventProperties = advertisingEventProperties
        self.primaryAdvertisingIntervalMin = primaryAdvertisingIntervalMin
        self.primaryAdvertisingIntervalMax = primaryAdvertisingIntervalMax
        self.primaryAdvertisingChannelMap = primaryAdvertisingChannelMap
        self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.advertisingFilterPolicy = advertisingFilterPolicy
        self.advertisingTXPower = advertisingTXPower
        self.primaryAdvertisingPHY = primaryAdvertisingPHY
        self.secondaryAdvertisingMaxSkip = secondaryAdvertisingMaxSkip
        self.secondaryAdvertisingPHY = secondaryAdvertisingPHY
        self.advertisingSID = advertisingSID
        self.scanRequestNotificationEnable = scanRequestNotificationEnable
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(advertisingHandle)
        writer.u16(advertisingEventProperties.rawValue)
        writer.u24(primaryAdvertisingIntervalMin & 0xFF_FFFF)
        writer.u24(primaryAdvertisingIntervalMax & 0xFF_FFFF)
        writer.u8(primaryAdvertisingChannelMap)
        writer.u8(ownAddressType.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        writer.u8(advertisingFilterPolicy.rawValue)
        writer.i8(advertisingTXPower)
        writer.u8(primaryAdvertisingPHY.rawValue)
        writer.u8(secondaryAdvertisingMaxSkip)
        writer.u8(secondaryAdvertisingPHY.rawValue)
        writer.u8(advertisingSID)
        CommandCoding.writeBool(scanRequestNotificationEnable, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingHandle = try reader.u8()
        advertisingEventProperties = EventProperties(rawValue: try reader.u16())
        primaryAdvertisingIntervalMin = try reader.u24()
        primaryAdvertisingIntervalMax = try reader.u24()
        primaryAdvertisingChannelMap = try reader.u8()
        ownAddressType = try reader.enumeration(LEAddressType.self)
        peerAddressType = try CommandCoding.publicOrRandom(&reader, "Peer_Address_Type")
        peerAddress = try reader.address()
        advertisingFilterPolicy = try reader.enumeration(LEAdvertisingFilterPolicy.self)
        advertisingTXPower = try reader.i8()
        primaryAdvertisingPHY = try reader.enumeration(LEPHY.self)
        guard primaryAdvertisingPHY != .le2M else {
            throw DecodeError("\(reader.context): LE 2M is not a primary advertising PHY")
        }
        secondaryAdvertisingMaxSkip = try reader.u8()
        secondaryAdvertisingPHY = try reader.enumeration(LEPHY.self)
        advertisingSID = try reader.u8()
        scanRequestNotificationEnable = try CommandCoding.bool(&reader, "Scan_Request_Notification_Enable")
    }

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// The power the controller will use, in dBm.
        public var selectedTXPower: Int8

        public init(status: HCIStatus = .success, selectedTXPower: Int8) {
            self.status = status
            self.selectedTXPower = selectedTXPower
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            selectedTXPower = try reader.i8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.i8(selectedTXPower)
        }
    }
}

/// The variable-length data field of the extended data commands: length octet (at most 251)
/// then that many octets.
extension CommandCoding {
    static let maxExtendedDataFragment = 251

    static func extendedData(_ reader: inout ByteReader) throws -> [UInt8] {
        let length = Int(try reader.u8())
        guard length <= maxExtendedDataFragment else {
            throw DecodeError("\(reader.context): data length \(length) exceeds 251")
        }
        return try reader.bytes(length)
    }

    /// Data past 251 octets (a caller error) is cut rather than trapping.
    static func writeExtendedData(_ data: [UInt8], _ writer: inout ByteWriter) {
        let fragment = data.prefix(maxExtendedDataFragment)
        writer.u8(UInt8(fragment.count))
        writer.bytes(fragment)
    }
}

/// HCI_LE_Set_Extended_Advertising_Data (§7.8.54): one fragment of a set's advertising data.
public struct LESetExtendedAdvertisingData: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0037)
    public static let name = "LE Set Extended Advertising Data"

    /// Operation: where this fragment goes in the set's data.
    public enum Operation: UInt8, Sendable, Hashable {
        case intermediateFragment = 0x00
        /// Starts new data, discarding the old.
        case firstFragment = 0x01
        case lastFragment = 0x02
        /// The whole data in one command (discarding the old).
        case completeData = 0x03
        /// Keep the data, only change the Advertising DID (no data may be given).
        case unchangedData = 0x04
    }

    /// Fragment_Preference: a hint about fragmenting the data over the air.
    public enum FragmentPreference: UInt8, Sendable, Hashable {
        case controllerMayFragment = 0x00
        case controllerShouldNotFragment = 0x01
    }

    public var advertisingHandle: UInt8
    public var operation: Operation
    public var fragmentPreference: FragmentPreference
    /// At most 251 octets per command (more is cut when encoding).
    public var advertisingData: [UInt8]

    public init(advertisingHandle: UInt8 = 0, operation: Operation = .completeData,
                fragmentPreference: FragmentPreference = .controllerMayFragment, advertisingData: [UInt8]) {
        self.advertisingHandle = advertisingHandle
        self.operation = operation
        self.fragmentPreference = fragmentPreference
        self.advertisingData = advertisingData
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(advertisingHandle)
        writer.u8(operation.rawValue)
        writer.u8(fragmentPreference.rawValue)
        CommandCoding.writeExtendedData(advertisingData, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingHandle = try reader.u8()
        operation = try reader.enumeration(Operation.self)
        fragmentPreference = try reader.enumeration(FragmentPreference.self)
        advertisingData = try CommandCoding.extendedData(&reader)
    }
}

/// HCI_LE_Set_Extended_Scan_Response_Data (§7.8.55): one fragment of a set's scan response.
public struct LESetExtendedScanResponseData: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0038)
    public static let name = "LE Set Extended Scan Response Data"

    public typealias Operation = LESetExtendedAdvertisingData.Operation
    public typealias FragmentPreference = LESetExtendedAdvertisingData.FragmentPreference

    public var advertisingHandle: UInt8
    public var operation: Operation
    public var fragmentPreference: FragmentPreference
    /// At most 251 octets per command (more is cut when encoding).
    public var scanResponseData: [UInt8]

    public init(advertisingHandle: UInt8 = 0, operation: Operation = .completeData,
                fragmentPreference: FragmentPreference = .controllerMayFragment, scanResponseData: [UInt8]) {
        self.advertisingHandle = advertisingHandle
        self.operation = operation
        self.fragmentPreference = fragmentPreference
        self.scanResponseData = scanResponseData
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(advertisingHandle)
        writer.u8(operation.rawValue)
        writer.u8(fragmentPreference.rawValue)
        CommandCoding.writeExtendedData(scanResponseData, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingHandle = try reader.u8()
        operation = try reader.enumeration(Operation.self)
        fragmentPreference = try reader.enumeration(FragmentPreference.self)
        scanResponseData = try CommandCoding.extendedData(&reader)
    }
}

/// HCI_LE_Set_Extended_Advertising_Enable (§7.8.56).
public struct LESetExtendedAdvertisingEnable: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0039)
    public static let name = "LE Set Extended Advertising Enable"

    /// One entry of the per-set arrays.
    public struct AdvertisingSet: Hashable, Sendable {
        public var advertisingHandle: UInt8
        /// In units of 10 ms; 0 = until disabled.
        public var duration: UInt16
        /// 0 = no limit.
        public var maxExtendedAdvertisingEvents: UInt8

        public init(advertisingHandle: UInt8, duration: UInt16 = 0, maxExtendedAdvertisingEvents: UInt8 = 0) {
            self.advertisingHandle = advertisingHandle
            self.duration = duration
            self.maxExtendedAdvertisingEvents = maxExtendedAdvertisingEvents
        }
    }

    public var enable: Bool
    /// Num_Sets is the count of this array. Disabling with no sets disables all sets.
    public var sets: [AdvertisingSet]

    public init(enable: Bool, sets: [AdvertisingSet]) {
        self.enable = enable
        self.sets = sets
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeBool(enable, &writer)
        let written = sets.prefix(Int(UInt8.max))
        writer.u8(UInt8(written.count))
        // Array parameters are interleaved: each set's fields together (Vol 4 Part E §5.2).
        for set in written {
            writer.u8(set.advertisingHandle)
            writer.u16(set.duration)
            writer.u8(set.maxExtendedAdvertisingEvents)
        }
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        enable = try CommandCoding.bool(&reader, "Enable")
        let count = Int(try reader.u8())
        var sets: [AdvertisingSet] = []
        sets.reserveCapacity(count)
        for _ in 0..<count {
            sets.append(AdvertisingSet(advertisingHandle: try reader.u8(), duration: try reader.u16(),
                                       maxExtendedAdvertisingEvents: try reader.u8()))
        }
        self.sets = sets
    }
}

/// HCI_LE_Read_Maximum_Advertising_Data_Length (§7.8.57).
public struct LEReadMaximumAdvertisingDataLength: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x003A)
    public static let name = "LE Read Maximum Advertising Data Length"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Octets (0x001F–0x0672).
        public var maxAdvertisingDataLength: UInt16

        public init(status: HCIStatus = .success, maxAdvertisingDataLength: UInt16) {
            self.status = status
            self.maxAdvertisingDataLength = maxAdvertisingDataLength
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            maxAdvertisingDataLength = try reader.u16()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u16(maxAdvertisingDataLength)
        }
    }
}

/// HCI_LE_Read_Number_of_Supported_Advertising_Sets (§7.8.58).
public struct LEReadNumberOfSupportedAdvertisingSets: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x003B)
    public static let name = "LE Read Number of Supported Advertising Sets"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        public var numSupportedAdvertisingSets: UInt8

        public init(status: HCIStatus = .success, numSupportedAdvertisingSets: UInt8) {
            self.status = status
            self.numSupportedAdvertisingSets = numSupportedAdvertisingSets
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            numSupportedAdvertisingSets = try reader.u8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u8(numSupportedAdvertisingSets)
        }
    }
}

/// HCI_LE_Remove_Advertising_Set (§7.8.59).
public struct LERemoveAdvertisingSet: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x003C)
    public static let name = "LE Remove Advertising Set"

    public var advertisingHandle: UInt8

    public init(advertisingHandle: UInt8) { self.advertisingHandle = advertisingHandle }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u8(advertisingHandle) }
    public init(decodingParameters reader: inout ByteReader) throws { advertisingHandle = try reader.u8() }
}

/// HCI_LE_Clear_Advertising_Sets (§7.8.60).
public struct LEClearAdvertisingSets: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x003D)
    public static let name = "LE Clear Advertising Sets"
    public init() {}
}

extension CommandCoding {
    /// Reads a PHY mask and the PHYs it names, in bit order; bits outside `allowed` are
    /// reserved and make the command malformed.
    static func phyMask(_ reader: inout ByteReader, allowed: Set<LEPHY>, _ field: String) throws -> [LEPHY] {
        let mask = try reader.u8()
        let allowedBits = allowed.reduce(UInt8(0)) { $0 | $1.maskBit }
        guard mask & ~allowedBits == 0 else {
            throw DecodeError("\(reader.context): reserved bits in \(field) 0x\(String(mask, radix: 16))")
        }
        return LEPHY.allCases.filter { mask & $0.maskBit != 0 }
    }

    /// Orders per-PHY entries as the wire needs them (ascending mask bit), dropping repeats of
    /// a PHY (a caller error) so the mask and the entry count always agree.
    static func perPHYOrder<Entry>(_ entries: [Entry], phy: (Entry) -> LEPHY) -> (mask: UInt8, entries: [Entry]) {
        var mask: UInt8 = 0
        var ordered: [Entry] = []
        for candidate in LEPHY.allCases {
            if let entry = entries.first(where: { phy($0) == candidate }) {
                mask |= candidate.maskBit
                ordered.append(entry)
            }
        }
        return (mask, ordered)
    }
}

/// HCI_LE_Set_Extended_Scan_Parameters (§7.8.64).
public struct LESetExtendedScanParameters: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0041)
    public static let name = "LE Set Extended Scan Parameters"

    public typealias ScanType = LESetScanParameters.ScanType

    /// The parameters for scanning on one PHY (LE 1M or LE Coded).
    public struct ScanningPHY: Hashable, Sendable {
        public var phy: LEPHY
        public var scanType: ScanType
        /// In units of 0.625 ms (0x0004–0xFFFF).
        public var scanInterval: UInt16
        /// In units of 0.625 ms.
        public var scanWindow: UInt16

        public init(phy: LEPHY = .le1M, scanType: ScanType = .passive, scanInterval: UInt16 = 0x0010,
                    scanWindow: UInt16 = 0x0010) {
            self.phy = phy
            self.scanType = scanType
            self.scanInterval = scanInterval
            self.scanWindow = scanWindow
        }
    }

    /// 0 public, 1 random, 2 RPA else public, 3 RPA else random.
    public var ownAddressType: LEAddressType
    public var scanningFilterPolicy: LEScanningFilterPolicy
    /// One entry per PHY to scan on; encoded as the Scanning_PHYs mask plus the entries in bit
    /// order (LE 1M, then LE Coded). A repeated PHY is dropped when encoding.
    public var scanningPHYs: [ScanningPHY]

    public init(ownAddressType: LEAddressType = .publicDevice,
                scanningFilterPolicy: LEScanningFilterPolicy = .basicUnfiltered,
                scanningPHYs: [ScanningPHY] = [ScanningPHY()]) {
        self.ownAddressType = ownAddressType
        self.scanningFilterPolicy = scanningFilterPolicy
        self.scanningPHYs = scanningPHYs
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(ownAddressType.rawValue)
        writer.u8(scanningFilterPolicy.rawValue)
        let (mask, entries) = CommandCoding.perPHYOrder(scanningPHYs) { $0.phy }
        writer.u8(mask)
        for entry in entries {
            writer.u8(entry.scanType.rawValue)
            writer.u16(entry.scanInterval)
            writer.u16(entry.scanWindow)
        }
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        ownAddressType = try reader.enumeration(LEAddressType.self)
        scanningFilterPolicy = try reader.enumeration(LEScanningFilterPolicy.self)
        let phys = try CommandCoding.phyMask(&reader, allowed: [.le1M, .leCoded], "Scanning_PHYs")
        scanningPHYs = try phys.map { phy in
            ScanningPHY(phy: phy, scanType: try reader.enumeration(ScanType.self),
                        scanInterval: try reader.u16(), scanWindow: try reader.u16())
        }
    }
}

/// HCI_LE_Set_Extended_Scan_Enable (§7.8.65).
public struct LESetExtendedScanEnable: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0042)
    public static let name = "LE Set Extended Scan Enable"

    /// Filter_Duplicates.
    public enum FilterDuplicates: UInt8, Sendable, Hashable {
        case disabled = 0x00
        case enabled = 0x01
        /// Filtering on, with the duplicate list reset at the start of each scan period.
        case enabledResetForEachPeriod = 0x02
    }

    public var enable: Bool
    public var filterDuplicates: FilterDuplicates
    /// In units of 10 ms; 0 = scan until disabled.
    public var duration: UInt16
    /// In units of 1.28 s; 0 = no periodic scanning.
    public var period: UInt16

    public init(enable: Bool, filterDuplicates: FilterDuplicates = .disabled, duration: UInt16 = 0, period: UInt16 = 0) {
        self.enable = enable
        self.filterDuplicates = filterDuplicates
        self.duration = duration
        self.period = period
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeBool(enable, &writer)
        writer.u8(filterDuplicates.rawValue)
        writer.u16(duration)
        writer.u16(period)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        enable = try CommandCoding.bool(&reader, "Enable")
        filterDuplicates = try reader.enumeration(FilterDuplicates.self)
        duration = try reader.u16()
        period = try reader.u16()
    }
}

/// HCI_LE_Extended_Create_Connection [v1] (§7.8.66). Answered with Command Status, then LE
/// Enhanced Connection Complete (and Channel Selection Algorithm).
public struct LEExtendedCreateConnection: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0043)
    public static let name = "LE Extended Create Connection"
    public static let completion = HCICommandCompletion.commandStatus

    /// The scan and connection parameters for initiating on one PHY.
    public struct InitiatingPHY: Hashable, Sendable {
        public var phy: LEPHY
        /// In units of 0.625 ms (ignored for LE 2M, which is not scanned on).
        public var scanInterval: UInt16
        /// In units of 0.625 ms.
        public var scanWindow: UInt16
        /// In units of 1.25 ms.
        public var connectionIntervalMin: UInt16
        /// In units of 1.25 ms.
        public var connectionIntervalMax: UInt16
        /// In connection events.
        public var maxLatency: UInt16
        /// In units of 10 ms.
        public var supervisionTimeout: UInt16
        /// In units of 0.625 ms.
        public var minCELength: UInt16
        /// In units of 0.625 ms.
        public var maxCELength: UInt16

        public init(phy: LEPHY = .le1M, scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0060,
                    connectionIntervalMin: UInt16 = 0x0018, connectionIntervalMax: UInt16 = 0x0028,
                    maxLatency: UInt16 = 0, supervisionTimeout: UInt16 = 0x01F4,
                    minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
            self.phy = phy
            self.scanInterval = scanInterval
            self.scanWindow = scanWindow
            self.connectionIntervalMin = connectionIntervalMin
            self.connectionIntervalMax = connectionIntervalMax
            self.maxLatency = maxLatency
            self.supervisionTimeout = supervisionTimeout
            self.minCELength = minCELength
            self.maxCELength = maxCELength
        }
    }

    public var initiatorFilterPolicy: LEInitiatorFilterPolicy
    /// 0 public, 1 random, 2 RPA else public, 3 RPA else random.
    public var ownAddressType: LEAddressType
    /// 0 public, 1 random, 2 public identity, 3 random identity.
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    /// One entry per PHY; encoded as the Initiating_PHYs mask plus the entries in bit order
    /// (LE 1M, LE 2M, LE Coded). A repeated PHY is dropped when encoding.
    public var initiatingPHYs: [InitiatingPHY]

    public init(initiatorFilterPolicy: LEInitiatorFilterPolicy = .peerAddress,
                ownAddressType: LEAddressType = .publicDevice, peerAddressType: LEAddressType = .publicDevice,
                peerAddress: BluetoothAddress, initiatingPHYs: [InitiatingPHY] = [InitiatingPHY()]) {
        self.initiatorFilterPolicy = initiatorFilterPolicy
        self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.initiatingPHYs = initiatingPHYs
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(initiatorFilterPolicy.rawValue)
        writer.u8(ownAddressType.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        let (mask, entries) = CommandCoding.perPHYOrder(initiatingPHYs) { $0.phy }
        writer.u8(mask)
        for entry in entries {
            writer.u16(entry.scanInterval)
            writer.u16(entry.scanWindow)
            writer.u16(entry.connectionIntervalMin)
            writer.u16(entry.connectionIntervalMax)
            writer.u16(entry.maxLatency)
            writer.u16(entry.supervisionTimeout)
            writer.u16(entry.minCELength)
            writer.u16(entry.maxCELength)
        }
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        initiatorFilterPolicy = try reader.enumeration(LEInitiatorFilterPolicy.self)
        ownAddressType = try reader.enumeration(LEAddressType.self)
        peerAddressType = try reader.enumeration(LEAddressType.self)
        peerAddress = try reader.address()
        let phys = try CommandCoding.phyMask(&reader, allowed: Set(LEPHY.allCases), "Initiating_PHYs")
        initiatingPHYs = try phys.map { phy in
            InitiatingPHY(phy: phy, scanInterval: try reader.u16(), scanWindow: try reader.u16(),
                          connectionIntervalMin: try reader.u16(), connectionIntervalMax: try reader.u16(),
                          maxLatency: try reader.u16(), supervisionTimeout: try reader.u16(),
                          minCELength: try reader.u16(), maxCELength: try reader.u16())
        }
    }
}
