import ArgumentParser
import CoreBluetooth
import Foundation

/// What a side of a pairing can show and type, by the names `cbtool pair --io` and a spec's
/// `"pairing": {"io": …}` take.
enum PairingIO: String, CaseIterable, ExpressibleByArgument {
    case display
    case keyboard
    case displayKeyboard = "display-keyboard"
    case yesNo = "yes-no"
    case noInputNoOutput = "none"

    var capability: CBPairingIOCapability {
        switch self {
        case .display: .displayOnly
        case .keyboard: .keyboardOnly
        case .displayKeyboard: .keyboardDisplay
        case .yesNo: .displayYesNo
        case .noInputNoOutput: .noInputNoOutput
        }
    }

    /// Whether a passkey can be typed on this side.
    var canType: Bool { self == .keyboard || self == .displayKeyboard }
}

/// How pairing methods and their values are shown.
enum PairingText {
    static func method(_ method: CBPairingMethod) -> String {
        switch method {
        case .justWorks: "Just Works"
        case .numericComparison: "Numeric Comparison"
        case .passkeyDisplay: "Passkey Entry (this side displays)"
        case .passkeyEntry: "Passkey Entry (this side types)"
        case .outOfBand: "Out of Band"
        }
    }

    /// Six digits, zero-padded, as both devices show them.
    static func sixDigits(_ value: UInt32) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, 6 - text.count)) + text
    }

    /// A passkey as a user types it: 1–6 digits, spaces around ignored.
    static func passkey(_ line: String) -> UInt32? {
        let digits = line.trimmingCharacters(in: .whitespaces)
        guard (1...6).contains(digits.count), digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
        return UInt32(digits)
    }
}
