import AssignedNumbers
import Foundation

/// A Bluetooth UUID as Core Bluetooth presents it: 16-, 32- or 128-bit, kept in its shortest
/// form so that equal UUIDs compare equal whichever form they were written in.
open class CBUUID: NSObject, NSCopying, @unchecked Sendable {
    /// The UUID this object stands for (a Linux extension: the bridge to the host stack).
    public let bluetoothUUID: BluetoothUUID

    /// Wraps a host-stack UUID (a Linux extension).
    public init(bluetoothUUID: BluetoothUUID) {
        self.bluetoothUUID = bluetoothUUID
        super.init()
    }

    /// A UUID from "180D", "0000180D" or "71DA3FD1-7E10-41C1-B16F-4430B506CDE7" (any case).
    /// Like Apple's, traps on any other string.
    public convenience init(string theString: String) {
        guard let uuid = BluetoothUUID(theString) else {
            preconditionFailure("CBUUID(string:): \"\(theString)\" is not a valid UUID string")
        }
        self.init(bluetoothUUID: uuid)
    }

    /// A UUID from 2, 4 or 16 bytes, most significant first (the order `data` gives).
    /// Like Apple's, traps on any other length.
    public convenience init(data theData: Data) {
        let uuid: BluetoothUUID?
        switch theData.count {
        case 2, 4: uuid = BluetoothUUID(littleEndian: theData.reversed())
        case 16: uuid = BluetoothUUID(bigEndian: theData)
        default: uuid = nil
        }
        guard let uuid else {
            preconditionFailure("CBUUID(data:): data must be 2, 4 or 16 bytes, not \(theData.count)")
        }
        self.init(bluetoothUUID: uuid)
    }

    /// A UUID from a Foundation `UUID`.
    public convenience init(nsuuid theUUID: UUID) {
        let t = theUUID.uuid
        let bytes = [t.0, t.1, t.2, t.3, t.4, t.5, t.6, t.7, t.8, t.9, t.10, t.11, t.12, t.13, t.14, t.15]
        self.init(bluetoothUUID: BluetoothUUID(bigEndian: bytes)!)
    }

    /// The shortest form's bytes, most significant first: 2 bytes for a 16-bit SIG UUID,
    /// 4 for a 32-bit one, else 16.
    open var data: Data {
        if let short = bluetoothUUID.uuid16 { return Data([UInt8(short >> 8), UInt8(truncatingIfNeeded: short)]) }
        if let short = bluetoothUUID.uuid32 {
            return Data((0..<4).map { UInt8(truncatingIfNeeded: short >> (24 - 8 * UInt32($0))) })
        }
        return Data(bluetoothUUID.bigEndianBytes)
    }

    /// "180D" for a 16-bit SIG UUID, "12345678" for a 32-bit one, else the full upper-case form.
    open var uuidString: String {
        if bluetoothUUID.uuid16 == nil, let short = bluetoothUUID.uuid32 {
            let s = String(short, radix: 16, uppercase: true)
            return String(repeating: "0", count: 8 - s.count) + s
        }
        return bluetoothUUID.description
    }

    /// The UUID string.
    open override var description: String { uuidString }

    /// Equal when the UUIDs are equal, whichever form either was created from.
    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CBUUID else { return false }
        return other.bluetoothUUID == bluetoothUUID
    }

    /// Consistent with `isEqual(_:)`.
    open override var hash: Int { bluetoothUUID.hashValue }

    /// CBUUID is immutable, so a copy is the object itself.
    open func copy(with zone: NSZone? = nil) -> Any { self }
}

/// Characteristic Extended Properties descriptor (0x2900).
public let CBUUIDCharacteristicExtendedPropertiesString = "2900"
/// Characteristic User Description descriptor (0x2901); its value is a `String`.
public let CBUUIDCharacteristicUserDescriptionString = "2901"
/// Client Characteristic Configuration descriptor (0x2902); its value is an `NSNumber`.
public let CBUUIDClientCharacteristicConfigurationString = "2902"
/// Server Characteristic Configuration descriptor (0x2903).
public let CBUUIDServerCharacteristicConfigurationString = "2903"
/// Characteristic Presentation Format descriptor (0x2904); its value is `Data`.
public let CBUUIDCharacteristicFormatString = "2904"
/// Characteristic Aggregate Format descriptor (0x2905).
public let CBUUIDCharacteristicAggregateFormatString = "2905"
/// Valid Range descriptor (0x2906).
public let CBUUIDCharacteristicValidRangeString = "2906"
/// Observation Schedule descriptor (0x2910).
public let CBUUIDCharacteristicObservationScheduleString = "2910"
/// The characteristic that publishes an L2CAP channel's PSM (a little-endian UInt16).
public let CBUUIDL2CAPPSMCharacteristicString = "ABDD3056-28FA-441D-A470-55A75A52553A"
