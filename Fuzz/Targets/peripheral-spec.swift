// cbtool's peripheral spec JSON (`cbtool simulate --spec`): decoded and validated as
// `PeripheralSpec.load` does.
import CBTool
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let json = Data(bytes: data, count: size)
    guard let spec = try? JSONDecoder().decode(PeripheralSpec.self, from: json) else { return 0 }
    try? spec.validate()
    return 0
}
