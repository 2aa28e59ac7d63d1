// `cbtool spec-from-capture`'s reader: any btsnoop bytes rebuilt into a device's session, the
// spec written from it (which `cbtool simulate` must accept or refuse cleanly), and the timer
// delays and values `cbtool simulate` computes from that spec.
@testable import CBTool
@testable import CoreBluetooth

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let session = try? CaptureReader.read(bytes) else { return 0 }
    let (spec, _) = session.spec()
    guard (try? spec.validate()) != nil else { return 0 }
    for service in spec.services {
        for characteristic in service.characteristics ?? [] {
            guard let notify = characteristic.notify, let sequence = notify.sequence else { continue }
            for timed in sequence { _ = CBManager.loopNanoseconds(after: timed.at) }
            let period = notify.period ?? SimulatedPeripheral.defaultPeriod(of: sequence)
            _ = CBManager.loopNanoseconds(after: max(period, sequence.last?.at ?? 0))
        }
    }
    return 0
}
