import ByteCoding

/// One AD structure (Core spec Vol 3 Part C §11): `Length | AD Type | AD Data`, where Length
/// counts the type octet and the data. Advertising data and scan response data are sequences
/// of these.
public struct AdvertisingStructure: Hashable, Sendable, CustomStringConvertible {
    public var type: AdvertisingDataType
    public var data: [UInt8]

    /// The length octet counts the type too, so one structure carries at most 254 data octets.
    public static let maximumDataLength = 254

    public init(type: AdvertisingDataType, data: [UInt8] = []) {
        self.type = type
        self.data = data
    }

    /// Octets on the air: length, type and data (data past `maximumDataLength` is cut).
    public var encodedLength: Int { 2 + min(data.count, Self.maximumDataLength) }

    /// Writes `Length | AD Type | AD Data`. Data past 254 octets cannot be described by the
    /// length octet; it is cut (a caller error) rather than trapping, as the HCI commands do.
    public func encode(into writer: inout ByteWriter) {
        let significant = data.prefix(Self.maximumDataLength)
        writer.u8(UInt8(significant.count + 1))
        writer.u8(type.rawValue)
        writer.bytes(significant)
    }

    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: encodedLength)
        encode(into: &writer)
        return writer.bytes
    }

    /// Encodes a sequence of structures back to back (the significant part; no padding).
    public static func encode(_ structures: [AdvertisingStructure]) -> [UInt8] {
        var writer = ByteWriter(capacity: structures.reduce(0) { $0 + $1.encodedLength })
        for structure in structures { structure.encode(into: &writer) }
        return writer.bytes
    }

    /// The result of decoding a sequence of AD structures.
    public struct DecodedList: Equatable, Sendable {
        /// Every well-formed structure, in order.
        public var structures: [AdvertisingStructure]
        /// Why decoding stopped early, if it did: a structure whose length runs past the end of
        /// the data, or non-zero octets after the zero length octet that ends the significant part.
        public var malformation: DecodeError?
    }

    /// Decodes structures until the data ends or a zero length octet ends the significant part
    /// (Vol 3 Part C §11: a zero Length allows early termination; what follows is padding).
    /// Never throws and never traps: a structure that runs past the end stops decoding, and
    /// everything before it is returned.
    public static func decodeList(_ bytes: some Collection<UInt8>) -> DecodedList {
        var reader = ByteReader(Array(bytes), context: "AD structure")
        var structures: [AdvertisingStructure] = []
        while !reader.isAtEnd {
            let start = reader.offset
            do {
                let length = Int(try reader.u8())
                if length == 0 {
                    let padding = reader.rest()
                    if padding.contains(where: { $0 != 0 }) {
                        return DecodedList(structures: structures, malformation: DecodeError(
                            "AD structure: \(padding.count) octets after the terminating zero length at offset \(start) are not zero padding"))
                    }
                    break
                }
                let type = AdvertisingDataType(try reader.u8())
                let data = try reader.bytes(length - 1)
                structures.append(AdvertisingStructure(type: type, data: data))
            } catch {
                return DecodedList(structures: structures, malformation: DecodeError(
                    "AD structure at offset \(start): length \(bytes.dropFirst(start).first ?? 0) runs past the end of \(bytes.count) octets"))
            }
        }
        return DecodedList(structures: structures, malformation: nil)
    }

    public var description: String { "\(type): \(data.hexString)" }
}
