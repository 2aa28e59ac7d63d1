import ByteCoding

// LE Controller commands (OGF 0x08, Vol 4 Part E §7.8): controller setup, legacy advertising,
// legacy scanning and connection creation.

/// HCI_LE_Set_Event_Mask (§7.8.1).
public struct LESetEventMask: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0001)
    public static let name = "LE Set Event Mask"

    /// The spec's default after reset: bits 0–4 (Connection Complete, Advertising Report,
    /// Connection Update Complete, Read Remote Features Complete, Long Term Key Request).
    public static let defaultMask: UInt64 = 0x0000_0000_0000_001F

    /// Bit n enables LE subevent n + 1 (bit 0 LE Connection Complete, bit 9 LE Enhanced
    /// Connection Complete, bit 12 LE Extended Advertising Report…).
    public var leEventMask: UInt64

    public init(leEventMask: UInt64 = LESetEventMask.defaultMask) { self.leEventMask = leEventMask }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u64(leEventMask) }
    public init(decodingParameters reader: inout ByteReader) throws { leEventMask = try reader.u64() }
}

/// HCI_LE_Read_Buffer_Size [v1] (§7.8.2).
public struct LEReadBufferSizeV1: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0002)
    public static let name = "LE Read Buffer Size"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Maximum ACL data length per packet; 0 means LE shares the Read Buffer Size buffers.
        public var leACLDataPacketLength: UInt16
        public var totalNumLEACLDataPackets: UInt8

        public init(status: HCIStatus = .success, leACLDataPacketLength: UInt16, totalNumLEACLDataPackets: UInt8) {
            self.status = status
            self.leACLDataPacketLength = leACLDataPacketLength
            self.totalNumLEACLDataPackets = totalNumLEACLDataPackets
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            leACLDataPacketLength = try reader.u16()
            totalNumLEACLDataPackets = try reader.u8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u16(leACLDataPacketLength)
            writer.u8(totalNumLEACLDataPackets)
        }
    }
}

/// HCI_LE_Read_Buffer_Size [v2] (§7.8.2): LE ACL and ISO buffers.
public struct LEReadBufferSizeV2: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0060)
    public static let name = "LE Read Buffer Size [v2]"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// 0 means LE shares the Read Buffer Size buffers.
        public var leACLDataPacketLength: UInt16
        public var totalNumLEACLDataPackets: UInt8
        public var isoDataPacketLength: UInt16
        public var totalNumISODataPackets: UInt8

        public init(status: HCIStatus = .success, leACLDataPacketLength: UInt16, totalNumLEACLDataPackets: UInt8,
                    isoDataPacketLength: UInt16 = 0, totalNumISODataPackets: UInt8 = 0) {
            self.status = status
            self.leACLDataPacketLength = leACLDataPacketLength
            self.totalNumLEACLDataPackets = totalNumLEACLDataPackets
            self.isoDataPacketLength = isoDataPacketLength
            self.totalNumISODataPackets = totalNumISODataPackets
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            leACLDataPacketLength = try reader.u16()
            totalNumLEACLDataPackets = try reader.u8()
            isoDataPacketLength = try reader.u16()
            totalNumISODataPackets = try reader.u8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u16(leACLDataPacketLength)
            writer.u8(totalNumLEACLDataPackets)
            writer.u16(isoDataPacketLength)
            writer.u8(totalNumISODataPackets)
        }
    }
}

/// HCI_LE_Read_Local_Supported_Features (§7.8.3).
public struct LEReadLocalSupportedFeatures: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0003)
    public static let name = "LE Read Local Supported Features"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// The raw 64-bit bitmap; bits the `LEFeatures` constants don't name are kept.
        public var leFeatures: UInt64

        public init(status: HCIStatus = .success, leFeatures: UInt64) {
            self.status = status
            self.leFeatures = leFeatures
        }

        public init(status: HCIStatus = .success, features: LEFeatures) {
            self.init(status: status, leFeatures: features.rawValue)
        }

        /// The bitmap as a typed set.
        public var features: LEFeatures { LEFeatures(rawValue: leFeatures) }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            leFeatures = try reader.u64()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u64(leFeatures)
        }
    }
}

/// HCI_LE_Set_Random_Address (§7.8.4).
public struct LESetRandomAddress: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0005)
    public static let name = "LE Set Random Address"

    public var randomAddress: BluetoothAddress

    public init(randomAddress: BluetoothAddress) { self.randomAddress = randomAddress }

    public func encodeParameters(into writer: inout ByteWriter) { writer.address(randomAddress) }
    public init(decodingParameters reader: inout ByteReader) throws { randomAddress = try reader.address() }
}

/// HCI_LE_Set_Advertising_Parameters (§7.8.5).
public struct LESetAdvertisingParameters: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0006)
    public static let name = "LE Set Advertising Parameters"

    /// Advertising_Type: the legacy PDU to send.
    public enum AdvertisingType: UInt8, Sendable, Hashable {
        /// ADV_IND: connectable and scannable undirected.
        case advInd = 0x00
        /// ADV_DIRECT_IND, high duty cycle (at most 1.28 s; intervals ignored).
        case advDirectIndHighDuty = 0x01
        /// ADV_SCAN_IND: scannable undirected.
        case advScanInd = 0x02
        /// ADV_NONCONN_IND: non-connectable undirected.
        case advNonconnInd = 0x03
        /// ADV_DIRECT_IND, low duty cycle.
        case advDirectIndLowDuty = 0x04
    }

    /// In units of 0.625 ms (0x0020–0x4000; default 0x0800 = 1.28 s).
    public var advertisingIntervalMin: UInt16
    /// In units of 0.625 ms.
    public var advertisingIntervalMax: UInt16
    public var advertisingType: AdvertisingType
    /// 0 public, 1 random, 2 RPA else public, 3 RPA else random.
    public var ownAddressType: LEAddressType
    /// For directed advertising (and RPA generation): public (0) or random (1) only.
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    /// Bit 0 channel 37, bit 1 channel 38, bit 2 channel 39.
    public var advertisingChannelMap: UInt8
    public var advertisingFilterPolicy: LEAdvertisingFilterPolicy

    public init(advertisingIntervalMin: UInt16 = 0x0800, advertisingIntervalMax: UInt16 = 0x0800,
                advertisingType: AdvertisingType = .advInd, ownAddressType: LEAddressType = .publicDevice,
                peerAddressType: LEAddressType = .publicDevice, peerAddress: BluetoothAddress = .zero,
                advertisingChannelMap: UInt8 = 0x07,
                advertisingFilterPolicy: LEAdvertisingFilterPolicy = .acceptAll) {
        self.advertisingIntervalMin = advertisingIntervalMin
        self.advertisingIntervalMax = advertisingIntervalMax
        self.advertisingType = advertisingType
        self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.advertisingChannelMap = advertisingChannelMap
        self.advertisingFilterPolicy = advertisingFilterPolicy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u16(advertisingIntervalMin)
        writer.u16(advertisingIntervalMax)
        writer.u8(advertisingType.rawValue)
        writer.u8(ownAddressType.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        writer.u8(advertisingChannelMap)
        writer.u8(advertisingFilterPolicy.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingIntervalMin = try reader.u16()
        advertisingIntervalMax = try reader.u16()
        advertisingType = try reader.enumeration(AdvertisingType.self)
        ownAddressType = try reader.enumeration(LEAddressType.self)
        peerAddressType = try CommandCoding.publicOrRandom(&reader, "Peer_Address_Type")
        peerAddress = try reader.address()
        advertisingChannelMap = try reader.u8()
        advertisingFilterPolicy = try reader.enumeration(LEAdvertisingFilterPolicy.self)
    }
}

/// HCI_LE_Set_Advertising_Data (§7.8.7).
public struct LESetAdvertisingData: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0008)
    public static let name = "LE Set Advertising Data"

    /// The significant part (at most 31 octets; more is cut when encoding). On the wire it is
    /// preceded by its length and zero padded to 31 octets.
    public var advertisingData: [UInt8]

    public init(advertisingData: [UInt8] = []) { self.advertisingData = advertisingData }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeLegacyData(advertisingData, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingData = try CommandCoding.legacyData(&reader)
    }
}

/// HCI_LE_Set_Scan_Response_Data (§7.8.8).
public struct LESetScanResponseData: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0009)
    public static let name = "LE Set Scan Response Data"

    /// The significant part (at most 31 octets; more is cut when encoding).
    public var scanResponseData: [UInt8]

    public init(scanResponseData: [UInt8] = []) { self.scanResponseData = scanResponseData }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeLegacyData(scanResponseData, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        scanResponseData = try CommandCoding.legacyData(&reader)
    }
}

/// HCI_LE_Set_Advertising_Enable (§7.8.9).
public struct LESetAdvertisingEnable: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000A)
    public static let name = "LE Set Advertising Enable"

    public var advertisingEnable: Bool

    public init(advertisingEnable: Bool) { self.advertisingEnable = advertisingEnable }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeBool(advertisingEnable, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        advertisingEnable = try CommandCoding.bool(&reader, "Advertising_Enable")
    }
}

/// HCI_LE_Set_Scan_Parameters (§7.8.10).
public struct LESetScanParameters: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000B)
    public static let name = "LE Set Scan Parameters"

    /// LE_Scan_Type.
    public enum ScanType: UInt8, Sendable, Hashable {
        /// Listen only.
        case passive = 0x00
        /// Send scan requests to scannable advertisers.
        case active = 0x01
    }

    public var leScanType: ScanType
    /// In units of 0.625 ms (0x0004–0x4000; default 0x0010 = 10 ms).
    public var leScanInterval: UInt16
    /// In units of 0.625 ms, at most the interval.
    public var leScanWindow: UInt16
    /// 0 public, 1 random, 2 RPA else public, 3 RPA else random.
    public var ownAddressType: LEAddressType
    public var scanningFilterPolicy: LEScanningFilterPolicy

    public init(leScanType: ScanType = .passive, leScanInterval: UInt16 = 0x0010, leScanWindow: UInt16 = 0x0010,
                ownAddressType: LEAddressType = .publicDevice,
                scanningFilterPolicy: LEScanningFilterPolicy = .basicUnfiltered) {
        self.leScanType = leScanType
        self.leScanInterval = leScanInterval
        self.leScanWindow = leScanWindow
        self.ownAddressType = ownAddressType
        self.scanningFilterPolicy = scanningFilterPolicy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(leScanType.rawValue)
        writer.u16(leScanInterval)
        writer.u16(leScanWindow)
        writer.u8(ownAddressType.rawValue)
        writer.u8(scanningFilterPolicy.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        leScanType = try reader.enumeration(ScanType.self)
        leScanInterval = try reader.u16()
        leScanWindow = try reader.u16()
        ownAddressType = try reader.enumeration(LEAddressType.self)
        scanningFilterPolicy = try reader.enumeration(LEScanningFilterPolicy.self)
    }
}

/// HCI_LE_Set_Scan_Enable (§7.8.11).
public struct LESetScanEnable: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000C)
    public static let name = "LE Set Scan Enable"

    public var leScanEnable: Bool
    /// Whether the controller drops duplicate advertising reports.
    public var filterDuplicates: Bool

    public init(leScanEnable: Bool, filterDuplicates: Bool = false) {
        self.leScanEnable = leScanEnable
        self.filterDuplicates = filterDuplicates
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeBool(leScanEnable, &writer)
        CommandCoding.writeBool(filterDuplicates, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        leScanEnable = try CommandCoding.bool(&reader, "LE_Scan_Enable")
        filterDuplicates = try CommandCoding.bool(&reader, "Filter_Duplicates")
    }
}

/// HCI_LE_Create_Connection (§7.8.12). Answered with Command Status, then LE (Enhanced)
/// Connection Complete.
public struct LECreateConnection: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000D)
    public static let name = "LE Create Connection"
    public static let completion = HCICommandCompletion.commandStatus

    /// In units of 0.625 ms.
    public var leScanInterval: UInt16
    /// In units of 0.625 ms, at most the interval.
    public var leScanWindow: UInt16
    public var initiatorFilterPolicy: LEInitiatorFilterPolicy
    /// 0 public, 1 random, 2 public identity, 3 random identity.
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    /// 0 public, 1 random, 2 RPA else public, 3 RPA else random.
    public var ownAddressType: LEAddressType
    /// In units of 1.25 ms (0x0006–0x0C80).
    public var connectionIntervalMin: UInt16
    /// In units of 1.25 ms.
    public var connectionIntervalMax: UInt16
    /// Peripheral latency, in connection events (0x0000–0x01F3).
    public var maxLatency: UInt16
    /// In units of 10 ms (0x000A–0x0C80).
    public var supervisionTimeout: UInt16
    /// Hint for the connection event length, in units of 0.625 ms.
    public var minCELength: UInt16
    /// In units of 0.625 ms.
    public var maxCELength: UInt16

    /// Defaults: scan 60 ms every 60 ms, 30–50 ms connection interval, no latency, 5 s
    /// supervision timeout.
    public init(leScanInterval: UInt16 = 0x0060, leScanWindow: UInt16 = 0x0060,
                initiatorFilterPolicy: LEInitiatorFilterPolicy = .peerAddress,
                peerAddressType: LEAddressType = .publicDevice, peerAddress: BluetoothAddress,
                ownAddressType: LEAddressType = .publicDevice,
                connectionIntervalMin: UInt16 = 0x0018, connectionIntervalMax: UInt16 = 0x0028,
                maxLatency: UInt16 = 0, supervisionTimeout: UInt16 = 0x01F4,
                minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.leScanInterval = leScanInterval
        self.leScanWindow = leScanWindow
        self.initiatorFilterPolicy = initiatorFilterPolicy
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.ownAddressType = ownAddressType
        self.connectionIntervalMin = connectionIntervalMin
        self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u16(leScanInterval)
        writer.u16(leScanWindow)
        writer.u8(initiatorFilterPolicy.rawValue)
        writer.u8(peerAddressType.rawValue)
        writer.address(peerAddress)
        writer.u8(ownAddressType.rawValue)
        writer.u16(connectionIntervalMin)
        writer.u16(connectionIntervalMax)
        writer.u16(maxLatency)
        writer.u16(supervisionTimeout)
        writer.u16(minCELength)
        writer.u16(maxCELength)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        leScanInterval = try reader.u16()
        leScanWindow = try reader.u16()
        initiatorFilterPolicy = try reader.enumeration(LEInitiatorFilterPolicy.self)
        peerAddressType = try reader.enumeration(LEAddressType.self)
        peerAddress = try reader.address()
        ownAddressType = try reader.enumeration(LEAddressType.self)
        connectionIntervalMin = try reader.u16()
        connectionIntervalMax = try reader.u16()
        maxLatency = try reader.u16()
        supervisionTimeout = try reader.u16()
        minCELength = try reader.u16()
        maxCELength = try reader.u16()
    }
}

/// HCI_LE_Create_Connection_Cancel (§7.8.13).
public struct LECreateConnectionCancel: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000E)
    public static let name = "LE Create Connection Cancel"
    public init() {}
}
