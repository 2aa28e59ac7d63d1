import HCI
import Scheduling

/// An LE address as an `IntegerKeyMap` key, for the tables every advertising report looks in
/// (the central service's advertisers, the API's advertisement cache): one multiply instead of
/// SipHash. Keys compare whole (type and address).
public struct AddressKey: IntegerMapKey, Sendable {
    public let address: LEAddress

    @inlinable
    public init(_ address: LEAddress) { self.address = address }

    @inlinable
    public var integerMapBits: UInt64 { address.packed }
}
