// The shared-radio wire protocol (RadioWireMessage): frame bodies from another process on the
// Unix socket, decoded and framed again.
@testable import VirtualController

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: min(size, RadioWireMessage.maxFrameLength)))
    if let message = try? RadioWireMessage(decoding: body) { _ = message.frame() }
    return 0
}
