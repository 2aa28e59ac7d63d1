// btsnoop captures (RFC 1761 layout, datalink 1002): the file reader, then each record's packet.
import HCI
import HCITransport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let reader = try? BtsnoopReader(bytes: bytes) else { return 0 }
    for record in reader.records {
        _ = record.direction
        _ = record.unixMicroseconds
        if case .event(let event)? = try? record.packet() { _ = try? HCIEvent(decoding: event) }
    }
    return 0
}
