// cbtool's peripheral spec JSON (`cbtool simulate --spec`): decoded and validated as
// `PeripheralSpec.load` does; then what `cbtool simulate` computes from a valid spec before it
// runs (each notification schedule's timer delays and its counter's values).
@testable import CBTool
@testable import CoreBluetooth
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let json = Data(bytes: data, count: size)
    guard let spec = try? JSONDecoder().decode(PeripheralSpec.self, from: json), (try? spec.validate()) != nil else { return 0 }
    simulateSchedules(of: spec)
    return 0
}

/// The arithmetic `SimulatedPeripheral` does with a spec's numbers.
func simulateSchedules(of spec: PeripheralSpec) {
    for service in spec.services {
        for characteristic in service.characteristics ?? [] {
            guard let notify = characteristic.notify else { continue }
            for n in [0, 1, 2, 1_000_003, Int.max] { _ = SimulatedPeripheral.value(number: n, of: notify) }
            _ = CBManager.loopNanoseconds(after: notify.interval ?? 0)
            if let sequence = notify.sequence {
                for timed in sequence { _ = CBManager.loopNanoseconds(after: timed.at) }
                let period = notify.period ?? SimulatedPeripheral.defaultPeriod(of: sequence)
                _ = CBManager.loopNanoseconds(after: max(period, sequence.last?.at ?? 0))
            }
        }
    }
}
