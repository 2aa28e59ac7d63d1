extension Array where Element == UInt8 {
    /// Parses hex such as "01 03 0c 00" or "01030c00" (spaces, colons and a 0x prefix allowed).
    /// Returns nil for anything that is not whole bytes of hex digits.
    public init?(hex: String) {
        var digits = hex.lowercased()
        if digits.hasPrefix("0x") { digits.removeFirst(2) }
        var result: [UInt8] = []
        result.reserveCapacity(digits.utf8.count / 2)
        var high: UInt8? = nil
        for c in digits.utf8 {
            let nibble: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "\n"), UInt8(ascii: "\t"):
                if high != nil { return nil }
                continue
            default: return nil
            }
            if let h = high { result.append(h << 4 | nibble); high = nil } else { high = nibble }
        }
        if high != nil { return nil }
        self = result
    }
}

extension Collection where Element == UInt8 {
    /// Lower-case hex with no separators, e.g. "01030c00".
    public var hexString: String {
        let table = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self { out.append(table[Int(b >> 4)]); out.append(table[Int(b & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
