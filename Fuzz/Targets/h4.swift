// H4 framing (Vol 4 Part A): a byte stream from a UART or TCP controller, cut into chunks of
// the size the first byte picks, framed, and each event decoded as the driver would.
import HCI
import HCITransport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let chunk = Int(input.u8()) + 1
    var framer = H4Framer(initialCapacity: 16)
    while !input.isEmpty {
        framer.append(contentsOf: input.take(chunk))
        do {
            while let packet = try framer.nextPacket() {
                if case .event(let event) = packet { _ = try? HCIEvent(decoding: event) }
            }
        } catch {
            return 0  // framing lost: the transport closes
        }
    }
    return 0
}
