// Advertising and scan response data (CSS Part A): strict and lenient decoding, every element's
// typed value, and the re-encoding.
import GAP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let lenient = AdvertisingData(bytes: bytes)
    _ = lenient.description
    for element in lenient.elements {
        _ = element.type
        _ = element.structure
        _ = element.encodedLength
    }
    if let strict = try? AdvertisingData.decode(bytes) {
        _ = strict.structures
        _ = strict.description
    }
    return 0
}
