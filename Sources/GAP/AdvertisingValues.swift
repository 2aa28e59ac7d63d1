import AssignedNumbers
import ByteCoding

/// How many octets each UUID takes in a UUID list or service data structure.
public enum UUIDWidth: Int, Sendable, Hashable, CaseIterable, Comparable {
    case bits16 = 2
    case bits32 = 4
    case bits128 = 16

    public var byteCount: Int { rawValue }

    /// The shortest form `uuid` has: 16-bit for SIG aliases, then 32-bit, else 128-bit.
    public static func shortest(for uuid: BluetoothUUID) -> UUIDWidth {
        if uuid.uuid16 != nil { return .bits16 }
        if uuid.uuid32 != nil { return .bits32 }
        return .bits128
    }

    /// Whether `uuid` has a form of this width.
    public func canEncode(_ uuid: BluetoothUUID) -> Bool { uuid.littleEndianBytes(length: rawValue) != nil }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// The Flags AD type (CSS Part A §1.3). Only in advertising data, never in a scan response.
public struct AdvertisingFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let leLimitedDiscoverableMode = Self(rawValue: 0x01)
    public static let leGeneralDiscoverableMode = Self(rawValue: 0x02)
    public static let brEdrNotSupported = Self(rawValue: 0x04)
    public static let simultaneousLEAndBREDRController = Self(rawValue: 0x08)
    /// Previously used; reserved in current versions of the supplement.
    public static let simultaneousLEAndBREDRHost = Self(rawValue: 0x10)

    /// 0x06: what an LE-only device in the general discoverable mode advertises.
    public static let leGeneralDiscoverableLEOnly: Self = [.leGeneralDiscoverableMode, .brEdrNotSupported]
}

/// Service Data (CSS Part A §1.11): a service UUID followed by service-defined octets.
public struct ServiceData: Hashable, Sendable {
    public var uuid: BluetoothUUID
    /// The UUID's form on the air, which picks the AD type (0x16, 0x20 or 0x21).
    public var width: UUIDWidth
    public var data: [UInt8]

    /// - Parameter width: The UUID form; nil, or a form `uuid` does not have, uses the shortest.
    public init(uuid: BluetoothUUID, data: [UInt8], width: UUIDWidth? = nil) {
        self.uuid = uuid
        self.data = data
        if let width, width.canEncode(uuid) { self.width = width } else { self.width = .shortest(for: uuid) }
    }
}

/// Manufacturer Specific Data (CSS Part A §1.4): a company identifier then vendor octets.
public struct ManufacturerData: Hashable, Sendable {
    /// The SIG-assigned company identifier (Apple is 0x004C).
    public var companyIdentifier: UInt16
    /// The octets after the company identifier.
    public var data: [UInt8]

    public init(companyIdentifier: UInt16, data: [UInt8]) {
        self.companyIdentifier = companyIdentifier
        self.data = data
    }

    /// The whole AD data: the company identifier (little-endian) then `data`. This is the form
    /// Core Bluetooth's `CBAdvertisementDataManufacturerDataKey` carries.
    public var bytes: [UInt8] {
        [UInt8(truncatingIfNeeded: companyIdentifier), UInt8(companyIdentifier >> 8)] + data
    }

    /// From the whole AD data; nil when it is too short to hold a company identifier.
    public init?(bytes: some Collection<UInt8>) {
        var reader = ByteReader(Array(bytes), context: "Manufacturer Specific Data")
        guard let company = try? reader.u16() else { return nil }
        self.init(companyIdentifier: company, data: reader.rest())
    }
}

/// The LE Role AD type (CSS Part A §1.17).
public enum AdvertisedLERole: UInt8, Hashable, Sendable {
    case peripheralOnly = 0x00
    case centralOnly = 0x01
    case peripheralAndCentralPreferPeripheral = 0x02
    case peripheralAndCentralPreferCentral = 0x03
}

/// A URI scheme as the URI AD type encodes it: one Unicode code point from the SIG's "URI
/// Scheme Name String Mapping" (Assigned Numbers), written in UTF-8 ahead of the rest of the URI.
public struct URIScheme: Hashable, Sendable, CustomStringConvertible {
    /// The code point (a Unicode scalar value; 0x16 is "http:", 0x17 "https:").
    public var codePoint: UInt32
    public init(codePoint: UInt32) { self.codePoint = codePoint }

    /// 0x01: no scheme mapping; the rest of the URI carries its own scheme.
    public static let empty = URIScheme(codePoint: 0x01)
    public static let http = URIScheme(codePoint: 0x16)
    public static let https = URIScheme(codePoint: 0x17)

    /// The start of the assigned table (IANA's permanent schemes in alphabetical order).
    private static let names: [UInt32: String] = [
        0x01: "", 0x02: "aaa:", 0x03: "aaas:", 0x04: "about:", 0x05: "acap:", 0x06: "acct:", 0x07: "cap:",
        0x08: "cid:", 0x09: "coap:", 0x0A: "coaps:", 0x0B: "crid:", 0x0C: "data:", 0x0D: "dav:",
        0x0E: "dict:", 0x0F: "dns:", 0x10: "file:", 0x11: "ftp:", 0x12: "geo:", 0x13: "go:",
        0x14: "gopher:", 0x15: "h323:", 0x16: "http:", 0x17: "https:",
    ]

    /// The scheme name string with its colon ("https:"), "" for `empty`, nil when not known here.
    public var name: String? { Self.names[codePoint] }

    /// The known scheme whose name starts `uri` (the longest one, so "https:" beats "http:").
    static func longestKnownPrefix(of uri: String) -> (URIScheme, String)? {
        var best: (URIScheme, String)? = nil
        for (code, name) in names where !name.isEmpty && uri.hasPrefix(name) {
            if name.count > (best?.0.name?.count ?? 0) { best = (URIScheme(codePoint: code), String(uri.dropFirst(name.count))) }
        }
        return best
    }

    public var description: String { name.map { $0.isEmpty ? "(none)" : $0 } ?? "U+\(String(codePoint, radix: 16))" }
}

/// The URI AD type (CSS Part A §1.18): a scheme code point, then the rest of the URI in UTF-8.
public struct AdvertisedURI: Hashable, Sendable, CustomStringConvertible {
    public var scheme: URIScheme
    /// What follows the scheme, e.g. "//example.org/" after "https:".
    public var remainder: String

    public init(scheme: URIScheme, remainder: String) {
        self.scheme = scheme
        self.remainder = remainder
    }

    /// From a whole URI, using the mapping for its scheme when the table here has it
    /// ("https://example.org" → 0x17 + "//example.org"), else `.empty` and the whole string.
    public init(_ uri: String) {
        if let (scheme, remainder) = URIScheme.longestKnownPrefix(of: uri) {
            self.init(scheme: scheme, remainder: remainder)
        } else {
            self.init(scheme: .empty, remainder: uri)
        }
    }

    /// The whole URI; for a scheme this module cannot name, only the remainder.
    public var string: String { (scheme.name ?? "") + remainder }

    /// The AD data: the scheme code point in UTF-8, then the remainder.
    var bytes: [UInt8] {
        var out: [UInt8] = []
        if let scalar = Unicode.Scalar(scheme.codePoint) { out += Array(String(Character(scalar)).utf8) }
        return out + Array(remainder.utf8)
    }

    /// From AD data: valid UTF-8 whose first scalar is the scheme.
    init?(bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self), let first = text.unicodeScalars.first else { return nil }
        self.init(scheme: URIScheme(codePoint: first.value), remainder: String(text.unicodeScalars.dropFirst()))
    }

    public var description: String { string }
}
