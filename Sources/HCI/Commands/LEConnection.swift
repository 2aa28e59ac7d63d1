import ByteCoding

// LE Controller commands (Vol 4 Part E §7.8) that act on an established connection:
// parameters, remote features, data length and PHY.

/// HCI_LE_Connection_Update (§7.8.18). Answered with Command Status, then LE Connection Update
/// Complete.
public struct LEConnectionUpdate: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0013)
    public static let name = "LE Connection Update"
    public static let completion = HCICommandCompletion.commandStatus

    public var connectionHandle: ConnectionHandle
    /// In units of 1.25 ms (0x0006–0x0C80).
    public var connectionIntervalMin: UInt16
    /// In units of 1.25 ms.
    public var connectionIntervalMax: UInt16
    /// Peripheral latency, in connection events.
    public var maxLatency: UInt16
    /// In units of 10 ms.
    public var supervisionTimeout: UInt16
    /// In units of 0.625 ms.
    public var minCELength: UInt16
    /// In units of 0.625 ms.
    public var maxCELength: UInt16

    public init(connectionHandle: ConnectionHandle, connectionIntervalMin: UInt16, connectionIntervalMax: UInt16,
                maxLatency: UInt16 = 0, supervisionTimeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.connectionHandle = connectionHandle
        self.connectionIntervalMin = connectionIntervalMin
        self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u16(connectionIntervalMin)
        writer.u16(connectionIntervalMax)
        writer.u16(maxLatency)
        writer.u16(supervisionTimeout)
        writer.u16(minCELength)
        writer.u16(maxCELength)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        connectionIntervalMin = try reader.u16()
        connectionIntervalMax = try reader.u16()
        maxLatency = try reader.u16()
        supervisionTimeout = try reader.u16()
        minCELength = try reader.u16()
        maxCELength = try reader.u16()
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request_Reply (§7.8.31): accepts the peer's request,
/// possibly with other values.
public struct LERemoteConnectionParameterRequestReply: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0020)
    public static let name = "LE Remote Connection Parameter Request Reply"
    public typealias ReturnParameters = ConnectionHandleReturn

    public var connectionHandle: ConnectionHandle
    /// In units of 1.25 ms.
    public var intervalMin: UInt16
    /// In units of 1.25 ms.
    public var intervalMax: UInt16
    /// In connection events.
    public var maxLatency: UInt16
    /// Supervision timeout, in units of 10 ms.
    public var timeout: UInt16
    /// In units of 0.625 ms.
    public var minCELength: UInt16
    /// In units of 0.625 ms.
    public var maxCELength: UInt16

    public init(connectionHandle: ConnectionHandle, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16,
                timeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.connectionHandle = connectionHandle
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.timeout = timeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u16(intervalMin)
        writer.u16(intervalMax)
        writer.u16(maxLatency)
        writer.u16(timeout)
        writer.u16(minCELength)
        writer.u16(maxCELength)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        intervalMin = try reader.u16()
        intervalMax = try reader.u16()
        maxLatency = try reader.u16()
        timeout = try reader.u16()
        minCELength = try reader.u16()
        maxCELength = try reader.u16()
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request_Negative_Reply (§7.8.32).
public struct LERemoteConnectionParameterRequestNegativeReply: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0021)
    public static let name = "LE Remote Connection Parameter Request Negative Reply"
    public typealias ReturnParameters = ConnectionHandleReturn

    public var connectionHandle: ConnectionHandle
    /// Sent to the peer, typically Unacceptable Connection Parameters.
    public var reason: HCIStatus

    public init(connectionHandle: ConnectionHandle, reason: HCIStatus = .unacceptableConnectionParameters) {
        self.connectionHandle = connectionHandle
        self.reason = reason
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u8(reason.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        reason = HCIStatus(try reader.u8())
    }
}

/// HCI_LE_Read_Remote_Features (§7.8.21). Answered with Command Status, then LE Read Remote
/// Features Complete.
public struct LEReadRemoteFeatures: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0016)
    public static let name = "LE Read Remote Features"
    public static let completion = HCICommandCompletion.commandStatus

    public var connectionHandle: ConnectionHandle

    public init(connectionHandle: ConnectionHandle) { self.connectionHandle = connectionHandle }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
    }
}

/// HCI_LE_Set_Data_Length (§7.8.33): the largest PDU the controller should send on a link.
public struct LESetDataLength: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0022)
    public static let name = "LE Set Data Length"
    public typealias ReturnParameters = ConnectionHandleReturn

    public var connectionHandle: ConnectionHandle
    /// Payload octets (0x001B–0x00FB).
    public var txOctets: UInt16
    /// Microseconds (0x0148–0x4290).
    public var txTime: UInt16

    public init(connectionHandle: ConnectionHandle, txOctets: UInt16 = 251, txTime: UInt16 = 2120) {
        self.connectionHandle = connectionHandle
        self.txOctets = txOctets
        self.txTime = txTime
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u16(txOctets)
        writer.u16(txTime)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        txOctets = try reader.u16()
        txTime = try reader.u16()
    }
}

/// HCI_LE_Read_Suggested_Default_Data_Length (§7.8.34).
public struct LEReadSuggestedDefaultDataLength: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0023)
    public static let name = "LE Read Suggested Default Data Length"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Payload octets for new connections.
        public var suggestedMaxTXOctets: UInt16
        /// Microseconds.
        public var suggestedMaxTXTime: UInt16

        public init(status: HCIStatus = .success, suggestedMaxTXOctets: UInt16, suggestedMaxTXTime: UInt16) {
            self.status = status
            self.suggestedMaxTXOctets = suggestedMaxTXOctets
            self.suggestedMaxTXTime = suggestedMaxTXTime
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            suggestedMaxTXOctets = try reader.u16()
            suggestedMaxTXTime = try reader.u16()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u16(suggestedMaxTXOctets)
            writer.u16(suggestedMaxTXTime)
        }
    }
}

/// HCI_LE_Write_Suggested_Default_Data_Length (§7.8.35).
public struct LEWriteSuggestedDefaultDataLength: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0024)
    public static let name = "LE Write Suggested Default Data Length"

    /// Payload octets (0x001B–0x00FB).
    public var suggestedMaxTXOctets: UInt16
    /// Microseconds (0x0148–0x4290).
    public var suggestedMaxTXTime: UInt16

    public init(suggestedMaxTXOctets: UInt16 = 251, suggestedMaxTXTime: UInt16 = 2120) {
        self.suggestedMaxTXOctets = suggestedMaxTXOctets
        self.suggestedMaxTXTime = suggestedMaxTXTime
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u16(suggestedMaxTXOctets)
        writer.u16(suggestedMaxTXTime)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        suggestedMaxTXOctets = try reader.u16()
        suggestedMaxTXTime = try reader.u16()
    }
}

/// HCI_LE_Read_Maximum_Data_Length (§7.8.46).
public struct LEReadMaximumDataLength: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x002F)
    public static let name = "LE Read Maximum Data Length"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Octets.
        public var supportedMaxTXOctets: UInt16
        /// Microseconds.
        public var supportedMaxTXTime: UInt16
        /// Octets.
        public var supportedMaxRXOctets: UInt16
        /// Microseconds.
        public var supportedMaxRXTime: UInt16

        public init(status: HCIStatus = .success, supportedMaxTXOctets: UInt16, supportedMaxTXTime: UInt16,
                    supportedMaxRXOctets: UInt16, supportedMaxRXTime: UInt16) {
            self.status = status
            self.supportedMaxTXOctets = supportedMaxTXOctets
            self.supportedMaxTXTime = supportedMaxTXTime
            self.supportedMaxRXOctets = supportedMaxRXOctets
            self.supportedMaxRXTime = supportedMaxRXTime
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            supportedMaxTXOctets = try reader.u16()
            supportedMaxTXTime = try reader.u16()
            supportedMaxRXOctets = try reader.u16()
            supportedMaxRXTime = try reader.u16()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u16(supportedMaxTXOctets)
            writer.u16(supportedMaxTXTime)
            writer.u16(supportedMaxRXOctets)
            writer.u16(supportedMaxRXTime)
        }
    }
}

/// HCI_LE_Read_PHY (§7.8.47).
public struct LEReadPHY: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0030)
    public static let name = "LE Read PHY"

    public var connectionHandle: ConnectionHandle

    public init(connectionHandle: ConnectionHandle) { self.connectionHandle = connectionHandle }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
    }

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        public var connectionHandle: ConnectionHandle
        public var txPHY: LEPHY
        public var rxPHY: LEPHY

        public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, txPHY: LEPHY, rxPHY: LEPHY) {
            self.status = status
            self.connectionHandle = connectionHandle
            self.txPHY = txPHY
            self.rxPHY = rxPHY
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            connectionHandle = try CommandCoding.handle(&reader)
            txPHY = try reader.enumeration(LEPHY.self)
            rxPHY = try reader.enumeration(LEPHY.self)
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            CommandCoding.writeHandle(connectionHandle, &writer)
            writer.u8(txPHY.rawValue)
            writer.u8(rxPHY.rawValue)
        }
    }
}

/// HCI_LE_Set_Default_PHY (§7.8.48): preferred PHYs for new connections.
public struct LESetDefaultPHY: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0031)
    public static let name = "LE Set Default PHY"

    /// Bit 0: no transmitter preference (TX_PHYs ignored); bit 1: no receiver preference.
    public var allPHYs: UInt8
    /// PHY mask (`LEPHY.maskBit`): bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded.
    public var txPHYs: UInt8
    /// PHY mask, as `txPHYs`.
    public var rxPHYs: UInt8

    public init(allPHYs: UInt8 = 0, txPHYs: UInt8 = 0x01, rxPHYs: UInt8 = 0x01) {
        self.allPHYs = allPHYs
        self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(allPHYs)
        writer.u8(txPHYs)
        writer.u8(rxPHYs)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        allPHYs = try reader.u8()
        txPHYs = try reader.u8()
        rxPHYs = try reader.u8()
    }
}

/// HCI_LE_Set_PHY (§7.8.49). Answered with Command Status, then LE PHY Update Complete.
public struct LESetPHY: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0032)
    public static let name = "LE Set PHY"
    public static let completion = HCICommandCompletion.commandStatus

    public var connectionHandle: ConnectionHandle
    /// Bit 0: no transmitter preference; bit 1: no receiver preference.
    public var allPHYs: UInt8
    /// PHY mask: bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded.
    public var txPHYs: UInt8
    /// PHY mask, as `txPHYs`.
    public var rxPHYs: UInt8
    /// Coding preference on LE Coded: 0 none, 1 S=2, 2 S=8.
    public var phyOptions: UInt16

    public init(connectionHandle: ConnectionHandle, allPHYs: UInt8 = 0, txPHYs: UInt8, rxPHYs: UInt8,
                phyOptions: UInt16 = 0) {
        self.connectionHandle = connectionHandle
        self.allPHYs = allPHYs
        self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs
        self.phyOptions = phyOptions
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeHandle(connectionHandle, &writer)
        writer.u8(allPHYs)
        writer.u8(txPHYs)
        writer.u8(rxPHYs)
        writer.u16(phyOptions)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try CommandCoding.handle(&reader)
        allPHYs = try reader.u8()
        txPHYs = try reader.u8()
        rxPHYs = try reader.u8()
        phyOptions = try reader.u16()
    }
}
