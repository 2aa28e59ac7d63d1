import ByteCoding

/// Return parameters of the commands that answer with a status and the connection handle they
/// acted on (LE Set Data Length, LE Long Term Key Request Reply, …).
public struct ConnectionHandleReturn: HCIReturnParameters, Hashable {
    public var status: HCIStatus
    public var connectionHandle: ConnectionHandle

    public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle) {
        self.status = status
        self.connectionHandle = connectionHandle
    }

    public init(decoding reader: inout ByteReader) throws {
        status = HCIStatus(try reader.u8())
        connectionHandle = try CommandCoding.handle(&reader)
    }

    public func encode(into writer: inout ByteWriter) {
        writer.u8(status.rawValue)
        CommandCoding.writeHandle(connectionHandle, &writer)
    }
}

/// HCI_Read_RSSI (Vol 4 Part E §7.5.4). On LE it is the received signal strength of the
/// connection, in dBm.
public struct ReadRSSI: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.statusParameters, ocf: 0x0005)
    public static let name = "Read RSSI"

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
        /// In dBm (-127…20); 127 means not available.
        public var rssi: Int8

        public init(status: HCIStatus = .success, connectionHandle: ConnectionHandle, rssi: Int8) {
            self.status = status
            self.connectionHandle = connectionHandle
            self.rssi = rssi
        }

        public init(decoding reader: inout ByteReader) throws {
            status = HCIStatus(try reader.u8())
            connectionHandle = try CommandCoding.handle(&reader)
            rssi = try reader.i8()
        }

        public func encode(into writer: inout ByteWriter) {
            writer.u8(status.rawValue)
            CommandCoding.writeHandle(connectionHandle, &writer)
            writer.i8(rssi)
        }
    }
}
