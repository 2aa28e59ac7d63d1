import Scheduling
/// An attribute handle (Core spec Vol 3 Part F §3.2.2): 0x0001…0xFFFF; 0x0000 is reserved and
/// never names an attribute.
public struct ATTHandle: RawRepresentable, Hashable, Comparable, Sendable, ExpressibleByIntegerLiteral,
    CustomStringConvertible
{
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }
    public init(integerLiteral value: UInt16) { rawValue = value }

    /// 0x0000: not a valid handle.
    public static let invalid = ATTHandle(0x0000)
    /// The lowest valid handle.
    public static let min = ATTHandle(0x0001)
    /// The highest handle.
    public static let max = ATTHandle(0xFFFF)

    public var isValid: Bool { rawValue != 0 }

    /// The next handle, or nil after 0xFFFF.
    public var next: ATTHandle? { rawValue == .max ? nil : ATTHandle(rawValue + 1) }

    public static func < (a: ATTHandle, b: ATTHandle) -> Bool { a.rawValue < b.rawValue }

    /// "0x002A".
    public var description: String {
        let hex = String(rawValue, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 4 - hex.count) + hex
    }
}

extension ATTHandle: IntegerMapKey {
    @inlinable public var integerMapBits: UInt64 { UInt64(rawValue) }
}
