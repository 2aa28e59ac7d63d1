import ByteCoding
import Testing
@testable import HCI

/// Encodes, decodes (directly and through an H4 frame) and compares; then checks that the
/// decoder insists on exactly the defined length: one byte less or one byte more throws.
func expectRoundTrip<C: HCICommand & Equatable>(_ command: C, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let packet = command.packet
    #expect(packet.opcode == C.opcode, sourceLocation: sourceLocation)
    #expect(try C(packet: packet) == command, sourceLocation: sourceLocation)

    let frame = HCIPacket.command(packet).h4Bytes
    guard case .command(let parsed) = try HCIPacket(h4: frame) else {
        Issue.record("not a command frame", sourceLocation: sourceLocation)
        return
    }
    #expect(try C(packet: parsed) == command, sourceLocation: sourceLocation)

    if !packet.parameters.isEmpty {
        let truncated = HCICommandPacket(opcode: C.opcode, parameters: Array(packet.parameters.dropLast()))
        #expect(throws: DecodeError.self, sourceLocation: sourceLocation) { try C(packet: truncated) }
    }
    let trailing = HCICommandPacket(opcode: C.opcode, parameters: packet.parameters + [0x00])
    #expect(throws: DecodeError.self, sourceLocation: sourceLocation) { try C(packet: trailing) }
    #expect(HCICommands.name(of: C.opcode) == C.name, sourceLocation: sourceLocation)
}

/// Return parameters survive encoding and decoding, and lose their last field when truncated.
func expectReturnRoundTrip<R: HCIReturnParameters & Equatable>(_ value: R, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let bytes = value.bytes
    #expect(try R(returnBytes: bytes, context: "test") == value, sourceLocation: sourceLocation)
    #expect(bytes.first == value.status.rawValue, sourceLocation: sourceLocation)
    if bytes.count > 1 {
        #expect(throws: DecodeError.self, sourceLocation: sourceLocation) {
            try R(returnBytes: Array(bytes.dropLast()), context: "test")
        }
    }
}

/// The full H4 command frame, as hex without separators.
func h4Hex<C: HCICommand>(_ command: C) -> String {
    HCIPacket.command(command.packet).h4Bytes.hexString
}

/// Normalises a spaced hex string for comparison with `h4Hex`.
func hex(_ spaced: String) -> String {
    spaced.filter { !$0.isWhitespace }.lowercased()
}

let testAddress = BluetoothAddress("C0:11:22:33:44:55")!
