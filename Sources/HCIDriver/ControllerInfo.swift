import HCI

/// The Supported_Commands bitmap of Read Local Supported Commands (Vol 4 Part E §6.27):
/// octet n, bit m set means the command is supported.
public struct SupportedCommands: Hashable, Sendable {
    /// A command's place in the bitmap, from the table in `HCI`.
    public typealias Position = SupportedCommandsTable.Position

    /// 64 octets.
    public var bytes: [UInt8]

    /// `bytes` is cut or zero padded to 64 octets.
    public init(_ bytes: [UInt8] = []) {
        self.bytes = Array(bytes.prefix(64)) + Array(repeating: 0, count: max(0, 64 - bytes.count))
    }

    /// Whether the bitmap marks `command` as supported.
    public func supports<C: HCICommand>(_ command: C.Type) -> Bool {
        SupportedCommandsTable.isSupported(C.opcode, in: bytes)
    }

    public func supports(_ position: Position) -> Bool {
        supports(octet: position.octet, bit: position.bit)
    }

    public func supports(octet: Int, bit: Int) -> Bool {
        guard bytes.indices.contains(octet), (0..<8).contains(bit) else { return false }
        return bytes[octet] & 1 << UInt8(bit) != 0
    }

    /// Sets one bit (for building a controller's answer in tests and virtual controllers).
    public mutating func insert(_ position: Position) {
        guard bytes.indices.contains(position.octet), (0..<8).contains(position.bit) else { return }
        bytes[position.octet] |= 1 << UInt8(position.bit)
    }
}

extension SupportedCommandsTable.Position {
    static func of<C: HCICommand>(_: C.Type) -> Self {
        guard let position = SupportedCommandsTable.positions[C.opcode.rawValue] else {
            preconditionFailure("\(C.name) has no Supported_Commands position")
        }
        return position
    }

    public static let setEventMaskPage2 = of(SetEventMaskPage2.self)
    public static let leReadMaximumDataLength = of(LEReadMaximumDataLength.self)
    public static let leSetExtendedAdvertisingParameters = of(LESetExtendedAdvertisingParameters.self)
    public static let leSetExtendedAdvertisingData = of(LESetExtendedAdvertisingData.self)
    public static let leSetExtendedScanResponseData = of(LESetExtendedScanResponseData.self)
    public static let leSetExtendedAdvertisingEnable = of(LESetExtendedAdvertisingEnable.self)
    public static let leSetExtendedScanParameters = of(LESetExtendedScanParameters.self)
    public static let leSetExtendedScanEnable = of(LESetExtendedScanEnable.self)
    public static let leExtendedCreateConnection = of(LEExtendedCreateConnection.self)
    public static let leReadBufferSizeV2 = of(LEReadBufferSizeV2.self)
}

/// What the driver learned about its controller while starting.
public struct ControllerInfo: Sendable, Hashable {
    // Read Local Version Information.
    public var hciVersion: UInt8 = 0
    public var hciSubversion: UInt16 = 0
    public var lmpVersion: UInt8 = 0
    public var companyIdentifier: UInt16 = 0
    public var lmpSubversion: UInt16 = 0

    public var supportedCommands = SupportedCommands()
    /// LMP features page 0 (BR/EDR; bit 38 "LE Supported (Controller)").
    public var lmpFeatures: UInt64 = 0
    public var leFeatures: LEFeatures = []
    /// The public address (zero when the controller has none).
    public var address: BluetoothAddress = .zero

    /// Maximum data bytes of one ACL packet to the controller: the fragment size.
    public var aclDataPacketLength: Int = 0
    /// ACL buffers in the controller: how many packets may be in flight at once.
    public var totalACLDataPackets: Int = 0
    /// LE has no buffers of its own and shares the BR/EDR ones (LE Read Buffer Size gave 0).
    public var usesSharedBREDRBuffers = false

    /// LE Read Maximum Data Length, when the controller answered it.
    public var maxDataLength: LEMaximumDataLength?

    public init() {}

    /// Extended advertising can be used: LE feature bit 12 and the commands it needs.
    public var supportsExtendedAdvertising: Bool {
        leFeatures.contains(.leExtendedAdvertising)
            && supportedCommands.supports(.leSetExtendedAdvertisingParameters)
            && supportedCommands.supports(.leSetExtendedAdvertisingData)
            && supportedCommands.supports(.leSetExtendedAdvertisingEnable)
    }

    /// Extended scanning (and extended connection creation) can be used: LE feature bit 12
    /// and the commands it needs.
    public var supportsExtendedScanning: Bool {
        leFeatures.contains(.leExtendedAdvertising)
            && supportedCommands.supports(.leSetExtendedScanParameters)
            && supportedCommands.supports(.leSetExtendedScanEnable)
            && supportedCommands.supports(.leExtendedCreateConnection)
    }
}

/// The controller's largest LE data channel payloads and times (Vol 4 Part E §7.8.46).
public struct LEMaximumDataLength: Sendable, Hashable {
    public var supportedMaxTXOctets: UInt16
    public var supportedMaxTXTime: UInt16
    public var supportedMaxRXOctets: UInt16
    public var supportedMaxRXTime: UInt16

    public init(supportedMaxTXOctets: UInt16, supportedMaxTXTime: UInt16,
                supportedMaxRXOctets: UInt16, supportedMaxRXTime: UInt16) {
        self.supportedMaxTXOctets = supportedMaxTXOctets
        self.supportedMaxTXTime = supportedMaxTXTime
        self.supportedMaxRXOctets = supportedMaxRXOctets
        self.supportedMaxRXTime = supportedMaxRXTime
    }
}
