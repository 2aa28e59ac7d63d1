import ByteCoding

// Link encryption events (Core spec Vol 4 Part E §7.7).

/// HCI_Encryption_Change [v1] (Vol 4 Part E §7.7.8): encryption on a link started, stopped or
/// failed to start.
public struct EncryptionChange: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x08
    public static let name = "Encryption Change"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// 0x00 off; 0x01 on (AES-CCM on LE, E0 on BR/EDR); 0x02 on with AES-CCM (BR/EDR).
    public var encryptionEnabled: UInt8

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, encryptionEnabled: UInt8) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.encryptionEnabled = encryptionEnabled
    }

    /// True if the link is now encrypted.
    public var isEncrypted: Bool { encryptionEnabled != 0 }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(encryptionEnabled)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        encryptionEnabled = try reader.u8()
    }
}

/// HCI_Encryption_Change [v2] (Vol 4 Part E §7.7.8): v1 plus the key size, sent instead of v1
/// when the host enabled it in the event mask page 2.
public struct EncryptionChangeV2: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x59
    public static let name = "Encryption Change [v2]"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle
    /// 0x00 off; 0x01 on (AES-CCM on LE, E0 on BR/EDR); 0x02 on with AES-CCM (BR/EDR).
    public var encryptionEnabled: UInt8
    /// Octets of the encryption key, 0x01–0x10 (meaningless when encryption is off).
    public var encryptionKeySize: UInt8

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, encryptionEnabled: UInt8,
                encryptionKeySize: UInt8) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
        self.encryptionEnabled = encryptionEnabled
        self.encryptionKeySize = encryptionKeySize
    }

    /// True if the link is now encrypted.
    public var isEncrypted: Bool { encryptionEnabled != 0 }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
        writer.u8(encryptionEnabled)
        writer.u8(encryptionKeySize)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
        encryptionEnabled = try reader.u8()
        encryptionKeySize = try reader.u8()
    }
}

/// HCI_Encryption_Key_Refresh_Complete (Vol 4 Part E §7.7.39): an encrypted link was re-keyed
/// (on LE: encryption restarted with a new key while already encrypted).
public struct EncryptionKeyRefreshComplete: HCIEventParameters, Hashable {
    public static let eventCode: UInt8 = 0x30
    public static let name = "Encryption Key Refresh Complete"
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle) {
        self.status = status
        self.connectionHandle = connectionHandle & 0x0FFF
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        writer.handle12(connectionHandle)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try reader.handle12()
    }
}

/// HCI_LE_Long_Term_Key_Request (Vol 4 Part E §7.7.65.5): as peripheral, the central asked to
/// encrypt; the host answers with the LTK (LE Long Term Key Request Reply) or a negative reply.
public struct LELongTermKeyRequest: LEMetaEventParameters, Hashable {
    public static let subeventCode: UInt8 = 0x05
    public static let name = "LE Long Term Key Request"
    public var connectionHandle: ConnectionHandle
    /// Rand from the central's LL_ENC_REQ; zero with LE Secure Connections.
    public var randomNumber: UInt64
    /// EDIV from the central's LL_ENC_REQ; zero with LE Secure Connections.
    public var encryptedDiversifier: UInt16

    public init(connectionHandle: ConnectionHandle, randomNumber: UInt64, encryptedDiversifier: UInt16) {
        self.connectionHandle = connectionHandle & 0x0FFF
        self.randomNumber = randomNumber
        self.encryptedDiversifier = encryptedDiversifier
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.handle12(connectionHandle)
        writer.u64(randomNumber)
        writer.u16(encryptedDiversifier)
    }

    public init(decodingParameters reader: inout ByteReader) throws {
        connectionHandle = try reader.handle12()
        randomNumber = try reader.u64()
        encryptedDiversifier = try reader.u16()
    }
}
