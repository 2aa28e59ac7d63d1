// HCI events (Vol 4 Part E §7.7) from a controller: the first byte is the event code, the rest
// its parameters (any length up to 255, as the header allows). Decoded events are encoded
// again and named, as logs do.
import HCI

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let code = input.u8()
    let parameters = input.take(255)
    if let event = try? HCIEvent(decoding: HCIEventPacket(code: code, parameters: parameters)) {
        _ = event.packet
        _ = event.name
    }
    // The same bytes as an H4 frame (indicator first), as btsnoop and the transports read them.
    _ = try? HCIPacket(h4: input.bytes)
    return 0
}
