import ByteCoding
import HCI
import HCIDriver
import HCITesting
import HCITransport
import Scheduling

extension ScriptedController {
    /// Scripts a complete controller for `start`.
    /// - supportedCommands: the 64-octet bitmap.
    /// - leBuffer: LE Read Buffer Size ([v1] and [v2]) ACL length and count.
    /// - brEdrBuffer: Read Buffer Size ACL length and count.
    func scriptStartup(supportedCommands: SupportedCommands = SupportedCommands(),
                       leBuffer: (length: UInt16, count: UInt8) = (27, 3),
                       brEdrBuffer: (length: UInt16, count: UInt16) = (1021, 4),
                       leFeatures: UInt64 = 0x0000_0000_0000_003F) {
        answer(0x0C03, .complete(returnParameters: "00"))                       // Reset
        // Read Local Version Information: HCI 5.4 (0x0D), revision 0x1234, LMP 5.4,
        // company 0x005F, LMP subversion 0x5678.
        answer(0x1001, .complete(returnParameters: "00 0d 3412 0d 5f00 7856"))
        answer(0x1002, .complete(returnParameters: "00" + supportedCommands.bytes.hexString))
        // LMP features page 0: bit 38 (LE Supported (Controller)) = octet 4 bit 6.
        answer(0x1003, .complete(returnParameters: "00 0000000040000000"))
        // BD_ADDR C0:11:22:33:44:55, least significant byte first.
        answer(0x1009, .complete(returnParameters: "00 554433 2211c0"))
        answer(0x0C01, .complete(returnParameters: "00"))                       // Set Event Mask
        answer(0x0C63, .complete(returnParameters: "00"))                       // Set Event Mask Page 2
        answer(0x2001, .complete(returnParameters: "00"))                       // LE Set Event Mask
        var writer = ByteWriter()
        writer.u8(0); writer.u16(leBuffer.length); writer.u8(leBuffer.count)
        answer(0x2002, .complete(returnParameters: writer.bytes.hexString))      // LE Read Buffer Size [v1]
        writer.u16(251); writer.u8(2)                                            // + ISO buffers
        answer(0x2060, .complete(returnParameters: writer.bytes.hexString))      // LE Read Buffer Size [v2]
        writer = ByteWriter()
        writer.u8(0); writer.u16(brEdrBuffer.length); writer.u8(64); writer.u16(brEdrBuffer.count); writer.u16(8)
        answer(0x1005, .complete(returnParameters: writer.bytes.hexString))      // Read Buffer Size
        writer = ByteWriter()
        writer.u8(0); writer.u64(leFeatures)
        answer(0x2003, .complete(returnParameters: writer.bytes.hexString))      // LE Read Local Supported Features
        // LE Read Maximum Data Length: 251 octets / 2120 µs (0x0848) each way.
        answer(0x202F, .complete(returnParameters: "00 fb00 4808 fb00 4808"))
    }
}

/// Records what the driver tells the layer above.
final class RecordingDelegate: HCIDriverDelegate {
    var events: [HCIEvent] = []
    var pdus: [(handle: ConnectionHandle, pdu: [UInt8])] = []
    var canSendMore: [ConnectionHandle] = []
    var closes: [HCITransportError?] = []
    var willResets: [HCIError] = []
    var didResets: [ControllerInfo] = []
    var onEvent: ((HCIEvent) -> Void)?

    func didReceiveEvent(_ event: HCIEvent) {
        events.append(event)
        onEvent?(event)
    }
    func didReceiveACL(handle: ConnectionHandle, pdu: [UInt8]) { pdus.append((handle, pdu)) }
    func driverCanSendMore(handle: ConnectionHandle) { canSendMore.append(handle) }
    func driverDidClose(error: HCITransportError?) { closes.append(error) }
    func driverWillReset(_ error: HCIError) { willResets.append(error) }
    func driverDidReset(_ info: ControllerInfo) { didResets.append(info) }
}

/// A driver on a manual loop, wired to a scripted controller.
final class Harness {
    let loop = EventLoop(name: "test", pacing: .manual)
    let transport = FakeTransport()
    let controller: ScriptedController
    let driver: HCIDriver
    let delegate = RecordingDelegate()

    init(configuration: HCIDriverConfiguration = HCIDriverConfiguration()) {
        controller = ScriptedController(transport: transport, loop: loop)
        driver = HCIDriver(transport: transport, loop: loop, configuration: configuration)
        driver.delegate = delegate
    }

    /// Processes everything ready now without moving the clock.
    func settle() { loop.run(for: .zero) }

    /// Runs `start` against the script; returns its result.
    @discardableResult
    func start() -> Result<ControllerInfo, HCIError>? {
        var result: Result<ControllerInfo, HCIError>?
        driver.start { result = $0 }
        loop.run(until: { result != nil }, timeout: .seconds(120))
        return result
    }

    /// Starts with a scripted controller whose LE buffers are `length` × `count`.
    func startRunning(aclLength: UInt16 = 27, aclCount: UInt8 = 3) throws {
        controller.scriptStartup(leBuffer: (aclLength, aclCount))
        let result = start()
        _ = try result?.get()
        transport.clearSent()
    }

    /// Opens an LE connection as the controller would report it (LE Connection Complete).
    func connect(_ handle: ConnectionHandle) {
        // 3E, length 19: subevent 01, status 00, handle, role 00 (central), peer type 00,
        // peer 66:55:44:33:22:11, interval 0x0018, latency 0, timeout 0x00C8, accuracy 0.
        let h = [UInt8(handle & 0xFF), UInt8(handle >> 8)].hexString
        transport.inject(h4: "04 3e 13 01 00 \(h) 00 00 112233445566 1800 0000 c800 00")
    }

    /// Disconnection Complete, status success, reason 0x13 (remote user terminated).
    func disconnect(_ handle: ConnectionHandle) {
        let h = [UInt8(handle & 0xFF), UInt8(handle >> 8)].hexString
        transport.inject(h4: "04 05 04 00 \(h) 13")
    }

    /// Number Of Completed Packets for one handle.
    func completed(_ handle: ConnectionHandle, _ count: UInt16) {
        transport.inject(.event(NumberOfCompletedPackets(entries: [.init(handle: handle, completedPackets: count)]).packet))
    }
}

extension Array where Element == UInt8 {
    /// A whole L2CAP basic-frame PDU: length, channel ID, then `payload`.
    static func l2cap(channel: UInt16 = 0x0004, payload: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u16(UInt16(payload.count))
        writer.u16(channel)
        writer.bytes(payload)
        return writer.bytes
    }
}
