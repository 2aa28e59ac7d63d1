import ByteCoding

/// HCI_Reset (Vol 4 Part E §7.3.2).
public struct Reset: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerBaseband, ocf: 0x0003)
    public static let name = "Reset"
    public init() {}
}

/// HCI_Set_Event_Mask (Vol 4 Part E §7.3.1): which events (page 1) the controller may send.
public struct SetEventMask: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerBaseband, ocf: 0x0001)
    public static let name = "Set Event Mask"

    /// The spec's default after reset: bits 0–44.
    public static let defaultMask: UInt64 = 0x0000_1FFF_FFFF_FFFF

    /// Bit n enables the event the spec lists at bit n (e.g. bit 4 Disconnection Complete,
    /// bit 61 LE Meta).
    public var eventMask: UInt64

    public init(eventMask: UInt64 = SetEventMask.defaultMask) { self.eventMask = eventMask }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u64(eventMask) }
    public init(decodingParameters reader: inout ByteReader) throws { eventMask = try reader.u64() }
}

/// HCI_Set_Event_Mask_Page_2 (Vol 4 Part E §7.3.69).
public struct SetEventMaskPage2: HCICommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerBaseband, ocf: 0x0063)
    public static let name = "Set Event Mask Page 2"

    /// Bit n enables the event the spec lists at bit n of page 2 (e.g. bit 23 Authenticated
    /// Payload Timeout Expired). All off by default.
    public var eventMaskPage2: UInt64

    public init(eventMaskPage2: UInt64 = 0) { self.eventMaskPage2 = eventMaskPage2 }

    public func encodeParameters(into writer: inout ByteWriter) { writer.u64(eventMaskPage2) }
    public init(decodingParameters reader: inout ByteReader) throws { eventMaskPage2 = try reader.u64() }
}
