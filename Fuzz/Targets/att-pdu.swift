// ATT PDUs (Vol 3 Part F §3.4): every opcode decoded from a peer's bytes, then encoded again.
import ATT

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let pdu = try? ATTPDU(decoding: bytes) {
        _ = pdu.encode()
        _ = pdu.opcode.name
        _ = pdu.isRequest
        _ = pdu.expectedResponseOpcode
    }
    return 0
}
