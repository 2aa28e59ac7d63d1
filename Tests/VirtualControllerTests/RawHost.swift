import HCI
import HCITransport
import Scheduling
import Testing
@testable import VirtualController

/// A host that speaks raw HCI to a virtual controller, for tests that check the controller's
/// behaviour packet by packet.
final class RawHost: HCIPacketSink, @unchecked Sendable {
    let controller: VirtualController
    let transport: HCITransport
    var loop: EventLoop { controller.radio.loop }
    var events: [HCIEvent] = []
    var acl: [ACLDataPacket] = []
    var closedWith: HCITransportError?? = nil

    init(_ controller: VirtualController) {
        self.controller = controller
        transport = controller.makeHostTransport()
        try! transport.open(on: controller.radio.loop, sink: self)
    }

    func receive(_ packet: HCIPacket) {
        switch packet {
        case .event(let e):
            do { events.append(try HCIEvent(decoding: e)) } catch { Issue.record("controller sent an undecodable event: \(error)") }
        case .acl(let a): acl.append(a)
        default: Issue.record("unexpected packet from controller: \(packet)")
        }
    }

    func transportClosed(_ error: HCITransportError?) { closedWith = .some(error) }

    /// Sends a command and runs the loop until its Command Complete or Command Status arrives.
    @discardableResult
    func command<C: HCICommand>(_ command: C, sourceLocation: SourceLocation = #_sourceLocation) -> HCIEvent? {
        transport.send(.command(command.packet))
        return awaitCompletion(of: C.opcode, sourceLocation: sourceLocation)
    }

    func raw(_ packet: HCICommandPacket, sourceLocation: SourceLocation = #_sourceLocation) -> HCIEvent? {
        transport.send(.command(packet))
        return awaitCompletion(of: packet.opcode, sourceLocation: sourceLocation)
    }

    private func awaitCompletion(of opcode: HCIOpcode, sourceLocation: SourceLocation) -> HCIEvent? {
        var found: HCIEvent?
        loop.run(until: {
            found = self.events.first { e in
                switch e {
                case .commandComplete(let c): c.opcode == opcode
                case .commandStatus(let s): s.opcode == opcode
                default: false
                }
            }
            return found != nil
        }, timeout: .seconds(1))
        guard let found else {
            Issue.record("no completion for \(opcode)", sourceLocation: sourceLocation)
            return nil
        }
        events.removeAll { e in
            if case .commandComplete(let c) = e, c.opcode == opcode { return true }
            if case .commandStatus(let s) = e, s.opcode == opcode { return true }
            return false
        }
        return found
    }

    /// The status a command was answered with.
    func status<C: HCICommand>(_ command: C, sourceLocation: SourceLocation = #_sourceLocation) -> HCIStatus? {
        switch self.command(command, sourceLocation: sourceLocation) {
        case .commandComplete(let c)?: c.status
        case .commandStatus(let s)?: s.status
        default: nil
        }
    }

    /// Sends a command expected to succeed with Command Complete and decodes its return parameters.
    func returning<C: HCICommand>(_ command: C, sourceLocation: SourceLocation = #_sourceLocation) -> C.ReturnParameters? {
        guard case .commandComplete(let c)? = self.command(command, sourceLocation: sourceLocation) else { return nil }
        return try? C.ReturnParameters(returnBytes: c.returnParameters, context: C.name)
    }

    /// Standard bring-up: reset and unmask everything a host wants.
    func initialize(leEventMask: UInt64 = 0x0000_0000_000F_FFFF) {
        #expect(status(Reset()) == .success)
        #expect(status(SetEventMask(eventMask: 0x3DBF_FFFF_FFFF_FFFF)) == .success)
        #expect(status(LESetEventMask(leEventMask: leEventMask)) == .success)
    }

    /// Removes and returns the LE meta events seen so far.
    func takeLEEvents() -> [LEMetaEvent] {
        var taken: [LEMetaEvent] = []
        events.removeAll { e in
            if case .le(let le) = e { taken.append(le); return true }
            return false
        }
        return taken
    }

    func take<T>(_ match: (HCIEvent) -> T?) -> [T] {
        var taken: [T] = []
        events.removeAll { e in
            if let t = match(e) { taken.append(t); return true }
            return false
        }
        return taken
    }

    func sendACL(handle: ConnectionHandle, _ data: [UInt8], boundary: ACLDataPacket.Boundary = .firstNonFlushable) {
        transport.send(.acl(ACLDataPacket(handle: handle, boundary: boundary, data: data)))
    }
}

/// Two devices on one radio with raw hosts, ready to advertise, scan and connect.
struct TwoDevices {
    let radio: VirtualRadio
    let a: RawHost
    let b: RawHost
    var loop: EventLoop { radio.loop }
    static let addressA = BluetoothAddress("C0:00:00:00:00:0A")!
    static let addressB = BluetoothAddress("C0:00:00:00:00:0B")!

    /// `configurationA`: device A's controller's (B has the defaults).
    init(airTime: AirTimeMode = .instant, distance: Double = 1,
         configurationA: VirtualController.Configuration = VirtualController.Configuration()) {
        radio = VirtualRadio(loop: EventLoop(name: "test-radio", pacing: .manual), airTime: airTime, seed: 7)
        a = RawHost(VirtualController(radio: radio, address: Self.addressA, configuration: configurationA))
        b = RawHost(VirtualController(radio: radio, address: Self.addressB, position: RadioPosition(x: distance)))
        a.initialize()
        b.initialize()
    }

    /// B advertises connectably (ADV_IND), A connects. Returns (central handle, peripheral handle).
    func connect(intervalMin: UInt16 = 0x0018) -> (ConnectionHandle, ConnectionHandle)? {
        #expect(b.status(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x0020, advertisingIntervalMax: 0x0020, advertisingType: .advInd,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll)) == .success)
        #expect(b.status(LESetAdvertisingEnable(advertisingEnable: true)) == .success)
        #expect(a.status(LECreateConnection(
            leScanInterval: 0x0010, leScanWindow: 0x0010, initiatorFilterPolicy: .peerAddress,
            peerAddressType: .publicDevice, peerAddress: Self.addressB, ownAddressType: .publicDevice,
            connectionIntervalMin: intervalMin, connectionIntervalMax: intervalMin, maxLatency: 0, supervisionTimeout: 0x0048,
            minCELength: 0, maxCELength: 0)) == .success)
        var central: ConnectionHandle?
        var peripheral: ConnectionHandle?
        loop.run(until: {
            for e in a.takeLEEvents() { if case .enhancedConnectionComplete(let c) = e, c.status == .success { central = c.connectionHandle } }
            for e in b.takeLEEvents() { if case .enhancedConnectionComplete(let c) = e, c.status == .success { peripheral = c.connectionHandle } }
            return central != nil && peripheral != nil
        }, timeout: .seconds(2))
        guard let central, let peripheral else { return nil }
        return (central, peripheral)
    }
}
