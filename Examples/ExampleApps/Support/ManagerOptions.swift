import CoreBluetooth
import Foundation

/// The managers' init options the examples use.
public enum ManagerOptions {
    /// Where a manager's device stands on the virtual radio, in metres (a Linux extension, so
    /// RSSI follows from distance); nil or empty for none.
    public static func position(_ position: [Double]?) -> [String: Any]? {
        guard let position, !position.isEmpty else { return nil }
        return [CBManagerOptionLinuxPositionKey: position]
    }
}

/// A dynamic characteristic's read answer, from `request.offset` on (the book's ch. 7 handler
/// with its range bug fixed: `offset..<count`, and `.invalidOffset` past the end).
public func answerRead(_ request: CBATTRequest, with value: Data, on manager: CBPeripheralManager) {
    guard request.offset <= value.count else {
        manager.respond(to: request, withResult: .invalidOffset)
        return
    }
    request.value = value.subdata(in: value.startIndex + request.offset..<value.endIndex)
    manager.respond(to: request, withResult: .success)
}

/// Lowercase hex without separators, as the book's `hexEncodedString()`: "48656c6c6f".
public func hexString(_ data: Data) -> String {
    data.map { String(format: "%02x", $0) }.joined()
}
