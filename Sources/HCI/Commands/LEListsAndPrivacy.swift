import ByteCoding

// LE Controller commands (Vol 4 Part E §7.8) for the Filter Accept List, the resolving list
// and address resolution, plus LE Read Supported States.

/// The Address_Type of Filter Accept List entries.
public enum LEFilterAcceptListAddressType: UInt8, Sendable, Hashable {
    case publicDevice = 0x00
    case randomDevice = 0x01
    /// The entry stands for all advertisements that carry no address.
    case anonymous = 0xFF
}

/// HCI_LE_Read_Filter_Accept_List_Size (§7.8.14).
public struct LEReadFilterAcceptListSize: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x000F)
    public static let name = "LE Read Filter Accept List Size"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        public var filterAcceptListSize: UInt8

        public init(status: HCIStatus = .success, filterAcceptListSize: UInt8) {
            self.status = status
            self.filterAcceptListSize = filterAcceptListSize
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            filterAcceptListSize = try reader.u8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u8(filterAcceptListSize)
        }
    }
}

/// HCI_LE_Clear_Filter_Accept_List (§7.8.15).
public struct LEClearFilterAcceptList: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0010)
    public static let name = "LE Clear Filter Accept List"
    public init() {}
}

/// HCI_LE_Add_Device_To_Filter_Accept_List (§7.8.16).
public struct LEAddDeviceToFilterAcceptList: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0011)
    public static let name = "LE Add Device To Filter Accept List"

    public var addressType: LEFilterAcceptListAddressType
    /// Ignored for `.anonymous`.
    public var address: BluetoothAddress

    public init(addressType: LEFilterAcceptListAddressType, address: BluetoothAddress) {
        self.addressType = addressType
        self.address = address
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(addressType.rawValue)
        writer.address(address)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        addressType = try reader.enumeration(LEFilterAcceptListAddressType.self)
        address = try reader.address()
    }
}

/// HCI_LE_Remove_Device_From_Filter_Accept_List (§7.8.17).
public struct LERemoveDeviceFromFilterAcceptList: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0012)
    public static let name = "LE Remove Device From Filter Accept List"

    public var addressType: LEFilterAcceptListAddressType
    public var address: BluetoothAddress

    public init(addressType: LEFilterAcceptListAddressType, address: BluetoothAddress) {
        self.addressType = addressType
        self.address = address
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(addressType.rawValue)
        writer.address(address)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        addressType = try reader.enumeration(LEFilterAcceptListAddressType.self)
        address = try reader.address()
    }
}

/// HCI_LE_Read_Supported_States (§7.8.27).
public struct LEReadSupportedStates: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x001C)
    public static let name = "LE Read Supported States"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Bit n set: the state or state combination at bit n of the spec's table is supported.
        public var leStates: UInt64

        public init(status: HCIStatus = .success, leStates: UInt64) {
            self.status = status
            self.leStates = leStates
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            leStates = try reader.u64()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u64(leStates)
        }
    }
}

/// HCI_LE_Add_Device_To_Resolving_List (§7.8.38).
public struct LEAddDeviceToResolvingList: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0027)
    public static let name = "LE Add Device To Resolving List"

    /// Public (0) or random static (1) identity address.
    public var peerIdentityAddressType: LEAddressType
    public var peerIdentityAddress: BluetoothAddress
    /// The peer's IRK, 16 octets in wire order (all zero: the peer uses its identity address).
    public var peerIRK: [UInt8]
    /// Our IRK for this peer, 16 octets in wire order.
    public var localIRK: [UInt8]

    public init(peerIdentityAddressType: LEAddressType, peerIdentityAddress: BluetoothAddress,
                peerIRK: [UInt8], localIRK: [UInt8]) {
        self.peerIdentityAddressType = peerIdentityAddressType
        self.peerIdentityAddress = peerIdentityAddress
        self.peerIRK = peerIRK
        self.localIRK = localIRK
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(peerIdentityAddressType.rawValue)
        writer.address(peerIdentityAddress)
        CommandCoding.writeBlock16(peerIRK, &writer)
        CommandCoding.writeBlock16(localIRK, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        peerIdentityAddressType = try CommandCoding.publicOrRandom(&reader, "Peer_Identity_Address_Type")
        peerIdentityAddress = try reader.address()
        peerIRK = try CommandCoding.block16(&reader)
        localIRK = try CommandCoding.block16(&reader)
    }
}

/// HCI_LE_Remove_Device_From_Resolving_List (§7.8.39).
public struct LERemoveDeviceFromResolvingList: PeerIdentityCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0028)
    public static let name = "LE Remove Device From Resolving List"

    /// Public (0) or random static (1) identity address.
    public var peerIdentityAddressType: LEAddressType
    public var peerIdentityAddress: BluetoothAddress

    public init(peerIdentityAddressType: LEAddressType, peerIdentityAddress: BluetoothAddress) {
        self.peerIdentityAddressType = peerIdentityAddressType
        self.peerIdentityAddress = peerIdentityAddress
    }
}

/// HCI_LE_Clear_Resolving_List (§7.8.40).
public struct LEClearResolvingList: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x0029)
    public static let name = "LE Clear Resolving List"
    public init() {}
}

/// HCI_LE_Read_Resolving_List_Size (§7.8.41).
public struct LEReadResolvingListSize: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x002A)
    public static let name = "LE Read Resolving List Size"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        public var resolvingListSize: UInt8

        public init(status: HCIStatus = .success, resolvingListSize: UInt8) {
            self.status = status
            self.resolvingListSize = resolvingListSize
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            resolvingListSize = try reader.u8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.u8(resolvingListSize)
        }
    }
}

/// HCI_LE_Read_Peer_Resolvable_Address (§7.8.42): the resolvable private address the
/// controller last used for (or saw from) a peer in its resolving list.
public struct LEReadPeerResolvableAddress: PeerIdentityCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x002B)
    public static let name = "LE Read Peer Resolvable Address"

    /// Public (0) or random static (1) identity address.
    public var peerIdentityAddressType: LEAddressType
    public var peerIdentityAddress: BluetoothAddress

    public init(peerIdentityAddressType: LEAddressType, peerIdentityAddress: BluetoothAddress) {
        self.peerIdentityAddressType = peerIdentityAddressType
        self.peerIdentityAddress = peerIdentityAddress
    }

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Unknown Connection Identifier when the peer is not in the list or has no such address.
        public var peerResolvableAddress: BluetoothAddress

        public init(status: HCIStatus = .success, peerResolvableAddress: BluetoothAddress) {
            self.status = status
            self.peerResolvableAddress = peerResolvableAddress
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            peerResolvableAddress = try reader.address()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.address(peerResolvableAddress)
        }
    }
}

/// HCI_LE_Read_Local_Resolvable_Address (§7.8.43): the resolvable private address the
/// controller currently uses towards a peer in its resolving list.
public struct LEReadLocalResolvableAddress: PeerIdentityCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x002C)
    public static let name = "LE Read Local Resolvable Address"

    /// Public (0) or random static (1) identity address.
    public var peerIdentityAddressType: LEAddressType
    public var peerIdentityAddress: BluetoothAddress

    public init(peerIdentityAddressType: LEAddressType, peerIdentityAddress: BluetoothAddress) {
        self.peerIdentityAddressType = peerIdentityAddressType
        self.peerIdentityAddress = peerIdentityAddress
    }

    public struct ReturnParameters: HCIReturnParameters, Hashable {
        public var status: HCIStatus
        /// Unknown Connection Identifier when the peer is not in the list or has no such address.
        public var localResolvableAddress: BluetoothAddress

        public init(status: HCIStatus = .success, localResolvableAddress: BluetoothAddress) {
            self.status = status
            self.localResolvableAddress = localResolvableAddress
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            localResolvableAddress = try reader.address()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            writer.address(localResolvableAddress)
        }
    }
}

/// HCI_LE_Set_Address_Resolution_Enable (§7.8.44).
public struct LESetAddressResolutionEnable: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x002D)
    public static let name = "LE Set Address Resolution Enable"

    public var addressResolutionEnable: Bool

    public init(addressResolutionEnable: Bool) { self.addressResolutionEnable = addressResolutionEnable }

    public func encodeParameters(into writer: inout ByteWriter) {
        CommandCoding.writeBool(addressResolutionEnable, &writer)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        addressResolutionEnable = try CommandCoding.bool(&reader, "Address_Resolution_Enable")
    }
}

/// HCI_LE_Set_Resolvable_Private_Address_Timeout (§7.8.45).
public struct LESetResolvablePrivateAddressTimeout: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x002E)
    public static let name = "LE Set Resolvable Private Address Timeout"

    /// Seconds (0x0001–0x0E10; default 0x0384 = 15 minutes).
    public var rpaTimeout: UInt16

    public init(rpaTimeout: UInt16 = 0x0384) { self.rpaTimeout = rpaTimeout }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u16(rpaTimeout) }
    public init(decodingParameters reader: inout ByteReader) throws { rpaTimeout = try reader.u16() }
}

/// HCI_LE_Set_Privacy_Mode (§7.8.77): whether a peer in the resolving list may still be
/// heard under its identity address.
public struct LESetPrivacyMode: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.leController, ocf: 0x004E)
    public static let name = "LE Set Privacy Mode"

    public enum PrivacyMode: UInt8, Sendable, Hashable {
        /// The default: a peer with an IRK is accepted only under a resolvable private address.
        case network = 0x00
        /// The peer is also accepted under its identity address.
        case device = 0x01
    }

    /// Public (0) or random static (1) identity address.
    public var peerIdentityAddressType: LEAddressType
    public var peerIdentityAddress: BluetoothAddress
    public var privacyMode: PrivacyMode

    public init(peerIdentityAddressType: LEAddressType, peerIdentityAddress: BluetoothAddress, privacyMode: PrivacyMode) {
        self.peerIdentityAddressType = peerIdentityAddressType
        self.peerIdentityAddress = peerIdentityAddress
        self.privacyMode = privacyMode
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(peerIdentityAddressType.rawValue)
        writer.address(peerIdentityAddress)
        writer.u8(privacyMode.rawValue)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        peerIdentityAddressType = try CommandCoding.publicOrRandom(&reader, "Peer_Identity_Address_Type")
        peerIdentityAddress = try reader.address()
        privacyMode = try reader.enumeration(PrivacyMode.self)
    }
}

/// A command whose parameters are one peer identity address (type, then address): the
/// resolving list's removal and its two address reads share this coding.
public protocol PeerIdentityCommand: HCICommand {
    /// Public (0) or random static (1) identity address.
    var peerIdentityAddressType: LEAddressType { get }
    var peerIdentityAddress: BluetoothAddress { get }
    init(peerIdentityAddressType: LEAddressType, peerIdentityAddress: BluetoothAddress)
}

extension PeerIdentityCommand {
    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(peerIdentityAddressType.rawValue)
        writer.address(peerIdentityAddress)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        let type = try CommandCoding.publicOrRandom(&reader, "Peer_Identity_Address_Type")
        self.init(peerIdentityAddressType: type, peerIdentityAddress: try reader.address())
    }
}
