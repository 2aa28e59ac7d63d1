import Foundation

/// A value that crosses to the delegate queue as is (dictionaries of `Any` the app receives).
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension Unchecked where Value == () -> Bool {
    /// The closure as `@Sendable`, for a caller that promises it only reads thread-safe state.
    var sendable: @Sendable () -> Bool { { value() } }
}

/// The name a device gives itself in its GAP service until the app names it (a peripheral
/// manager's advertised name): the machine's host name, as a phone uses its own name.
enum LocalDeviceName {
    static let current: String = {
        let name = ProcessInfo.processInfo.hostName
        return name.isEmpty || name == "localhost" ? "CoreBluetooth" : String(name.prefix(248))
    }()
}

extension Data {
    /// The bytes as an array, copied in one go: `[UInt8](data)` goes through Data's generic
    /// iterator byte by byte (about 1,000 instructions for 20 bytes, once per notification).
    var byteArray: [UInt8] {
        let count = self.count
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = copyBytes(to: buffer)
        }
    }
}
