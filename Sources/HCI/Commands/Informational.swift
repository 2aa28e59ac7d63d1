import ByteCoding

/// HCI_Read_Local_Version_Information (Vol 4 Part E §7.4.1).
public struct ReadLocalVersionInformation: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0001)
    public static let name = "Read Local Version Information"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Core specification version (Assigned Numbers), e.g. 0x0D for 5.4.
        public var hciVersion: UInt8
        public var hciSubversion: UInt16
        public var lmpVersion: UInt8
        /// The manufacturer's company identifier (Assigned Numbers).
        public var companyIdentifier: UInt16
        public var lmpSubversion: UInt16

        public init(status: HCIStatus = .success, hciVersion: UInt8, hciSubversion: UInt16,
                    lmpVersion: UInt8, companyIdentifier: UInt16, lmpSubversion: UInt16) {
            self.status = status
            self.hciVersion = hciVersion
            self.hciSubversion = hciSubversion
            self.lmpVersion = lmpVersion
            self.companyIdentifier = companyIdentifier
            self.lmpSubversion = lmpSubversion
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            hciVersion = try reader.u8()
            hciSubversion = try reader.u16()
            lmpVersion = try reader.u8()
            companyIdentifier = try reader.u16()
            lmpSubversion = try reader.u16()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u8(hciVersion)
            writer.u16(hciSubversion)
            writer.u8(lmpVersion)
            writer.u16(companyIdentifier)
            writer.u16(lmpSubversion)
        }
    }
}

/// HCI_Read_Local_Supported_Commands (Vol 4 Part E §7.4.2).
public struct ReadLocalSupportedCommands: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0002)
    public static let name = "Read Local Supported Commands"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// The 64-octet bitmap of Vol 4 Part E §6.27: octet n, bit m set = command supported.
        public var supportedCommands: [UInt8]

        /// `supportedCommands` is cut or zero padded to 64 octets.
        public init(status: HCIStatus = .success, supportedCommands: [UInt8] = []) {
            self.status = status
            self.supportedCommands = Array(supportedCommands.prefix(64))
                + Array(repeating: 0, count: max(0, 64 - supportedCommands.count))
        }

        /// Whether the bitmap marks the command at `octet`, `bit` (as §6.27 lists them, e.g.
        /// octet 0 bit 5 Disconnect, octet 25 bit 0 LE Set Event Mask) supported.
        public func supports(octet: Int, bit: Int) -> Bool {
            guard supportedCommands.indices.contains(octet), (0..<8).contains(bit) else { return false }
            return supportedCommands[octet] & (1 << UInt8(bit)) != 0
        }

        /// Sets or clears one bit (for building a controller's answer).
        public mutating func setSupported(octet: Int, bit: Int, _ supported: Bool = true) {
            guard supportedCommands.indices.contains(octet), (0..<8).contains(bit) else { return }
            if supported {
                supportedCommands[octet] |= 1 << UInt8(bit)
            } else {
                supportedCommands[octet] &= ~(1 << UInt8(bit))
            }
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            supportedCommands = try reader.bytes(64)
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.padded(supportedCommands.prefix(64), to: 64)
        }
    }
}

/// HCI_Read_Local_Supported_Features (Vol 4 Part E §7.4.3): page 0 of the LMP features.
public struct ReadLocalSupportedFeatures: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0003)
    public static let name = "Read Local Supported Features"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// The LMP feature bitmap (Vol 2 Part C §3.3); e.g. bit 38 "LE Supported (Controller)",
        /// bit 37 "BR/EDR Not Supported".
        public var lmpFeatures: UInt64

        public init(status: HCIStatus = .success, lmpFeatures: UInt64) {
            self.status = status
            self.lmpFeatures = lmpFeatures
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            lmpFeatures = try reader.u64()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u64(lmpFeatures)
        }
    }
}

/// HCI_Read_Buffer_Size (Vol 4 Part E §7.4.5): the shared BR/EDR + LE ACL buffers, used by the
/// host when LE Read Buffer Size reports no dedicated LE buffers.
public struct ReadBufferSize: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0005)
    public static let name = "Read Buffer Size"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        public var aclDataPacketLength: UInt16
        public var synchronousDataPacketLength: UInt8
        public var totalNumACLDataPackets: UInt16
        public var totalNumSynchronousDataPackets: UInt16

        public init(status: HCIStatus = .success, aclDataPacketLength: UInt16,
                    synchronousDataPacketLength: UInt8 = 0, totalNumACLDataPackets: UInt16,
                    totalNumSynchronousDataPackets: UInt16 = 0) {
            self.status = status
            self.aclDataPacketLength = aclDataPacketLength
            self.synchronousDataPacketLength = synchronousDataPacketLength
            self.totalNumACLDataPackets = totalNumACLDataPackets
            self.totalNumSynchronousDataPackets = totalNumSynchronousDataPackets
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            aclDataPacketLength = try reader.u16()
            synchronousDataPacketLength = try reader.u8()
            totalNumACLDataPackets = try reader.u16()
            totalNumSynchronousDataPackets = try reader.u16()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u16(aclDataPacketLength)
            writer.u8(synchronousDataPacketLength)
            writer.u16(totalNumACLDataPackets)
            writer.u16(totalNumSynchronousDataPackets)
        }
    }
}

/// HCI_Read_BD_ADDR (Vol 4 Part E §7.4.6): the controller's public address.
public struct ReadBDADDR: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0009)
    public static let name = "Read BD_ADDR"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// The public device address (all zero on a controller that has none).
        public var bdAddr: BluetoothAddress

        public init(status: HCIStatus = .success, bdAddr: BluetoothAddress) {
            self.status = status
            self.bdAddr = bdAddr
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            bdAddr = try reader.address()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.address(bdAddr)
        }
    }
}
