import AssignedNumbers
import CoreBluetooth
import Foundation

/// Names and value decoding for the attributes whose SIG types we know; hex for the rest.
enum GATTDescription {
    static let serviceNames: [String: String] = [
        "1800": "Generic Access", "1801": "Generic Attribute", "180A": "Device Information",
        "180D": "Heart Rate", "180F": "Battery", "1815": "Automation IO",
    ]

    static let characteristicNames: [String: String] = [
        "2A00": "Device Name", "2A01": "Appearance", "2A04": "Peripheral Preferred Connection Parameters",
        "2A05": "Service Changed", "2A19": "Battery Level", "2A37": "Heart Rate Measurement",
        "2A38": "Body Sensor Location", "2A39": "Heart Rate Control Point", "2A23": "System ID",
        "2A24": "Model Number String", "2A25": "Serial Number String", "2A26": "Firmware Revision String",
        "2A27": "Hardware Revision String", "2A28": "Software Revision String", "2A29": "Manufacturer Name String",
        "2A56": "Digital", "2AA6": "Central Address Resolution", "2B29": "Client Supported Features",
        "2B2A": "Database Hash", "2B3A": "Server Supported Features",
    ]

    static let descriptorNames: [String: String] = [
        "2900": "Characteristic Extended Properties", "2901": "Characteristic User Description",
        "2902": "Client Characteristic Configuration", "2903": "Server Characteristic Configuration",
        "2904": "Characteristic Presentation Format",
    ]

    static func label(_ uuid: CBUUID, _ names: [String: String]) -> String {
        if let name = names[uuid.uuidString] { return "\(uuid.uuidString) (\(name))" }
        return uuid.uuidString
    }

    static func properties(_ p: CBCharacteristicProperties) -> [String] {
        var names: [String] = []
        let all: [(CBCharacteristicProperties, String)] = [
            (.broadcast, "broadcast"), (.read, "read"), (.writeWithoutResponse, "writeWithoutResponse"),
            (.write, "write"), (.notify, "notify"), (.indicate, "indicate"),
            (.authenticatedSignedWrites, "authenticatedSignedWrites"), (.extendedProperties, "extendedProperties"),
            (.notifyEncryptionRequired, "notifyEncryptionRequired"), (.indicateEncryptionRequired, "indicateEncryptionRequired"),
        ]
        for (flag, name) in all where p.contains(flag) { names.append(name) }
        return names
    }

    static func hex(_ data: Data) -> String {
        data.isEmpty ? "(empty)" : data.map { String(format: "%02x", $0) }.joined(separator: " ")
    }

    /// The value in hex, with its meaning where the type is known or the bytes are text.
    static func value(_ data: Data, of uuid: CBUUID) -> String {
        if let meaning = decode(data, uuid) { return "\(meaning)  [\(hex(data))]" }
        return hex(data)
    }

    static func decode(_ data: Data, _ uuid: CBUUID) -> String? {
        let b = [UInt8](data)
        func u16(_ i: Int) -> Int? { i + 1 < b.count ? Int(b[i]) | Int(b[i + 1]) << 8 : nil }
        switch uuid.uuidString {
        case "2A00", "2A24", "2A25", "2A26", "2A27", "2A28", "2A29":
            return "\"\(String(decoding: b, as: UTF8.self))\""
        case "2A01":
            guard let value = u16(0), b.count == 2 else { return nil }
            return appearance(value)
        case "2A19":
            guard b.count == 1 else { return nil }
            return "\(b[0]) %"
        case "2A37":
            return heartRateMeasurement(b)
        case "2A38":
            guard b.count == 1 else { return nil }
            let places = ["other", "chest", "wrist", "finger", "hand", "ear lobe", "foot"]
            return Int(b[0]) < places.count ? places[Int(b[0])] : "location \(b[0])"
        case "2A05":
            guard let start = u16(0), let end = u16(2) else { return nil }
            return String(format: "handles 0x%04X–0x%04X", start, end)
        case "2A04":
            guard let min = u16(0), let max = u16(2), let latency = u16(4), let timeout = u16(6) else { return nil }
            return String(format: "interval %.2f–%.2f ms, latency %d, timeout %d ms",
                          Double(min) * 1.25, Double(max) * 1.25, latency, timeout * 10)
        default:
            return text(b)
        }
    }

    /// UTF-8 text of printable characters, quoted.
    static func text(_ b: [UInt8]) -> String? {
        guard !b.isEmpty, let s = String(bytes: b, encoding: .utf8),
              s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F || $0 == "\n" || $0 == "\t" })
        else { return nil }
        return "\"" + s.replacingOccurrences(of: "\n", with: "\\n").replacingOccurrences(of: "\t", with: "\\t") + "\""
    }

    static func appearance(_ value: Int) -> String {
        let categories: [Int: String] = [
            0: "unknown", 1: "phone", 2: "computer", 3: "watch", 4: "clock", 5: "display", 6: "remote control",
            7: "eyeglasses", 8: "tag", 9: "keyring", 10: "media player", 11: "barcode scanner", 12: "thermometer",
            13: "heart rate sensor", 14: "blood pressure", 15: "human interface device", 16: "glucose meter",
            17: "running/walking sensor", 18: "cycling", 49: "pulse oximeter", 81: "weight scale",
        ]
        let category = value >> 6
        let name = categories[category] ?? "category \(category)"
        return String(format: "0x%04X: %@, subcategory %d", value, name, value & 0x3F)
    }

    /// Heart Rate Measurement (Heart Rate Service §3.1): flags, then the rate (8 or 16 bits),
    /// energy expended (kJ) and RR intervals (1/1024 s) when the flags say so.
    static func heartRateMeasurement(_ b: [UInt8]) -> String? {
        guard let flags = b.first else { return nil }
        var i = 1
        func u16() -> Int? {
            guard i + 1 < b.count else { return nil }
            defer { i += 2 }
            return Int(b[i]) | Int(b[i + 1]) << 8
        }
        let rate: Int
        if flags & 0x01 != 0 {
            guard let value = u16() else { return nil }
            rate = value
        } else {
            guard i < b.count else { return nil }
            rate = Int(b[i])
            i += 1
        }
        var parts = ["\(rate) bpm"]
        if flags & 0x04 != 0 { parts.append(flags & 0x02 != 0 ? "contact" : "no contact") }
        if flags & 0x08 != 0 {
            guard let energy = u16() else { return nil }
            parts.append("energy \(energy) kJ")
        }
        if flags & 0x10 != 0 {
            var intervals: [String] = []
            while let rr = u16() { intervals.append(String(format: "%.3f s", Double(rr) / 1024)) }
            if !intervals.isEmpty { parts.append("RR " + intervals.joined(separator: ", ")) }
        }
        guard i == b.count else { return nil }
        return parts.joined(separator: ", ")
    }

    /// A descriptor value as Core Bluetooth gives it (String, NSNumber or Data).
    static func descriptorValue(_ value: Any?, of uuid: CBUUID) -> String {
        switch value {
        case let text as String: return "\"\(text)\""
        case let number as NSNumber:
            if uuid.uuidString == "2902" {
                let v = number.intValue
                let on = [v & 1 != 0 ? "notifications" : nil, v & 2 != 0 ? "indications" : nil].compactMap { $0 }
                return on.isEmpty ? "0x0000 (off)" : String(format: "0x%04X (%@)", v, on.joined(separator: ", "))
            }
            return String(format: "0x%04X", number.intValue)
        case let data as Data: return hex(data)
        case nil: return "(no value)"
        default: return "\(value!)"
        }
    }
}

/// Parsing of what users type: UUIDs and hex.
enum InputParsing {
    /// A CBUUID, or an error for malformed input (where CBUUID(string:) traps, as Apple's does).
    /// Checked by the parser CBUUID(string:) uses, so that nothing it refuses gets through:
    /// Foundation's `UUID(uuidString:)`, checked before, took "…-000x5F9B34FB", which then
    /// trapped in CBUUID(string:) (found by fuzzing the spec JSON); `isHexDigit` alone would
    /// take full-width digits.
    static func uuid(_ text: String) throws -> CBUUID {
        let trimmed = text.hasPrefix("0x") || text.hasPrefix("0X") ? String(text.dropFirst(2)) : text
        guard trimmed.allSatisfy({ $0.isASCII && ($0.isHexDigit || $0 == "-") }), let uuid = BluetoothUUID(trimmed) else {
            throw ToolError("malformed UUID \"\(text)\": use 4 or 8 hex digits (180D) or the 128-bit form (6E400001-B5A3-F393-E0A9-E50E24DCCA9E)")
        }
        return CBUUID(bluetoothUUID: uuid)
    }

    /// Bytes from hex ("01 0a", "010A", "0x010a", "01:0a").
    static func hex(_ text: String) throws -> Data {
        var digits = text.lowercased()
        if digits.hasPrefix("0x") { digits.removeFirst(2) }
        digits.removeAll { $0 == " " || $0 == ":" || $0 == "-" || $0 == "_" }
        // ASCII only: `isHexDigit` is also true of full-width digits, which `UInt8(_:radix:)` refuses.
        guard digits.count % 2 == 0, digits.allSatisfy({ $0.isASCII && $0.isHexDigit }) else {
            throw ToolError("bad hex \"\(text)\": expected pairs of hex digits, like 01ff or \"01 ff\"")
        }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            bytes.append(UInt8(digits[index..<next], radix: 16)!)
            index = next
        }
        return Data(bytes)
    }
}

/// The value formatting `cbtool` prints, for tests.
public enum GATTDescriptionProbe {
    public static func describe(_ value: Data, _ uuid: CBUUID) -> String { GATTDescription.value(value, of: uuid) }
}
