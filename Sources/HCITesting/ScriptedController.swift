import ByteCoding
import HCI
import Scheduling

/// A controller double answering commands from a script: per opcode, the return parameters of
/// its Command Complete (given as hex), a Command Status, or silence. Answers arrive through
/// the loop, like a real transport's.
public final class ScriptedController {
    public enum Answer {
        case complete(returnParameters: String, credits: UInt8 = 1)
        case status(HCIStatus, credits: UInt8 = 1)
        case silent
    }

    public let transport: FakeTransport
    public let loop: EventLoop
    public var answers: [UInt16: Answer] = [:]
    /// Unscripted commands: answered "Unknown HCI Command" (false) or never (true).
    public var silentByDefault = false
    /// Commands received, in order.
    public private(set) var received: [HCICommandPacket] = []

    public init(transport: FakeTransport, loop: EventLoop) {
        self.transport = transport
        self.loop = loop
        transport.onSend = { [unowned self] packet in
            guard case .command(let command) = packet else { return }
            received.append(command)
            answer(command)
        }
    }

    public func answer(_ opcode: UInt16, _ answer: Answer) { answers[opcode] = answer }

    private func answer(_ command: HCICommandPacket) {
        let event: HCIEventPacket
        switch answers[command.opcode.rawValue] {
        case .complete(let hex, let credits)?:
            event = CommandComplete(numHCICommandPackets: credits, opcode: command.opcode,
                                    returnParameters: [UInt8](hex: hex)!).packet
        case .status(let status, let credits)?:
            event = CommandStatus(status: status, numHCICommandPackets: credits, opcode: command.opcode).packet
        case .silent?:
            return
        case nil where silentByDefault:
            return
        case nil:
            // Unknown HCI Command: a one-byte return, as real controllers give.
            event = CommandComplete(opcode: command.opcode, returnParameters: [0x01]).packet
        }
        let transport = transport
        loop.execute { transport.inject(.event(event)) }
    }
}
