// `cbtool spec-from-capture`'s reader: any btsnoop bytes rebuilt into a device's session, and
// the spec written from it (which `cbtool simulate` must accept or refuse cleanly).
import CBTool

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let session = try? CaptureReader.read(bytes) else { return 0 }
    let (spec, _) = session.spec()
    try? spec.validate()
    return 0
}
