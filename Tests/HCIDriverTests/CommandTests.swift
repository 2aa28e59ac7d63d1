import ByteCoding
import HCI
import HCIDriver
import HCITransport
import Scheduling
import Testing

/// Command flow control, matching, timeouts and failures, against a controller the test drives
/// by hand (no script: `onSend` stays nil unless a test sets answers).
@Suite struct CommandTests {
    /// A running driver whose controller answers nothing unless told.
    static func running() throws -> Harness {
        let h = Harness()
        try h.startRunning()
        h.controller.answers.removeAll()
        h.controller.silentByDefault = true
        return h
    }

    @Test func secondCommandWaitsForTheFirstWithOneCredit() throws {
        let h = try Self.running()
        var first: Result<StatusReturn, HCIError>?
        var second: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(Reset()) { first = $0 }
        h.driver.send(ReadBDADDR()) { second = $0 }
        h.settle()
        #expect(h.transport.sentHex == ["01030c00"])
        #expect(h.driver.queuedCommandCount == 1)

        // Command Complete for Reset, Num_HCI_Command_Packets 1.
        h.transport.inject(h4: "04 0e 04 01 030c 00")
        #expect(first == .success(StatusReturn()))
        #expect(h.transport.sentHex == ["01030c00", "01091000"])

        // Read BD_ADDR: status 0, address C0:11:22:33:44:55.
        h.transport.inject(h4: "04 0e 0a 01 0910 00 554433 2211c0")
        #expect(try second?.get().bdAddr == BluetoothAddress("C0:11:22:33:44:55"))
        #expect(h.driver.commandCredits == 1)
    }

    @Test func zeroCreditsWaitForANoOpCommandComplete() throws {
        let h = try Self.running()
        h.driver.send(Reset()) { _ in }
        h.driver.send(ReadBDADDR()) { _ in }
        h.settle()
        // Reset completes but the controller has no room: Num_HCI_Command_Packets 0.
        h.transport.inject(h4: "04 0e 04 00 030c 00")
        #expect(h.driver.commandCredits == 0)
        #expect(h.transport.sentHex == ["01030c00"])
        // Opcode 0x0000 with Num_HCI_Command_Packets 1: room again, nothing completed.
        h.transport.inject(h4: "04 0e 03 01 0000")
        #expect(h.transport.sentHex == ["01030c00", "01091000"])
        #expect(h.driver.outstandingCommandCount == 1)
    }

    @Test func noOpCommandStatusGivesCreditToo() throws {
        let h = try Self.running()
        h.driver.send(Reset()) { _ in }
        h.driver.send(ReadBDADDR()) { _ in }
        h.settle()
        h.transport.inject(h4: "04 0e 04 00 030c 00")
        #expect(h.transport.sentCommands.count == 1)
        // Command Status, status 0, Num_HCI_Command_Packets 1, opcode 0x0000.
        h.transport.inject(h4: "04 0f 04 00 01 0000")
        #expect(h.transport.sentHex == ["01030c00", "01091000"])
    }

    @Test func moreCreditsSendSeveralCommandsAtOnce() throws {
        let h = try Self.running()
        h.transport.inject(h4: "04 0e 03 03 0000")
        h.driver.send(Reset()) { _ in }
        h.driver.send(ReadBDADDR()) { _ in }
        h.driver.send(ReadLocalVersionInformation()) { _ in }
        h.driver.send(LESetAdvertisingEnable(advertisingEnable: true)) { _ in }
        h.settle()
        #expect(h.transport.sentCommands.count == 3)
        #expect(h.driver.queuedCommandCount == 1)
    }

    @Test func silentCommandTimesOutAfterExactlyTheTimeoutAndTheNextIsSent() throws {
        let h = try Self.running()
        let start = h.loop.now
        var first: Result<StatusReturn, HCIError>?
        var second: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(LESetAdvertisingEnable(advertisingEnable: true)) { first = $0 }
        h.driver.send(ReadBDADDR()) { second = $0 }
        h.settle()
        #expect(h.transport.sentCommands.map(\.opcode.rawValue) == [0x200A])

        h.loop.run(for: .seconds(5) - .nanoseconds(1))
        #expect(first == nil)
        #expect(h.transport.sentCommands.count == 1)

        h.loop.run(for: .nanoseconds(1))
        #expect(h.loop.now == start + .seconds(5))
        #expect(first == .failure(.timeout(command: "LE Set Advertising Enable")))
        #expect(h.transport.sentCommands.map(\.opcode.rawValue) == [0x200A, 0x1009])
        #expect(second == nil)

        // The second one has its own 5 s from when it was sent.
        h.loop.run(for: .seconds(5))
        #expect(second?.failure == .timeout(command: "Read BD_ADDR"))
    }

    @Test func perCommandTimeoutOverridesTheDefault() throws {
        var configuration = HCIDriverConfiguration()
        configuration.commandTimeout = .seconds(2)
        let h = Harness(configuration: configuration)
        try h.startRunning()
        h.controller.answers.removeAll()
        h.controller.silentByDefault = true
        var result: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(ReadBDADDR(), timeout: .milliseconds(300)) { result = $0 }
        h.loop.run(for: .milliseconds(299))
        #expect(result == nil)
        h.loop.run(for: .milliseconds(1))
        #expect(result?.failure == .timeout(command: "Read BD_ADDR"))

        h.driver.send(ReadBDADDR()) { result = $0 }
        result = nil
        h.loop.run(for: .milliseconds(1999))
        #expect(result == nil)
        h.loop.run(for: .milliseconds(1))
        #expect(result != nil)
    }

    @Test func lateAnswerAfterTimeoutIsIgnored() throws {
        let h = try Self.running()
        var results: [Result<StatusReturn, HCIError>] = []
        h.driver.send(Reset()) { results.append($0) }
        h.loop.run(for: .seconds(5))
        #expect(results == [.failure(.timeout(command: "Reset"))])
        h.transport.inject(h4: "04 0e 04 01 030c 00")
        #expect(results.count == 1)
    }

    @Test func failedStatusWithOneByteReturn() throws {
        let h = try Self.running()
        var result: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(ReadBDADDR()) { result = $0 }
        h.settle()
        // Command Complete, Read BD_ADDR, return parameters only the status 0x01.
        h.transport.inject(h4: "04 0e 04 01 0910 01")
        #expect(result?.failure == .status(.unknownHCICommand, command: "Read BD_ADDR"))
        #expect(result?.failure?.description == "Read BD_ADDR failed: Unknown HCI Command (0x01)")
    }

    @Test func truncatedSuccessfulReturnIsMalformed() throws {
        let h = try Self.running()
        var result: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(ReadBDADDR()) { result = $0 }
        h.settle()
        h.transport.inject(h4: "04 0e 06 01 0910 00 5544")
        guard case .malformed? = result?.failure else {
            Issue.record("expected .malformed, got \(String(describing: result))")
            return
        }
    }

    @Test func commandCompleteWithoutStatusIsMalformed() throws {
        let h = try Self.running()
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { result = $0 }
        h.settle()
        h.transport.inject(h4: "04 0e 03 01 030c")
        guard case .malformed? = result?.failure else {
            Issue.record("expected .malformed, got \(String(describing: result))")
            return
        }
    }

    @Test func commandStatusCommandSucceedsOnStatusZero() throws {
        let h = try Self.running()
        h.controller.answer(0x200D, .status(.success))
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Self.createConnection) { result = $0 }
        h.settle()
        #expect(result == .success(StatusReturn(status: .success)))
    }

    @Test func commandStatusCommandFailsOnNonZeroStatus() throws {
        let h = try Self.running()
        h.controller.answer(0x200D, .status(.commandDisallowed))
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Self.createConnection) { result = $0 }
        h.settle()
        #expect(result?.failure == .status(.commandDisallowed, command: "LE Create Connection"))
    }

    @Test func failedCommandStatusEndsACommandCompleteCommand() throws {
        let h = try Self.running()
        var result: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(ReadBDADDR()) { result = $0 }
        h.settle()
        // A successful Command Status does not answer a Command Complete command…
        h.transport.inject(.event(CommandStatus(status: .success, opcode: ReadBDADDR.opcode).packet))
        #expect(result == nil)
        // …a failed one does.
        h.transport.inject(.event(CommandStatus(status: .unknownHCICommand, opcode: ReadBDADDR.opcode).packet))
        #expect(result?.failure == .status(.unknownHCICommand, command: "Read BD_ADDR"))
    }

    @Test func completionForAnUnknownOpcodeIsIgnoredButGivesCredit() throws {
        let h = try Self.running()
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { result = $0 }
        h.driver.send(Reset()) { _ in }
        h.settle()
        h.transport.inject(h4: "04 0e 04 00 0910 00")
        #expect(result == nil)
        #expect(h.driver.commandCredits == 0)
        h.transport.inject(h4: "04 0e 04 01 0910 00")
        #expect(result == nil)
        #expect(h.transport.sentCommands.count == 2)
    }

    @Test func completionsMatchTheOldestCommandWithThatOpcode() throws {
        let h = try Self.running()
        h.transport.inject(h4: "04 0e 03 02 0000")
        var order: [Int] = []
        h.driver.send(Reset()) { _ in order.append(1) }
        h.driver.send(Reset()) { _ in order.append(2) }
        h.settle()
        h.transport.inject(h4: "04 0e 04 01 030c 00")
        #expect(order == [1])
        h.transport.inject(h4: "04 0e 04 01 030c 00")
        #expect(order == [1, 2])
    }

    @Test func sendRawReturnsTheRawAnswer() throws {
        let h = try Self.running()
        var result: Result<HCICommandResponse, HCIError>?
        // A vendor command, OGF 0x3F OCF 0x001: answered with a failure, which raw callers see.
        let packet = HCICommandPacket(opcode: HCIOpcode(ogf: 0x3F, ocf: 0x001), parameters: [0xAA])
        h.driver.sendRaw(packet) { result = $0 }
        h.settle()
        #expect(h.transport.sentHex == ["0101fc01aa"])
        h.transport.inject(h4: "04 0e 05 01 01fc 0c 99")
        let response = try #require(try result?.get())
        #expect(response == .complete(CommandComplete(opcode: packet.opcode, returnParameters: [0x0C, 0x99])))
        #expect(response.status == .commandDisallowed)
    }

    @Test func malformedEventsAreDroppedAndTheDriverGoesOn() throws {
        let h = try Self.running()
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { result = $0 }
        h.settle()
        // Command Status too short; Disconnection Complete too short; LE Meta without subevent.
        h.transport.inject(h4: "04 0f 02 00 01")
        h.transport.inject(h4: "04 05 02 00 40")
        h.transport.inject(h4: "04 3e 00")
        #expect(result == nil)
        #expect(h.delegate.events.isEmpty)
        h.transport.inject(h4: "04 0e 04 01 030c 00")
        #expect(result == .success(StatusReturn()))
    }

    @Test func otherEventsGoToTheDelegate() throws {
        let h = try Self.running()
        // Hardware Error, code 0x42.
        h.transport.inject(h4: "04 10 01 42")
        // An event code nobody decodes.
        h.transport.inject(h4: "04 ff 02 01 02")
        #expect(h.delegate.events.count == 2)
        guard case .hardwareError(let e) = h.delegate.events.first else {
            Issue.record("expected Hardware Error")
            return
        }
        #expect(e.hardwareCode == 0x42)
        // Command Complete / Status and Number Of Completed Packets stay in the driver.
        h.transport.inject(h4: "04 0e 03 01 0000")
        h.completed(0x0040, 1)
        #expect(h.delegate.events.count == 2)
    }

    @Test func transportClosingFailsEveryPendingCommand() throws {
        let h = try Self.running()
        var results: [Result<StatusReturn, HCIError>] = []
        h.driver.send(Reset()) { results.append($0) }
        h.driver.send(Reset()) { results.append($0) }
        h.driver.send(Reset()) { results.append($0) }
        h.settle()
        let error = HCITransportError("cable pulled")
        h.transport.fail(error)
        #expect(results == Array(repeating: .failure(.transportClosed(error)), count: 3))
        #expect(h.delegate.closes == [error])
        // Nothing more goes out, and late timers find nothing.
        var late: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { late = $0 }
        #expect(late == .failure(.transportClosed(nil)))
        h.loop.run(for: .seconds(10))
        #expect(results.count == 3)
    }

    @Test func stopClosesTheTransport() throws {
        let h = try Self.running()
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { result = $0 }
        h.driver.stop()
        #expect(result == .failure(.transportClosed(nil)))
        #expect(!h.transport.isOpen)
        #expect(h.delegate.closes.count == 1)
    }

    @Test func commandsBeforeStartFail() {
        let h = Harness()
        var result: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { result = $0 }
        #expect(result == .failure(.transportClosed(nil)))
        #expect(h.transport.sent.isEmpty)
    }

    @Test func errorDescriptionsNameTheCommand() {
        #expect(HCIError.timeout(command: "LE Set PHY").description.contains("LE Set PHY"))
        #expect(HCIError.status(.commandDisallowed, command: "LE Encrypt").description
            == "LE Encrypt failed: Command Disallowed (0x0C)")
    }

    static let createConnection = LECreateConnection(
        leScanInterval: 0x0060, leScanWindow: 0x0030, initiatorFilterPolicy: .peerAddress,
        peerAddressType: .publicDevice, peerAddress: BluetoothAddress("C0:11:22:33:44:55")!,
        ownAddressType: .publicDevice, connectionIntervalMin: 0x0018, connectionIntervalMax: 0x0028,
        maxLatency: 0, supervisionTimeout: 0x00C8, minCELength: 0, maxCELength: 0)
}
