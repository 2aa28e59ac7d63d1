// The shared-radio wire protocol (RadioWireMessage): frame bodies from another process on the
// Unix socket, decoded and framed again, and the link-layer PDUs they carry decoded as the
// receiving controller decodes them (advertising, extended advertising of the kind given,
// data PDUs with or without a MIC, and the LL control PDUs inside).
@testable import VirtualController

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: min(size, RadioWireMessage.maxFrameLength)))
    guard let message = try? RadioWireMessage(decoding: body) else { return 0 }
    _ = message.frame()
    switch message {
    case .sendAdvertising(_, _, let pdu), .heardAdvertising(_, _, _, let pdu):
        if let decoded = try? AdvertisingPDU(decoding: pdu) { _ = decoded.encode() }
    case .sendExtended(_, _, _, let kind, let pdu), .heardExtended(_, _, _, let kind, _, let pdu):
        if let kind = try? ExtendedAdvertisingPDU.kind(wire: kind), let decoded = try? ExtendedAdvertisingPDU(decoding: pdu, as: kind) {
            _ = decoded.encode()
        }
    case .sendData(_, _, _, let mic, let pdu), .heardData(_, _, _, let mic, let pdu):
        if let decoded = try? DataPDU(decoding: pdu, encrypted: mic) {
            _ = decoded.encode()
            if decoded.llid == .control { _ = try? LLControlPDU(decoding: decoded.payload[...]) }
        }
    default:
        break
    }
    return 0
}
