import ByteCoding

// LE Meta subevents a scanner or advertiser receives (Core spec Vol 4 Part E §7.7.65).
//
// Arrayed parameters (Event_Type[i], Address[i], …) are laid out report by report on the wire:
// all fields of report 0, then all fields of report 1 (Vol 4 Part E §5.2: arrayed parameters are
// interleaved unless the spec says otherwise; this is what controllers send).

/// Event_Type of a legacy advertising report: which PDU was received.
public enum LegacyAdvertisingEventType: UInt8, Sendable, Hashable {
    /// Connectable and scannable undirected (ADV_IND).
    case advInd = 0x00
    /// Connectable directed (ADV_DIRECT_IND).
    case advDirectInd = 0x01
    /// Scannable undirected (ADV_SCAN_IND).
    case advScanInd = 0x02
    /// Non-connectable undirected (ADV_NONCONN_IND).
    case advNonconnInd = 0x03
    /// Scan response (SCAN_RSP).
    case scanRsp = 0x04
}

/// HCI_LE_Advertising_Report (Vol 4 Part E §7.7.65.2): legacy advertising PDUs and scan responses.
public struct LEAdvertisingReport: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x02
    public static let name = "LE Advertising Report"

    public struct Report: Hashable, Sendable {
        public var eventType: LegacyAdvertisingEventType
        public var addressType: LEAddressType
        public var address: BluetoothAddress
        /// Advertising or scan response data (0–31 octets from a legacy PDU).
        public var data: [UInt8]
        /// dBm, -127…+20; 127 means not available.
        public var rssi: Int8

        public init(eventType: LegacyAdvertisingEventType, addressType: LEAddressType,
                    address: BluetoothAddress, data: [UInt8], rssi: Int8) {
            self.eventType = eventType
            self.addressType = addressType
            self.address = address
            self.data = data
            self.rssi = rssi
        }
    }

    /// Num_Reports is 1–25 in practice (one octet on the wire).
    public var reports: [Report]

    public init(reports: [Report]) {
        precondition(reports.count <= 255, "Num_Reports is one octet")
        self.reports = reports
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(UInt8(reports.count))
        for report in reports {
            precondition(report.data.count <= 255, "Data_Length is one octet")
            writer.u8(report.eventType.rawValue)
            writer.u8(report.addressType.rawValue)
            writer.address(report.address)
            writer.u8(UInt8(report.data.count))
            writer.bytes(report.data)
            writer.i8(report.rssi)
        }
    }

    /// Smallest report: Event_Type, Address_Type, Address, Data_Length, RSSI.
    private static let minimumReportSize = 10

    public init(decodingParameters reader: inout ByteReader) throws {
        let count = Int(try reader.u8())
        guard reader.remaining >= count * Self.minimumReportSize else {
            throw DecodeError("\(reader.context): \(count) reports cannot fit in \(reader.remaining) bytes")
        }
        var reports: [Report] = []
        reports.reserveCapacity(count)
        for _ in 0..<count {
            let eventType = try reader.eventEnum(LegacyAdvertisingEventType.self)
            let addressType = try reader.eventEnum(LEAddressType.self)
            let address = try reader.address()
            let data = try reader.bytes(Int(try reader.u8()))
            reports.append(Report(eventType: eventType, addressType: addressType, address: address,
                                  data: data, rssi: try reader.i8()))
        }
        self.reports = reports
        // Num_Reports defines the size.
        try reader.expectEnd()
    }
}

/// HCI_LE_Directed_Advertising_Report (Vol 4 Part E §7.7.65.11): ADV_DIRECT_IND PDUs addressed to
/// a resolvable private address the controller could not resolve (scan filter policy 0x02/0x03).
public struct LEDirectedAdvertisingReport: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x0B
    public static let name = "LE Directed Advertising Report"

    public struct Report: Hashable, Sendable {
        /// Always `.advDirectInd` from a conforming controller.
        public var eventType: LegacyAdvertisingEventType
        public var addressType: LEAddressType
        public var address: BluetoothAddress
        /// `.randomDevice`: the target address is a resolvable private address.
        public var directAddressType: LEAddressType
        public var directAddress: BluetoothAddress
        /// dBm, -127…+20; 127 means not available.
        public var rssi: Int8

        public init(eventType: LegacyAdvertisingEventType = .advDirectInd, addressType: LEAddressType,
                    address: BluetoothAddress, directAddressType: LEAddressType = .randomDevice,
                    directAddress: BluetoothAddress, rssi: Int8) {
            self.eventType = eventType
            self.addressType = addressType
            self.address = address
            self.directAddressType = directAddressType
            self.directAddress = directAddress
            self.rssi = rssi
        }
    }

    public var reports: [Report]

    public init(reports: [Report]) {
        precondition(reports.count <= 255, "Num_Reports is one octet")
        self.reports = reports
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(UInt8(reports.count))
        for report in reports {
            writer.u8(report.eventType.rawValue)
            writer.u8(report.addressType.rawValue)
            writer.address(report.address)
            writer.u8(report.directAddressType.rawValue)
            writer.address(report.directAddress)
            writer.i8(report.rssi)
        }
    }

    private static let reportSize = 16

    public init(decodingParameters reader: inout ByteReader) throws {
        let count = Int(try reader.u8())
        guard reader.remaining >= count * Self.reportSize else {
            throw DecodeError.truncated(reader.context, needed: count * Self.reportSize, available: reader.remaining)
        }
        var reports: [Report] = []
        reports.reserveCapacity(count)
        for _ in 0..<count {
            reports.append(Report(eventType: try reader.eventEnum(LegacyAdvertisingEventType.self),
                                  addressType: try reader.eventEnum(LEAddressType.self),
                                  address: try reader.address(),
                                  directAddressType: try reader.eventEnum(LEAddressType.self),
                                  directAddress: try reader.address(),
                                  rssi: try reader.i8()))
        }
        self.reports = reports
        try reader.expectEnd()
    }
}

/// Event_Type of an extended advertising report (a 16-bit field): what kind of advertising it came
/// from, plus the data status in bits 5–6.
public struct ExtendedAdvertisingEventType: OptionSet, Hashable, Sendable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let connectable = ExtendedAdvertisingEventType(rawValue: 1 << 0)
    public static let scannable = ExtendedAdvertisingEventType(rawValue: 1 << 1)
    public static let directed = ExtendedAdvertisingEventType(rawValue: 1 << 2)
    public static let scanResponse = ExtendedAdvertisingEventType(rawValue: 1 << 3)
    /// The report is for a legacy PDU (then the low bits follow Table 7.1x's legacy combinations).
    public static let legacy = ExtendedAdvertisingEventType(rawValue: 1 << 4)

    /// Whether this report holds all of the advertiser's data or more reports follow.
    public enum DataStatus: UInt8, Sendable, Hashable {
        case complete = 0b00
        /// More reports with the rest of the data follow.
        case incompleteMoreToCome = 0b01
        /// The controller could not receive the rest; no more reports follow.
        case incompleteTruncated = 0b10
        case reserved = 0b11
    }

    private static let dataStatusShift: UInt16 = 5
    private static let dataStatusMask: UInt16 = 0b11 << dataStatusShift

    /// Bits 5–6.
    public var dataStatus: DataStatus {
        get { DataStatus(rawValue: UInt8((rawValue & Self.dataStatusMask) >> Self.dataStatusShift))! }
        set { rawValue = rawValue & ~Self.dataStatusMask | UInt16(newValue.rawValue) << Self.dataStatusShift }
    }

    public init(_ options: ExtendedAdvertisingEventType, dataStatus: DataStatus) {
        self = options
        self.dataStatus = dataStatus
    }
}

/// HCI_LE_Extended_Advertising_Report (Vol 4 Part E §7.7.65.13): extended (and, when extended
/// scanning is used, legacy) advertising PDUs and scan responses.
public struct LEExtendedAdvertisingReport: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x0D
    public static let name = "LE Extended Advertising Report"

    public struct Report: Hashable, Sendable {
        public var eventType: ExtendedAdvertisingEventType
        /// nil: anonymous advertising, no address (Address_Type 0xFF).
        public var addressType: LEAddressType?
        public var address: BluetoothAddress
        /// 0x01 LE 1M, 0x03 LE Coded.
        public var primaryPHY: UInt8
        /// 0x00 none (no secondary channel packets), 0x01 LE 1M, 0x02 LE 2M, 0x03 LE Coded.
        public var secondaryPHY: UInt8
        /// 0x00–0x0F; 0xFF when the PDU carried no ADI.
        public var advertisingSID: UInt8
        /// dBm, -127…+20; 127 means not available.
        public var txPower: Int8
        /// dBm, -127…+20; 127 means not available.
        public var rssi: Int8
        /// Units of 1.25 ms; 0x0000 when there is no periodic advertising.
        public var periodicAdvertisingInterval: UInt16
        /// For directed reports: 0x00 public, 0x01 random (static or non-resolvable), 0x02 RPA
        /// resolved by the controller, 0x03 RPA the controller could not resolve.
        public var directAddressType: UInt8
        /// The target address of a directed PDU; meaningful only with `.directed`.
        public var directAddress: BluetoothAddress
        /// This report's fragment of the advertising data (see `eventType.dataStatus`).
        public var data: [UInt8]

        public init(eventType: ExtendedAdvertisingEventType, addressType: LEAddressType?,
                    address: BluetoothAddress, primaryPHY: UInt8 = 0x01, secondaryPHY: UInt8 = 0x00,
                    advertisingSID: UInt8 = 0xFF, txPower: Int8 = 127, rssi: Int8,
                    periodicAdvertisingInterval: UInt16 = 0, directAddressType: UInt8 = 0,
                    directAddress: BluetoothAddress = .zero, data: [UInt8]) {
            self.eventType = eventType
            self.addressType = addressType
            self.address = address
            self.primaryPHY = primaryPHY
            self.secondaryPHY = secondaryPHY
            self.advertisingSID = advertisingSID
            self.txPower = txPower
            self.rssi = rssi
            self.periodicAdvertisingInterval = periodicAdvertisingInterval
            self.directAddressType = directAddressType
            self.directAddress = directAddress
            self.data = data
        }
    }

    public var reports: [Report]

    public init(reports: [Report]) {
        precondition(reports.count <= 255, "Num_Reports is one octet")
        self.reports = reports
    }

    /// Address_Type value for anonymous advertising.
    private static let anonymousAddressType: UInt8 = 0xFF

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(UInt8(reports.count))
        for report in reports {
            precondition(report.data.count <= 255, "Data_Length is one octet")
            writer.u16(report.eventType.rawValue)
            writer.u8(report.addressType?.rawValue ?? Self.anonymousAddressType)
            writer.address(report.address)
            writer.u8(report.primaryPHY)
            writer.u8(report.secondaryPHY)
            writer.u8(report.advertisingSID)
            writer.i8(report.txPower)
            writer.i8(report.rssi)
            writer.u16(report.periodicAdvertisingInterval)
            writer.u8(report.directAddressType)
            writer.address(report.directAddress)
            writer.u8(UInt8(report.data.count))
            writer.bytes(report.data)
        }
    }

    /// A report without data: 2 + 1 + 6 + 1 + 1 + 1 + 1 + 1 + 2 + 1 + 6 + 1 octets.
    private static let minimumReportSize = 24

    public var encodedParametersSize: Int {
        reports.reduce(1) { $0 + Self.minimumReportSize + $1.data.count }
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        let count = Int(try reader.u8())
        guard reader.remaining >= count * Self.minimumReportSize else {
            throw DecodeError("\(reader.context): \(count) reports cannot fit in \(reader.remaining) bytes")
        }
        var reports: [Report] = []
        reports.reserveCapacity(count)
        for _ in 0..<count {
            let eventType = ExtendedAdvertisingEventType(rawValue: try reader.u16())
            let rawAddressType = try reader.u8()
            let addressType: LEAddressType?
            if rawAddressType == Self.anonymousAddressType {
                addressType = nil
            } else if let type = LEAddressType(rawValue: rawAddressType) {
                addressType = type
            } else {
                throw DecodeError("\(reader.context): invalid Address_Type 0x\(String(rawAddressType, radix: 16))")
            }
            let address = try reader.address()
            let primaryPHY = try reader.u8()
            let secondaryPHY = try reader.u8()
            let advertisingSID = try reader.u8()
            let txPower = try reader.i8()
            let rssi = try reader.i8()
            let periodicAdvertisingInterval = try reader.u16()
            let directAddressType = try reader.u8()
            let directAddress = try reader.address()
            let data = try reader.bytes(Int(try reader.u8()))
            reports.append(Report(
                eventType: eventType, addressType: addressType, address: address, primaryPHY: primaryPHY,
                secondaryPHY: secondaryPHY, advertisingSID: advertisingSID, txPower: txPower, rssi: rssi,
                periodicAdvertisingInterval: periodicAdvertisingInterval, directAddressType: directAddressType,
                directAddress: directAddress, data: data))
        }
        self.reports = reports
        try reader.expectEnd()
    }
}

/// HCI_LE_Scan_Timeout (Vol 4 Part E §7.7.65.17): extended scanning stopped because its Duration
/// elapsed. No parameters.
public struct LEScanTimeout: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x11
    public static let name = "LE Scan Timeout"
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
    public init(decodingParameters reader: inout ByteReader) throws {}
}

/// HCI_LE_Advertising_Set_Terminated (Vol 4 Part E §7.7.65.18): an advertising set stopped because
/// a connection was made, its duration elapsed or it reached its maximum number of events.
public struct LEAdvertisingSetTerminated: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x12
    public static let name = "LE Advertising Set Terminated"
    /// Success when a connection ended advertising; `.advertisingTimeout` or `.limitReached` otherwise.
    public var status: HCIStatus
    public var advertisingHandle: UInt8
    /// The new connection's handle; only meaningful when `status` is success.
    public var connectionHandle: ConnectionHandle
    /// Extended advertising events completed (if the host asked for a maximum number of events).
    public var numCompletedExtendedAdvertisingEvents: UInt8

    public init(status: HCIStatus = .success, advertisingHandle: UInt8, connectionHandle: ConnectionHandle,
                numCompletedExtendedAdvertisingEvents: UInt8) {
        self.status = status
        self.advertisingHandle = advertisingHandle
        self.connectionHandle = connectionHandle & 0x0FFF
        self.numCompletedExtendedAdvertisingEvents = numCompletedExtendedAdvertisingEvents
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.u8(advertisingHandle)
        writer.handle12(connectionHandle)
        writer.u8(numCompletedExtendedAdvertisingEvents)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        advertisingHandle = try reader.u8()
        connectionHandle = try reader.handle12()
        numCompletedExtendedAdvertisingEvents = try reader.u8()
    }
}
