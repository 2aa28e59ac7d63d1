// ACL reassembly and L2CAP on LE-U (Vol 3 Part A): ACL fragments from a controller, reassembled
// per handle as the HCI driver does, into a link with the fixed channels, LE signalling, a
// credit-based server accepting every SPSM and a credit-based channel of our own being opened,
// so that K-frame reassembly, credits and signalling state all see peer bytes. Between
// fragments the input also sends SDUs, lets time pass (signalling timeouts) and drains the
// controller queue.
@testable import HCIDriver
import HCI
import L2CAP
import L2CAPTesting
import Scheduling

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let loop = EventLoop(pacing: .manual)
    let lower = FakeLowerLayer()
    let setup = input.u8()
    let link = L2CAPLink(handle: 0x40, role: setup & 1 == 0 ? .central : .peripheral, lower: lower, loop: loop)
    lower.holdsSentPDUs = setup & 2 != 0
    var channels: [L2CAPCreditChannel] = []
    let ours = CreditBasedChannelParameters(mtu: setup & 4 == 0 ? 64 : 512, mps: setup & 8 == 0 ? 23 : 100,
                                            initialCredits: UInt16(setup >> 4))
    link.creditBasedServer = { psm in
        psm & 1 == 0 ? .accept(ours, onOpen: { channels.append($0) }) : .refuse(.spsmNotSupported)
    }
    link.att.onReceive = { _ in }
    link.securityManager.onReceive = { _ in }
    if setup & 0x10 != 0 {
        link.openCreditBasedChannel(psm: 0x80, parameters: ours, enhanced: setup & 0x20 != 0) { result in
            if case .success(let channel) = result { channels.append(channel) }
        }
    }
    var reassembler = ACLReassembler()
    while !input.isEmpty {
        let op = input.u8()
        switch op & 7 {
        case 0, 1, 2, 3:
            // An ACL fragment: two handles, boundary flags from the op byte.
            let boundary = ACLDataPacket.Boundary(rawValue: (op >> 3) & 3) ?? .continuing
            let handle: ConnectionHandle = op & 0x20 == 0 ? 0x40 : 0x41
            let packet = ACLDataPacket(handle: handle, boundary: boundary, data: input.record())
            for outcome in reassembler.receive(packet) {
                if case .pdu(let pdu) = outcome, handle == 0x40 { link.receive(pdu) }
            }
        case 4:
            // A whole PDU straight to the link, as the driver's fast path hands it.
            link.receive(input.record())
        case 5:
            let sdu = input.record()
            for channel in channels where channel.isOpen { _ = channel.send(sdu + sdu + sdu) }
        case 6:
            loop.run(for: .seconds(Int64(op >> 3)))
        default:
            lower.drain(link)
            if op & 0x80 != 0, let channel = channels.first(where: \.isOpen) { channel.close() }
        }
    }
    loop.run(for: .seconds(60))
    link.close()
    loop.runUntilIdle()
    return 0
}
