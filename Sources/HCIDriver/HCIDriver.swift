import ByteCoding
import HCI
import HCITransport
import Logging
import Scheduling
import StackLogging

/// How a command was answered, undecoded: what `sendRaw` gives back.
public enum HCICommandResponse: Sendable, Hashable {
    case complete(CommandComplete)
    case status(CommandStatus)

    /// The status the controller gave (the first return parameter of Command Complete).
    public var status: HCIStatus? {
        switch self {
        case .complete(let event): event.status
        case .status(let event): event.status
        }
    }
}

/// Tunables of an `HCIDriver`.
public struct HCIDriverConfiguration: Sendable {
    /// How long a command may wait for its Command Complete / Command Status once sent. Real
    /// and virtual controllers sometimes never answer; the timeout keeps the queue moving.
    public var commandTimeout: Duration = .seconds(5)
    /// Whole PDUs a connection may have waiting for controller buffers before `sendACL`
    /// refuses more.
    public var maxQueuedPDUsPerConnection: Int = 64
    /// Set Event Mask: Disconnection Complete (bit 4), Encryption Change (7), Read Remote
    /// Version Information Complete (11), Hardware Error (15), Data Buffer Overflow (25),
    /// Encryption Key Refresh Complete (47), LE Meta (61) — Vol 4 Part E §7.3.1.
    public var eventMask: UInt64 = 1 << 4 | 1 << 7 | 1 << 11 | 1 << 15 | 1 << 25 | 1 << 47 | 1 << 61
    /// Set Event Mask Page 2 (Vol 4 Part E §7.3.69): nothing by default. Encryption Change v2
    /// (bit 25) only adds the key size, and the v1 event keeps captures readable by tools that
    /// predate v2 (tshark 4.0 among them).
    public var eventMaskPage2: UInt64 = 0
    /// LE Set Event Mask (Vol 4 Part E §7.8.1): bit n enables subevent n + 1. The subevents the
    /// host decodes: Connection Complete (0x01), Advertising Report (0x02), Connection Update
    /// Complete (0x03), Read Remote Features Complete (0x04), Long Term Key Request (0x05),
    /// Remote Connection Parameter Request (0x06), Data Length Change (0x07), Enhanced
    /// Connection Complete (0x0A), Directed Advertising Report (0x0B), PHY Update Complete
    /// (0x0C), Extended Advertising Report (0x0D), Scan Timeout (0x11), Advertising Set
    /// Terminated (0x12). Not Enhanced Connection Complete v2 (0x29): it adds only the
    /// advertising set, and v1 keeps captures readable by tools that predate v2 (tshark 4.0).
    /// How many times the controller may reset itself (a Hardware Error event, or a Reset the
    /// host did not ask for) within `recoveryWindow` and be reset and initialised again; one
    /// more and the driver gives up and closes, as for a controller that is gone.
    public var maxRecoveries = 3
    public var recoveryWindow: Duration = .seconds(60)
    /// How long packets may sit in the controller's buffers on a connection, with none of them
    /// completed, while other packets wait for a buffer, before the driver gives the link up
    /// (Disconnect). A controller that still has the link completes or flushes its packets,
    /// or ends the link, within its supervision timeout (32 s at most, Vol 6 Part B §4.5.2);
    /// one that forgot the link never returns those buffers, and every link stalls. nil: never.
    public var aclCompletionTimeout: Duration? = .seconds(40)
    public var leEventMask: UInt64 = {
        let subevents: [UInt64] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0A, 0x0B, 0x0C, 0x0D,
                                   0x11, 0x12]
        return subevents.reduce(0) { $0 | 1 << ($1 - 1) }
    }()

    public init() {}
}

/// The host side of HCI: sends commands with flow control and timeouts, runs the controller
/// initialisation, fragments and schedules outbound ACL against the controller's buffers,
/// reassembles inbound ACL, and passes events up to its delegate.
///
/// Loop-confined: create it, call it and receive its callbacks on `loop` only.
public final class HCIDriver: HCIPacketSink, @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        loop.assertConfined("HCIDriver", file: file, line: line)
    }

    public let loop: EventLoop
    public let transport: HCITransport
    public let configuration: HCIDriverConfiguration
    /// `corebluetooth.hci`: commands (trace), failures and timeouts, what the driver drops.
    @exclusivity(unchecked) public var logger: Logger  // exclusivity checks: 0.07 % of adv
    @exclusivity(unchecked) private var delegateHeld = WeakHeldExistential<any HCIDriverDelegate>(wrappedValue: nil)  // exclusivity checks: 0.28 % of notify
    public var delegate: (any HCIDriverDelegate)? {
        get { delegateHeld.wrappedValue }
        set { delegateHeld.wrappedValue = newValue }
    }

    /// What the controller told us during `start`; nil until it completes.
    @exclusivity(unchecked) public internal(set) var controllerInfo: ControllerInfo?  // exclusivity checks: 0.3 % of notify

    /// `resetting`: the controller reset itself and is being initialised again (only the
    /// initialisation's commands go out; ACL is refused).
    enum State { case idle, starting, running, resetting, closed }
    @exclusivity(unchecked) var state: State = .idle  // exclusivity checks: 0.3 % of notify

    // Commands.
    final class PendingCommand {
        let id: UInt64
        let packet: HCICommandPacket
        let name: String
        /// nil for raw commands, which accept either kind of answer.
        let expected: HCICommandCompletion?
        let timeout: Duration
        let completion: (Result<HCICommandResponse, HCIError>) -> Void
        var timer: TimerHandle?
        /// For a command naming a connection the host had open when it was queued: its handle
        /// and that connection's serial number, so an Unknown Connection Identifier answer
        /// ends it and no later one that reuses the handle. (Not a weak reference: one would
        /// give every connection a side table, and each retain of it on the ACL path a slow one.)
        var linkHandle: ConnectionHandle?
        var linkSerial: UInt64?

        init(id: UInt64, packet: HCICommandPacket, name: String, expected: HCICommandCompletion?,
             timeout: Duration, completion: @escaping (Result<HCICommandResponse, HCIError>) -> Void) {
            self.id = id
            self.packet = packet
            self.name = name
            self.expected = expected
            self.timeout = timeout
            self.completion = completion
        }
    }
    var nextCommandID: UInt64 = 0
    /// Commands the controller has room for (Num_HCI_Command_Packets). One before it speaks.
    @exclusivity(unchecked) public internal(set) var commandCredits = 1  // exclusivity checks: 0.15 % of adv
    @exclusivity(unchecked) var commandQueue = RingBuffer<PendingCommand>()  // exclusivity checks: 0.08 % of adv
    /// Sent and not yet answered, oldest first.
    @exclusivity(unchecked) var outstandingCommands: [PendingCommand] = []  // exclusivity checks: 0.07 % of adv

    // Outbound ACL. A class, so the hot paths change it in place: a struct copied out of the
    // dictionary and written back copied its fragment queue's storage on every packet.
    final class OutboundConnection {
        /// Tells this connection from a later one on the same handle (never reused).
        let serial: UInt64
        init(serial: UInt64) { self.serial = serial }
        @exclusivity(unchecked) var fragments = RingBuffer<(packet: ACLDataPacket, endsPDU: Bool)>(capacity: 4)  // exclusivity checks: 0.3 % of notify
        @exclusivity(unchecked) var queuedPDUs = 0  // exclusivity checks: 0.3 % of notify
        /// Packets handed to the controller and not yet reported by Number Of Completed Packets.
        @exclusivity(unchecked) var inFlight = 0  // exclusivity checks: 0.3 % of notify
        /// The queue had to wait for controller buffers: tell the delegate when it drains.
        @exclusivity(unchecked) var waitedForCredits = false  // exclusivity checks: 0.3 % of notify
        /// Since when the packets in flight have been waiting for a completion: when the first
        /// went, or the last Number Of Completed Packets for the connection came.
        @exclusivity(unchecked) var waitingSince = LoopInstant.zero  // exclusivity checks: 0.3 % of notify
        /// The driver gave the link up for want of completions (`aclCompletionTimeout`).
        var stalled = false
    }
    @exclusivity(unchecked) var connections = IntegerKeyMap<ConnectionHandle, OutboundConnection>()  // exclusivity checks: 0.6 % of notify
    /// The next `OutboundConnection.serial`.
    var nextConnectionSerial: UInt64 = 1
    /// Connections with fragments waiting, in round-robin order.
    @exclusivity(unchecked) var sendOrder: [ConnectionHandle] = []  // exclusivity checks: 0.6 % of notify
    /// Free controller ACL buffers.
    @exclusivity(unchecked) public internal(set) var aclCredits = 0  // exclusivity checks: 0.6 % of notify
    /// Armed while packets wait for a controller buffer: checks that the buffers in use are
    /// still being completed (`aclCompletionTimeout`).
    @exclusivity(unchecked) var completionWatchdog: TimerHandle?  // exclusivity checks: 0.3 % of notify

    // Inbound ACL.
    @exclusivity(unchecked) var reassembler = ACLReassembler()  // exclusivity checks: 0.28 % of notify

    // Initialisation and recovery (Startup.swift).
    /// Counts initialisation runs: a run another one replaced (the controller reset during it)
    /// stops and reports nothing.
    var initGeneration: UInt64 = 0
    /// Who waits for `start`'s outcome while it runs.
    var startCompletion: ((Result<ControllerInfo, HCIError>) -> Void)?
    /// When the controller reset itself lately (within `recoveryWindow`).
    var recoveries: [LoopInstant] = []
    /// Why the driver closed the transport itself (given up on the controller), for the delegate.
    var closeError: HCITransportError?

    public init(transport: HCITransport, loop: EventLoop,
                configuration: HCIDriverConfiguration = HCIDriverConfiguration(),
                logger: Logger = StackLogging.standard.logger(.hci)) {
        self.transport = transport
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
    }

    /// Closes the transport; pending commands fail with `.transportClosed(nil)`.
    public func stop() {
        assertOnLoop()
        guard state != .closed else { return }
        transport.close()
        // A transport that closes without telling its sink must not leave commands hanging.
        if state != .closed { transportClosed(nil) }
    }

    // MARK: Commands

    /// Sends a typed command when the controller has room, and completes with its decoded
    /// return parameters.
    ///
    /// - Command Complete commands: the return parameters, decoded only when the status is
    ///   success (a failed command may return only its status) — else `.status(…)`.
    /// - Command Status commands: success is a Command Status with status 0; the outcome arrives
    ///   later as an event for the delegate.
    /// - `timeout` (default `configuration.commandTimeout`) counts from when the command is
    ///   written to the controller.
    public func send<C: HCICommand>(_ command: C, timeout: Duration? = nil,
                                    completion: @escaping (Result<C.ReturnParameters, HCIError>) -> Void) {
        assertOnLoop()
        enqueue(command.packet, name: C.name, expected: C.completion, timeout: timeout) { result in
            completion(result.flatMap { Self.decode(C.self, from: $0) })
        }
    }

    /// Sends a command packet as is; completes with the Command Complete or Command Status that
    /// answered it, whatever its status. Fails only by timeout or transport closure.
    public func sendRaw(_ packet: HCICommandPacket, name: String? = nil, timeout: Duration? = nil,
                        completion: @escaping (Result<HCICommandResponse, HCIError>) -> Void) {
        assertOnLoop()
        enqueue(packet, name: name ?? "Command \(packet.opcode)", expected: nil, timeout: timeout,
                completion: completion)
    }

    static func decode<C: HCICommand>(_: C.Type, from response: HCICommandResponse)
        -> Result<C.ReturnParameters, HCIError> {
        switch response {
        case .status(let event):
            guard event.status.isSuccess else { return .failure(.status(event.status, command: C.name)) }
            // Only Command Status commands match a successful Command Status; their return
            // parameters are the status alone.
            return decodeReturn(C.self, [event.status.rawValue])
        case .complete(let event):
            guard let status = event.status else {
                return .failure(.malformed(DecodeError("\(C.name): Command Complete without a status")))
            }
            guard status.isSuccess else { return .failure(.status(status, command: C.name)) }
            return decodeReturn(C.self, event.returnParameters)
        }
    }

    private static func decodeReturn<C: HCICommand>(_: C.Type, _ bytes: [UInt8]) -> Result<C.ReturnParameters, HCIError> {
        do {
            return .success(try C.ReturnParameters(returnBytes: bytes, context: C.name))
        } catch let error as DecodeError {
            return .failure(.malformed(error))
        } catch {
            return .failure(.malformed(DecodeError("\(C.name): \(error)")))
        }
    }

    func enqueue(_ packet: HCICommandPacket, name: String, expected: HCICommandCompletion?,
                 timeout: Duration?, initialising: Bool = false,
                 completion: @escaping (Result<HCICommandResponse, HCIError>) -> Void) {
        if state == .resetting && !initialising {
            // What was asked of the controller before it reset means nothing to it now.
            completion(.failure(.controllerReset("the controller is being reset")))
            return
        }
        guard state == .starting || state == .running || state == .resetting else {
            completion(.failure(.transportClosed(nil)))
            return
        }
        nextCommandID &+= 1
        let command = PendingCommand(id: nextCommandID, packet: packet, name: name, expected: expected,
                                     timeout: timeout ?? configuration.commandTimeout, completion: completion)
        if Self.connectionCommands.contains(packet.opcode), packet.parameters.count >= 2 {
            let handle = ConnectionHandle(packet.parameters[0]) | ConnectionHandle(packet.parameters[1] & 0x0F) << 8
            if let connection = connections[handle] {
                command.linkHandle = handle
                command.linkSerial = connection.serial
            }
        }
        commandQueue.append(command)
        pumpCommands()
    }

    /// Whether the controller reset itself and is being initialised again (`driverWillReset`
    /// was or is about to be called; `driverDidReset` or `driverDidClose` follows).
    public var isResetting: Bool { state == .resetting }

    /// Commands waiting for the controller to have room.
    public var queuedCommandCount: Int { commandQueue.count }
    /// Commands sent and not yet answered.
    public var outstandingCommandCount: Int { outstandingCommands.count }

    func pumpCommands() {
        while commandCredits > 0, state == .starting || state == .running || state == .resetting, let command = commandQueue.popFirst() {
            commandCredits -= 1
            outstandingCommands.append(command)
            let id = command.id
            command.timer = loop.schedule(after: command.timeout) { [weakSelf = WeakHandle(self)] in weakSelf.object?.commandTimedOut(id) }
            // Names and sizes only: some parameters are keys (LE Start Encryption, LTK replies).
            logger.trace("→ \(command.name), \(command.packet.parameters.count) octets")
            // State is consistent before the send: a transport may answer synchronously.
            transport.send(.command(command.packet))
        }
    }

    private func commandTimedOut(_ id: UInt64) {
        guard let index = outstandingCommands.firstIndex(where: { $0.id == id }) else { return }
        let command = outstandingCommands.remove(at: index)
        // The controller will never return this slot: take it back so the queue moves on.
        commandCredits += 1
        logger.warning("\(command.name) timed out after \(command.timeout)")
        command.completion(.failure(.timeout(command: command.name)))
        pumpCommands()
    }

    private func handleCommandComplete(_ event: CommandComplete) {
        commandCredits = Int(event.numHCICommandPackets)
        // Opcode 0x0000 only announces free command slots.
        if event.opcode.rawValue != 0 {
            if let index = outstandingCommands.firstIndex(where: { $0.packet.opcode == event.opcode }) {
                let command = outstandingCommands.remove(at: index)
                command.timer?.cancel()
                logger.trace("← \(command.name) complete, \(event.returnParameters.count) octets")
                if event.status == .unknownConnectionIdentifier { controllerForgotLink(of: command) }
                command.completion(.success(.complete(event)))
            } else if event.opcode == Reset.opcode, state == .running {
                // The controller reset by itself (and says so): its state and links are gone.
                controllerDidReset("the controller reset itself (Command Complete for a Reset the host did not send)")
                return
            } else {
                logger.warning("Command Complete for \(event.opcode) that nobody waits for; ignored")
            }
        }
        pumpCommands()
    }

    private func handleCommandStatus(_ event: CommandStatus) {
        commandCredits = Int(event.numHCICommandPackets)
        if event.opcode.rawValue != 0 {
            // A successful Command Status never completes a Command Complete command (its
            // Command Complete is still to come); a failed one ends any command.
            if let index = outstandingCommands.firstIndex(where: {
                $0.packet.opcode == event.opcode && ($0.expected != .commandComplete || !event.status.isSuccess)
            }) {
                let command = outstandingCommands.remove(at: index)
                command.timer?.cancel()
                if event.status.isSuccess {
                    logger.trace("← \(command.name) status \(event.status)")
                } else {
                    logger.debug("\(command.name) failed: \(event.status)")
                    if event.status == .unknownConnectionIdentifier { controllerForgotLink(of: command) }
                }
                command.completion(.success(.status(event)))
            } else {
                logger.warning("Command Status for \(event.opcode) that nobody waits for; ignored")
            }
        }
        pumpCommands()
    }

    /// The commands whose parameters start with a Connection_Handle (Vol 4 Part E §7): an
    /// Unknown Connection Identifier answer to one of them means the controller has no such
    /// connection.
    static let connectionCommands: Set<HCIOpcode> = [
        Disconnect.opcode, ReadRemoteVersionInformation.opcode, ReadRSSI.opcode, LEConnectionUpdate.opcode,
        LEReadRemoteFeatures.opcode, LEEnableEncryption.opcode, LELongTermKeyRequestReply.opcode,
        LELongTermKeyRequestNegativeReply.opcode, LERemoteConnectionParameterRequestReply.opcode,
        LERemoteConnectionParameterRequestNegativeReply.opcode, LESetDataLength.opcode, LEReadPHY.opcode,
        LESetPHY.opcode,
    ]

    /// A command naming a connection the host has open was answered Unknown Connection
    /// Identifier: the controller dropped the link without a Disconnection Complete (firmware
    /// that resets part of itself, or a bug). The link ends here as that event would end it
    /// (its ACL credits come back, the layers above hear of it once), before the command's
    /// own answer is delivered, so what waited on the link fails as on any disconnection. The
    /// reason is what the controller would have reported: Connection Terminated By Local Host
    /// for a Disconnect the layer above asked for, otherwise Connection Timeout (a link lost
    /// unnoticed is a supervision timeout, and Apple reports `CBError.connectionTimeout` for it).
    private func controllerForgotLink(of command: PendingCommand) {
        guard state == .running, let handle = command.linkHandle, let connection = connections[handle],
              connection.serial == command.linkSerial else { return }
        let asked = command.packet.opcode == Disconnect.opcode && !connection.stalled
        let reason: HCIStatus = asked ? .connectionTerminatedByLocalHost : .connectionTimeout
        logger.warning("the controller no longer knows connection 0x\(String(handle, radix: 16)) (\(command.name): Unknown Connection Identifier) but never reported its end; ending it as disconnected (\(reason))")
        dispatch(.disconnectionComplete(DisconnectionComplete(status: .success, connectionHandle: handle, reason: reason)))
    }

    // MARK: HCIPacketSink

    public func receive(_ packet: consuming HCIPacket) {
        assertOnLoop()
        guard state == .starting || state == .running || state == .resetting else { return }
        switch consume packet {
        case .event(let raw): handleEvent(raw)
        case .acl(let acl): handleInboundACL(acl)
        case .command(let command): logger.warning("controller sent a command (\(command.opcode)); ignored")
        case .other(let type, _): logger.debug("ignored packet of H4 type 0x\(String(type, radix: 16))")
        }
    }

    public func transportClosed(_ error: HCITransportError?) {
        assertOnLoop()
        guard state != .closed else { return }
        state = .closed
        let error = error ?? closeError
        if let error { logger.error("transport closed: \(error)") }
        let failure = HCIError.transportClosed(error)
        let pending = outstandingCommands + Array(drain(&commandQueue))
        outstandingCommands.removeAll()
        for command in pending {
            command.timer?.cancel()
            command.completion(.failure(failure))
        }
        connections.removeAll()
        sendOrder.removeAll()
        completionWatchdog?.cancel()
        completionWatchdog = nil
        aclCredits = 0
        reassembler.removeAll()
        // A start whose run was replaced by a reset's has nobody else to tell it.
        if let waiting = startCompletion {
            startCompletion = nil
            waiting(.failure(failure))
        }
        delegate?.driverDidClose(error: error)
    }

    func drain(_ queue: inout RingBuffer<PendingCommand>) -> [PendingCommand] {
        var all: [PendingCommand] = []
        while let next = queue.popFirst() { all.append(next) }
        return all
    }

    // MARK: Events

    private func handleEvent(_ raw: HCIEventPacket) {
        let event: HCIEvent
        do {
            event = try HCIEvent(decoding: raw)
        } catch {
            logger.warning("dropped malformed event 0x\(String(raw.code, radix: 16)) \(raw.parameters.hexString): \(error)")
            return
        }
        dispatch(event)
    }

    /// One event from the controller (or one the driver concludes it owed: a link it forgot).
    private func dispatch(_ event: HCIEvent) {
        switch event {
        case .commandComplete(let e): handleCommandComplete(e)
        case .commandStatus(let e): handleCommandStatus(e)
        case .numberOfCompletedPackets(let e): handleNumberOfCompletedPackets(e)
        case .disconnectionComplete(let e):
            // A Disconnection Complete for a handle the host no longer has (the driver ended the
            // link itself when the controller forgot it) is stale: passed up, it ends nothing.
            if e.status.isSuccess { connectionClosed(e.connectionHandle) }
            delegate?.didReceiveEvent(event)
            pumpACL()
        case .le(.connectionComplete(let e)):
            if e.status.isSuccess { connectionOpened(e.connectionHandle) }
            delegate?.didReceiveEvent(event)
        case .le(.enhancedConnectionComplete(let e)):
            if e.status.isSuccess { connectionOpened(e.connectionHandle) }
            delegate?.didReceiveEvent(event)
        case .le(.enhancedConnectionCompleteV2(let e)):
            if e.status.isSuccess { connectionOpened(e.connectionHandle) }
            delegate?.didReceiveEvent(event)
        case .hardwareError(let e):
            // Vol 4 Part E §7.7.16: the controller failed; what it had is lost. Reset it and
            // start over, as a host must.
            delegate?.didReceiveEvent(event)
            controllerDidReset("hardware error 0x\(String(e.hardwareCode, radix: 16))")
        default:
            delegate?.didReceiveEvent(event)
        }
    }
}
