import ByteCoding

/// HCI_Reset (Vol 4 Part E §7.3.2).
public struct Reset: HCIParameterlessCommand, Hashable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerBaseband, ocf: 0x0003)
    public static let name = "Reset"
    public init() {}
}
