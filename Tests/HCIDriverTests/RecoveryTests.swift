import ByteCoding
import HCI
import HCIDriver
import HCITransport
import Scheduling
import Testing

/// A controller that resets itself (issue 17): a Hardware Error event (Vol 4 Part E §7.7.16),
/// or a Command Complete for a Reset the host never sent. The driver fails what was pending,
/// forgets every connection's ACL state, tells the layer above, resets the controller and runs
/// the initialisation again; a controller that keeps failing is given up.
@Suite struct RecoveryTests {
    typealias S = StartupTests
    /// What `start` sends to the default script (no supported-commands bitmap).
    static let initialisation = [S.reset, S.readLocalVersion, S.readLocalSupportedCommands, S.readLocalSupportedFeatures,
                                 S.readBDADDR, S.setEventMask, S.leSetEventMask, S.leReadBufferSizeV1,
                                 S.leReadLocalSupportedFeatures]
    static let resetComplete = "04 0e 04 01 030c 00"

    @Test func theHardwareErrorEventDecodesByteForByte() throws {
        // H4 event 0x04, code 0x10, length 1, Hardware_Code 0x42.
        let packet = HCIEventPacket(code: 0x10, parameters: [0x42])
        #expect(try HCIEvent(decoding: packet) == .hardwareError(HardwareError(hardwareCode: 0x42)))
        #expect(HCIEvent.hardwareError(HardwareError(hardwareCode: 0x42)).packet.parameters == [0x42])
        // Without its code: malformed, dropped by the driver without a reset.
        #expect(throws: DecodeError.self) { try HCIEvent(decoding: HCIEventPacket(code: 0x10, parameters: [])) }
        let h = Harness()
        try h.startRunning()
        h.transport.inject(h4: "04 10 00")
        h.settle()
        #expect(h.delegate.willResets.isEmpty && h.transport.sent.isEmpty)
    }

    @Test func aHardwareErrorFailsWhatWasPendingDropsTheLinksAndInitialisesTheControllerAgain() throws {
        let h = Harness()
        try h.startRunning(aclLength: 27, aclCount: 2)
        h.connect(0x0040)
        // Two PDUs of three fragments each: the controller's two buffers fill, the rest waits.
        #expect(h.driver.sendACL(handle: 0x0040, pdu: .l2cap(payload: Array(repeating: 1, count: 60))))
        #expect(h.driver.aclCredits == 0)
        // A command the controller never answers, and one waiting behind it.
        h.controller.answer(0x1405, .silent)
        var rssi: Result<ReadRSSI.ReturnParameters, HCIError>?
        var queued: Result<ReadBDADDR.ReturnParameters, HCIError>?
        h.driver.send(ReadRSSI(connectionHandle: 0x0040)) { rssi = $0 }
        h.driver.send(ReadBDADDR()) { queued = $0 }
        h.settle()
        h.transport.clearSent()

        var stateAtWillReset: (pending: Bool, connected: Bool)?
        h.delegate.onEvent = { _ in }
        h.transport.inject(h4: "04 10 01 42")
        let expected = HCIError.controllerReset("hardware error 0x42")
        #expect(rssi == .failure(expected))
        #expect(queued == .failure(expected))
        #expect(h.delegate.willResets == [expected])
        // The event itself still reaches the layer above.
        #expect(h.delegate.events.contains(.hardwareError(HardwareError(hardwareCode: 0x42))))
        stateAtWillReset = (rssi != nil, h.driver.isConnected(handle: 0x0040))
        #expect(stateAtWillReset?.connected == false)
        #expect(h.driver.isResetting)
        // Nothing but the initialisation goes out meanwhile.
        #expect(!h.driver.sendACL(handle: 0x0040, pdu: .l2cap(payload: [1])))
        var refused: Result<StatusReturn, HCIError>?
        h.driver.send(LESetScanEnable(leScanEnable: true)) { refused = $0 }
        #expect(refused == .failure(.controllerReset("the controller is being reset")))

        h.loop.run(until: { !h.delegate.didResets.isEmpty })
        // Reset, then the whole initialisation, byte for byte, and nothing else.
        #expect(h.transport.sentHex == Self.initialisation)
        #expect(h.delegate.didResets.count == 1)
        #expect(h.driver.controllerInfo == h.delegate.didResets.first)
        #expect(!h.driver.isResetting)
        // Every buffer is the host's again, and links work once the controller reports them.
        #expect(h.driver.aclCredits == 2)
        h.connect(0x0041)
        #expect(h.driver.sendACL(handle: 0x0041, pdu: .l2cap(payload: [7])))
        #expect(h.transport.sentACL.count == 1)
        #expect(h.delegate.closes.isEmpty)
    }

    @Test func aResetTheHostDidNotSendIsTheControllerResettingItself() throws {
        let h = Harness()
        try h.startRunning()
        h.connect(0x0040)
        h.transport.inject(h4: Self.resetComplete)
        #expect(h.delegate.willResets.count == 1)
        #expect(!h.driver.isConnected(handle: 0x0040))
        h.loop.run(until: { !h.delegate.didResets.isEmpty })
        #expect(h.transport.sentHex == Self.initialisation)
        // The answer to the host's own Reset is no reset of the controller's.
        h.transport.clearSent()
        var answered: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { answered = $0 }
        h.loop.run(until: { answered != nil })
        #expect(answered == .success(StatusReturn()))
        #expect(h.delegate.willResets.count == 1)
    }

    @Test func aSecondHardwareErrorDuringTheRecoveryStartsItOver() throws {
        let h = Harness()
        try h.startRunning()
        h.controller.answers.removeAll()
        h.controller.silentByDefault = true
        h.transport.inject(h4: "04 10 01 01")
        h.settle()
        #expect(h.transport.sentHex == [S.reset])
        h.transport.inject(h4: Self.resetComplete)
        #expect(h.transport.sentHex == [S.reset, S.readLocalVersion])
        // Again, while the controller is being initialised: the run under way stops.
        h.transport.inject(h4: "04 10 01 02")
        #expect(h.transport.sentHex == [S.reset, S.readLocalVersion, S.reset])
        // Told once: the layer above already knows the controller is resetting.
        #expect(h.delegate.willResets == [.controllerReset("hardware error 0x1")])
        h.controller.silentByDefault = false
        h.controller.scriptStartup()
        // The late answer to the first run's Read Local Version Information matches nothing.
        h.transport.inject(h4: "04 0e 0c 01 0110 00 0d 3412 0d 5f00 7856")
        h.transport.inject(h4: Self.resetComplete)
        h.loop.run(until: { !h.delegate.didResets.isEmpty })
        h.loop.run(for: .seconds(10))
        #expect(h.transport.sentHex == [S.reset, S.readLocalVersion] + Self.initialisation)
        #expect(h.delegate.didResets.count == 1)
        #expect(h.delegate.closes.isEmpty)
    }

    @Test func aControllerThatKeepsFailingIsGivenUp() throws {
        let h = Harness()
        try h.startRunning()
        // Three recoveries within a minute are fine.
        for n in 1...3 {
            h.transport.inject(h4: "04 10 01 0\(n)")
            h.loop.run(until: { h.delegate.didResets.count == n })
            h.loop.run(for: .seconds(10))
        }
        #expect(h.delegate.didResets.count == 3 && h.delegate.closes.isEmpty)
        // A fourth: the controller is gone for the host.
        h.transport.inject(h4: "04 10 01 04")
        h.settle()
        #expect(h.delegate.willResets.count == 3)
        #expect(h.delegate.closes.count == 1)
        let reason = "\(h.delegate.closes.first.flatMap { $0 }.map { "\($0)" } ?? "")"
        #expect(reason.contains("reset 4 times within 60 s"), "\(reason)")
        #expect(!h.transport.isOpen)
        var late: Result<StatusReturn, HCIError>?
        h.driver.send(Reset()) { late = $0 }
        #expect(late == .failure(.transportClosed(nil)))
    }

    @Test func failuresFarApartAreEachRecovered() throws {
        let h = Harness()
        try h.startRunning()
        for n in 1...6 {
            h.transport.inject(h4: "04 10 01 01")
            h.loop.run(until: { h.delegate.didResets.count == n })
            h.loop.run(for: .seconds(25))
        }
        #expect(h.delegate.didResets.count == 6 && h.delegate.closes.isEmpty)
    }

    @Test func aControllerThatCannotBeInitialisedAgainIsGivenUp() throws {
        let h = Harness()
        try h.startRunning()
        h.controller.answer(0x0C03, .complete(returnParameters: "03"))   // Reset: Hardware Failure
        h.transport.inject(h4: "04 10 01 01")
        h.loop.run(until: { !h.delegate.closes.isEmpty })
        #expect(h.delegate.didResets.isEmpty)
        let reason = "\(h.delegate.closes.first.flatMap { $0 }.map { "\($0)" } ?? "")"
        #expect(reason.contains("could not be initialised again"), "\(reason)")
    }

    @Test func aHardwareErrorWhileStartingStartsTheInitialisationOver() throws {
        let h = Harness()
        h.controller.silentByDefault = true
        var result: Result<ControllerInfo, HCIError>?
        h.driver.start { result = $0 }
        h.settle()
        h.transport.inject(h4: Self.resetComplete)
        #expect(h.transport.sentHex == [S.reset, S.readLocalVersion])
        h.transport.inject(h4: "04 10 01 07")
        #expect(result == nil)
        #expect(h.transport.sentHex == [S.reset, S.readLocalVersion, S.reset])
        h.controller.silentByDefault = false
        h.controller.scriptStartup()
        h.transport.inject(h4: Self.resetComplete)
        h.loop.run(until: { result != nil })
        #expect(try result?.get().address == BluetoothAddress("C0:11:22:33:44:55"))
        // Nothing was running: the layer above hears no reset.
        #expect(h.delegate.willResets.isEmpty && h.delegate.didResets.isEmpty)
        #expect(h.transport.sentHex == [S.reset, S.readLocalVersion] + Self.initialisation)
    }
}
